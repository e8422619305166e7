// Plain device allocations (cuMemAlloc*, stream-ordered pools), host memory,
// pointer queries.
//
// Note [Device arena]
// Each device owns one PROT_NONE reservation (4 x its memory + 1 GiB, placed
// near 0x2000'0000'0000 + device x 1 TiB when the kernel allows), so device
// pointers are recognisable and never collide with malloc or VMM ranges.
// cuMemAlloc takes whole 4 KiB pages from it first-fit and makes them
// read-write; cuMemFree discards the pages and makes them PROT_NONE again, so
// a use after free faults instead of silently reading stale data.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <unordered_set>

#include "internal.hpp"

struct CUmemPoolHandle_st {
  int device = 0;
  bool is_default = false;
};

namespace fakecuda {
namespace {

constexpr size_t kPage = 4096;
constexpr uintptr_t kArenaHint = uintptr_t{0x2000'0000'0000};
constexpr uintptr_t kArenaStride = uintptr_t{1} << 40;

size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

struct DeviceAlloc {
  size_t size = 0;     // as requested
  size_t charged = 0;  // whole pages
  int device = 0;
  CUctx_st* ctx = nullptr;
  CUmemoryPool pool = nullptr;
  bool free_pending = false;  // cuMemFreeAsync queued
  uint64_t id = 0;
};

struct Arena {
  uintptr_t base = 0;
  size_t size = 0;
  std::map<uintptr_t, size_t> free;  // start -> length, coalesced
};

struct HostRange {
  size_t size = 0;
  bool registered = false;  // cuMemHostRegister (else cuMemAllocHost / cuMemHostAlloc)
  CUctx_st* ctx = nullptr;
  int device = 0;
};

struct Memory {
  std::vector<Arena> arenas;
  std::map<uintptr_t, DeviceAlloc> device;
  std::map<uintptr_t, HostRange> host;
  std::vector<CUmemoryPool> default_pools;
  std::unordered_set<const CUmemPoolHandle_st*> pools;
  uint64_t next_id = 1;
};

Memory& memory() {  // LOCKING: driver lock
  static Memory* m = [] {
    auto* p = new Memory;
    p->arenas.resize(static_cast<size_t>(config().devices));
    p->default_pools.resize(static_cast<size_t>(config().devices), nullptr);
    return p;
  }();
  return *m;
}

CUresult arena_init(int dev, Arena& a) {
  if (a.base != 0) return CUDA_SUCCESS;
  size_t size = round_up(config().mem_bytes * 4 + (size_t{1} << 30), kGranule);
  void* hint = reinterpret_cast<void*>(kArenaHint + kArenaStride * static_cast<uintptr_t>(dev));
  constexpr int kFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  void* p = MAP_FAILED;
  if (kPlaceAtHints) p = mmap(hint, size, PROT_NONE, kFlags | MAP_FIXED_NOREPLACE, -1, 0);
  if (p == MAP_FAILED) p = mmap(nullptr, size, PROT_NONE, kFlags, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  a.base = reinterpret_cast<uintptr_t>(p);
  a.size = size;
  a.free.emplace(a.base, size);
  return CUDA_SUCCESS;
}

void arena_give_back(Arena& a, uintptr_t p, size_t n) {
  auto next = a.free.lower_bound(p);
  if (next != a.free.end() && p + n == next->first) {
    n += next->second;
    next = a.free.erase(next);
  }
  if (next != a.free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == p) {
      prev->second += n;
      return;
    }
  }
  a.free.emplace(p, n);
}

template <class Map>
auto containing(Map& m, uintptr_t p, size_t (*size_of)(const typename Map::mapped_type&)) {
  auto it = m.upper_bound(p);
  if (it == m.begin()) return m.end();
  --it;
  size_t n = std::max<size_t>(size_of(it->second), 1);
  return p < it->first + n ? it : m.end();
}

size_t device_size(const DeviceAlloc& a) { return a.size; }
size_t host_size(const HostRange& h) { return h.size; }

CUresult need_init() { return initialized() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED; }

CUresult default_pool(int dev, CUmemoryPool* out) {  // LOCKING: driver lock
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  CUmemoryPool& p = memory().default_pools[static_cast<size_t>(dev)];
  if (p == nullptr) {
    p = new CUmemPoolHandle_st{dev, true};
    memory().pools.insert(p);
  }
  *out = p;
  return CUDA_SUCCESS;
}

}  // namespace

CUresult alloc_device(int dev, CUctx_st* ctx, size_t bytes, uintptr_t* out) {
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  Arena& a = memory().arenas[static_cast<size_t>(dev)];
  if (CUresult r = arena_init(dev, a)) return r;
  size_t n = round_up(bytes, kPage);
  if (n < bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  if (CUresult r = charge_device(dev, n)) return r;
  auto it = a.free.begin();
  while (it != a.free.end() && it->second < n) ++it;
  if (it == a.free.end()) {
    uncharge_device(dev, n);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  uintptr_t p = it->first;
  size_t left = it->second - n;
  a.free.erase(it);
  if (left != 0) a.free.emplace(p + n, left);
  if (mprotect(reinterpret_cast<void*>(p), n, PROT_READ | PROT_WRITE) != 0) {
    arena_give_back(a, p, n);
    uncharge_device(dev, n);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  DeviceAlloc d;
  d.size = bytes;
  d.charged = n;
  d.device = dev;
  d.ctx = ctx;
  d.id = memory().next_id++;
  memory().device.emplace(p, d);
  *out = p;
  return CUDA_SUCCESS;
}

CUresult free_device(uintptr_t p) {
  auto it = memory().device.find(p);
  if (it == memory().device.end()) return CUDA_ERROR_INVALID_VALUE;
  const DeviceAlloc d = it->second;
  memory().device.erase(it);
  void* addr = reinterpret_cast<void*>(p);
  madvise(addr, d.charged, MADV_DONTNEED);
  mprotect(addr, d.charged, PROT_NONE);
  arena_give_back(memory().arenas[static_cast<size_t>(d.device)], p, d.charged);
  uncharge_device(d.device, d.charged);
  return CUDA_SUCCESS;
}

PointerInfo find_allocation(uintptr_t p) {
  PointerInfo info;
  auto& dev = memory().device;
  if (auto it = containing(dev, p, device_size); it != dev.end()) {
    info.found = true;
    info.type = CU_MEMORYTYPE_DEVICE;
    info.device = it->second.device;
    info.base = it->first;
    info.size = it->second.size;
    info.ctx = it->second.ctx;
    return info;
  }
  auto& host = memory().host;
  if (auto it = containing(host, p, host_size); it != host.end()) {
    info.found = true;
    info.type = CU_MEMORYTYPE_HOST;
    info.device = it->second.device;
    info.base = it->first;
    info.size = it->second.size;
    info.ctx = it->second.ctx;
  }
  return info;
}

}  // namespace fakecuda

using namespace fakecuda;

namespace {

CUresult mem_alloc(CUdeviceptr* dptr, size_t bytes) {
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx = nullptr;
  if (CUresult r = need_context(&ctx)) return r;
  Lock lock(driver_lock());
  if (CUresult r = check_unsafe_call()) return r;
  uintptr_t p = 0;
  if (CUresult r = alloc_device(ctx->device, ctx, bytes, &p)) return r;
  *dptr = p;
  return CUDA_SUCCESS;
}

CUresult alloc_async(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, CUstream h, bool ptd) {
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  std::shared_ptr<CUstream_st> s;
  if (CUresult r = resolve_stream(h, ptd, &s)) return r;
  if (stream_capture(s.get())) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // see README
  int dev = 0;
  if (pool != nullptr) {
    if (memory().pools.count(pool) == 0) return CUDA_ERROR_INVALID_VALUE;
    dev = pool->device;
  } else {
    CUctx_st* ctx = nullptr;
    if (CUresult r = need_context(&ctx)) return r;
    dev = ctx->device;
    if (CUresult r = default_pool(dev, &pool)) return r;
  }
  CUctx_st* ctx = current_context();
  uintptr_t p = 0;
  if (CUresult r = alloc_device(dev, ctx, bytes, &p)) return r;
  memory().device[p].pool = pool;
  *dptr = p;  // usable by work queued after this point on any stream ordered after s
  return CUDA_SUCCESS;
}

CUresult free_async(CUdeviceptr dptr, CUstream h, bool ptd) {
  Lock lock(driver_lock());
  std::shared_ptr<CUstream_st> s;
  if (CUresult r = resolve_stream(h, ptd, &s)) return r;
  auto it = memory().device.find(dptr);
  if (it == memory().device.end() || it->second.free_pending) return CUDA_ERROR_INVALID_VALUE;
  if (stream_capture(s.get())) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  Op op;
  op.run = [dptr] {
    Lock inner(driver_lock());  // the one op that takes the driver lock (Note [Locking])
    (void)free_device(dptr);
  };
  if (CUresult r = submit_op(s, std::move(op), nullptr)) return r;
  it->second.free_pending = true;
  return CUDA_SUCCESS;
}

CUresult host_alloc(void** pp, size_t bytes) {
  if (pp == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx = nullptr;
  if (CUresult r = need_context(&ctx)) return r;
  size_t n = round_up(bytes, kPage);
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  Lock lock(driver_lock());
  memory().host.emplace(reinterpret_cast<uintptr_t>(p), HostRange{bytes, false, ctx, ctx->device});
  *pp = p;
  return CUDA_SUCCESS;
}

// The driver's "boolean" attributes are 4-byte values (callers pass uint32_t / int).
void set_bool(void* data, bool v) { *static_cast<unsigned*>(data) = v ? 1 : 0; }

// One attribute of a pointer. `info` may be not found (then only
// cuPointerGetAttributes calls this, and gets the documented zero values).
CUresult attribute(void* data, CUpointer_attribute a, CUdeviceptr ptr, const PointerInfo& info) {
  switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: *static_cast<CUcontext*>(data) = info.ctx; break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned*>(data) = info.found ? static_cast<unsigned>(info.type) : 0;
      break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      *static_cast<CUdeviceptr*>(data) = info.found ? ptr : 0;
      break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (info.found && info.type != CU_MEMORYTYPE_HOST) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<void**>(data) = info.found ? reinterpret_cast<void*>(ptr) : nullptr;
      break;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: set_bool(data, false); break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      *static_cast<unsigned long long*>(data) = info.found ? info.base : 0;
      break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: set_bool(data, false); break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = info.found ? info.device : -2;
      break;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      set_bool(data, info.found && !info.vmm && info.type == CU_MEMORYTYPE_DEVICE);
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = info.base;
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *static_cast<size_t*>(data) = info.size; break;
    case CU_POINTER_ATTRIBUTE_MAPPED: set_bool(data, info.found); break;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
      *static_cast<unsigned long long*>(data) = 0;
      break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: *static_cast<CUmemoryPool*>(data) = nullptr; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

PointerInfo lookup(CUdeviceptr ptr) {  // LOCKING: driver lock
  PointerInfo info = find_allocation(ptr);
  if (!info.found) info = find_vmm_mapping(ptr);
  return info;
}

}  // namespace

extern "C" {
decltype(cuMemAllocAsync) cuMemAllocAsync_ptsz;
decltype(cuMemFreeAsync) cuMemFreeAsync_ptsz;
decltype(cuMemAllocFromPoolAsync) cuMemAllocFromPoolAsync_ptsz;
}

FAKECUDA_API CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx = nullptr;
  if (CUresult r = need_context(&ctx)) return r;
  Lock lock(driver_lock());
  *total = config().mem_bytes;
  *free = config().mem_bytes - device_used(ctx->device);
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) { return mem_alloc(dptr, bytes); }

FAKECUDA_API CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width,
                                         size_t height, unsigned int element) {
  if (pitch == nullptr || width == 0 || height == 0) return CUDA_ERROR_INVALID_VALUE;
  if (element != 4 && element != 8 && element != 16) return CUDA_ERROR_INVALID_VALUE;
  size_t p = round_up(width, 512);
  if (CUresult r = mem_alloc(dptr, p * height)) return r;
  *pitch = p;
  return CUDA_SUCCESS;
}

// Freeing synchronizes with the device (work queued before the free may still
// use the memory), as cuMemFree / cuMemFreeHost do on the driver. cuMemUnmap
// does not (measured, DESIGN.md), and neither does it here.
FAKECUDA_API CUresult cuMemFree_v2(CUdeviceptr dptr) {
  if (CUresult r = need_init()) return r;
  if (dptr == 0) return CUDA_SUCCESS;
  int dev = 0;
  {
    Lock lock(driver_lock());
    auto it = memory().device.find(dptr);
    if (it == memory().device.end() || it->second.free_pending) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = check_unsafe_call()) return r;
    dev = it->second.device;
  }
  sync_device(dev);
  Lock lock(driver_lock());
  auto it = memory().device.find(dptr);
  if (it == memory().device.end() || it->second.free_pending) return CUDA_ERROR_INVALID_VALUE;
  return free_device(dptr);
}

FAKECUDA_API CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream h) {
  return alloc_async(dptr, bytes, nullptr, h, false);
}
FAKECUDA_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream h) {
  return alloc_async(dptr, bytes, nullptr, h, true);
}
FAKECUDA_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                              CUstream h) {
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return alloc_async(dptr, bytes, pool, h, false);
}
FAKECUDA_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes,
                                                   CUmemoryPool pool, CUstream h) {
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return alloc_async(dptr, bytes, pool, h, true);
}
FAKECUDA_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream h) { return free_async(dptr, h, false); }
FAKECUDA_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream h) {
  return free_async(dptr, h, true);
}

