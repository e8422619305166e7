// The exported hooks, generated from driver_api.def.
#pragma once

#include <span>

namespace vstack::shim {

struct HookEntry {
  const char* name;  // exact exported symbol
  void* hook;        // our exported function of that name
};

// Every hook, sorted by name.
std::span<const HookEntry> hook_entries();
// Our hook for an exact symbol name, or nullptr.
void* hook_by_name(const char* name);

}  // namespace vstack::shim
