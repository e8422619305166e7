// Device-side checks of quant/format.hpp functions whose GPU code differs from the host's: run over
// every input where that is feasible, called from test_fp4_gpu.cpp.
#include <cstdint>

#include <cuda_runtime.h>

#include "quant/format.hpp"

namespace {

// rcp_rn_normal(s) against 1.0f / s (the IEEE division) for every float s in [kQuotientMin, kQuotientMax].
__global__ void rcp_mismatch_kernel(uint32_t lo, uint32_t hi, unsigned long long* mismatches) {
  unsigned long long bad = 0;
  const uint32_t stride = gridDim.x * blockDim.x;
  for (uint32_t b = lo + blockIdx.x * blockDim.x + threadIdx.x; b <= hi; b += stride) {  // hi < 2^31: no wrap
    const float s = __uint_as_float(b);
    bad += __float_as_uint(vstack::quant::rcp_rn_normal(s)) != __float_as_uint(1.0f / s);
  }
  if (bad) atomicAdd(mismatches, bad);
}

}  // namespace

// Returns the number of mismatches, or -1 on a CUDA error.
long long fp4_test_rcp_mismatches() {
  unsigned long long* d = nullptr;
  if (cudaMalloc(&d, sizeof(*d)) != cudaSuccess) return -1;
  unsigned long long h = ~0ull;
  bool ok = cudaMemset(d, 0, sizeof(*d)) == cudaSuccess;
  if (ok) {
    rcp_mismatch_kernel<<<1024, 256>>>(vstack::quant::f32_bits(vstack::quant::kQuotientMin),
                                       vstack::quant::f32_bits(vstack::quant::kQuotientMax), d);
    ok = cudaGetLastError() == cudaSuccess && cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost) == cudaSuccess;
  }
  ok = cudaFree(d) == cudaSuccess && ok;
  return ok ? static_cast<long long>(h) : -1;
}
