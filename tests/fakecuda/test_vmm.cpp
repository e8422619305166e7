// VMM: reserve / create / map / set access / unmap / release, aliasing,
// faults, and the error codes of misuse.
#include <cstring>

#include "test_util.hpp"

using namespace fakecuda_test;

namespace {

constexpr size_t kG = 2 * kMiB;

CUmemAllocationProp device_prop(int dev = 0) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = dev;
  return p;
}

void set_rw(CUdeviceptr p, size_t n, int dev = 0) {
  CUmemAccessDesc a{};
  a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  a.location.id = dev;
  a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU_OK(cuMemSetAccess(p, n, &a, 1));
}

size_t free_bytes() {
  size_t f = 0, t = 0;
  CU_OK(cuMemGetInfo(&f, &t));
  return f;
}

}  // namespace

TEST_CASE("VMM granularity is 2 MiB on every location type", "[vmm]") {
  use_device();
  for (CUmemLocationType t :
       {CU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_LOCATION_TYPE_HOST, CU_MEM_LOCATION_TYPE_HOST_NUMA}) {
    CUmemAllocationProp p = device_prop();
    p.location.type = t;
    for (auto f : {CU_MEM_ALLOC_GRANULARITY_MINIMUM, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED}) {
      size_t g = 0;
      CU_OK(cuMemGetAllocationGranularity(&g, &p, f));
      REQUIRE(g == kG);
    }
  }
}

TEST_CASE("reserve honours alignment and the address hint", "[vmm]") {
  use_device();
  CUdeviceptr r = 0;
  CU_OK(cuMemAddressReserve(&r, 8 * kMiB, 64 * kMiB, 0, 0));
  REQUIRE(r % (64 * kMiB) == 0);
  CU_OK(cuMemAddressFree(r, 8 * kMiB));
  CUdeviceptr again = 0;
  CU_OK(cuMemAddressReserve(&again, 8 * kMiB, 0, r, 0));
  REQUIRE(again == r);
  REQUIRE(cuMemAddressFree(again, 4 * kMiB) == CUDA_ERROR_INVALID_VALUE);  // wrong size
  CU_OK(cuMemAddressFree(again, 8 * kMiB));
  REQUIRE(cuMemAddressReserve(&r, 3 * kMiB, 0, 0, 0) == CUDA_ERROR_INVALID_VALUE);
  REQUIRE(cuMemAddressReserve(&r, 4 * kMiB, 3 * kMiB, 0, 0) == CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("one handle mapped twice aliases; offsets map the right bytes", "[vmm]") {
  use_device();
  CUdeviceptr r = 0;
  CU_OK(cuMemAddressReserve(&r, 16 * kMiB, 0, 0, 0));
  CUmemAllocationProp prop = device_prop();
  CUmemGenericAllocationHandle h = 0;
  CU_OK(cuMemCreate(&h, 4 * kMiB, &prop, 0));
  CU_OK(cuMemMap(r, 4 * kMiB, 0, h, 0));
  CU_OK(cuMemMap(r + 8 * kMiB, 2 * kMiB, 2 * kMiB, h, 0));  // second half of h
  set_rw(r, 4 * kMiB);
  set_rw(r + 8 * kMiB, 2 * kMiB);

  auto* a = reinterpret_cast<volatile uint32_t*>(r);
  auto* b = reinterpret_cast<volatile uint32_t*>(r + 8 * kMiB);
  a[kG / 4 + 5] = 0xfeedf00d;  // byte 2 MiB + 20 of the handle
  REQUIRE(b[5] == 0xfeedf00d);
  b[7] = 0x12345678;
  REQUIRE(a[kG / 4 + 7] == 0x12345678);

  // Copies see the same memory (the stream worker uses the same mappings).
  uint32_t w = 0;
  CU_OK(cuMemcpyDtoH(&w, r + kG + 20, 4));
  REQUIRE(w == 0xfeedf00d);

  unsigned long long flags = 99;
  CUmemLocation loc{CU_MEM_LOCATION_TYPE_DEVICE, 0};
  CU_OK(cuMemGetAccess(&flags, &loc, r + 8 * kMiB));
  REQUIRE(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);

  CUmemGenericAllocationHandle again = 0;
  CU_OK(cuMemRetainAllocationHandle(&again, reinterpret_cast<void*>(r + 8 * kMiB + 100)));
  REQUIRE(again == h);
  CU_OK(cuMemRelease(again));
  CUmemAllocationProp got{};
  CU_OK(cuMemGetAllocationPropertiesFromHandle(&got, h));
  REQUIRE(got.location.type == CU_MEM_LOCATION_TYPE_DEVICE);
  REQUIRE(got.location.id == 0);

  unsigned type = 0;
  CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, r + 100));
  REQUIRE(type == CU_MEMORYTYPE_DEVICE);
  CUdeviceptr base = 0;
  size_t size = 0;
  CU_OK(cuMemGetAddressRange(&base, &size, r + 8 * kMiB + 4));
  REQUIRE(base == r + 8 * kMiB);
  REQUIRE(size == 2 * kMiB);

  CU_OK(cuMemUnmap(r, 4 * kMiB));
  CU_OK(cuMemUnmap(r + 8 * kMiB, 2 * kMiB));
  CU_OK(cuMemRelease(h));
  CU_OK(cuMemAddressFree(r, 16 * kMiB));
}

