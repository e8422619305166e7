// dlsym routing. Frameworks open libcuda themselves and look entry points up
// with dlsym(handle, name) (PyTorch 2.11 / cudart 13: ~110 of them), which
// bypasses LD_PRELOAD symbol binding; so the shim exports dlsym too, in both
// symbol versions (GLIBC_2.2.5 for old binaries, GLIBC_2.34 for new ones),
// resolves through the C library's own dlsym, and swaps a real driver entry
// point for its hook.
//
// Limitation: dlsym(RTLD_NEXT, ...) is resolved relative to libvstack.so, i.e.
// "the next object after the shim", not after the caller. For a preloaded
// shim that is what callers mean in practice.
#include <dlfcn.h>

#include <cstring>

#include "shim/real.hpp"
#include "shim/runtime.hpp"

namespace {

void* route(void* handle, const char* name) {
  void* r = vstack::shim::real_dlsym(handle, name);
  if (!r || !name || name[0] != 'c' || name[1] != 'u' || !vstack::shim::hooks_on()) return r;
  if (!vstack::shim::real_loaded()) {
    // Load the driver table only for lookups that land in the driver itself.
    Dl_info info;
    if (!dladdr(r, &info) || !info.dli_fname || !std::strstr(info.dli_fname, "libcuda")) return r;
  }
  void* h = vstack::shim::hook_for_real(r);
  return h ? h : r;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void* vstack_dlsym_234(void* handle, const char* name) {
  return route(handle, name);
}
extern "C" __attribute__((visibility("default"))) void* vstack_dlsym_225(void* handle, const char* name) {
  return route(handle, name);
}
__asm__(".symver vstack_dlsym_234, dlsym@@GLIBC_2.34");
__asm__(".symver vstack_dlsym_225, dlsym@GLIBC_2.2.5");
