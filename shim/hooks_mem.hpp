// Handlers: allocation, free, memory info, pointer queries, IPC, the
// application's own VMM calls.
#pragma once

#include <cstring>

#include "base/function_ref.hpp"
#include "base/log.hpp"
#include "shim/real.hpp"
#include "shim/via.hpp"

namespace vstack::shim {

// Serve an allocation: from the pool, or by `real_alloc` (the driver's own
// allocation of the entry point called) when a rule passes it through; a
// pass-through allocation is charged to the gpu tier.
using RealAlloc = FunctionRef<CUresult(CUdeviceptr*)>;
CUresult allocate(CUdeviceptr* dptr, size_t bytes, bool ipc, const char* what, RealAlloc real_alloc);
CUresult release(CUdeviceptr p, CUstream s, bool async, bool per_thread);

template <class V>
CUresult on_cuMemAlloc(const V& real, CUdeviceptr* dptr, size_t bytes) {
  if (!dptr) return CUDA_ERROR_INVALID_VALUE;
  if (!pool_for_current_context()) return real(dptr, bytes);
  return allocate(dptr, bytes, false, "cuMemAlloc", [&](CUdeviceptr* d) { return real(d, bytes); });
}

template <class V>
CUresult on_cuMemAllocPitch(const V& real, CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                            unsigned elem) {
  if (!dptr || !pitch || (elem != 4 && elem != 8 && elem != 16)) return CUDA_ERROR_INVALID_VALUE;
  if (!pool_for_current_context()) return real(dptr, pitch, width, height, elem);
  const size_t p = (width + 511) / 512 * 512;  // the driver's texture pitch alignment
  CUresult r = allocate(dptr, p * height, false, "cuMemAllocPitch",
                        [&](CUdeviceptr* d) { return shim::real().cuMemAlloc_v2(d, p * height); });
  if (r == CUDA_SUCCESS) *pitch = p;
  return r;
}

template <class V>
CUresult on_cuMemAllocAsync(const V& real, CUdeviceptr* dptr, size_t bytes, CUstream s) {
  if (!dptr) return CUDA_ERROR_INVALID_VALUE;
  if (!pool_for_current_context()) return real(dptr, bytes, s);
  // Served at once: the memory is valid before the stream reaches the call.
  return allocate(dptr, bytes, false, "cuMemAllocAsync", [&](CUdeviceptr* d) { return real(d, bytes, s); });
}

template <class V>
CUresult on_cuMemAllocFromPoolAsync(const V& real, CUdeviceptr* dptr, size_t bytes, CUmemoryPool mp, CUstream s) {
  if (!dptr) return CUDA_ERROR_INVALID_VALUE;
  if (!pool_for_current_context()) return real(dptr, bytes, mp, s);
  bool ipc;
  {
    std::lock_guard g(side().mu);
    ipc = side().ipc_pools.count(mp) != 0;
  }
  return allocate(dptr, bytes, ipc, "cuMemAllocFromPoolAsync", [&](CUdeviceptr* d) { return real(d, bytes, mp, s); });
}

template <class V>
CUresult on_cuMemFree(const V& real, CUdeviceptr p) {
  if (!pool_ready() || p == 0) return real(p);
  return release(p, nullptr, false, false);
}

template <class V>
CUresult on_cuMemFreeAsync(const V& real, CUdeviceptr p, CUstream s) {
  if (!pool_ready() || p == 0) return real(p, s);
  return release(p, s, true, real.per_thread());
}

template <class V>
CUresult on_cuMemPoolCreate(const V& real, CUmemoryPool* mp, const CUmemPoolProps* props) {
  CUresult r = real(mp, props);
  if (r == CUDA_SUCCESS && props && props->handleTypes != CU_MEM_HANDLE_TYPE_NONE) {
    std::lock_guard g(side().mu);
    side().ipc_pools.insert(*mp);
  }
  return r;
}

// Frameworks size themselves from this: report the capacity of all tiers.
CUresult mem_get_info(size_t* free, size_t* total);
template <class V>
CUresult on_cuMemGetInfo(const V& real, size_t* free, size_t* total) {
  if (!pool_for_current_context()) return real(free, total);
  return mem_get_info(free, total);
}

template <class V>
CUresult on_cuMemGetAddressRange(const V& real, CUdeviceptr* base, size_t* size, CUdeviceptr p) {
  pool::Pool* pl = pool_ready();
  pool::Pool::Range r{};
  if (!pl || !pl->find(p, &r)) return real(base, size, p);
  if (base) *base = r.base;
  if (size) *size = r.size;
  return CUDA_SUCCESS;
}

// One attribute of a pool pointer; CUDA_ERROR_NOT_FOUND means "ask the driver".
CUresult pool_pointer_attribute(void* data, CUpointer_attribute a, CUdeviceptr p, const pool::Pool::Range& r);

template <class V>
CUresult on_cuPointerGetAttribute(const V& real, void* data, CUpointer_attribute a, CUdeviceptr p) {
  pool::Pool* pl = pool_ready();
  pool::Pool::Range r{};
  if (!pl || !pl->find(p, &r)) return real(data, a, p);
  CUresult e = pool_pointer_attribute(data, a, p, r);
  return e == CUDA_ERROR_NOT_FOUND ? real(data, a, p) : e;
}

template <class V>
CUresult on_cuPointerGetAttributes(const V& real, unsigned n, CUpointer_attribute* attrs, void** data, CUdeviceptr p) {
  pool::Pool* pl = pool_ready();
  pool::Pool::Range r{};
  if (!pl || !pl->find(p, &r)) return real(n, attrs, data, p);
  for (unsigned i = 0; i < n; ++i) {
    CUresult e = pool_pointer_attribute(data[i], attrs[i], p, r);
    if (e == CUDA_ERROR_NOT_FOUND) e = shim::real().cuPointerGetAttribute(data[i], attrs[i], p);
    if (e != CUDA_SUCCESS) return e;
  }
  return CUDA_SUCCESS;
}

template <class V>
CUresult on_cuIpcGetMemHandle(const V& real, CUipcMemHandle* h, CUdeviceptr p) {
  pool::Pool* pl = pool_ready();
  pool::Pool::Range r{};
  if (!pl || !pl->find(p, &r)) return real(h, p);
  log::error(
      "cuIpcGetMemHandle on a paged allocation ({:#x}, {} bytes): paged memory moves between tiers and cannot be "
      "exported. Keep such allocations out of the pool with a config rule, e.g. "
      "{{\"match\": {{\"min_bytes\": {}, \"max_bytes\": {}}}, \"action\": \"passthrough\"}} in \"rules\" "
      "(or allocate them from a memory pool created with IPC handle types: those are never paged).",
      p, r.size, r.size, r.size);
  return CUDA_ERROR_NOT_SUPPORTED;
}

template <class V>
CUresult on_cuMemCreate(const V& real, CUmemGenericAllocationHandle* h, size_t size, const CUmemAllocationProp* prop,
                        unsigned long long flags) {
  pool::Pool* pl = pool_ready();
  const bool ours = pl && prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
                    prop->location.id == static_cast<int>(pool_device());
  if (!ours) return real(h, size, prop, flags);
  // The application's own device memory counts against the gpu tier.
  if (Status s = pl->charge_gpu(size); !s) return to_cu(s, "cuMemCreate");
  CUresult r = real(h, size, prop, flags);
  if (r != CUDA_SUCCESS) {
    pl->uncharge_gpu(size);
    return r;
  }
  add(stats().global.app_vmm_bytes, size);
  std::lock_guard g(side().mu);
  side().app_vmm[*h] = size;
  return r;
}

template <class V>
CUresult on_cuMemRelease(const V& real, CUmemGenericAllocationHandle h) {
  CUresult r = real(h);
  pool::Pool* pl = pool_ready();
  if (r != CUDA_SUCCESS || !pl) return r;
  uint64_t bytes = 0;
  {
    std::lock_guard g(side().mu);
    auto it = side().app_vmm.find(h);
    if (it == side().app_vmm.end()) return r;
    bytes = it->second;
    side().app_vmm.erase(it);
  }
  pl->uncharge_gpu(bytes);
  sub(stats().global.app_vmm_bytes, bytes);
  return r;
}

}  // namespace vstack::shim
