// End to end on the CPU: this program talks to the CUDA driver API, linked
// against tests/fakecuda (libcuda.so.1 on host memory), and runs with the real
// libvstack.so in LD_PRELOAD and configs/ci.json (64 MiB gpu tier, 256 MiB
// host tier, 2 MiB pages; the fake device has 128 MiB). Kernels are host
// callbacks with real parameter layouts, run asynchronously on stream threads.
#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fakecuda.h"

namespace {

constexpr uint64_t MiB = 1ull << 20;

#define CU_OK(x) REQUIRE((x) == CUDA_SUCCESS)

uint8_t pattern(uint64_t i, uint32_t seed) { return static_cast<uint8_t>((i * 2654435761u) >> 13 ^ seed); }

// fill(uint8_t* p, size_t n, uint32_t seed)
void k_fill(const fakecuda_launch* l) {
  auto* p = fakecuda::arg<uint8_t*>(l, 0);
  auto n = fakecuda::arg<size_t>(l, 1);
  auto s = fakecuda::arg<uint32_t>(l, 2);
  for (size_t i = 0; i < n; ++i) p[i] = pattern(i, s);
}
// check(const uint8_t* p, size_t n, uint32_t seed, unsigned long long* bad)
void k_check(const fakecuda_launch* l) {
  auto* p = fakecuda::arg<const uint8_t*>(l, 0);
  auto n = fakecuda::arg<size_t>(l, 1);
  auto s = fakecuda::arg<uint32_t>(l, 2);
  auto* bad = fakecuda::arg<unsigned long long*>(l, 3);
  for (size_t i = 0; i < n; ++i) *bad += p[i] != pattern(i, s);
}
// A kernel whose parameter is a struct holding the pointer.
struct Desc {
  int tag;
  uint8_t* ptr;
  size_t n;
};
void k_fill_struct(const fakecuda_launch* l) {
  auto d = fakecuda::arg<Desc>(l, 0);
  for (size_t i = 0; i < d.n; ++i) d.ptr[i] = pattern(i, static_cast<uint32_t>(d.tag));
}
// indirect(uint8_t** table, int count, size_t n, unsigned long long* bad):
// the buffers are reachable only through the table in device memory.
void k_indirect(const fakecuda_launch* l) {
  auto** table = fakecuda::arg<uint8_t**>(l, 0);
  auto count = fakecuda::arg<int>(l, 1);
  auto n = fakecuda::arg<size_t>(l, 2);
  auto* bad = fakecuda::arg<unsigned long long*>(l, 3);
  for (int b = 0; b < count; ++b)
    for (size_t i = 0; i < n; ++i) *bad += table[b][i] != pattern(i, 100u + static_cast<uint32_t>(b));
}

struct Driver {
  CUcontext ctx = nullptr;
  CUmodule mod = nullptr;
  CUfunction fill = nullptr, check = nullptr, fill_struct = nullptr, indirect = nullptr;
  Driver() {
    static bool registered = [] {
      fakecuda::register_kernel<uint8_t*, size_t, uint32_t>("fill", k_fill);
      fakecuda::register_kernel<const uint8_t*, size_t, uint32_t, unsigned long long*>("check", k_check);
      fakecuda::register_kernel<Desc>("fill_struct", k_fill_struct);
      fakecuda::register_kernel<uint8_t**, int, size_t, unsigned long long*>("indirect", k_indirect);
      return true;
    }();
    (void)registered;
    CU_OK(cuInit(0));
    CUdevice dev;
    CU_OK(cuDeviceGet(&dev, 0));
    CU_OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU_OK(cuCtxSetCurrent(ctx));
    CU_OK(cuModuleLoadData(&mod, "fake image"));
    CU_OK(cuModuleGetFunction(&fill, mod, "fill"));
    CU_OK(cuModuleGetFunction(&check, mod, "check"));
    CU_OK(cuModuleGetFunction(&fill_struct, mod, "fill_struct"));
    CU_OK(cuModuleGetFunction(&indirect, mod, "indirect"));
  }
  CUresult launch_fill(CUdeviceptr p, size_t n, uint32_t seed, CUstream s = nullptr) {
    void* args[] = {&p, &n, &seed};
    return cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr);
  }
  // Mismatches counted on the "device", into a pool counter.
  unsigned long long count_bad(CUdeviceptr p, size_t n, uint32_t seed, CUstream s = nullptr) {
    CUdeviceptr bad = 0;
    REQUIRE(cuMemAlloc(&bad, 8) == CUDA_SUCCESS);
    REQUIRE(cuMemsetD8(bad, 0, 8) == CUDA_SUCCESS);
    void* args[] = {&p, &n, &seed, &bad};
    REQUIRE(cuLaunchKernel(check, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr) == CUDA_SUCCESS);
    unsigned long long out = ~0ull;
    REQUIRE(cuStreamSynchronize(s) == CUDA_SUCCESS);
    REQUIRE(cuMemcpyDtoH(&out, bad, 8) == CUDA_SUCCESS);
    REQUIRE(cuMemFree(bad) == CUDA_SUCCESS);
    return out;
  }
};

