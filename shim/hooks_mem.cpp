#include "shim/hooks_mem.hpp"

#include "shim/real.hpp"

namespace vstack::shim {

CUresult allocate(CUdeviceptr* dptr, size_t bytes, bool ipc, const char* what, RealAlloc real_alloc) {
  pool::Pool* pl = pool_ready();  // the caller checked the context
  const Rule* rule = match_rule(config(), bytes, ipc);
  // Memory from an IPC-exportable pool must stay exportable: never paged
  // unless a rule says otherwise.
  const bool passthrough = rule ? rule->action == RuleAction::passthrough : ipc;
  if (passthrough) {
    if (Status s = pl->charge_gpu(bytes); !s) return to_cu(s, what);
    CUresult r = real_alloc(dptr);
    if (r != CUDA_SUCCESS) {
      pl->uncharge_gpu(bytes);
      return r;
    }
    add(stats().global.passthrough_allocations, 1);
    add(stats().global.passthrough_bytes, bytes);
    std::lock_guard g(side().mu);
    side().passthrough[*dptr] = bytes;
    return r;
  }
  pool::Placement where;
  where.pinned = rule && rule->action == RuleAction::pin_gpu;
  where.opaque = rule && rule->action == RuleAction::opaque;
  auto p = pl->allocate(bytes, where);
  if (!p) {
    if (p.status().code() == Code::out_of_memory) log::info("{}({} bytes): {}", what, bytes, p.status().message());
    return to_cu(p.status(), what);
  }
  *dptr = p.value();
  return CUDA_SUCCESS;
}

CUresult release(CUdeviceptr p, CUstream s, bool async, bool per_thread) {
  pool::Pool* pl = pool_ready();
  uint64_t bytes = 0;
  {
    std::lock_guard g(side().mu);
    auto it = side().passthrough.find(p);
    if (it != side().passthrough.end()) {
      bytes = it->second;
      side().passthrough.erase(it);
    }
  }
  if (bytes) {
    CUresult r = async ? real().cuMemFreeAsync(p, s) : real().cuMemFree_v2(p);
    pl->uncharge_gpu(bytes);
    sub(stats().global.passthrough_allocations, 1);
    sub(stats().global.passthrough_bytes, bytes);
    return r;
  }
  pool::Pool::Range r{};
  if (!pl->find(p, &r)) return async ? real().cuMemFreeAsync(p, s) : real().cuMemFree_v2(p);
  if (r.base != p) return CUDA_ERROR_INVALID_VALUE;
  Status st;
  {
    RelaxedCapture relaxed;
    st = async ? pl->free_async(p, target(s, per_thread).stream) : pl->free(p);
  }
  pl->reap();
  return to_cu(st, async ? "cuMemFreeAsync" : "cuMemFree");
}

CUresult mem_get_info(size_t* free, size_t* total) {
  pool::Pool* pl = pool_ready();
  const uint64_t cap = pl->total_capacity();
  const uint64_t used = pl->committed() + stats().global.passthrough_bytes.load() + stats().global.app_vmm_bytes.load();
  if (total) *total = cap;
  if (free) *free = used >= cap ? 0 : cap - used;
  return CUDA_SUCCESS;
}

CUresult pool_pointer_attribute(void* data, CUpointer_attribute a, CUdeviceptr p, const pool::Pool::Range& r) {
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: *static_cast<CUcontext*>(data) = pool_context(); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned*>(data) = CU_MEMORYTYPE_DEVICE;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *static_cast<CUdeviceptr*>(data) = p; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: return CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *static_cast<unsigned*>(data) = 0; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *static_cast<int*>(data) = static_cast<int>(pool_device()); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *static_cast<CUdeviceptr*>(data) = r.base; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *static_cast<size_t*>(data) = r.size; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED: *static_cast<unsigned*>(data) = 1; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: *static_cast<unsigned long long*>(data) = r.base; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: *static_cast<unsigned*>(data) = 0; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
      *static_cast<unsigned long long*>(data) = CU_MEM_HANDLE_TYPE_NONE;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE: *static_cast<unsigned*>(data) = 0; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: *static_cast<CUmemoryPool*>(data) = nullptr; return CUDA_SUCCESS;
    default: return CUDA_ERROR_NOT_FOUND;
  }
}

}  // namespace vstack::shim
