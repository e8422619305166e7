// Fused dequant-GEMM y = x * W^T (+ bias): params, kernel and launch.
//
// x [M x K] (bf16/f16) and the FP4 weight (GEMM layout, quant/layout.hpp) are
// streamed through a cp.async multi-stage pipeline into shared memory; each warp
// loads its x fragments with ldmatrix, decodes its weight fragments in registers
// (16-entry code table in shared memory, times the block scale, rounded to x's
// dtype) and issues mma.sync m16n8k16 with fp32 accumulation. Warps that split K
// (WARPS_K > 1) are reduced through shared memory in the epilogue.
//
// Exactness of the decoded weights: for NVFP4 (per-tensor g applied in the
// epilogue) and MXFP4, code * block scale has at most 5 significant bits and is
// exact in bf16 (and in f16 where in range); NF4 values are rounded once to x's
// dtype (relative 2^-9 bf16, 2^-12 f16).
//
// Note [Pair decode]. The decode is the kernel's main cost at small M (measured
// H100 2026-11-22: with 2 table loads + 2 FMUL + 1 cvt per pair of weights the
// GEMV ran at 25-40 % of HBM bandwidth and NVFP4, whose scale decode is the most
// instructions, was the slowest format). Where the product is exact in x's dtype
// (NVFP4 in bf16 and f16; MXFP4 in bf16 — E8M0 scales leave f16's range) a
// code byte indexes a 256-entry table of packed (low, high) code values and the
// pair is scaled with one HMUL2 by the block scale from a 256-entry table: the
// same bits as the fp32 path, in 2 instructions per pair. NF4 keeps the fp32
// path (its table values need the single rounding the bound above assumes).
//
// M <= 16 (the decode regime) runs quant/gemv_kernel.cuh instead (Note [Decode kernel]).
#pragma once

#include <type_traits>

#include "quant/device.cuh"
#include "quant/format.hpp"
#include "quant/gemm_traits.hpp"
#include "quant/layout.hpp"

