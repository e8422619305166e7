// Quantise / dequantise kernels, running the per-block functions of format.hpp (the
// same code as the CPU reference) with coalesced accesses (Note [Quantize kernel]).
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

// 8 consecutive elements (16 bytes of bf16/f16, 32 of f32) -> fp32, read once, not kept in L1.
template <typename T>
__device__ __forceinline__ void load8(const T* src, float (&v)[8]) {
  const uint4* q = reinterpret_cast<const uint4*>(src);
  if constexpr (sizeof(T) == 4) {
    const uint4 a = dev::ld_stream16(q), b = dev::ld_stream16(q + 1);
    const uint32_t w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = __uint_as_float(w[i]);
  } else {
    const uint4 a = dev::ld_stream16(q);
    const T* h = reinterpret_cast<const T*>(&a);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = dev::Dt<T>::to_f(h[i]);
  }
}

// Max |x| over finite values of n8 groups of 8 elements into *out (float bits, non-negative,
// so unsigned order = float order). Lane-contiguous 16-byte loads, 4 groups in flight.
template <typename T>
__global__ void __launch_bounds__(256) amax_kernel(const T* x, int64_t n8, unsigned* out) {
  constexpr int U = 4;
  float m = 0.0f;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * 256;
  for (int64_t g = blockIdx.x * 256LL + threadIdx.x; g < n8; g += U * stride) {
    float v[U][8];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (g + u * stride < n8) load8(x + (g + u * stride) * 8, v[u]);
      else
#pragma unroll
        for (int i = 0; i < 8; ++i) v[u][i] = 0.0f;
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float a = abs_f(v[u][i]);
        if (is_finite(a)) m = max_f(m, a);
      }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
  if ((threadIdx.x & 31) == 0) atomicMax(out, __float_as_uint(m));
}

// scale2[0] held the amax; replace it by the NVFP4 per-tensor scale.
__global__ void nvfp4_finalize_kernel(float* scale2) { scale2[0] = nvfp4_global(scale2[0]); }

// Quantise. Note [Quantize kernel]: each lane owns 8 consecutive elements, so a warp
// reads 256 contiguous elements per step (coalesced 16-byte loads) and writes the 128
// code bytes of those 4 chunks with one 4-byte store per lane. A block's statistics are
// reduced over its B/8 lanes with shuffles, then every lane of the block derives the same
// scale with block_scale_code and encodes its elements with encode_element (the CPU
// reference's code). GEMM layout: linear byte 4u + t of a chunk sits at 8t + u, so the
// word lane u stores (positions 4u..4u+3) is byte u/2 of lanes 4(u%2)..4(u%2)+3 of its
// chunk: four shuffles. The chunk's scales are gathered to its first lane and stored as
// one 1-, 2- or 4-byte word. Each thread does kQuantIters steps (loads first); NF4_DQ
// uses 8, so that a CTA's 256 chunks are exactly one group of kDqGroup blocks.
// Measured before (H100, 2026-11-22): one thread per 64-element chunk (128-byte strided
// loads per lane) ran at 41-49 % of the copy bandwidth.
template <Format F>
constexpr int kQuantIters = F == Format::nf4_dq ? 8 : 4;
template <Format F>
constexpr int64_t quant_chunks_per_cta() { return static_cast<int64_t>(kConvertThreads) / 8 * kQuantIters<F>; }
static_assert(quant_chunks_per_cta<Format::nf4_dq>() == kDqGroup, "NF4_DQ: one CTA per group");