FAKECUDA_API CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  if (CUresult r = need_init()) return r;
  if (pool == nullptr || props == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(props->location.id)) return CUDA_ERROR_INVALID_DEVICE;
  auto* p = new CUmemPoolHandle_st{props->location.id, false};
  Lock lock(driver_lock());
  memory().pools.insert(p);
  *pool = p;
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  if (CUresult r = need_init()) return r;
  Lock lock(driver_lock());
  if (memory().pools.count(pool) == 0 || pool->is_default) return CUDA_ERROR_INVALID_VALUE;
  memory().pools.erase(pool);
  delete pool;  // allocations from it stay valid until freed, as documented
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) {
  if (CUresult r = need_init()) return r;
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  return default_pool(dev, pool);
}

FAKECUDA_API CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr ptr) {
  if (CUresult r = need_init()) return r;
  Lock lock(driver_lock());
  PointerInfo info = lookup(ptr);
  if (!info.found || info.type != CU_MEMORYTYPE_DEVICE) return CUDA_ERROR_NOT_FOUND;
  if (base != nullptr) *base = info.base;
  if (size != nullptr) *size = info.size;
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuPointerGetAttribute(void* data, CUpointer_attribute a, CUdeviceptr ptr) {
  if (CUresult r = need_init()) return r;
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  PointerInfo info = lookup(ptr);
  if (!info.found) return CUDA_ERROR_INVALID_VALUE;
  return attribute(data, a, ptr, info);
}

FAKECUDA_API CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute* attrs, void** data,
                                             CUdeviceptr ptr) {
  if (CUresult r = need_init()) return r;
  if (n == 0 || attrs == nullptr || data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  PointerInfo info = lookup(ptr);
  for (unsigned i = 0; i < n; ++i) {
    if (data[i] == nullptr) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = attribute(data[i], attrs[i], ptr, info);
    if (r != CUDA_SUCCESS && attrs[i] != CU_POINTER_ATTRIBUTE_HOST_POINTER) return r;
    if (r != CUDA_SUCCESS) *static_cast<void**>(data[i]) = nullptr;
  }
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuMemAllocHost_v2(void** pp, size_t bytes) { return host_alloc(pp, bytes); }

FAKECUDA_API CUresult cuMemHostAlloc(void** pp, size_t bytes, unsigned int flags) {
  constexpr unsigned kKnown =
      CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
  if ((flags & ~kKnown) != 0) return CUDA_ERROR_INVALID_VALUE;
  return host_alloc(pp, bytes);
}

FAKECUDA_API CUresult cuMemFreeHost(void* p) {
  if (CUresult r = need_init()) return r;
  int dev = 0;
  {
    Lock lock(driver_lock());
    auto it = memory().host.find(reinterpret_cast<uintptr_t>(p));
    if (it == memory().host.end() || it->second.registered) return CUDA_ERROR_INVALID_VALUE;
    dev = it->second.device;
  }
  sync_device(dev);
  Lock lock(driver_lock());
  auto it = memory().host.find(reinterpret_cast<uintptr_t>(p));
  if (it == memory().host.end() || it->second.registered) return CUDA_ERROR_INVALID_VALUE;
  munmap(p, round_up(it->second.size, kPage));
  memory().host.erase(it);
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuMemHostRegister_v2(void* p, size_t bytes, unsigned int flags) {
  constexpr unsigned kKnown = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                              CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
  if (p == nullptr || bytes == 0 || (flags & ~kKnown) != 0) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx = nullptr;
  if (CUresult r = need_context(&ctx)) return r;
  Lock lock(driver_lock());
  auto b = reinterpret_cast<uintptr_t>(p);
  auto& host = memory().host;
  auto it = host.lower_bound(b + bytes);  // first range starting at or after the end
  if (it != host.begin()) {
    --it;
    if (it->first + std::max<size_t>(it->second.size, 1) > b)
      return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  }
  host.emplace(b, HostRange{bytes, true, ctx, ctx->device});
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuMemHostUnregister(void* p) {
  if (CUresult r = need_init()) return r;
  Lock lock(driver_lock());
  auto it = memory().host.find(reinterpret_cast<uintptr_t>(p));
  if (it == memory().host.end() || !it->second.registered)
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  memory().host.erase(it);
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* pd, void* p, unsigned int flags) {
  if (CUresult r = need_init()) return r;
  if (pd == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  auto& host = memory().host;
  if (containing(host, reinterpret_cast<uintptr_t>(p), host_size) == host.end())
    return CUDA_ERROR_INVALID_VALUE;
  *pd = reinterpret_cast<CUdeviceptr>(p);  // unified addressing: the same address
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr) {
  if (CUresult r = need_init()) return r;
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  auto it = memory().device.find(dptr);
  if (it == memory().device.end()) return CUDA_ERROR_INVALID_VALUE;
  std::memset(handle, 0, sizeof *handle);
  const uint64_t words[3] = {static_cast<uint64_t>(getpid()), dptr, it->second.id};
  std::memcpy(handle->reserved, words, sizeof words);
  return CUDA_SUCCESS;
}
