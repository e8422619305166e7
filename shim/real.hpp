// The real driver: loaded on first use, never through our own hooks.
#pragma once

#include "shim/cuda_api.hpp"

namespace vstack::shim {

#define VSTACK_UNPAREN(...) __VA_ARGS__

struct Real {
#define VSTACK_HOOK(name, handler, stream, params, args) CUresult(CUDAAPI* name) params = nullptr;
#define VSTACK_REAL(name, params) CUresult(CUDAAPI* name) params = nullptr;
#include "shim/driver_api.def"
};

// The table, loading libcuda on first call ($VSTACK_REAL_LIBCUDA or libcuda.so.1).
// Entries the driver lacks are null.
const Real& real();
// True once the driver is loaded (never loads it).
bool real_loaded();
// The C library's dlsym, found with dlvsym so the shim never calls its own.
void* real_dlsym(void* handle, const char* name);
// A driver symbol by name (for prim::make_cuda_vmm).
void* resolve_real(const char* name);
// The hook that stands for a real driver function pointer, or nullptr.
void* hook_for_real(void* real_fn);
// The libcuda handle (nullptr if it could not be loaded).
void* driver_handle();

}  // namespace vstack::shim