TEST_CASE("physical memory lives until released AND unmapped everywhere", "[vmm]") {
  use_device();
  const size_t f0 = free_bytes();
  CUdeviceptr r = 0;
  CU_OK(cuMemAddressReserve(&r, 4 * kMiB, 0, 0, 0));
  CUmemAllocationProp prop = device_prop();
  CUmemGenericAllocationHandle h = 0;
  CU_OK(cuMemCreate(&h, kG, &prop, 0));
  CU_OK(cuMemMap(r, kG, 0, h, 0));
  CU_OK(cuMemMap(r + kG, kG, 0, h, 0));
  set_rw(r, 2 * kG);
  *reinterpret_cast<volatile int*>(r) = 42;
  CU_OK(cuMemRelease(h));
  REQUIRE(free_bytes() == f0 - kG);                  // still mapped: still charged
  REQUIRE(*reinterpret_cast<volatile int*>(r + kG) == 42);  // and still the same memory
  REQUIRE(cuMemRelease(h) == CUDA_ERROR_INVALID_VALUE);    // no references left
  CU_OK(cuMemUnmap(r, kG));
  REQUIRE(free_bytes() == f0 - kG);
  CU_OK(cuMemUnmap(r + kG, kG));
  REQUIRE(free_bytes() == f0);  // last mapping gone: freed
  CU_OK(cuMemAddressFree(r, 4 * kMiB));
}

TEST_CASE("VMM misuse returns the documented errors", "[vmm]") {
  use_device();
  CUmemAllocationProp prop = device_prop();
  CUmemGenericAllocationHandle h = 0;
  REQUIRE(cuMemCreate(&h, kG + 4096, &prop, 0) == CUDA_ERROR_INVALID_VALUE);
  CUmemAllocationProp bad = prop;
  bad.location.id = 7;
  REQUIRE(cuMemCreate(&h, kG, &bad, 0) == CUDA_ERROR_INVALID_DEVICE);
  CU_OK(cuMemCreate(&h, kG, &prop, 0));

  CUdeviceptr r = 0;
  CU_OK(cuMemAddressReserve(&r, 8 * kMiB, 0, 0, 0));
  // Not reserved (reservations are a granule apart).
  REQUIRE(cuMemMap(r + 8 * kMiB, kG, 0, h, 0) == CUDA_ERROR_INVALID_VALUE);
  // Past the handle, unaligned, flags.
  REQUIRE(cuMemMap(r, 2 * kG, 0, h, 0) == CUDA_ERROR_INVALID_VALUE);
  REQUIRE(cuMemMap(r + 4096, kG, 0, h, 0) == CUDA_ERROR_INVALID_VALUE);
  REQUIRE(cuMemMap(r, kG, 0, h, 1) == CUDA_ERROR_INVALID_VALUE);
  // Access / unmap before mapping.
  CUmemAccessDesc a{};
  a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  a.location.id = 0;
  a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  REQUIRE(cuMemSetAccess(r, kG, &a, 1) == CUDA_ERROR_INVALID_VALUE);
  REQUIRE(cuMemUnmap(r, kG) == CUDA_ERROR_INVALID_VALUE);

  CU_OK(cuMemMap(r, kG, 0, h, 0));
  REQUIRE(cuMemMap(r, kG, 0, h, 0) == CUDA_ERROR_INVALID_VALUE);  // already mapped
  REQUIRE(cuMemSetAccess(r, 2 * kG, &a, 1) == CUDA_ERROR_INVALID_VALUE);  // half unmapped
  REQUIRE(cuMemAddressFree(r, 8 * kMiB) == CUDA_ERROR_INVALID_VALUE);   // still mapped
  CU_OK(cuMemMap(r + kG, kG, 0, h, 0));
  CU_OK(cuMemSetAccess(r, 2 * kG, &a, 1));  // spans two mappings
  REQUIRE(cuMemUnmap(r, kG / 2) == CUDA_ERROR_INVALID_VALUE);  // not granule aligned
  CU_OK(cuMemUnmap(r, 2 * kG));  // both mappings at once
  CU_OK(cuMemRelease(h));
  REQUIRE(cuMemRelease(h) == CUDA_ERROR_INVALID_VALUE);
  REQUIRE(cuMemMap(r, kG, 0, h, 0) == CUDA_ERROR_INVALID_VALUE);  // released handle
  CU_OK(cuMemAddressFree(r, 8 * kMiB));
}

