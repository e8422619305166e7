// Device-side checks of quant/format.hpp functions whose GPU code differs from the host's: run over
// every input where that is feasible, called from test_fp4_gpu.cpp.
// nf4_encode_fast as the quantize kernels run it (Note [Biased lookup] in quant/format.hpp).
#define VSTACK_NF4_LOOKUP_TU 1

#include <cstdint>
#include <initializer_list>

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

// nf4_encode_fast(v) against nf4_encode(v) for every float v that is not NaN (both signs, 0 to Inf), with
// the tables in shared memory as the quantize kernel keeps them: Note [Biased lookup]'s wrapping address
// over every bucket.
__global__ void nf4_mismatch_kernel(unsigned long long* mismatches) {
  using namespace vstack::quant;
  __shared__ uint8_t base4[kNf4Buckets];
  __shared__ __align__(16) float mids[16];
  for (int k = threadIdx.x; k < kNf4Buckets; k += blockDim.x) base4[k] = static_cast<uint8_t>(4 * nf4_bucket_base(k));
  if (threadIdx.x < 16) mids[threadIdx.x] = nf4_mid(threadIdx.x);
  __syncthreads();
  unsigned long long bad = 0;
  const uint32_t stride = gridDim.x * blockDim.x;
  for (uint32_t m = blockIdx.x * blockDim.x + threadIdx.x; m <= 0x7F800000u; m += stride)  // no wrap: m < 2^31
    for (uint32_t sign : {0u, 0x80000000u}) {
      const float v = __uint_as_float(m | sign);
      bad += nf4_encode_fast(v, base4, mids) != nf4_encode(v);
    }
  if (bad) atomicAdd(mismatches, bad);
}

// Runs launch(d) on a zeroed device counter d; the count, or -1 on a CUDA error.
template <typename Launch>
long long count_mismatches(Launch launch) {
  unsigned long long* d = nullptr;
  if (cudaMalloc(&d, sizeof(*d)) != cudaSuccess) return -1;
  unsigned long long h = ~0ull;
  bool ok = cudaMemset(d, 0, sizeof(*d)) == cudaSuccess;
  if (ok) {
    launch(d);
    ok = cudaGetLastError() == cudaSuccess && cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost) == cudaSuccess;
  }
  ok = cudaFree(d) == cudaSuccess && ok;
  return ok ? static_cast<long long>(h) : -1;
}

}  // namespace

// Each returns the number of mismatches, or -1 on a CUDA error.
long long fp4_test_rcp_mismatches() {
  return count_mismatches([](unsigned long long* d) {
    rcp_mismatch_kernel<<<1024, 256>>>(vstack::quant::f32_bits(vstack::quant::kQuotientMin),
                                       vstack::quant::f32_bits(vstack::quant::kQuotientMax), d);
  });
}

long long fp4_test_nf4_mismatches() {
  return count_mismatches([](unsigned long long* d) { nf4_mismatch_kernel<<<1024, 256>>>(d); });
}
