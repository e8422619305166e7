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

// Dequantise: one thread per 8 consecutive elements (4 linear code bytes), so that
// the code loads (4 bytes per lane) and the output stores (16 bytes per lane for
// bf16/f16, 32 for f32) are contiguous across the warp. Measured before (H100,
// 2026-11-22): one thread per 64-element chunk with a 16-way switch per NF4 code
// ran at 47 % (E2M1) and 15 % (NF4) of the copy bandwidth. NF4 values come from a
// 16-entry shared table built with nf4_value (the same fp32 bits), so the
// result is still value * scale rounded once, as in the reference.
inline constexpr int kDequantElems = 8;

template <Format F, typename T, Layout L>
__global__ void __launch_bounds__(kConvertThreads) dequantize_kernel(const ConvertParams p) {
  constexpr int B = block_size(F);
  __shared__ float table[16];
  if constexpr (uses_nf4_table(F)) {
    if (threadIdx.x < 16) table[threadIdx.x] = nf4_value(threadIdx.x);
    __syncthreads();
  }
  const int64_t o = blockIdx.x * static_cast<int64_t>(kConvertThreads) + threadIdx.x;  // octet
  if (o >= p.chunks * 8) return;
  const int64_t c = o >> 3;                 // chunk (64 elements)
  const int u = static_cast<int>(o & 7);    // linear code bytes 4u..4u+3 of the chunk
  uint32_t w;
  if constexpr (L == Layout::linear) {
    w = __ldg(reinterpret_cast<const uint32_t*>(p.codes + c * 32) + u);
  } else {  // linear byte 4u + i sits at gemm_byte_perm(4u + i) = 8i + u
    const uint8_t* cb = p.codes + c * 32 + u;
    w = static_cast<uint32_t>(__ldg(cb)) | (static_cast<uint32_t>(__ldg(cb + 8)) << 8) |
        (static_cast<uint32_t>(__ldg(cb + 16)) << 16) | (static_cast<uint32_t>(__ldg(cb + 24)) << 24);
  }
  const int sub = (8 * u) / B;  // block of these 8 elements inside the chunk
  uint32_t sc;
  if constexpr (L == Layout::linear) {
    const int64_t blk = c * (64 / B) + sub;
    sc = F == Format::nf4 ? __ldg(reinterpret_cast<const uint32_t*>(p.scales) + blk) : __ldg(p.scales + blk);
  } else {
    const int64_t n = c / p.kc_per_row, kc = c % p.kc_per_row;
    const int64_t soff = (kc * p.npad + n) * chunk_scale_bytes(F);
    sc = F == Format::nf4 ? __ldg(reinterpret_cast<const uint32_t*>(p.scales + soff)) : __ldg(p.scales + soff + sub);
  }
  float s2 = 1.0f;
  if constexpr (F == Format::nvfp4) s2 = __ldg(p.scale2);
  if constexpr (F == Format::nf4_dq) s2 = __ldg(p.scale2 + c / kDqGroup);
  const float s = block_scale<F>(sc, s2);
  float v[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const uint32_t code = (w >> (4 * i)) & 15u;
    if constexpr (uses_nf4_table(F)) v[i] = table[code] * s;
    else v[i] = decode<F>(code, s);
  }
  T* dst = static_cast<T*>(p.out) + o * 8;
  if constexpr (sizeof(T) == 4) {
    reinterpret_cast<float4*>(dst)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(dst)[1] = make_float4(v[4], v[5], v[6], v[7]);
  } else {
    uint4 q;
    q.x = dev::Dt<T>::pack2(v[0], v[1]);
    q.y = dev::Dt<T>::pack2(v[2], v[3]);
    q.z = dev::Dt<T>::pack2(v[4], v[5]);
    q.w = dev::Dt<T>::pack2(v[6], v[7]);
    *reinterpret_cast<uint4*>(dst) = q;
  }
}

}  // namespace vstack::quant