TEST_CASE("reserved-but-unmapped, mapped-without-access and unmapped VAs fault", "[vmm]") {
  use_device();
  CUdeviceptr r = 0;
  CU_OK(cuMemAddressReserve(&r, 4 * kMiB, 0, 0, 0));
  REQUIRE(child_death_signal([r] { (void)*reinterpret_cast<volatile int*>(r + 64); }) == SIGSEGV);

  CUmemAllocationProp prop = device_prop();
  CUmemGenericAllocationHandle h = 0;
  CU_OK(cuMemCreate(&h, kG, &prop, 0));
  CU_OK(cuMemMap(r, kG, 0, h, 0));
  REQUIRE(child_death_signal([r] { (void)*reinterpret_cast<volatile int*>(r); }) == SIGSEGV);
  set_rw(r, kG);
  REQUIRE(child_death_signal([r] { *reinterpret_cast<volatile int*>(r) = 1; }) == 0);
  CU_OK(cuMemUnmap(r, kG));
  REQUIRE(child_death_signal([r] { (void)*reinterpret_cast<volatile int*>(r); }) == SIGSEGV);

  // A copy from an unmapped VA faults in the stream worker, like a GPU would
  // take an illegal address. The child needs its own context: threads (the
  // stream workers) do not survive fork.
  REQUIRE(child_death_signal([r] {
            CUcontext c = nullptr;
            if (cuCtxCreate(&c, nullptr, 0, 0) != CUDA_SUCCESS) _exit(3);
            int x = 0;
            (void)cuMemcpyDtoH(&x, r, sizeof x);
          }) == SIGSEGV);
  CU_OK(cuMemRelease(h));
  CU_OK(cuMemAddressFree(r, 4 * kMiB));
}

TEST_CASE("one VA range can mix device and host chunks", "[vmm]") {
  use_device();
  CUdeviceptr r = 0;
  CU_OK(cuMemAddressReserve(&r, 2 * kG, 0, 0, 0));
  CUmemAllocationProp dev = device_prop();
  CUmemAllocationProp host = device_prop();
  host.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  host.location.id = 0;
  CUmemGenericAllocationHandle hd = 0, hh = 0;
  CU_OK(cuMemCreate(&hd, kG, &dev, 0));
  CU_OK(cuMemCreate(&hh, kG, &host, 0));
  CU_OK(cuMemMap(r, kG, 0, hd, 0));
  CU_OK(cuMemMap(r + kG, kG, 0, hh, 0));
  set_rw(r, 2 * kG);  // one call across both chunks
  CU_OK(cuMemsetD8(r + kG - 100, 0x3c, 200));  // straddles the boundary
  std::vector<unsigned char> back(300, 0);
  CU_OK(cuMemcpyDtoH(back.data(), r + kG - 150, 300));
  for (size_t i = 0; i < back.size(); ++i) REQUIRE(back[i] == ((i >= 50 && i < 250) ? 0x3c : 0));
  unsigned type = 0;
  CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, r + 10));
  REQUIRE(type == CU_MEMORYTYPE_DEVICE);
  CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, r + kG + 10));
  REQUIRE(type == CU_MEMORYTYPE_HOST);
  CU_OK(cuMemUnmap(r, 2 * kG));
  CU_OK(cuMemRelease(hd));
  CU_OK(cuMemRelease(hh));
  CU_OK(cuMemAddressFree(r, 2 * kG));
}
