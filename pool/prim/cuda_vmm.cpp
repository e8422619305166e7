#include "pool/prim/cuda_vmm.hpp"

#include <string>

namespace vstack::prim {

namespace {

// The driver functions this file uses: one list, one table.
#define VSTACK_VMM_FNS(X)                                                        \
  X(cuMemGetAllocationGranularity) X(cuMemAddressReserve) X(cuMemAddressFree)   \
  X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess)     \
  X(cuStreamCreate) X(cuStreamDestroy_v2) X(cuEventCreate) X(cuEventDestroy_v2)  \
  X(cuEventRecord) X(cuEventQuery) X(cuEventSynchronize) X(cuEventElapsedTime_v2) \
  X(cuStreamWaitEvent) X(cuMemcpyDtoDAsync_v2) X(cuGetErrorName)

struct Fns {
#define X(name) decltype(&::name) name = nullptr;
  VSTACK_VMM_FNS(X)
#undef X
};

Status drv(CUresult r, const Fns& f, const char* what) {
  if (r == CUDA_SUCCESS) return Status::ok();
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return Status(Code::out_of_memory, what, r);
  const char* name = nullptr;
  if (f.cuGetErrorName) f.cuGetErrorName(r, &name);
  return Status::driver(r, std::string(what) + ": " + (name ? name : "?"));
}

CUmemLocation to_cu(Location loc) {
  CUmemLocation l{};
  l.type = loc.kind == LocKind::device ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST_NUMA;
  l.id = loc.id;
  return l;
}

class CudaVmm final : public Vmm {
 public:
  CudaVmm(const Fns& f, const CudaVmmOptions& o) : f_(f), o_(o) {}

  uint64_t granularity(Location loc) override {
    CUmemAllocationProp p = prop(loc);
    size_t g = 0;
    if (f_.cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS) return 2ull << 20;
    return g;
  }

  Status reserve(uint64_t bytes, uint64_t alignment, DevPtr* va) override {
    CUdeviceptr p = 0;
    VSTACK_TRY(drv(f_.cuMemAddressReserve(&p, bytes, alignment, 0, 0), f_, "cuMemAddressReserve"));
    *va = p;
    return Status::ok();
  }
  Status release(DevPtr va, uint64_t bytes) override {
    return drv(f_.cuMemAddressFree(va, bytes), f_, "cuMemAddressFree");
  }

  Status create(Location loc, uint64_t bytes, Handle* h) override {
    CUmemAllocationProp p = prop(loc);
    CUmemGenericAllocationHandle gh = 0;
    VSTACK_TRY(drv(f_.cuMemCreate(&gh, bytes, &p, 0), f_, "cuMemCreate"));
    *h = gh;
    return Status::ok();
  }
  Status destroy(Handle h) override { return drv(f_.cuMemRelease(h), f_, "cuMemRelease"); }

  Status map(DevPtr va, uint64_t bytes, Handle h) override {
    VSTACK_TRY(drv(f_.cuMemMap(va, bytes, 0, h, 0), f_, "cuMemMap"));
    CUmemAccessDesc d{};
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = o_.device;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    Status s = drv(f_.cuMemSetAccess(va, bytes, &d, 1), f_, "cuMemSetAccess");
    if (!s) (void)f_.cuMemUnmap(va, bytes);  // roll back: leave the range as it was
    return s;
  }
  Status unmap(DevPtr va, uint64_t bytes) override { return drv(f_.cuMemUnmap(va, bytes), f_, "cuMemUnmap"); }

  Status stream_create(Stream* s) override {
    CUstream st = nullptr;
    VSTACK_TRY(drv(f_.cuStreamCreate(&st, CU_STREAM_NON_BLOCKING), f_, "cuStreamCreate"));
    *s = st;
    return Status::ok();
  }
  Status stream_destroy(Stream s) override {
    return drv(f_.cuStreamDestroy_v2(static_cast<CUstream>(s)), f_, "cuStreamDestroy");
  }
  Status event_create(Event* e, bool timing) override {
    CUevent ev = nullptr;
    VSTACK_TRY(drv(f_.cuEventCreate(&ev, timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING), f_, "cuEventCreate"));
    *e = ev;
    return Status::ok();
  }
  Status event_destroy(Event e) override {
    return drv(f_.cuEventDestroy_v2(static_cast<CUevent>(e)), f_, "cuEventDestroy");
  }
  Status event_record(Event e, Stream s) override {
    return drv(f_.cuEventRecord(static_cast<CUevent>(e), static_cast<CUstream>(s)), f_, "cuEventRecord");
  }
  Result<EventState> event_query(Event e) override {
    CUresult r = f_.cuEventQuery(static_cast<CUevent>(e));
    if (r == CUDA_SUCCESS) return EventState::done;
    if (r == CUDA_ERROR_NOT_READY) return EventState::pending;
    return drv(r, f_, "cuEventQuery");
  }
  Status event_sync(Event e) override {
    return drv(f_.cuEventSynchronize(static_cast<CUevent>(e)), f_, "cuEventSynchronize");
  }
  Result<float> event_elapsed_ms(Event a, Event b) override {
    float ms = 0;
    Status s = drv(f_.cuEventElapsedTime_v2(&ms, static_cast<CUevent>(a), static_cast<CUevent>(b)), f_,
                   "cuEventElapsedTime");
    if (!s) return s;
    return ms;
  }
  Status stream_wait(Stream s, Event e) override {
    return drv(f_.cuStreamWaitEvent(static_cast<CUstream>(s), static_cast<CUevent>(e), 0), f_, "cuStreamWaitEvent");
  }
  Status copy_async(DevPtr dst, DevPtr src, uint64_t bytes, Stream s) override {
    return drv(f_.cuMemcpyDtoDAsync_v2(dst, src, bytes, static_cast<CUstream>(s)), f_, "cuMemcpyDtoDAsync");
  }

 private:
  CUmemAllocationProp prop(Location loc) const {
    CUmemAllocationProp p{};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location = to_cu(loc);
    return p;
  }

  Fns f_;
  CudaVmmOptions o_;
};

}  // namespace

Result<std::unique_ptr<Vmm>> make_cuda_vmm(Resolver resolve, const CudaVmmOptions& opts) {
  Fns f;
#define X(name)                                                               \
  f.name = reinterpret_cast<decltype(&::name)>(resolve(#name));              \
  if (!f.name) return Status(Code::driver_error, "driver lacks " #name);
  VSTACK_VMM_FNS(X)
#undef X
  return std::unique_ptr<Vmm>(new CudaVmm(f, opts));
}

}  // namespace vstack::prim