template <Format F, typename T, Layout L>
__global__ void __launch_bounds__(kConvertThreads) quantize_kernel(const ConvertParams p) {
  constexpr int B = block_size(F), LPB = B / 8, IT = kQuantIters<F>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, u = lane & 7;
  const int64_t n = p.chunks * 64;
  const int64_t base = blockIdx.x * static_cast<int64_t>(kConvertThreads * 8 * IT) + warp * (256 * IT) + lane * 8;
  float v[IT][8];
#pragma unroll
  for (int i = 0; i < IT; ++i) {
    if (base + i * 256 < n) load8(static_cast<const T*>(p.in) + base + i * 256, v[i]);
    else
#pragma unroll
      for (int j = 0; j < 8; ++j) v[i][j] = 0.0f;
  }
  BlockStat st[IT];
#pragma unroll
  for (int i = 0; i < IT; ++i) {
    st[i] = block_stat(v[i]);
#pragma unroll
    for (int o = 1; o < LPB; o <<= 1) {
      st[i].amax = fmaxf(st[i].amax, __shfl_xor_sync(0xFFFFFFFFu, st[i].amax, o));
      st[i].bad |= __shfl_xor_sync(0xFFFFFFFFu, static_cast<int>(st[i].bad), o) != 0;
    }
  }
  float s2 = 1.0f;
  if constexpr (F == Format::nvfp4) {
    s2 = nvfp4_global(__ldg(p.scale2));  // scale2[0] holds the tensor's amax here
  } else if constexpr (F == Format::nf4_dq) {
    __shared__ float red[kConvertThreads / 32];
    float m = 0.0f;  // finite amax of the group = max of its blocks' finite amax
#pragma unroll
    for (int i = 0; i < IT; ++i) m = fmaxf(m, st[i].amax);
#pragma unroll
    for (int o = 8; o < 32; o <<= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
    if (lane == 0) red[warp] = m;
    __syncthreads();
    m = red[0];
#pragma unroll
    for (int w = 1; w < kConvertThreads / 32; ++w) m = fmaxf(m, red[w]);
    s2 = nf4dq_group_scale(m);
    if (threadIdx.x == 0) p.scale2[blockIdx.x] = s2;
  }
#pragma unroll
  for (int i = 0; i < IT; ++i) {
    const int64_t e = base + i * 256;
    float s;
    const uint32_t sc = block_scale_code<F>(st[i], s2, s);
    const bool zero = block_is_zero(st[i], s);
    uint32_t w = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) w |= encode_element<F>(v[i][j], s, zero) << (4 * j);
    if constexpr (L == Layout::gemm) {
      const int src = (lane & ~7) + 4 * (u & 1), t = u >> 1;
      uint32_t g = 0;
#pragma unroll
      for (int q = 0; q < 4; ++q) g |= ((__shfl_sync(0xFFFFFFFFu, w, src + q) >> (8 * t)) & 0xFFu) << (8 * q);
      w = g;
    }
    // The chunk's scales, gathered to lane u == 0 (block b of the chunk is lanes b*LPB..).
    uint32_t scw = sc;
    if constexpr (F == Format::nvfp4 || F == Format::mxfp4) {
#pragma unroll
      for (int b = 1; b < 8 / LPB; ++b) scw |= __shfl_down_sync(0xFFFFFFFFu, sc, b * LPB) << (8 * b);
    }
    if (e >= n) continue;  // whole chunks are valid or not
    reinterpret_cast<uint32_t*>(p.codes)[e / 8] = w;  // bytes e/2 .. e/2+3
    if (u == 0) {
      const int64_t c = e / 64;
      int64_t soff;  // first scale byte of this chunk
      if constexpr (L == Layout::linear) {
        soff = c * chunk_scale_bytes(F);
      } else {
        const int64_t row = c / p.kc_per_row, kc = c % p.kc_per_row;
        soff = (kc * p.npad + row) * chunk_scale_bytes(F);
      }
      if constexpr (chunk_scale_bytes(F) == 4) *reinterpret_cast<uint32_t*>(p.scales + soff) = scw;
      else if constexpr (chunk_scale_bytes(F) == 2) *reinterpret_cast<uint16_t*>(p.scales + soff) = static_cast<uint16_t>(scw);
      else p.scales[soff] = static_cast<uint8_t>(scw);
    }
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
