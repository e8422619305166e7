// Checks kernels/wgmma.cuh on the GPU: descriptors, the SW128 layout and the
// generated wrappers, for A from shared memory and from registers, B K-major and
// MN-major, N in {64, 128, 256}, bf16 and fp16, against an fp64 product on the host.
// One warpgroup computes D[64 x N] = A[64 x 64] * B[64 x N] over 4 k16 steps.
// Fresh random inputs each case, output poisoned with NaN. Exit status 0 only if all pass.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/wgmma.cuh"
#include "tests/gpu/cuda_check.hpp"

namespace wg = vstack::wgmma;


template <typename T>
__device__ uint32_t pack2(T lo, T hi) {
  uint32_t r;
  const uint16_t l = *reinterpret_cast<const uint16_t*>(&lo), h = *reinterpret_cast<const uint16_t*>(&hi);
  r = static_cast<uint32_t>(l) | (static_cast<uint32_t>(h) << 16);
  return r;
}

// A: 64x64 row-major (M x K). B: 64 x N row-major (K x N). D: 64 x N row-major.
template <typename T, int N, int kTransB, bool kARegs>
__global__ void __launch_bounds__(128) smoke(const T* A, const T* B, float* D, uint32_t lbo) {
  extern __shared__ uint8_t raw[];
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t{1023});
  uint8_t* sa = base;
  uint8_t* sb = base + 8192;
  const int tid = threadIdx.x;
  for (int i = tid; i < 64 * 64; i += 128) {
    const int r = i / 64, c = i % 64;
    *reinterpret_cast<T*>(sa + wg::sw128_offset(r, c)) = A[i];
  }
  for (int i = tid; i < 64 * N; i += 128) {
    const int k = i / N, n = i % N;
    if (kTransB) *reinterpret_cast<T*>(sb + (n / 64) * 8192 + wg::sw128_offset(k, n % 64)) = B[i];
    else *reinterpret_cast<T*>(sb + wg::sw128_offset(n, k)) = B[i];
  }
  wg::fence_proxy_async();
  __syncthreads();

  const int warp = tid / 32, lane = tid % 32, g = lane / 4, q = lane % 4;
  uint32_t a[4][4];
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const int r0 = 16 * warp + g, k0 = 16 * kk + 2 * q;
    a[kk][0] = pack2(A[r0 * 64 + k0], A[r0 * 64 + k0 + 1]);
    a[kk][1] = pack2(A[(r0 + 8) * 64 + k0], A[(r0 + 8) * 64 + k0 + 1]);
    a[kk][2] = pack2(A[r0 * 64 + k0 + 8], A[r0 * 64 + k0 + 9]);
    a[kk][3] = pack2(A[(r0 + 8) * 64 + k0 + 8], A[(r0 + 8) * 64 + k0 + 9]);
  }
  float d[N / 2];
#pragma unroll
  for (int j = 0; j < N / 2; ++j) d[j] = 0.f;
  wg::fence_operands(d);
  wg::arrive();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const uint64_t db = kTransB ? wg::desc_mnmajor(sb, lbo) + 128 * kk : wg::desc_kmajor(sb) + 2 * kk;
    if constexpr (kARegs) wg::mma_rs<N, T, kTransB>(d, a[kk], db, kk > 0);
    else wg::mma_ss<N, T, kTransB>(d, wg::desc_kmajor(sa) + 2 * kk, db, kk > 0);
  }
  wg::commit();
  wg::wait<0>();
  wg::fence_operands(d);
#pragma unroll
  for (int j = 0; j < N / 2; ++j) {
    const int row = 16 * warp + g + 8 * ((j / 2) % 2), col = 8 * (j / 4) + 2 * q + (j % 2);
    D[row * N + col] = d[j];
  }
}

template <typename T>
T from_float(float f);
template <>
__nv_bfloat16 from_float(float f) { return __float2bfloat16(f); }
template <>
__half from_float(float f) { return __float2half(f); }
template <typename T>
float to_float(T v);
template <>
float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <>
float to_float(__half v) { return __half2float(v); }

static std::mt19937 rng(12345);

template <typename T, int N, int kTransB, bool kARegs>
bool run_case(const char* tname, uint32_t lbo) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<T> a(64 * 64), b(64 * N);
  for (auto& v : a) v = from_float<T>(nd(rng));
  for (auto& v : b) v = from_float<T>(nd(rng));
  T *da, *db;
  float* dd;
  CK(cudaMalloc(&da, a.size() * sizeof(T)));
  CK(cudaMalloc(&db, b.size() * sizeof(T)));
  CK(cudaMalloc(&dd, 64 * N * sizeof(float)));
  CK(cudaMemcpy(da, a.data(), a.size() * sizeof(T), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db, b.data(), b.size() * sizeof(T), cudaMemcpyHostToDevice));
  CK(cudaMemset(dd, 0xFF, 64 * N * sizeof(float)));  // NaN poison
  const int smem = 1024 + 8192 + 64 * N * 2;
  auto k = smoke<T, N, kTransB, kARegs>;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  k<<<1, 128, smem>>>(da, db, dd, lbo);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> d(64 * N);
  CK(cudaMemcpy(d.data(), dd, d.size() * sizeof(float), cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  bool finite = true;
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < N; ++j) {
      double ref = 0;
      for (int kk = 0; kk < 64; ++kk) ref += double(to_float(a[i * 64 + kk])) * double(to_float(b[kk * N + j]));
      const double got = d[i * N + j];
      if (!std::isfinite(got)) finite = false;
      num += (got - ref) * (got - ref);
      den += ref * ref;
    }
  const double rel = std::sqrt(num / den);
  // fp32 accumulation of exact products over K = 64: rounding only, far under 1e-5.
  const bool ok = finite && rel < 1e-5;
  std::printf("%-4s %-5s N=%3d B=%s A=%s lbo=%5u rel=%.2e\n", ok ? "PASS" : "FAIL", tname, N,
              kTransB ? "MN-major" : "K-major ", kARegs ? "regs" : "smem", lbo, rel);
  CK(cudaFree(da));
  CK(cudaFree(db));
  CK(cudaFree(dd));
  return ok;
}

template <typename T, int N>
int run_all_for(const char* tname) {
  int fails = 0;
  fails += !run_case<T, N, 0, false>(tname, 8192);
  fails += !run_case<T, N, 0, true>(tname, 8192);
  fails += !run_case<T, N, 1, false>(tname, 8192);
  fails += !run_case<T, N, 1, true>(tname, 8192);
  return fails;
}

int main() {
  int dev = 0;
  cudaDeviceProp p{};
  CK(cudaGetDeviceProperties(&p, dev));
  if (p.major != 9) {
    std::printf("wgmma smoke: needs an sm_90 GPU, found %s (sm_%d%d)\n", p.name, p.major, p.minor);
    return 2;
  }
  int fails = 0;
  fails += run_all_for<__nv_bfloat16, 64>("bf16");
  fails += run_all_for<__nv_bfloat16, 128>("bf16");
  fails += run_all_for<__nv_bfloat16, 256>("bf16");
  fails += run_all_for<__half, 128>("f16");
  std::printf("wgmma smoke: %d failed\n", fails);
  return fails == 0 ? 0 : 1;
}
