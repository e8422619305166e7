// Plain allocations, accounting, host memory, pointer queries, errors.
// Runs with FAKECUDA_DEVICES=2 FAKECUDA_MEM_MB=64 (meson.build).
#include <cstring>
#include <string>
#include <vector>

#include "test_util.hpp"

using namespace fakecuda_test;

namespace {

size_t free_bytes() {
  size_t f = 0, t = 0;
  CU_OK(cuMemGetInfo(&f, &t));
  REQUIRE(t == 64 * kMiB);
  return f;
}

}  // namespace

TEST_CASE("devices and attributes follow the environment", "[memory]") {
  use_device();
  int n = 0;
  CU_OK(cuDeviceGetCount(&n));
  REQUIRE(n == 2);
  CUdevice d = -1;
  REQUIRE(cuDeviceGet(&d, 2) == CUDA_ERROR_INVALID_DEVICE);
  CU_OK(cuDeviceGet(&d, 1));
  REQUIRE(d == 1);
  size_t total = 0;
  CU_OK(cuDeviceTotalMem(&total, 1));
  REQUIRE(total == 64 * kMiB);
  int v = 0;
  CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
  REQUIRE(v == 1);
  CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
  REQUIRE(v == 1);
  CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
  REQUIRE(v == 9);
  CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
  REQUIRE(v > 0);
  REQUIRE(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0) == CUDA_ERROR_INVALID_VALUE);
  CU_OK(cuDeviceCanAccessPeer(&v, 0, 1));
  REQUIRE(v == 1);
  CU_OK(cuDriverGetVersion(&v));
  REQUIRE(v == 13000);
  char name[64] = {};
  CU_OK(cuDeviceGetName(name, sizeof name, 0));
  REQUIRE(std::strlen(name) > 0);
}

TEST_CASE("error names and strings", "[memory]") {
  const char* s = nullptr;
  CU_OK(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
  REQUIRE(std::string(s) == "CUDA_ERROR_OUT_OF_MEMORY");
  CU_OK(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s));
  REQUIRE(std::string(s) == "invalid argument");
  REQUIRE(cuGetErrorName(static_cast<CUresult>(12345), &s) == CUDA_ERROR_INVALID_VALUE);
  const void* table = reinterpret_cast<const void*>(1);
  CUuuid id{};
  REQUIRE(cuGetExportTable(&table, &id) == CUDA_ERROR_NOT_SUPPORTED);
}

TEST_CASE("contexts: current, push/pop, device", "[memory]") {
  CUcontext c0 = use_device(0);
  CUcontext c1 = nullptr;
  CU_OK(cuDevicePrimaryCtxRetain(&c1, 1));
  REQUIRE(c1 != c0);
  CU_OK(cuCtxPushCurrent(c1));
  CUdevice d = -1;
  CU_OK(cuCtxGetDevice(&d));
  REQUIRE(d == 1);
  CUcontext popped = nullptr;
  CU_OK(cuCtxPopCurrent(&popped));
  REQUIRE(popped == c1);
  CUcontext cur = nullptr;
  CU_OK(cuCtxGetCurrent(&cur));
  REQUIRE(cur == c0);
  unsigned flags = 0;
  int active = 0;
  CU_OK(cuDevicePrimaryCtxGetState(1, &flags, &active));
  REQUIRE(active == 1);
  CU_OK(cuDevicePrimaryCtxRelease(1));

  CUcontext own = nullptr;
  CU_OK(cuCtxCreate(&own, nullptr, 0, 1));  // becomes current
  CU_OK(cuCtxGetCurrent(&cur));
  REQUIRE(cur == own);
  CUdeviceptr p = 0;
  CU_OK(cuMemAlloc(&p, 4096));
  CUcontext owner = nullptr;
  CU_OK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, p));
  REQUIRE(owner == own);
  CU_OK(cuMemFree(p));
  CU_OK(cuCtxDestroy(own));
  REQUIRE(cuCtxSetCurrent(own) == CUDA_ERROR_INVALID_CONTEXT);
  use_device(0);
}

