#include "shim/real.hpp"

#include <dlfcn.h>

#include <mutex>
#include <unordered_map>

#include "base/log.hpp"
#include "shim/exports.hpp"
#include "shim/runtime.hpp"

namespace vstack::shim {

namespace {

using DlsymFn = void* (*)(void*, const char*);

DlsymFn find_real_dlsym() {
  // The newest version first; glibc < 2.34 only has GLIBC_2.2.5.
  void* f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (!f) f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
  return reinterpret_cast<DlsymFn>(f);
}

struct Driver {
  void* handle = nullptr;
  Real table;
  std::unordered_map<void*, void*> real_to_hook;  // immutable after load
};

std::once_flag g_once;
std::atomic<bool> g_loaded{false};
Driver* g_driver = nullptr;  // leaked: used until the very end of the process

void load() {
  auto* d = new Driver;
  const std::string& path = runtime_env().real_libcuda;
  d->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!d->handle) {
    log::error("cannot load the CUDA driver '{}': {}", path, dlerror());
  } else {
#define VSTACK_HOOK(name, handler, stream, params, args) \
  d->table.name = reinterpret_cast<decltype(d->table.name)>(real_dlsym(d->handle, #name));
#define VSTACK_REAL(name, params) \
  d->table.name = reinterpret_cast<decltype(d->table.name)>(real_dlsym(d->handle, #name));
#include "shim/driver_api.def"
    for (const HookEntry& h : hook_entries()) {
      void* r = real_dlsym(d->handle, h.name);
      if (r) d->real_to_hook.emplace(r, h.hook);
    }
  }
  g_driver = d;
  g_loaded.store(true, std::memory_order_release);
}

}  // namespace

void* real_dlsym(void* handle, const char* name) {
  static DlsymFn fn = find_real_dlsym();
  return fn ? fn(handle, name) : nullptr;
}

const Real& real() {
  if (!g_loaded.load(std::memory_order_acquire)) std::call_once(g_once, load);
  return g_driver->table;
}

bool real_loaded() { return g_loaded.load(std::memory_order_acquire); }

void* driver_handle() {
  (void)real();
  return g_driver->handle;
}

void* resolve_real(const char* name) {
  void* h = driver_handle();
  return h ? real_dlsym(h, name) : nullptr;
}

void* hook_for_real(void* real_fn) {
  (void)real();
  auto it = g_driver->real_to_hook.find(real_fn);
  return it == g_driver->real_to_hook.end() ? nullptr : it->second;
}

}  // namespace vstack::shim
