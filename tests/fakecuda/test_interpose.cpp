// Note [Interposition] in src/internal.hpp, checked the way the shim uses the
// library: with an interposer LD_PRELOADed (meson.build), cuGetProcAddress
// still hands out the library's own definition and the library's internal
// paths never call back into the interposed name.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

#include "test_util.hpp"

using namespace fakecuda_test;

TEST_CASE("cuGetProcAddress and internal calls bypass an interposer", "[interpose]") {
  const char* preload = std::getenv("LD_PRELOAD");
  REQUIRE(preload != nullptr);
  REQUIRE(std::strstr(preload, "fakecuda_interposer") != nullptr);
  use_device();
  CUdeviceptr p = 1;
  REQUIRE(cuMemAlloc(&p, 64) == CUDA_ERROR_NOT_PERMITTED);  // the interposer answers

  void* fn = nullptr;
  CU_OK(cuGetProcAddress("cuMemAlloc", &fn, 12000, 0, nullptr));
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(lib != nullptr);
  REQUIRE(fn == dlsym(lib, "cuMemAlloc_v2"));  // the library's own, not RTLD_DEFAULT's
  REQUIRE(fn != dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
  using Alloc = CUresult (*)(CUdeviceptr*, size_t);
  CU_OK(reinterpret_cast<Alloc>(fn)(&p, 64));
  CU_OK(cuMemFree(p));

  size_t pitch = 0;
  CU_OK(cuMemAllocPitch(&p, &pitch, 100, 2, 4));  // internally allocates, not via the export
  CU_OK(cuMemFree(p));
}