TEST_CASE("device allocations: alignment, attributes, ranges, free", "[memory]") {
  CUcontext ctx = use_device(0);
  std::vector<CUdeviceptr> ps;
  for (size_t n : {size_t{1}, size_t{1000}, size_t{4097}, size_t{300000}}) {
    CUdeviceptr p = 0;
    CU_OK(cuMemAlloc(&p, n));
    REQUIRE(p % 256 == 0);
    CU_OK(cuMemsetD8(p, 0x5a, n));
    std::vector<unsigned char> back(n, 0);
    CU_OK(cuMemcpyDtoH(back.data(), p, n));
    REQUIRE(back == std::vector<unsigned char>(n, 0x5a));
    ps.push_back(p);
  }
  // Distinct region: far from this process's heap.
  std::vector<char> heap(64);
  REQUIRE((ps[0] >> 40) != (reinterpret_cast<uintptr_t>(heap.data()) >> 40));

  CUdeviceptr p = ps[1];
  unsigned type = 0;
  CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p + 500));
  REQUIRE(type == CU_MEMORYTYPE_DEVICE);
  int ordinal = -1;
  CU_OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
  REQUIRE(ordinal == 0);
  CUdeviceptr start = 0;
  CU_OK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p + 999));
  REQUIRE(start == p);
  size_t size = 0;
  CU_OK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p + 10));
  REQUIRE(size == 1000);
  uint32_t managed = 0xdeadbeef;
  CU_OK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p));
  REQUIRE(managed == 0);
  CUcontext owner = nullptr;
  CU_OK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, p));
  REQUIRE(owner == ctx);
  CUdeviceptr base = 0;
  CU_OK(cuMemGetAddressRange(&base, &size, p + 123));
  REQUIRE(base == p);
  REQUIRE(size == 1000);

  CUpointer_attribute attrs[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                  CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  type = 77;
  ordinal = 77;
  size = 77;
  void* data[3] = {&type, &ordinal, &size};
  CU_OK(cuPointerGetAttributes(3, attrs, data, p + 1));
  REQUIRE(type == CU_MEMORYTYPE_DEVICE);
  REQUIRE(ordinal == 0);
  REQUIRE(size == 1000);
  // Not a CUDA pointer: success, with zero values.
  CU_OK(cuPointerGetAttributes(3, attrs, data, reinterpret_cast<CUdeviceptr>(heap.data())));
  REQUIRE(type == 0);
  REQUIRE(size == 0);
  REQUIRE(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                reinterpret_cast<CUdeviceptr>(heap.data())) ==
          CUDA_ERROR_INVALID_VALUE);

  CUipcMemHandle ipc{};
  CU_OK(cuIpcGetMemHandle(&ipc, p));
  REQUIRE(cuIpcGetMemHandle(&ipc, reinterpret_cast<CUdeviceptr>(heap.data())) ==
          CUDA_ERROR_INVALID_VALUE);

  for (CUdeviceptr q : ps) CU_OK(cuMemFree(q));
  REQUIRE(cuMemFree(p) == CUDA_ERROR_INVALID_VALUE);  // double free
  REQUIRE(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) ==
          CUDA_ERROR_INVALID_VALUE);
  REQUIRE(cuMemAlloc(&p, 0) == CUDA_ERROR_INVALID_VALUE);

  size_t pitch = 0;
  CU_OK(cuMemAllocPitch(&p, &pitch, 1000, 7, 4));
  REQUIRE(pitch >= 1000);
  REQUIRE(pitch % 256 == 0);
  CU_OK(cuMemGetAddressRange(&base, &size, p));
  REQUIRE(size >= pitch * 7);
  CU_OK(cuMemFree(p));
  REQUIRE(cuMemAllocPitch(&p, &pitch, 1000, 7, 3) == CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("a use after cuMemFree faults", "[memory]") {
  use_device(0);
  CUdeviceptr p = 0;
  CU_OK(cuMemAlloc(&p, 8192));
  *reinterpret_cast<volatile int*>(p) = 1;  // fine while allocated
  CU_OK(cuMemFree(p));
  int sig = child_death_signal([p] { *reinterpret_cast<volatile int*>(p) = 2; });
  REQUIRE(sig == SIGSEGV);
}

TEST_CASE("device memory accounting and out of memory", "[memory]") {
  use_device(0);
  const size_t f0 = free_bytes();
  REQUIRE(f0 <= 64 * kMiB);
  CUdeviceptr a = 0, b = 0;
  CU_OK(cuMemAlloc(&a, 16 * kMiB));
  REQUIRE(free_bytes() == f0 - 16 * kMiB);
  REQUIRE(cuMemAlloc(&b, f0 - 16 * kMiB + 4096) == CUDA_ERROR_OUT_OF_MEMORY);
  REQUIRE(free_bytes() == f0 - 16 * kMiB);  // a failed allocation charges nothing

  SECTION("VMM device handles count, host ones do not") {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h = 0;
    CU_OK(cuMemCreate(&h, 32 * kMiB, &prop, 0));
    REQUIRE(free_bytes() == f0 - 48 * kMiB);
    REQUIRE(cuMemCreate(&h, 32 * kMiB, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY);
    CUmemAllocationProp host = prop;
    host.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    CUmemGenericAllocationHandle hh = 0;
    CU_OK(cuMemCreate(&hh, 32 * kMiB, &host, 0));
    REQUIRE(free_bytes() == f0 - 48 * kMiB);
    CU_OK(cuMemRelease(hh));
    CU_OK(cuMemRelease(h));
    REQUIRE(free_bytes() == f0 - 16 * kMiB);
  }
  SECTION("accounting is per device") {
    use_device(1);
    const size_t g0 = free_bytes();
    CU_OK(cuMemAlloc(&b, 40 * kMiB));
    int ordinal = -1;
    CU_OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, b));
    REQUIRE(ordinal == 1);
    REQUIRE(free_bytes() == g0 - 40 * kMiB);
    CU_OK(cuMemFree(b));
    use_device(0);
    REQUIRE(free_bytes() == f0 - 16 * kMiB);
  }
  CU_OK(cuMemFree(a));
  REQUIRE(free_bytes() == f0);
}

