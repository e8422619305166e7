// Quantise / dequantise kernels: one thread per 64-element chunk, running the
// per-block functions of format.hpp (the same code as the CPU reference).
#pragma once

#include "quant/device.cuh"
#include "quant/format.hpp"
#include "quant/layout.hpp"

namespace vstack::quant {

struct ConvertParams {
  const void* in;     // quantize: x; dequantize: unused
  void* out;          // dequantize: y; quantize: unused
  uint8_t* codes;
  uint8_t* scales;
  float* scale2;
  int64_t chunks;     // rows * cols / 64
  int64_t kc_per_row; // GEMM layout: cols / 64
  int64_t npad;       // GEMM layout: round_up(rows, 16)
};

inline constexpr int kConvertThreads = 256;  // = kDqGroup: one CTA per NF4_DQ group

template <typename T>
__device__ __forceinline__ void load64(const T* src, float (&v)[64]) {
  const uint4* p = reinterpret_cast<const uint4*>(src);
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      uint4 u = __ldg(p + i);
      v[4 * i] = __uint_as_float(u.x); v[4 * i + 1] = __uint_as_float(u.y);
      v[4 * i + 2] = __uint_as_float(u.z); v[4 * i + 3] = __uint_as_float(u.w);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      uint4 u = __ldg(p + i);
      const T* h = reinterpret_cast<const T*>(&u);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[8 * i + j] = dev::Dt<T>::to_f(h[j]);
    }
  }
}

template <typename T>
__device__ __forceinline__ void store64(T* dst, const float (&v)[64]) {
  uint4* p = reinterpret_cast<uint4*>(dst);
  constexpr int PER = 16 / sizeof(T);
#pragma unroll
  for (int i = 0; i < 64 / PER; ++i) {
    uint4 u;
    T* h = reinterpret_cast<T*>(&u);
#pragma unroll
    for (int j = 0; j < PER; ++j) h[j] = dev::Dt<T>::from_f(v[PER * i + j]);
    p[i] = u;
  }
}

