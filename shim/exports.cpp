// The exported driver entry points, generated from driver_api.def: each one
// checks whether hooks are on for this thread and hands its arguments to its
// handler together with the real function of the same name.
#include "shim/exports.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "shim/hooks_copy.hpp"
#include "shim/hooks_launch.hpp"
#include "shim/hooks_mem.hpp"
#include "shim/real.hpp"

#define VSTACK_EXPORT extern "C" __attribute__((visibility("default")))

#define VSTACK_HOOK(name, handler, stream, params, args)                                                   \
  VSTACK_EXPORT CUresult CUDAAPI name params {                                                             \
    const auto& r = ::vstack::shim::real();                                                                \
    if (!::vstack::shim::hooks_on()) return r.name ? r.name args : CUDA_ERROR_NOT_SUPPORTED;               \
    ::vstack::shim::Reentry reentry;                                                                       \
    ::vstack::shim::Via<decltype(r.name)> via{r.name, ::vstack::shim::StreamKind::stream};                 \
    return ::vstack::shim::on_##handler(via, VSTACK_UNPAREN args);                                         \
  }
#include "shim/driver_api.def"

namespace vstack::shim {

namespace {

constexpr auto make_entries() {
  std::array entries = {
#define VSTACK_HOOK(name, handler, stream, params, args) HookEntry{#name, reinterpret_cast<void*>(&::name)},
#include "shim/driver_api.def"
  };
  std::sort(entries.begin(), entries.end(),
            [](const HookEntry& a, const HookEntry& b) { return std::strcmp(a.name, b.name) < 0; });
  return entries;
}

const auto& entries() {
  static const auto e = make_entries();
  return e;
}

}  // namespace

std::span<const HookEntry> hook_entries() { return {entries().data(), entries().size()}; }

void* hook_by_name(const char* name) {
  const auto& e = entries();
  auto it = std::lower_bound(e.begin(), e.end(), name,
                             [](const HookEntry& a, const char* n) { return std::strcmp(a.name, n) < 0; });
  return it != e.end() && std::strcmp(it->name, name) == 0 ? it->hook : nullptr;
}

}  // namespace vstack::shim