TEST_CASE("stream-ordered allocations and pools", "[memory]") {
  use_device(0);
  const size_t f0 = free_bytes();
  CUstream s = nullptr;
  CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  Gate& gate = new_gate();
  CU_OK(cuLaunchHostFunc(s, Gate::wait_fn, &gate));
  CUdeviceptr p = 0;
  CU_OK(cuMemAllocAsync(&p, 1 * kMiB, s));
  CU_OK(cuMemsetD32Async(p, 0x01020304u, kMiB / 4, s));
  uint32_t word = 0;
  CU_OK(cuMemcpyDtoHAsync(&word, p + 4096, 4, s));
  CU_OK(cuMemFreeAsync(p, s));
  REQUIRE(cuMemFreeAsync(p, s) == CUDA_ERROR_INVALID_VALUE);  // already queued for free
  REQUIRE(free_bytes() == f0 - kMiB);                          // freed when the stream gets there
  gate.open();
  CU_OK(cuStreamSynchronize(s));
  REQUIRE(word == 0x01020304u);
  REQUIRE(free_bytes() == f0);

  CUmemoryPool def = nullptr;
  CU_OK(cuDeviceGetDefaultMemPool(&def, 0));
  REQUIRE(cuMemPoolDestroy(def) == CUDA_ERROR_INVALID_VALUE);
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 1;
  CUmemoryPool pool = nullptr;
  CU_OK(cuMemPoolCreate(&pool, &props));
  CU_OK(cuMemAllocFromPoolAsync(&p, 4096, pool, s));
  int ordinal = -1;
  CU_OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
  REQUIRE(ordinal == 1);
  CU_OK(cuMemFreeAsync(p, s));
  CU_OK(cuStreamSynchronize(s));
  CU_OK(cuMemPoolDestroy(pool));
  CU_OK(cuStreamDestroy(s));
}

