// The CUDA virtual memory management API on host mappings.
//
// Note [VMM emulation]
//   reservation  cuMemAddressReserve: an anonymous PROT_NONE mapping
//   physical     cuMemCreate: a memfd of the handle's size (so that one handle
//                mapped at two addresses aliases, as on the GPU)
//   mapping      cuMemMap: mmap(MAP_FIXED | MAP_SHARED) of the memfd over part
//                of a reservation, PROT_NONE until cuMemSetAccess
//   unmap        cuMemUnmap: the range goes back to anonymous PROT_NONE
// Invariants (driver lock):
//   every mapping lies inside one reservation, and mappings never overlap;
//   a physical handle lives while refs > 0 || mappings > 0, where refs counts
//   cuMemCreate + cuMemRetainAllocationHandle - cuMemRelease; device-located
//   handles are charged to their device for exactly that lifetime.
#include <sys/mman.h>
#include <unistd.h>

#include <map>

#include "internal.hpp"

namespace fakecuda {
namespace {

constexpr uintptr_t kReserveHint = uintptr_t{0x3000'0000'0000};

struct Physical {
  int fd = -1;
  size_t size = 0;
  CUmemAllocationProp prop{};
  unsigned refs = 1;
  unsigned mappings = 0;
};

struct Mapping {
  size_t size = 0;
  CUmemGenericAllocationHandle handle = 0;
  size_t offset = 0;
  std::vector<CUmemAccess_flags> access;  // one per granule
};

struct Vmm {
  std::map<CUmemGenericAllocationHandle, Physical> handles;
  std::map<uintptr_t, size_t> reservations;  // base -> size
  std::map<uintptr_t, Mapping> mappings;     // base -> mapping
  CUmemGenericAllocationHandle next_handle = 0x1000;
  uintptr_t next_hint = kReserveHint;
};

Vmm& vmm() {  // LOCKING: driver lock
  static Vmm* v = new Vmm;
  return *v;
}

bool aligned(uintptr_t x) { return x % kGranule == 0; }

void destroy_if_unused(CUmemGenericAllocationHandle h) {
  auto it = vmm().handles.find(h);
  if (it == vmm().handles.end()) return;
  Physical& p = it->second;
  if (p.refs != 0 || p.mappings != 0) return;
  close(p.fd);
  if (p.prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE) uncharge_device(p.prop.location.id, p.size);
  vmm().handles.erase(it);
}

// The reservation holding [p, p + n), or end().
std::map<uintptr_t, size_t>::iterator reservation_of(uintptr_t p, size_t n) {
  auto& r = vmm().reservations;
  auto it = r.upper_bound(p);
  if (it == r.begin()) return r.end();
  --it;
  return p + n <= it->first + it->second ? it : r.end();
}

bool overlaps_mapping(uintptr_t p, size_t n) {
  auto& m = vmm().mappings;
  auto it = m.lower_bound(p + n);
  if (it == m.begin()) return false;
  --it;
  return it->first + it->second.size > p;
}

// Whether [p, p + n) is covered by whole mappings laid end to end. With
// `exact_ends`, the range must start and end on mapping boundaries.
bool covered_by_mappings(uintptr_t p, size_t n, bool exact_ends) {
  auto& m = vmm().mappings;
  auto it = m.upper_bound(p);
  if (it == m.begin()) return false;
  --it;
  if (it->first + it->second.size <= p) return false;
  if (exact_ends && it->first != p) return false;
  uintptr_t at = it->first;
  while (true) {
    uintptr_t end = at + it->second.size;
    if (end >= p + n) return !exact_ends || end == p + n;
    ++it;
    if (it == m.end() || it->first != end) return false;
    at = end;
  }
}

std::map<uintptr_t, Mapping>::iterator mapping_at(uintptr_t p) {
  auto& m = vmm().mappings;
  auto it = m.upper_bound(p);
  if (it == m.begin()) return m.end();
  --it;
  return p < it->first + it->second.size ? it : m.end();
}

CUresult check_location(const CUmemLocation& loc, bool allow_host) {
  switch (loc.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      return valid_device(loc.id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
      return allow_host && loc.id >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult need_init() { return initialized() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED; }

int prot_of(CUmemAccess_flags f) {
  switch (f) {
    case CU_MEM_ACCESS_FLAGS_PROT_READ: return PROT_READ;
    case CU_MEM_ACCESS_FLAGS_PROT_READWRITE: return PROT_READ | PROT_WRITE;
    default: return PROT_NONE;
  }
}

}  // namespace

PointerInfo find_vmm_mapping(uintptr_t p) {
  PointerInfo info;
  auto it = mapping_at(p);
  if (it == vmm().mappings.end()) return info;
  const Physical& ph = vmm().handles.at(it->second.handle);
  info.found = true;
  info.vmm = true;
  bool on_device = ph.prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE;
  info.type = on_device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
  info.device = on_device ? ph.prop.location.id : 0;
  info.base = it->first;
  info.size = it->second.size;
  info.ctx = nullptr;
  return info;
}

}  // namespace fakecuda

using namespace fakecuda;

FAKECUDA_API CUresult cuMemGetAllocationGranularity(size_t* g, const CUmemAllocationProp* prop,
                                                    CUmemAllocationGranularity_flags flags) {
  if (CUresult r = need_init()) return r;
  if (g == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (flags != CU_MEM_ALLOC_GRANULARITY_MINIMUM && flags != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_location(prop->location, true)) return r;
  *g = kGranule;
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                          CUdeviceptr addr, unsigned long long flags) {
  if (CUresult r = need_init()) return r;
  if (ptr == nullptr || size == 0 || !aligned(size) || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (alignment == 0) alignment = kGranule;
  if ((alignment & (alignment - 1)) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (alignment < kGranule) alignment = kGranule;
  constexpr int kFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  Lock lock(driver_lock());
  void* got = MAP_FAILED;
  // The address is a hint, as on the real driver; without one we still place
  // reservations in their own region (Note [Device arena] in memory.cpp).
  uintptr_t hint = addr != 0 ? addr : (kPlaceAtHints ? vmm().next_hint : 0);
  if (hint != 0 && hint % alignment == 0) {
    got = mmap(reinterpret_cast<void*>(hint), size, PROT_NONE, kFlags | MAP_FIXED_NOREPLACE, -1, 0);
    if (got != MAP_FAILED && reinterpret_cast<uintptr_t>(got) != hint) {
      munmap(got, size);  // an old kernel treated it as a plain hint
      got = MAP_FAILED;
    }
  }
  if (got == MAP_FAILED) {
    size_t over = size + alignment;
    void* raw = mmap(nullptr, over, PROT_NONE, kFlags, -1, 0);
    if (raw == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    auto r = reinterpret_cast<uintptr_t>(raw);
    uintptr_t a = (r + alignment - 1) / alignment * alignment;
    if (a > r) munmap(raw, a - r);
    if (r + over > a + size) munmap(reinterpret_cast<void*>(a + size), r + over - (a + size));
    got = reinterpret_cast<void*>(a);
  }
  auto base = reinterpret_cast<uintptr_t>(got);
  if (addr == 0 && base == vmm().next_hint) vmm().next_hint = base + size + kGranule;
  vmm().reservations.emplace(base, size);
  *ptr = base;
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  if (CUresult r = need_init()) return r;
  Lock lock(driver_lock());
  auto it = vmm().reservations.find(ptr);
  if (it == vmm().reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  if (overlaps_mapping(ptr, size)) return CUDA_ERROR_INVALID_VALUE;  // must be unmapped first
  munmap(reinterpret_cast<void*>(ptr), size);
  vmm().reservations.erase(it);
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                  const CUmemAllocationProp* prop, unsigned long long flags) {
  if (CUresult r = need_init()) return r;
  if (handle == nullptr || prop == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (size == 0 || !aligned(size)) return CUDA_ERROR_INVALID_VALUE;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_location(prop->location, true)) return r;
  if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE &&
      prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    return CUDA_ERROR_NOT_SUPPORTED;
  Lock lock(driver_lock());
  bool on_device = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
  if (on_device)
    if (CUresult r = charge_device(prop->location.id, size)) return r;
  int fd = memfd_create("fakecuda-physical", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
    if (fd >= 0) close(fd);
    if (on_device) uncharge_device(prop->location.id, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Physical p;
  p.fd = fd;
  p.size = size;
  p.prop = *prop;
  CUmemGenericAllocationHandle h = vmm().next_handle++;
  vmm().handles.emplace(h, p);
  *handle = h;
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  if (CUresult r = need_init()) return r;
  Lock lock(driver_lock());
  auto it = vmm().handles.find(handle);
  if (it == vmm().handles.end() || it->second.refs == 0) return CUDA_ERROR_INVALID_VALUE;
  --it->second.refs;
  destroy_if_unused(handle);  // physical memory goes once it is unmapped everywhere
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                               CUmemGenericAllocationHandle handle, unsigned long long flags) {
  if (CUresult r = need_init()) return r;
  if (flags != 0 || size == 0 || !aligned(ptr) || !aligned(size) || !aligned(offset))
    return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  auto h = vmm().handles.find(handle);
  if (h == vmm().handles.end() || h->second.refs == 0) return CUDA_ERROR_INVALID_VALUE;
  Physical& ph = h->second;
  if (offset > ph.size || size > ph.size - offset) return CUDA_ERROR_INVALID_VALUE;
  if (reservation_of(ptr, size) == vmm().reservations.end()) return CUDA_ERROR_INVALID_VALUE;
  if (overlaps_mapping(ptr, size)) return CUDA_ERROR_INVALID_VALUE;  // already mapped
  void* got = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED, ph.fd,
                   static_cast<off_t>(offset));
  if (got == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  Mapping m;
  m.size = size;
  m.handle = handle;
  m.offset = offset;
  m.access.assign(size / kGranule, CU_MEM_ACCESS_FLAGS_PROT_NONE);
  vmm().mappings.emplace(ptr, std::move(m));
  ++ph.mappings;
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  if (CUresult r = need_init()) return r;
  if (size == 0 || !aligned(ptr) || !aligned(size)) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  if (!covered_by_mappings(ptr, size, true)) return CUDA_ERROR_INVALID_VALUE;
  void* got = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  if (got == MAP_FAILED) return CUDA_ERROR_UNKNOWN;
  auto it = vmm().mappings.find(ptr);
  while (it != vmm().mappings.end() && it->first < ptr + size) {
    CUmemGenericAllocationHandle h = it->second.handle;
    it = vmm().mappings.erase(it);
    --vmm().handles.at(h).mappings;
    destroy_if_unused(h);
  }
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                     size_t count) {
  if (CUresult r = need_init()) return r;
  if (desc == nullptr || count == 0 || size == 0 || !aligned(ptr) || !aligned(size))
    return CUDA_ERROR_INVALID_VALUE;
  CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
  for (size_t i = 0; i < count; ++i) {
    if (CUresult r = check_location(desc[i].location, false)) return r;
    if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
        desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
        desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      return CUDA_ERROR_INVALID_VALUE;
    if (prot_of(desc[i].flags) > prot_of(flags)) flags = desc[i].flags;  // one address space
  }
  Lock lock(driver_lock());
  if (!covered_by_mappings(ptr, size, false)) return CUDA_ERROR_INVALID_VALUE;
  if (mprotect(reinterpret_cast<void*>(ptr), size, prot_of(flags)) != 0) return CUDA_ERROR_UNKNOWN;
  for (uintptr_t g = ptr; g < ptr + size; g += kGranule) {
    auto it = mapping_at(g);
    it->second.access[(g - it->first) / kGranule] = flags;
  }
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuMemGetAccess(unsigned long long* flags, const CUmemLocation* location,
                                     CUdeviceptr ptr) {
  if (CUresult r = need_init()) return r;
  if (flags == nullptr || location == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_location(*location, false)) return r;
  Lock lock(driver_lock());
  auto it = mapping_at(ptr);
  if (it == vmm().mappings.end()) return CUDA_ERROR_INVALID_VALUE;
  *flags = it->second.access[(ptr - it->first) / kGranule];
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                             CUmemGenericAllocationHandle handle) {
  if (CUresult r = need_init()) return r;
  if (prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  auto it = vmm().handles.find(handle);
  if (it == vmm().handles.end()) return CUDA_ERROR_INVALID_VALUE;
  *prop = it->second.prop;
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  if (CUresult r = need_init()) return r;
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  auto it = mapping_at(reinterpret_cast<uintptr_t>(addr));
  if (it == vmm().mappings.end()) return CUDA_ERROR_INVALID_VALUE;
  ++vmm().handles.at(it->second.handle).refs;  // released with cuMemRelease, as documented
  *handle = it->second.handle;
  return CUDA_SUCCESS;
}