namespace vstack::quant {

struct GemmParams {
  const void* x;
  const uint8_t* codes;
  const uint8_t* scales;
  const float* scale2;
  const void* bias;  // nullable
  void* y;
  int m, n, k, npad;
  int sms, cc;  // the device's SM count and compute capability (10 * major + minor)
  int smem_optin;  // the dynamic shared memory a CTA may have on it (bytes)
  // The decode kernel's split-K workspace (Note [Workspace split] in gemv_kernel.cuh), set by its launcher.
  float* ws_part = nullptr;
  unsigned* ws_count = nullptr;
};

using GemmLaunchFn = cudaError_t (*)(const GemmParams&, cudaStream_t);

// Defined in the generated gemm_<format>_<dtype>.cu files.
template <Format F, typename T>
GemmLaunchFn gemm_launcher(GemmConfigId id);

template <Format F, typename T>
inline constexpr bool kPairDecode = F == Format::nvfp4 || (F == Format::mxfp4 && std::is_same_v<T, __nv_bfloat16>);

template <class C, Format F, typename T>
__global__ void __launch_bounds__(C::THREADS) fp4_gemm_kernel(const GemmParams p) {
  using D = dev::Dt<T>;
  constexpr bool kPair = kPairDecode<F, T>;
  extern __shared__ __align__(128) uint8_t smem[];
  float* lut = reinterpret_cast<float*>(smem + C::PIPE_BYTES);
  uint32_t* pair_lut = reinterpret_cast<uint32_t*>(smem + C::PIPE_BYTES + 64);  // byte -> (lo, hi) values
  uint32_t* scale_lut = pair_lut + 256;                                          // scale code -> (s, s)
  constexpr int WMN = C::WARPS_M * C::WARPS_N;
  constexpr int SB = chunk_scale_bytes(F);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wk = warp / WMN, wm = (warp % WMN) / C::WARPS_N, wn = warp % C::WARPS_N;
  const int m0 = blockIdx.y * C::BM, n0 = blockIdx.x * C::BN;
  const int kc_total = p.k / 64;
  const int ktiles = (kc_total + C::WARPS_K - 1) / C::WARPS_K;
  if (tid < 16) lut[tid] = element_value(F, tid);
  if constexpr (kPair) {
    for (int i = tid; i < 256; i += C::THREADS) {
      pair_lut[i] = D::pack2(element_value(F, i & 15), element_value(F, i >> 4));
      const float s = F == Format::nvfp4 ? e4m3_value(i) : e8m0_value(i);
      scale_lut[i] = D::pack2(s, s);
    }
  }

  const char* xg = static_cast<const char*>(p.x);

  auto load = [&](int stage, int kt) {
    uint8_t* sA = smem + stage * C::STAGE_BYTES;
    uint8_t* sW = sA + C::A_BYTES;
    uint8_t* sS = sW + C::W_BYTES;
    constexpr int ACH = C::BK / 8;  // 16-byte chunks per x row
    static_assert((C::BM * ACH) % C::THREADS == 0, "x tile split");
#pragma unroll
    for (int i = 0; i < C::BM * ACH / C::THREADS; ++i) {
      const int c = tid + i * C::THREADS;
      const int row = c / ACH, ch = c % ACH;
      const int gm = m0 + row;
      const int gk = kt * C::BK + ch * 8;
      // Rows >= M are not loaded at all: they only feed output rows that are never stored.
      if (gm < p.m) {
        const bool ok = gk < p.k;
        const char* src = ok ? xg + (static_cast<int64_t>(gm) * p.k + gk) * 2 : xg;
        dev::cp_async16(sA + row * (C::BK * 2) + ((ch ^ (row & 7)) * 16), src, ok ? 16 : 0);
      }
    }
    constexpr int WCH = C::W_ROW / 16;
    static_assert((C::BN * WCH) % C::THREADS == 0, "W tile split");
#pragma unroll
    for (int i = 0; i < C::BN * WCH / C::THREADS; ++i) {
      const int c = tid + i * C::THREADS;
      const int row = c / WCH, ch = c % WCH;
      const int gn = n0 + row;
      const int gb = kt * C::W_ROW + ch * 16;
      const bool ok = gn < p.n && gb < p.k / 2;  // (gb: a 16-byte half of chunk gb / 32)
      const uint8_t* src = ok ? p.codes + gemm_chunk(gn, gb / 32, p.k) + gb % 32 : p.codes;
      dev::cp_async16(sW + row * C::W_PITCH + ch * 16, src, ok ? 16 : 0);
    }
    constexpr int SCH = C::BN * SB / 16;  // 16-byte chunks of one slice's scales
    static_assert(C::WARPS_K * SCH <= C::THREADS, "scale split");
    if (tid < C::WARPS_K * SCH) {
      // a tile's run of 16 SB bytes is SB pieces; in shared memory the runs of the BN rows' tiles
      const int s = tid / SCH, ch = tid % SCH, tl = ch / SB;
      const int kc = kt * C::WARPS_K + s;
      const bool ok = kc < kc_total && n0 + 16 * tl < p.npad;
      const uint8_t* src = ok ? p.scales + gemm_scale_chunk(n0 + 16 * tl, kc, p.k, SB) + (ch % SB) * 16 : p.scales;
      dev::cp_async16(sS + s * C::BN * 4 + ch * 16, src, ok ? 16 : 0);
    }
  };

  float acc[C::MT][C::NT][4];
#pragma unroll
  for (int a = 0; a < C::MT; ++a)
#pragma unroll
    for (int b = 0; b < C::NT; ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.0f;

  auto compute = [&](int stage, int kt) {
    const int kc = kt * C::WARPS_K + wk;
    if (kc >= kc_total) return;  // warp-uniform: this slice lies beyond K
    const uint8_t* sA = smem + stage * C::STAGE_BYTES;
    const uint8_t* sW = sA + C::A_BYTES;
    const uint8_t* sS = sW + C::W_BYTES + wk * C::BN * 4;
    uint2 cw[C::NT];
    float sc[C::NT][4];
    uint32_t sp[C::NT][4];  // pair-decode scales
#pragma unroll
    for (int j = 0; j < C::NT; ++j) {
      const int nl = wn * C::WTN + j * 8 + (lane >> 2);
      cw[j] = *reinterpret_cast<const uint2*>(sW + nl * C::W_PITCH + wk * 32 + (lane & 3) * 8);
      const uint8_t* sr = sS + gemm_scale_slot(nl) * SB;  // row nl's scale bytes of this chunk
      if constexpr (kPair && F == Format::nvfp4) {
        const uint32_t w = *reinterpret_cast<const uint32_t*>(sr);
#pragma unroll
        for (int s = 0; s < 4; ++s) sp[j][s] = scale_lut[(w >> (8 * s)) & 0xFFu];
      } else if constexpr (kPair) {  // MXFP4
        const uint32_t w = *reinterpret_cast<const uint16_t*>(sr);
#pragma unroll
        for (int s = 0; s < 4; ++s) sp[j][s] = scale_lut[(w >> (8 * (s >> 1))) & 0xFFu];
      } else if constexpr (F == Format::nvfp4) {
        const uint32_t w = *reinterpret_cast<const uint32_t*>(sr);
#pragma unroll
        for (int s = 0; s < 4; ++s) sc[j][s] = e4m3_value((w >> (8 * s)) & 0xFFu);
      } else if constexpr (F == Format::mxfp4) {
        const uint32_t w = *reinterpret_cast<const uint16_t*>(sr);
#pragma unroll
        for (int s = 0; s < 4; ++s) sc[j][s] = e8m0_value((w >> (8 * (s >> 1))) & 0xFFu);
      } else if constexpr (F == Format::nf4) {
        const float v = *reinterpret_cast<const float*>(sr);
#pragma unroll
        for (int s = 0; s < 4; ++s) sc[j][s] = v;
      } else {
        const int gn = n0 + nl;
        float v = 0.0f;
        if (gn < p.n) {
          const float g2 = __ldg(p.scale2 + (static_cast<int64_t>(gn) * kc_total + kc) / kDqGroup);
          v = e4m3_value(*sr) * g2;
        }
#pragma unroll
        for (int s = 0; s < 4; ++s) sc[j][s] = v;
      }
    }
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      uint32_t a[C::MT][4];
#pragma unroll
      for (int mt = 0; mt < C::MT; ++mt) {
        const int row = wm * C::WTM + mt * 16 + (lane & 15);
        const int ch = wk * 8 + s * 2 + (lane >> 4);
        dev::ldmatrix_x4(a[mt], sA + row * (C::BK * 2) + ((ch ^ (row & 7)) * 16));
      }
#pragma unroll
      for (int j = 0; j < C::NT; ++j) {
        const uint32_t w = (s < 2 ? cw[j].x : cw[j].y) >> ((s & 1) * 16);
        uint32_t b0, b1;
        if constexpr (kPair) {
          b0 = D::mul2(pair_lut[w & 0xFFu], sp[j][s]);
          b1 = D::mul2(pair_lut[(w >> 8) & 0xFFu], sp[j][s]);
        } else {
          const float f = sc[j][s];
          b0 = D::pack2(lut[w & 15u] * f, lut[(w >> 4) & 15u] * f);
          b1 = D::pack2(lut[(w >> 8) & 15u] * f, lut[(w >> 12) & 15u] * f);
        }
#pragma unroll
        for (int mt = 0; mt < C::MT; ++mt) D::mma(acc[mt][j], a[mt], b0, b1);
      }
    }
  };

#pragma unroll
  for (int s = 0; s < C::STAGES - 1; ++s) {
    if (s < ktiles) load(s, s);
    dev::cp_async_commit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    dev::cp_async_wait<C::STAGES - 2>();
    __syncthreads();  // tile kt landed for everyone; stage (kt-1) % STAGES is free
    const int nk = kt + C::STAGES - 1;
    if (nk < ktiles) load(nk % C::STAGES, nk);
    dev::cp_async_commit();
    compute(kt % C::STAGES, kt);
  }
  dev::cp_async_wait<0>();
  __syncthreads();

  // Epilogue: sum the WARPS_K partial tiles in shared memory, then scale, add bias, store.
  float* sC = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int w = 0; w < C::WARPS_K; ++w) {
    if (wk == w) {
#pragma unroll
      for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
        for (int j = 0; j < C::NT; ++j) {
          const int row = wm * C::WTM + mt * 16 + (lane >> 2);
          const int col = wn * C::WTN + j * 8 + (lane & 3) * 2;
          float* c0 = sC + row * C::C_PITCH + col;
          float* c1 = c0 + 8 * C::C_PITCH;
          if (w == 0) {
            c0[0] = acc[mt][j][0]; c0[1] = acc[mt][j][1];
            c1[0] = acc[mt][j][2]; c1[1] = acc[mt][j][3];
          } else {
            c0[0] += acc[mt][j][0]; c0[1] += acc[mt][j][1];
            c1[0] += acc[mt][j][2]; c1[1] += acc[mt][j][3];
          }
        }
    }
    __syncthreads();
  }
  const float gs = F == Format::nvfp4 ? __ldg(p.scale2) : 1.0f;
  const T* bias = static_cast<const T*>(p.bias);
  T* y = static_cast<T*>(p.y);
  for (int idx = tid; idx < C::BM * C::BN; idx += C::THREADS) {
    const int row = idx / C::BN, col = idx % C::BN;
    const int gm = m0 + row, gn = n0 + col;
    if (gm < p.m && gn < p.n) {
      float v = sC[row * C::C_PITCH + col] * gs;
      if (bias) v += D::to_f(bias[gn]);
      y[static_cast<int64_t>(gm) * p.n + gn] = D::from_f(v);
    }
  }
}

template <class C, Format F, typename T>
cudaError_t launch_gemm(const GemmParams& p, cudaStream_t stream) {
  auto kern = fp4_gemm_kernel<C, F, T>;
  // Above 48 KB a kernel needs the opt-in (once per process; single-device use assumed).
  static const cudaError_t attr =
      cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(C::SMEM_BYTES));
  if (attr != cudaSuccess) return attr;
  dim3 grid((p.n + C::BN - 1) / C::BN, (p.m + C::BM - 1) / C::BM);
  kern<<<grid, C::THREADS, static_cast<size_t>(C::SMEM_BYTES), stream>>>(p);
  return cudaGetLastError();
}

}  // namespace vstack::quant