TEST_CASE("host memory: pinned allocations and registration", "[memory]") {
  use_device(0);
  void* h = nullptr;
  CU_OK(cuMemAllocHost(&h, 100));
  unsigned type = 0;
  CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                              reinterpret_cast<CUdeviceptr>(h) + 50));
  REQUIRE(type == CU_MEMORYTYPE_HOST);
  CUdeviceptr d = 0;
  CU_OK(cuMemHostGetDevicePointer(&d, h, 0));
  REQUIRE(d == reinterpret_cast<CUdeviceptr>(h));
  CU_OK(cuMemFreeHost(h));
  REQUIRE(cuMemFreeHost(h) == CUDA_ERROR_INVALID_VALUE);

  CU_OK(cuMemHostAlloc(&h, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
  CU_OK(cuMemFreeHost(h));

  std::vector<char> buf(1 << 16);
  CU_OK(cuMemHostRegister(buf.data(), buf.size(), 0));
  REQUIRE(cuMemHostRegister(buf.data() + 100, 10, 0) == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  CU_OK(cuMemHostGetDevicePointer(&d, buf.data() + 100, 0));
  REQUIRE(d == reinterpret_cast<CUdeviceptr>(buf.data() + 100));
  CU_OK(cuMemHostUnregister(buf.data()));
  REQUIRE(cuMemHostUnregister(buf.data()) == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  REQUIRE(cuMemHostGetDevicePointer(&d, buf.data(), 0) == CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("copies and sets of every shape", "[memory]") {
  use_device(0);
  CUdeviceptr d = 0, e = 0;
  CU_OK(cuMemAlloc(&d, 64 * 1024));
  CU_OK(cuMemAlloc(&e, 64 * 1024));
  std::vector<uint32_t> host(1024);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint32_t>(i * 2654435761u);
  CU_OK(cuMemcpyHtoD(d, host.data(), 4096));
  CU_OK(cuMemcpyDtoD(e, d, 4096));
  std::vector<uint32_t> back(1024, 0);
  CU_OK(cuMemcpy(reinterpret_cast<CUdeviceptr>(back.data()), e, 4096));
  REQUIRE(back == host);

  // D16 / D32 alignment and values.
  REQUIRE(cuMemsetD16(d + 1, 7, 4) == CUDA_ERROR_INVALID_VALUE);
  REQUIRE(cuMemsetD32(d + 2, 7, 4) == CUDA_ERROR_INVALID_VALUE);
  CU_OK(cuMemsetD16(d, 0xabcd, 3));
  uint16_t h16[4] = {};
  CU_OK(cuMemcpyDtoH(h16, d, 8));
  REQUIRE((h16[0] == 0xabcd && h16[1] == 0xabcd && h16[2] == 0xabcd));
  REQUIRE(h16[3] != 0xabcd);

  // 2D: copy a 5x3 window between pitched buffers; set a 2D region.
  CU_OK(cuMemsetD8(d, 0, 64 * 1024));
  CU_OK(cuMemsetD2D32(d + 64, 256, 0x11223344u, 4, 3));  // 4 words x 3 rows, pitch 256
  std::vector<uint32_t> grid(256 * 4 / 4, 0);
  CU_OK(cuMemcpyDtoH(grid.data(), d, 256 * 4));
  for (int row = 0; row < 4; ++row)
    for (int col = 0; col < 64; ++col) {
      bool inside = row < 3 && col >= 16 && col < 20;
      REQUIRE(grid[row * 64 + col] == (inside ? 0x11223344u : 0u));
    }
  std::vector<unsigned char> src(10 * 32), dst(8 * 20, 0xee);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i);
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = src.data();
  c.srcPitch = 32;
  c.srcXInBytes = 2;
  c.srcY = 1;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = e;
  c.dstPitch = 20;
  c.WidthInBytes = 5;
  c.Height = 3;
  CU_OK(cuMemcpy2D(&c));
  CU_OK(cuMemcpyDtoH(dst.data(), e, 60));
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 5; ++x) REQUIRE(dst[y * 20 + x] == src[(y + 1) * 32 + 2 + x]);
  c.dstPitch = 4;  // narrower than the width
  REQUIRE(cuMemcpy2D(&c) == CUDA_ERROR_INVALID_VALUE);

  // 3D: two 2x2 slices.
  CUDA_MEMCPY3D q{};
  std::vector<unsigned char> s3(2 * 4 * 8), d3(2 * 2 * 2, 0);
  for (size_t i = 0; i < s3.size(); ++i) s3[i] = static_cast<unsigned char>(i + 1);
  q.srcMemoryType = CU_MEMORYTYPE_HOST;
  q.srcHost = s3.data();
  q.srcPitch = 8;
  q.srcHeight = 4;
  q.dstMemoryType = CU_MEMORYTYPE_HOST;
  q.dstHost = d3.data();
  q.dstPitch = 2;
  q.dstHeight = 2;
  q.WidthInBytes = 2;
  q.Height = 2;
  q.Depth = 2;
  CU_OK(cuMemcpy3D(&q));
  for (int z = 0; z < 2; ++z)
    for (int y = 0; y < 2; ++y)
      for (int x = 0; x < 2; ++x) REQUIRE(d3[(z * 2 + y) * 2 + x] == s3[(z * 4 + y) * 8 + x]);

  CUcontext ctx = nullptr;
  CU_OK(cuCtxGetCurrent(&ctx));
  CU_OK(cuMemcpyPeer(e, ctx, d, ctx, 16));
  CU_OK(cuMemFree(d));
  CU_OK(cuMemFree(e));
}

TEST_CASE("cuMemFree waits for work already queued on the memory", "[memory]") {
  use_device(0);
  CUstream s = nullptr;
  CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr p = 0;
  CU_OK(cuMemAlloc(&p, 1 << 16));
  Gate& gate = new_gate();
  CU_OK(cuLaunchHostFunc(s, Gate::wait_fn, &gate));
  CU_OK(cuMemsetD32Async(p, 1, (1 << 16) / 4, s));  // would fault after a non-waiting free
  auto t0 = std::chrono::steady_clock::now();  // before the opener starts: no flake
  std::thread opener([&] {
    sleep_ms(20);
    gate.open();
  });
  CU_OK(cuMemFree(p));
  auto waited = std::chrono::steady_clock::now() - t0;
  opener.join();
  REQUIRE(waited >= std::chrono::milliseconds(15));
  CU_OK(cuStreamQuery(s));
  CU_OK(cuStreamDestroy(s));
}