Driver& drv() {
  static Driver d;
  return d;
}

std::string where(const void* fn) {
  Dl_info i{};
  if (!dladdr(fn, &i) || !i.dli_fname) return "?";
  return std::string(i.dli_fname) + ":" + (i.dli_sname ? i.dli_sname : "?");
}

}  // namespace

TEST_CASE("the shim is in front: memory info reports every tier", "[shim]") {
  drv();
  size_t free_b = 0, total = 0;
  CU_OK(cuMemGetInfo(&free_b, &total));
  CHECK(total == 320 * MiB);  // 64 MiB gpu + 256 MiB host, not the fake device's 128 MiB
}

TEST_CASE("routing: dlsym and cuGetProcAddress hand out the hooks", "[shim][routing]") {
  drv();
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(h);
  void* p = dlsym(h, "cuMemAlloc_v2");
  REQUIRE(p);
  CHECK(where(p).find("libvstack.so") != std::string::npos);
  // A driver function vstack does not hook comes back untouched.
  CHECK(where(dlsym(h, "cuCtxSynchronize")).find("libcuda") != std::string::npos);

  void* fn = nullptr;
  CUdriverProcAddressQueryResult st{};
  CU_OK(cuGetProcAddress_v2("cuMemAlloc", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
  CHECK(where(fn).find("libvstack.so:cuMemAlloc_v2") != std::string::npos);
  CU_OK(cuGetProcAddress_v2("cuLaunchKernel", &fn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
  CHECK(where(fn).find("libvstack.so:cuLaunchKernel_ptsz") != std::string::npos);
  CU_OK(cuGetProcAddress_v2("cuMemcpyHtoD", &fn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
  CHECK(where(fn).find("libvstack.so:cuMemcpyHtoD_v2_ptds") != std::string::npos);
  // Asking for the resolver itself must return ours, or every later lookup is lost.
  CU_OK(cuGetProcAddress_v2("cuGetProcAddress", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
  CHECK(where(fn).find("libvstack.so") != std::string::npos);

  // Through the resolved pointers, allocations are paged.
  using AllocFn = CUresult (*)(CUdeviceptr*, size_t);
  CU_OK(cuGetProcAddress_v2("cuMemAlloc", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
  CUdeviceptr d = 0;
  CU_OK(reinterpret_cast<AllocFn>(fn)(&d, 3 * MiB));
  CUdeviceptr base = 0;
  size_t size = 0;
  CU_OK(cuMemGetAddressRange(&base, &size, d + 100));
  CHECK(base == d);
  CHECK(size == 3 * MiB);
  CU_OK(cuMemFree(d));
}

TEST_CASE("per-thread default stream entry points work under paging", "[shim][ptsz]") {
  auto& D = drv();
  void* fn = nullptr;
  CUdriverProcAddressQueryResult st{};
  CU_OK(cuGetProcAddress_v2("cuLaunchKernel", &fn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
  using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                CUstream, void**, void**);
  auto launch_ptsz = reinterpret_cast<LaunchFn>(fn);
  std::vector<CUdeviceptr> bufs(6);
  for (size_t i = 0; i < bufs.size(); ++i) {
    CU_OK(cuMemAlloc(&bufs[i], 24 * MiB));  // 144 MiB through a 64 MiB gpu tier
    size_t n = 24 * MiB;
    uint32_t seed = 7 + static_cast<uint32_t>(i);
    void* args[] = {&bufs[i], &n, &seed};
    CU_OK(launch_ptsz(D.fill, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
  }
  CU_OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
  for (size_t i = 0; i < bufs.size(); ++i) CHECK(D.count_bad(bufs[i], 24 * MiB, 7 + static_cast<uint32_t>(i)) == 0);
  for (auto b : bufs) CU_OK(cuMemFree(b));
}

TEST_CASE("data stays byte-exact through many eviction and promotion cycles", "[shim][paging]") {
  auto& D = drv();
  std::mt19937 rng(42);
  CUstream s1, s2;
  CU_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  CU_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  // ~3x the gpu tier in mixed sizes.
  std::vector<std::pair<CUdeviceptr, size_t>> a;
  std::vector<uint32_t> seed;
  size_t total = 0;
  while (total < 190 * MiB) {
    size_t n = (1 + rng() % 20) * MiB + rng() % 4096;
    CUdeviceptr p = 0;
    CU_OK(cuMemAlloc(&p, n));
    a.emplace_back(p, n);
    seed.push_back(rng());
    total += n;
  }
  for (size_t i = 0; i < a.size(); ++i) CU_OK(D.launch_fill(a[i].first, a[i].second, seed[i], i % 2 ? s1 : s2));
  for (int round = 0; round < 4; ++round) {
    std::shuffle(std::begin(a), std::end(a), rng);  // seeds follow their buffers below
    for (size_t i = 0; i < a.size(); ++i) {
      // Rewrite some through copies, some through kernels with a struct parameter.
      auto [p, n] = a[i];
      uint32_t s = static_cast<uint32_t>(p >> 12) + static_cast<uint32_t>(round);
      if (i % 3 == 0) {
        std::vector<uint8_t> host(n);
        for (size_t k = 0; k < n; ++k) host[k] = pattern(k, s);
        CU_OK(cuMemcpyHtoDAsync(p, host.data(), n, s1));
        CU_OK(cuStreamSynchronize(s1));
      } else if (i % 3 == 1) {
        Desc d{static_cast<int>(s), reinterpret_cast<uint8_t*>(p), n};
        void* args[] = {&d};
        CU_OK(cuLaunchKernel(D.fill_struct, 1, 1, 1, 1, 1, 1, 0, s2, args, nullptr));
      } else {
        CU_OK(D.launch_fill(p, n, s, s1));
      }
    }
    CU_OK(cuCtxSynchronize());
    for (size_t i = 0; i < a.size(); ++i) {
      auto [p, n] = a[i];
      uint32_t s = static_cast<uint32_t>(p >> 12) + static_cast<uint32_t>(round);
      if (i % 2 == 0) {
        std::vector<uint8_t> host(n);
        CU_OK(cuMemcpyDtoH(host.data(), p, n));
        size_t bad = 0;
        for (size_t k = 0; k < n; ++k) bad += host[k] != pattern(k, s);
        REQUIRE(bad == 0);
      } else {
        REQUIRE(D.count_bad(p, n, s, s2) == 0);
      }
    }
  }
  for (auto [p, n] : a) CU_OK(cuMemFree(p));
  CU_OK(cuStreamDestroy(s1));
  CU_OK(cuStreamDestroy(s2));
}

TEST_CASE("frees give memory back and allocations reuse it", "[shim][free]") {
  auto& D = drv();
  for (int round = 0; round < 5; ++round) {
    std::vector<CUdeviceptr> v;
    for (int i = 0; i < 10; ++i) {  // 300 MiB of 320
      CUdeviceptr p;
      CU_OK(cuMemAlloc(&p, 30 * MiB));
      CU_OK(D.launch_fill(p, 30 * MiB, static_cast<uint32_t>(i + round)));
      v.push_back(p);
    }
    CHECK(D.count_bad(v[0], 30 * MiB, static_cast<uint32_t>(round)) == 0);
    for (auto p : v) CU_OK(cuMemFree(p));
  }
}

TEST_CASE("allocation beyond every tier returns CUDA_ERROR_OUT_OF_MEMORY and nothing breaks", "[shim][oom]") {
  auto& D = drv();
  CUdeviceptr big = 0;
  CU_OK(cuMemAlloc(&big, 300 * MiB));
  CUdeviceptr more = 0;
  CHECK(cuMemAlloc(&more, 30 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(cuMemAllocAsync(&more, 30 * MiB, nullptr) == CUDA_ERROR_OUT_OF_MEMORY);
  CU_OK(D.launch_fill(big, 300 * MiB, 5));
  CHECK(D.count_bad(big, 300 * MiB, 5) == 0);
  CU_OK(cuMemFree(big));
  CU_OK(cuMemAlloc(&more, 30 * MiB));
  CU_OK(cuMemFree(more));
}

TEST_CASE("a kernel reaching memory only through pointers stored in device memory is correct", "[shim][indirect]") {
  auto& D = drv();
  constexpr int kBufs = 8;
  constexpr size_t kN = 16 * MiB;  // 128 MiB in all: half must sit on the host tier
  std::vector<CUdeviceptr> bufs(kBufs);
  for (int b = 0; b < kBufs; ++b) {
    CU_OK(cuMemAlloc(&bufs[b], kN));
    CU_OK(D.launch_fill(bufs[b], kN, 100u + static_cast<uint32_t>(b)));
  }
  CUdeviceptr table = 0, bad = 0;
  CU_OK(cuMemAlloc(&table, kBufs * sizeof(CUdeviceptr)));
  CU_OK(cuMemAlloc(&bad, 8));
  CU_OK(cuMemcpyHtoD(table, bufs.data(), kBufs * sizeof(CUdeviceptr)));
  CU_OK(cuMemsetD32(bad, 0, 2));
  int count = kBufs;
  size_t n = kN;
  void* args[] = {&table, &count, &n, &bad};
  CU_OK(cuLaunchKernel(D.indirect, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
  unsigned long long out = ~0ull;
  CU_OK(cuMemcpyDtoH(&out, bad, 8));
  CHECK(out == 0);
  for (auto b : bufs) CU_OK(cuMemFree(b));
  CU_OK(cuMemFree(table));
  CU_OK(cuMemFree(bad));
}

TEST_CASE("graphs: captured launches run correctly under paging", "[shim][graph]") {
  auto& D = drv();
  CUstream s;
  CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  std::vector<CUdeviceptr> bufs(4);
  for (auto& b : bufs) CU_OK(cuMemAlloc(&b, 24 * MiB));  // 96 MiB over a 64 MiB gpu tier
  CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  for (size_t i = 0; i < bufs.size(); ++i) CU_OK(D.launch_fill(bufs[i], 24 * MiB, 900 + static_cast<uint32_t>(i), s));
  CUgraph g = nullptr;
  CU_OK(cuStreamEndCapture(s, &g));
  CUgraphExec ge = nullptr;
  CU_OK(cuGraphInstantiate(&ge, g, 0));
  for (int rep = 0; rep < 3; ++rep) {
    // Scribble over everything in between so that pages move between replays.
    for (auto b : bufs) CU_OK(cuMemsetD8Async(b, 0xAB, 24 * MiB, s));
    CU_OK(cuGraphLaunch(ge, s));
    CU_OK(cuStreamSynchronize(s));
    for (size_t i = 0; i < bufs.size(); ++i) CHECK(D.count_bad(bufs[i], 24 * MiB, 900 + static_cast<uint32_t>(i), s) == 0);
  }
  CU_OK(cuGraphExecDestroy(ge));
  CU_OK(cuGraphDestroy(g));
  for (auto b : bufs) CU_OK(cuMemFree(b));
  CU_OK(cuStreamDestroy(s));
}

TEST_CASE("IPC export of a paged allocation is refused clearly", "[shim][ipc]") {
  drv();
  CUdeviceptr p;
  CU_OK(cuMemAlloc(&p, 4 * MiB));
  CUipcMemHandle h;
  CHECK(cuIpcGetMemHandle(&h, p) == CUDA_ERROR_NOT_SUPPORTED);
  CU_OK(cuMemFree(p));
}

TEST_CASE("stats signal during a multi-threaded launch storm", "[shim][stats]") {
  auto& D = drv();
  constexpr int kThreads = 4;
  std::vector<CUdeviceptr> bufs(kThreads);
  for (auto& b : bufs) CU_OK(cuMemAlloc(&b, 20 * MiB));  // 80 MiB over 64: launches keep faulting
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> th;
  for (int t = 0; t < kThreads; ++t) {
    th.emplace_back([&, t] {
      if (cuCtxSetCurrent(D.ctx) != CUDA_SUCCESS) ++failures;
      CUstream s;
      if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) ++failures;
      for (int i = 0; i < 60 && !stop; ++i) {
        CUdeviceptr p = bufs[(t + i) % kThreads];
        size_t n = 20 * MiB;
        uint32_t seed = static_cast<uint32_t>(p >> 21);  // same value whoever writes
        void* args[] = {&p, &n, &seed};
        if (cuLaunchKernel(D.fill, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr) != CUDA_SUCCESS) ++failures;
      }
      if (cuStreamSynchronize(s) != CUDA_SUCCESS) ++failures;
      cuStreamDestroy(s);
    });
  }
  const std::string path = "/tmp/vstack-" + std::to_string(getpid()) + ".json";
  std::remove(path.c_str());
  for (int i = 0; i < 20; ++i) {
    kill(getpid(), SIGUSR1);
    usleep(5000);
  }
  for (auto& t : th) t.join();
  CHECK(failures == 0);
  // The dump thread writes asynchronously; give it a moment.
  std::string text;
  for (int i = 0; i < 200 && text.find("\"tiers\"") == std::string::npos; ++i) {
    usleep(10000);
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    text = ss.str();
  }
  CHECK(text.find("\"tiers\"") != std::string::npos);
  CHECK(text.find("\"promotions\"") != std::string::npos);
  for (auto b : bufs) CHECK(D.count_bad(b, 20 * MiB, static_cast<uint32_t>(b >> 21)) == 0);
  for (auto b : bufs) CU_OK(cuMemFree(b));
}

TEST_CASE("allocations in another device's context are not paged", "[shim][multidevice]") {
  auto& D = drv();
  int n = 0;
  CU_OK(cuDeviceGetCount(&n));
  REQUIRE(n >= 2);  // the test runs with FAKECUDA_DEVICES=2
  CUdevice dev1;
  CU_OK(cuDeviceGet(&dev1, 1));
  CUcontext ctx1;
  CU_OK(cuDevicePrimaryCtxRetain(&ctx1, dev1));
  CU_OK(cuCtxSetCurrent(ctx1));
  CUdeviceptr p = 0;
  CU_OK(cuMemAlloc(&p, 4 * MiB));
  int ordinal = -1;
  CU_OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
  CHECK(ordinal == 1);  // served by the driver on device 1, not by the pool of device 0
  CU_OK(cuMemFree(p));
  CU_OK(cuCtxSetCurrent(D.ctx));
  CU_OK(cuMemAlloc(&p, 4 * MiB));
  CU_OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
  CHECK(ordinal == 0);
  CUdeviceptr base = 0;
  size_t size = 0;
  CU_OK(cuMemGetAddressRange(&base, &size, p + 1));
  CHECK(size == 4 * MiB);
  CU_OK(cuMemFree(p));
  CU_OK(cuDevicePrimaryCtxRelease(dev1));
}

// Run with tests/shim/rules.json (hidden: `shim_e2e [.rules]`).
TEST_CASE("config rules: pass-through and pinned allocations", "[.rules]") {
  auto& D = drv();
  size_t free0 = 0, total = 0;
  CU_OK(cuMemGetInfo(&free0, &total));
  // Pass-through: the driver's own memory, so it can be IPC-exported; charged to the gpu tier.
  CUdeviceptr pt = 0;
  CU_OK(cuMemAlloc(&pt, 3 * MiB + 4096));
  CUipcMemHandle h;
  CHECK(cuIpcGetMemHandle(&h, pt) == CUDA_SUCCESS);
  size_t free1 = 0;
  CU_OK(cuMemGetInfo(&free1, &total));
  CHECK(free0 - free1 == 3 * MiB + 4096);
  CU_OK(D.launch_fill(pt, 3 * MiB + 4096, 11));
  CHECK(D.count_bad(pt, 3 * MiB + 4096, 11) == 0);
  // A paged allocation of another size is refused for IPC.
  CUdeviceptr paged = 0;
  CU_OK(cuMemAlloc(&paged, 3 * MiB));
  CHECK(cuIpcGetMemHandle(&h, paged) == CUDA_ERROR_NOT_SUPPORTED);
  // Pinned: survives pressure of 3x the gpu tier on the gpu, data intact.
  CUdeviceptr pin = 0;
  CU_OK(cuMemAlloc(&pin, 6 * MiB));
  CU_OK(D.launch_fill(pin, 6 * MiB, 12));
  std::vector<CUdeviceptr> pressure(6);
  for (auto& p : pressure) {
    CU_OK(cuMemAlloc(&p, 32 * MiB));
    CU_OK(D.launch_fill(p, 32 * MiB, 13));
  }
  CHECK(D.count_bad(pin, 6 * MiB, 12) == 0);
  CHECK(D.count_bad(pt, 3 * MiB + 4096, 11) == 0);
  for (auto p : pressure) CU_OK(cuMemFree(p));
  CU_OK(cuMemFree(pin));
  CU_OK(cuMemFree(paged));
  CU_OK(cuMemFree(pt));
  size_t free2 = 0;
  CU_OK(cuMemGetInfo(&free2, &total));
  CHECK(free2 == free0);
}