// Max |x| over finite values into *out (float bits, non-negative, so unsigned order = float order).
template <typename T>
__global__ void __launch_bounds__(256) amax_kernel(const T* x, int64_t chunks, unsigned* out) {
  float m = 0.0f;
  for (int64_t c = blockIdx.x * 256LL + threadIdx.x; c < chunks; c += static_cast<int64_t>(gridDim.x) * 256) {
    float v[64];
    load64(x + c * 64, v);
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      float a = abs_f(v[i]);
      if (is_finite(a)) m = max_f(m, a);
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
  if ((threadIdx.x & 31) == 0) atomicMax(out, __float_as_uint(m));
}

// scale2[0] held the amax; replace it by the NVFP4 per-tensor scale.
__global__ void nvfp4_finalize_kernel(float* scale2) { scale2[0] = nvfp4_global(scale2[0]); }

template <Format F, typename T, Layout L>
__global__ void __launch_bounds__(kConvertThreads) quantize_kernel(const ConvertParams p) {
  constexpr int B = block_size(F), NB = 64 / B;
  const int64_t c = blockIdx.x * static_cast<int64_t>(kConvertThreads) + threadIdx.x;
  const bool valid = c < p.chunks;
  float v[64];
  if (valid) load64(static_cast<const T*>(p.in) + c * 64, v);
  float s2 = 1.0f;
  if constexpr (F == Format::nvfp4) {
    s2 = nvfp4_global(__ldg(p.scale2));  // scale2[0] holds the tensor's amax here
  } else if constexpr (F == Format::nf4_dq) {
    // This CTA's 256 chunks are one group of 256 blocks.
    __shared__ float red[kConvertThreads / 32];
    float m = 0.0f;
    if (valid) {
#pragma unroll
      for (int i = 0; i < 64; ++i) {
        float a = abs_f(v[i]);
        if (is_finite(a)) m = max_f(m, a);
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    m = red[0];
#pragma unroll
    for (int i = 1; i < kConvertThreads / 32; ++i) m = fmaxf(m, red[i]);
    s2 = nf4dq_group_scale(m);
    if (threadIdx.x == 0) p.scale2[blockIdx.x] = s2;
  }
  if (!valid) return;

  uint8_t code[64];
  uint32_t sc[NB];
#pragma unroll
  for (int b = 0; b < NB; ++b) {
    float xb[B];
    uint8_t cb[B];
#pragma unroll
    for (int i = 0; i < B; ++i) xb[i] = v[b * B + i];
    sc[b] = encode_block<F, B>(xb, s2, cb);
#pragma unroll
    for (int i = 0; i < B; ++i) code[b * B + i] = cb[i];
  }
  // 32 code bytes; in the GEMM layout position p holds linear byte gemm_byte_unperm(p).
  uint32_t w[8];
#pragma unroll
  for (int q = 0; q < 8; ++q) {
    uint32_t word = 0;
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const int pos = 4 * q + t;
      const int j = L == Layout::gemm ? gemm_byte_unperm(pos) : pos;
      word |= static_cast<uint32_t>(code[2 * j] | (code[2 * j + 1] << 4)) << (8 * t);
    }
    w[q] = word;
  }
  uint4* dst = reinterpret_cast<uint4*>(p.codes + c * 32);  // row n, chunk kc of GEMM = linear chunk c
  dst[0] = make_uint4(w[0], w[1], w[2], w[3]);
  dst[1] = make_uint4(w[4], w[5], w[6], w[7]);

  int64_t soff;  // first scale byte of this chunk
  if constexpr (L == Layout::linear) {
    soff = c * NB * scale_bytes(F);
  } else {
    const int64_t n = c / p.kc_per_row, kc = c % p.kc_per_row;
    soff = (kc * p.npad + n) * chunk_scale_bytes(F);
  }
  if constexpr (F == Format::nf4) {
    *reinterpret_cast<uint32_t*>(p.scales + soff) = sc[0];
  } else {
#pragma unroll
    for (int b = 0; b < NB; ++b) p.scales[soff + b] = static_cast<uint8_t>(sc[b]);
  }
}

template <Format F, typename T, Layout L>
__global__ void __launch_bounds__(kConvertThreads) dequantize_kernel(const ConvertParams p) {
  constexpr int B = block_size(F), NB = 64 / B;
  const int64_t c = blockIdx.x * static_cast<int64_t>(kConvertThreads) + threadIdx.x;
  if (c >= p.chunks) return;
  const uint4* src = reinterpret_cast<const uint4*>(p.codes + c * 32);
  uint4 u0 = __ldg(src), u1 = __ldg(src + 1);
  const uint32_t w[8] = {u0.x, u0.y, u0.z, u0.w, u1.x, u1.y, u1.z, u1.w};
  int64_t soff;
  if constexpr (L == Layout::linear) {
    soff = c * NB * scale_bytes(F);
  } else {
    const int64_t n = c / p.kc_per_row, kc = c % p.kc_per_row;
    soff = (kc * p.npad + n) * chunk_scale_bytes(F);
  }
  float s2 = 1.0f;
  if constexpr (F == Format::nvfp4) s2 = __ldg(p.scale2);
  if constexpr (F == Format::nf4_dq) s2 = __ldg(p.scale2 + c / kDqGroup);
  float s[NB];
#pragma unroll
  for (int b = 0; b < NB; ++b) {
    uint32_t sc = F == Format::nf4 ? *reinterpret_cast<const uint32_t*>(p.scales + soff) : p.scales[soff + b];
    s[b] = block_scale<F>(sc, s2);
  }
  float v[64];
#pragma unroll
  for (int j = 0; j < 32; ++j) {  // linear byte j = elements 2j, 2j+1
    const int pos = L == Layout::gemm ? gemm_byte_perm(j) : j;
    const uint32_t byte = (w[pos >> 2] >> (8 * (pos & 3))) & 0xFFu;
    v[2 * j] = decode<F>(byte & 15u, s[(2 * j) / B]);
    v[2 * j + 1] = decode<F>(byte >> 4, s[(2 * j + 1) / B]);
  }
  store64(static_cast<T*>(p.out) + c * 64, v);
}

}  // namespace vstack::quant
