// cuGetProcAddress resolution, the export list, and that the library's
// answers are its own definitions.
#include <dlfcn.h>

#include <string>

#include "test_util.hpp"

using namespace fakecuda_test;

#undef cuGetProcAddress
extern "C" CUresult cuGetProcAddress(const char*, void**, int, cuuint64_t);

namespace {

struct Row {
  const char* symbol;
  const char* base;
  int since;
  bool per_thread;
};

constexpr bool kDEFAULT = false, kPTDS = true, kPTSZ = true;

const Row kRows[] = {
#define FAKECUDA_EXPORT(symbol, base, since, kind) {#symbol, #base, since, k##kind},
#include "src/exports.def"
#undef FAKECUDA_EXPORT
};

void* libcuda() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(h != nullptr);
  return h;
}

std::string resolve(const char* base, int version, cuuint64_t flags, CUresult* r = nullptr,
                    CUdriverProcAddressQueryResult* status = nullptr) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult st{};
  CUresult res = cuGetProcAddress_v2(base, &fn, version, flags, &st);
  if (r != nullptr) *r = res;
  if (status != nullptr) *status = st;
  if (res != CUDA_SUCCESS) return "";
  Dl_info info{};
  REQUIRE(dladdr(fn, &info) != 0);
  REQUIRE(info.dli_sname != nullptr);
  REQUIRE(dlsym(libcuda(), info.dli_sname) == fn);
  return info.dli_sname;
}

}  // namespace

TEST_CASE("every export resolves, and cuGetProcAddress agrees with dlsym", "[procaddr]") {
  void* h = libcuda();
  for (const Row& row : kRows) {
    INFO(row.symbol);
    void* direct = dlsym(h, row.symbol);
    REQUIRE(direct != nullptr);
    cuuint64_t flags = row.per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                      : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
    void* fn = nullptr;
    CUdriverProcAddressQueryResult st{};
    CU_OK(cuGetProcAddress_v2(row.base, &fn, row.since, flags, &st));
    REQUIRE(st == CU_GET_PROC_ADDRESS_SUCCESS);
    REQUIRE(fn == direct);
  }
  // Only the driver's names and the test API are exported.
  REQUIRE(dlsym(h, "_ZN8fakecuda11driver_lockEv") == nullptr);
  REQUIRE(dlsym(h, "fakecuda_register_kernel") != nullptr);
  REQUIRE(dlsym(h, "cuMemAlloc") == nullptr);  // the v1 (32-bit) form is not emulated
}

TEST_CASE("versioned and per-thread names are picked like the driver does", "[procaddr]") {
  const cuuint64_t legacy = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
  const cuuint64_t ptds = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  REQUIRE(resolve("cuMemAlloc", 12000, 0) == "cuMemAlloc_v2");
  REQUIRE(resolve("cuMemAlloc", 13000, ptds) == "cuMemAlloc_v2");  // no per-thread form
  REQUIRE(resolve("cuMemcpyHtoD", 12000, legacy) == "cuMemcpyHtoD_v2");
  REQUIRE(resolve("cuMemcpyHtoD", 12000, ptds) == "cuMemcpyHtoD_v2_ptds");
  REQUIRE(resolve("cuMemcpyAsync", 12000, ptds) == "cuMemcpyAsync_ptsz");
  REQUIRE(resolve("cuLaunchKernel", 12000, 0) == "cuLaunchKernel");
  REQUIRE(resolve("cuLaunchKernel", 12000, ptds) == "cuLaunchKernel_ptsz");
  REQUIRE(resolve("cuGraphLaunch", 12000, ptds) == "cuGraphLaunch_ptsz");
  REQUIRE(resolve("cuGraphInstantiate", 12000, 0) == "cuGraphInstantiateWithFlags");
  REQUIRE(resolve("cuGraphInstantiate", 11000, 0) == "cuGraphInstantiate_v2");
  REQUIRE(resolve("cuGraphAddKernelNode", 12000, 0) == "cuGraphAddKernelNode_v2");
  REQUIRE(resolve("cuGraphAddKernelNode", 11080, 0) == "cuGraphAddKernelNode");
  REQUIRE(resolve("cuStreamGetCaptureInfo", 12030, 0) == "cuStreamGetCaptureInfo_v3");
  REQUIRE(resolve("cuStreamGetCaptureInfo", 12020, ptds) == "cuStreamGetCaptureInfo_v2_ptsz");
  REQUIRE(resolve("cuStreamBeginCapture", 12000, ptds) == "cuStreamBeginCapture_v2_ptsz");
  REQUIRE(resolve("cuCtxCreate", 12080, 0) == "cuCtxCreate_v4");
  REQUIRE(resolve("cuCtxCreate", 12000, 0) == "cuCtxCreate_v2");
  REQUIRE(resolve("cuEventElapsedTime", 12080, 0) == "cuEventElapsedTime_v2");
  REQUIRE(resolve("cuGetProcAddress", 12000, 0) == "cuGetProcAddress_v2");
  REQUIRE(resolve("cuMemsetD2D32Async", 13000, ptds) == "cuMemsetD2D32Async_ptsz");

  CUresult r = CUDA_SUCCESS;
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
  REQUIRE(resolve("cuMemAlloc", 3000, 0, &r, &st).empty());
  REQUIRE(r == CUDA_ERROR_NOT_FOUND);
  REQUIRE(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  REQUIRE(resolve("cuNoSuchFunction", 13000, 0, &r, &st).empty());
  REQUIRE(r == CUDA_ERROR_NOT_FOUND);
  REQUIRE(st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  REQUIRE(resolve("cuArrayCreate", 13000, 0, &r, &st).empty());  // real, but not emulated
  REQUIRE(st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);

  void* fn = nullptr;
  CU_OK(cuGetProcAddress("cuMemFree", &fn, 12000, 0));
  REQUIRE(fn == dlsym(libcuda(), "cuMemFree_v2"));
  REQUIRE(cuGetProcAddress("cuMemFree", &fn, 12000, 4) == CUDA_ERROR_INVALID_VALUE);

  // A resolved pointer works.
  using Alloc = CUresult (*)(CUdeviceptr*, size_t);
  using Free = CUresult (*)(CUdeviceptr);
  use_device();
  void* a = nullptr;
  void* f = nullptr;
  CU_OK(cuGetProcAddress("cuMemAlloc", &a, 12000, 0));
  CU_OK(cuGetProcAddress("cuMemFree", &f, 12000, 0));
  CUdeviceptr p = 0;
  CU_OK(reinterpret_cast<Alloc>(a)(&p, 100));
  CU_OK(reinterpret_cast<Free>(f)(p));
}
