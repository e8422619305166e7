// A stand-in for the shim: LD_PRELOADed by the fakecuda_interpose test, it
// interposes cuMemAlloc_v2 and makes it fail, so the test can see whether a
// call went through the interposer or straight to the library.
#include <cuda.h>

extern "C" __attribute__((visibility("default"))) CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t) {
  if (p != nullptr) *p = 0;
  return CUDA_ERROR_NOT_PERMITTED;
}
