// Decode-regime FP4 kernel, M <= 16: y = x * W^T (+ bias) streaming the weight
// from HBM through per-warp shared-memory rings. Launch plan: quant/gemv_plan.hpp.
//
// Note [Decode kernel]. The weight is the mma A operand (16 rows x 16 k), x the
// B operand (k x 8 columns = up to 8 rows of x; two mmas for M > 8). In the
// GEMM layout (FORMAT.md) lane r of a quad finds, in the 8 bytes at 8r of a
// 32-byte chunk, exactly its A-fragment codes for the chunk's four k16 steps,
// and step b uses only the codes of 16-element block b: so each k16 mma sees a
// single NVFP4 block (two steps share an MXFP4 block, four an NF4 block). The
// codes are decoded WITHOUT their scale (a code byte indexes a 256-entry table
// of (low, high) value pairs in x's dtype: exact for E2M1, NF4 rounded once),
// the mma runs with a zero accumulator over the scale's steps, and the fp32
// result is multiplied by the block scale into the fp32 accumulator. So the
// scale never has to fit x's dtype (MXFP4 with f16 x is exact over the whole
// E8M0 range) and NF4 weights are rounded once, as the test bound assumes.
// The table has one copy per shared-memory bank (lane l reads word 32*byte + l):
// conflict-free lookups, 32 KB per CTA.
//
// Memory: each warp streams its 16 rows through its own ring of 4 shared-memory
// stages with 16-byte `cp.async.cg ... L2::256B` (a stage = 128 contiguous bytes
// of each row + the rows' scales of those 4 chunks), waiting with
// cp.async.wait_group and __syncwarp only: 3 stages = 6 KB of codes in flight
// per warp, 48 KB per CTA, one CTA per SM. Lanes then read their fragment bytes
// with LDS.64 (row pitch 160 bytes: the 8 rows of a half-warp hit distinct
// banks). x's K slice is loaded once per CTA into shared memory (16-byte chunks
// XOR-swizzled by row for ldmatrix); rows >= M of the 8-wide mma column tile
// alias rows < M or are zero: those output columns are never stored.
// Measured (H100, 2026-11-22, N = K = 8192, M = 1, NVFP4): codes loaded straight
// into a register ring with 8-byte ld.global.nc 8 chunks ahead ran at ~30 % of
// the read bandwidth for every format and M, as if one chunk per warp were in
// flight (42 us); these rings 21.7 us. Rings of 3 stages (2 in flight), small
// enough for two CTAs = 16 warps per SM, were slower (31.4 us).
#pragma once

#include <cooperative_groups.h>

#include "quant/device.cuh"
#include "quant/format.hpp"
#include "quant/gemm_kernel.cuh"
#include "quant/gemv_plan.hpp"

namespace vstack::quant {

namespace gemv {

// 16-byte async copy global -> shared with an L2 prefetch of the 256-byte block;
// bytes < 16 zero-fills the rest (0: nothing is read).
__device__ __forceinline__ void cp_async16_l2(void* dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(dev::smem_u32(dst)), "l"(src),
               "r"(bytes));
}

// Four E4M3 scale bytes -> fp32 (exact; NaN stays NaN).
__device__ __forceinline__ void e4m3x4_to_f32(uint32_t w, float (&s)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t h01, h23;
  asm("{\n.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %2;\ncvt.rn.f16x2.e4m3x2 %0, lo;\ncvt.rn.f16x2.e4m3x2 %1, hi;\n}\n"
      : "=r"(h01), "=r"(h23)
      : "r"(w));
  const __half2 a = *reinterpret_cast<const __half2*>(&h01), b = *reinterpret_cast<const __half2*>(&h23);
  s[0] = __low2float(a);
  s[1] = __high2float(a);
  s[2] = __low2float(b);
  s[3] = __high2float(b);
#else
#pragma unroll
  for (int i = 0; i < 4; ++i) s[i] = e4m3_value((w >> (8 * i)) & 0xFFu);
#endif
}

struct Args {
  int kcs;    // chunks per CTA
  int mrows;  // x rows in shared memory (pow2 >= M)
};

}  // namespace gemv

// MT: 8-column mma tiles (1: M <= 8, 2: M <= 16).
template <Format F, typename T, int MT>
__global__ void __launch_bounds__(kGemvThreads, 1) fp4_gemv_kernel(const GemmParams p, const gemv::Args a) {
  using D = dev::Dt<T>;
  constexpr int SB = chunk_scale_bytes(F);
  constexpr int G = block_size(F) / 16;           // k16 steps per scale
  constexpr int NG = 4 / G;                       // scales per row and chunk
  constexpr int P = kGemvStages, CH = kGemvStageChunks;
  extern __shared__ __align__(128) uint8_t smem[];
  uint32_t* lut = reinterpret_cast<uint32_t*>(smem);
  uint8_t* rings = smem + kGemvLutBytes;
  uint8_t* xs = rings + kGemvWarps * kGemvWarpBytes;  // x slice

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, r = lane & 3;
  const int kc_total = p.k / 64;
  const int kc0 = blockIdx.x * a.kcs;
  const int nk = min(a.kcs, kc_total - kc0);
  const int row_blk = blockIdx.y * (kGemvWarps * kGemvRows);
  const int n_first = row_blk + warp * kGemvRows;  // this warp's rows: n_first + 0..15
  const int pitch = gemv_x_pitch(a.kcs);          // bytes per x row in shared memory
  const int64_t half_k = p.k / 2;
  uint8_t* ring = rings + warp * kGemvWarpBytes;
  const int nt = (nk + CH - 1) / CH;              // stages of this slice

  // Stage t of this warp: 16 rows x 128 bytes (chunks 4t..4t+3) + their scales.
  auto issue = [&](int t) {
    if (t < nt) {
      uint8_t* st = ring + (t % P) * kGemvStageBytes;
      const int kcb = t * CH;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int idx = lane + 32 * i, row = idx >> 3, pc = idx & 7;
        const int n = n_first + row;
        const bool ok = n < p.n && kcb + (pc >> 1) < nk;
        const uint8_t* src = ok ? p.codes + static_cast<int64_t>(n) * half_k + static_cast<int64_t>(kc0 + kcb) * 32 + pc * 16
                                : p.codes;
        gemv::cp_async16_l2(st + row * kGemvRowPitch + pc * 16, src, ok ? 16 : 0);
      }
      if (lane < CH * SB) {  // per chunk, the 16 rows' scales are 16 * SB contiguous bytes
        const int j = lane / SB, pc = lane % SB;
        const bool ok = kcb + j < nk && n_first < p.npad;
        const uint8_t* src =
            ok ? p.scales + (static_cast<int64_t>(kc0 + kcb + j) * p.npad + n_first) * SB + pc * 16 : p.scales;
        dev::cp_async16(st + kGemvScaleOff + j * 64 + pc * 16, src, ok ? 16 : 0);
      }
    }
    dev::cp_async_commit();
  };
  // Start streaming before the table and x are built.
#pragma unroll
  for (int t = 0; t < P - 1; ++t) issue(t);

  // Code byte -> (value(low nibble), value(high nibble)) in T, 32 copies (one per bank).
  {
    const int byte = warp * 32 + lane;
    const uint32_t e = D::pack2(element_value(F, byte & 15), element_value(F, byte >> 4));
#pragma unroll 4
    for (int j = 0; j < 32; ++j) lut[(warp * 32 + j) * 32 + lane] = __shfl_sync(0xFFFFFFFFu, e, j);
  }
  // x rows [0, M) of this K slice; rows M..mrows-1 zero.
  {
    const int per_row = pitch / 16;  // 16-byte chunks, zero beyond this slice's nk chunks
    const char* xg = static_cast<const char*>(p.x);
    for (int i = tid; i < a.mrows * per_row; i += kGemvThreads) {
      const int row = i / per_row, ch = i % per_row;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (row < p.m && ch < nk * 8)
        v = __ldg(reinterpret_cast<const uint4*>(xg + (static_cast<int64_t>(row) * p.k + kc0 * 64 + ch * 8) * 2));
      *reinterpret_cast<uint4*>(xs + row * pitch + ((ch ^ (row & 7)) * 16)) = v;
    }
  }
  __syncthreads();

  float acc[MT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[mt][e] = 0.0f;

  const uint32_t* lut_lane = lut + lane;
  auto lookup = [&](uint32_t byte) { return lut_lane[byte << 5]; };
  const bool ok_g = n_first + g < p.n, ok_g8 = n_first + g + 8 < p.n;

  auto compute = [&](const uint8_t* st, int kc) {  // kc: chunk of this slice; st + j*32 its stage column
    // x fragments of the chunk's four k16 steps: b[mt][step][0..1]
    uint32_t bx[MT][4][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int mi = lane >> 3;  // matrix: step 2h + mi/2, k half mi%2
        const int row = ((lane & 7) + 8 * mt) & (a.mrows - 1);
        const int ch = kc * 8 + (2 * h + (mi >> 1)) * 2 + (mi & 1);
        uint32_t rr[4];
        dev::ldmatrix_x4(rr, xs + row * pitch + ((ch ^ (row & 7)) * 16));
        bx[mt][2 * h][0] = rr[0];
        bx[mt][2 * h][1] = rr[1];
        bx[mt][2 * h + 1][0] = rr[2];
        bx[mt][2 * h + 1][1] = rr[3];
      }
    const int j = kc % CH;
    const uint2 lo = *reinterpret_cast<const uint2*>(st + g * kGemvRowPitch + j * 32 + r * 8);
    const uint2 hi = *reinterpret_cast<const uint2*>(st + (g + 8) * kGemvRowPitch + j * 32 + r * 8);
    const uint8_t* ss = st + kGemvScaleOff + j * 64;
    // Block scales of rows g and g+8: sc[0 / 1][group]
    float sc[2][NG];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = g + 8 * h;
      if constexpr (F == Format::nvfp4) {
        gemv::e4m3x4_to_f32(*reinterpret_cast<const uint32_t*>(ss + row * 4), sc[h]);
      } else if constexpr (F == Format::mxfp4) {
        const uint32_t w = *reinterpret_cast<const uint16_t*>(ss + row * 2);
        sc[h][0] = e8m0_value(w & 0xFFu);
        sc[h][1] = e8m0_value(w >> 8);
      } else if constexpr (F == Format::nf4) {
        sc[h][0] = *reinterpret_cast<const float*>(ss + row * 4);
      } else {
        float g2 = 0.0f;  // (chunks beyond the slice: any finite g2, their codes and scales are 0)
        if (h == 0 ? ok_g : ok_g8)
          g2 = __ldg(p.scale2 + (static_cast<int64_t>(n_first + row) * kc_total + kc0 + min(kc, nk - 1)) / kDqGroup);
        sc[h][0] = e4m3_value(ss[row]) * g2;
      }
    }
#pragma unroll
    for (int grp = 0; grp < NG; ++grp) {
      float d[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int e = 0; e < 4; ++e) d[mt][e] = 0.0f;
#pragma unroll
      for (int stp = grp * G; stp < (grp + 1) * G; ++stp) {
        const uint32_t wl = stp < 2 ? lo.x : lo.y, wh = stp < 2 ? hi.x : hi.y;
        const int sh = (stp & 1) * 16;
        uint32_t af[4];
        af[0] = lookup((wl >> sh) & 0xFFu);
        af[1] = lookup((wh >> sh) & 0xFFu);
        af[2] = lookup((wl >> (sh + 8)) & 0xFFu);
        af[3] = lookup((wh >> (sh + 8)) & 0xFFu);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) D::mma(d[mt], af, bx[mt][stp][0], bx[mt][stp][1]);
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        acc[mt][0] = fmaf(d[mt][0], sc[0][grp], acc[mt][0]);
        acc[mt][1] = fmaf(d[mt][1], sc[0][grp], acc[mt][1]);
        acc[mt][2] = fmaf(d[mt][2], sc[1][grp], acc[mt][2]);
        acc[mt][3] = fmaf(d[mt][3], sc[1][grp], acc[mt][3]);
      }
    }
  };

  for (int t = 0; t < nt; ++t) {
    dev::cp_async_wait<P - 2>();  // this lane's copies of stage t landed
    __syncwarp();                 // ... and everyone's; stage t-1 is free for t+P-1
    issue(t + P - 1);
    const uint8_t* st = ring + (t % P) * kGemvStageBytes;
    // All CH chunks, straight-line so that their latency chains interleave: chunks beyond
    // the slice have zero codes, scales and x (zero-filled copies), so they add 0.
#pragma unroll
    for (int j = 0; j < CH; ++j) compute(st, t * CH + j);
  }
  dev::cp_async_wait<0>();
  __syncwarp();

  const float gs = F == Format::nvfp4 ? __ldg(p.scale2) : 1.0f;
  const T* bias = static_cast<const T*>(p.bias);
  T* y = static_cast<T*>(p.y);
  auto store = [&](int n, int m, float v) {
    v *= gs;
    if (bias) v += D::to_f(bias[n]);
    y[static_cast<int64_t>(m) * p.n + n] = D::from_f(v);
  };

  if (gridDim.x == 1) {  // the whole K in this CTA
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int n = n_first + g + 8 * (e >> 1);
        const int m = mt * 8 + 2 * r + (e & 1);
        if (n < p.n && m < p.m) store(n, m, acc[mt][e]);
      }
    return;
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Split K: the gridDim.x CTAs of this row block are one cluster; sum their partials
  // through distributed shared memory in rank order (deterministic). Each warp's
  // partials [16 rows][16 columns] fp32 go to the start of its own (drained) ring.
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  float* part = reinterpret_cast<float*>(ring);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int e = 0; e < 4; ++e) part[(g + 8 * (e >> 1)) * 16 + mt * 8 + 2 * r + (e & 1)] = acc[mt][e];
  cluster.sync();
  const int S = static_cast<int>(gridDim.x), rank = static_cast<int>(blockIdx.x);
  constexpr int R = kGemvWarps * kGemvRows;
  const int per = (R + S - 1) / S;
  const int r0 = rank * per, r1 = min(R, r0 + per);
  for (int i = tid; i < (r1 - r0) * p.m; i += kGemvThreads) {
    const int rl = r0 + i / p.m, m = i % p.m;
    const int n = row_blk + rl;
    if (n >= p.n) continue;
    const int off = (rl / kGemvRows) * (kGemvWarpBytes / 4) + (rl % kGemvRows) * 16 + m;
    float v = 0.0f;
    for (int s = 0; s < S; ++s) v += cluster.map_shared_rank(reinterpret_cast<float*>(rings), s)[off];
    store(n, m, v);
  }
  cluster.sync();  // keep this CTA's partials alive until every rank has read them
#endif
}

template <Format F, typename T, int MT>
cudaError_t launch_gemv_cfg(const GemmParams& p, const GemvPlan& pl, cudaStream_t stream) {
  auto kern = fp4_gemv_kernel<F, T, MT>;
  static const cudaError_t attr = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       static_cast<int>(gemv_smem(kGemvMaxM, kGemvXMaxBytes / (16 * 128))));
  if (attr != cudaSuccess) return attr;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(pl.split), static_cast<unsigned>(pl.row_blocks));
  cfg.blockDim = dim3(kGemvThreads);
  cfg.dynamicSmemBytes = static_cast<size_t>(pl.smem);
  cfg.stream = stream;
  cudaLaunchAttribute la[1];
  la[0].id = cudaLaunchAttributeClusterDimension;
  la[0].val.clusterDim.x = static_cast<unsigned>(pl.split);
  la[0].val.clusterDim.y = 1;
  la[0].val.clusterDim.z = 1;
  cfg.attrs = la;
  cfg.numAttrs = pl.split > 1 ? 1 : 0;
  gemv::Args a{static_cast<int>(pl.kc_per_cta), pl.mrows};
  return cudaLaunchKernelEx(&cfg, kern, p, a);
}

template <Format F, typename T>
cudaError_t launch_gemv(const GemmParams& p, cudaStream_t stream) {
  // Cluster capacity per (MT, S, CTAs per SM), asked once (single device assumed, as for the smem opt-in).
  // If the query fails, the H100-like model stands in (the plan only gets slower, never wrong).
  static int64_t cache[2][kGemvMaxSplit + 1][3] = {};
  const int mt = p.m > 8 ? 2 : 1;
  const ClusterModel model{p.sms};
  auto cap = [&](int s, int cps) -> int64_t {
    if (s > 1 && p.cc < 90) return 0;
    int64_t& c = cache[mt - 1][s][cps];
    if (c == 0) {
      auto kern = mt == 2 ? fp4_gemv_kernel<F, T, 2> : fp4_gemv_kernel<F, T, 1>;
      cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(gemv_smem(kGemvMaxM, kGemvXMaxBytes / (16 * 128))));
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = dim3(static_cast<unsigned>(s), 1024);
      cfg.blockDim = dim3(kGemvThreads);
      cfg.dynamicSmemBytes = static_cast<size_t>(cps == 2 ? kGemvTwoPerSm : gemv_smem(kGemvMaxM, kGemvXMaxBytes / (16 * 128)));
      cudaLaunchAttribute la[1];
      la[0].id = cudaLaunchAttributeClusterDimension;
      la[0].val.clusterDim.x = static_cast<unsigned>(s);
      la[0].val.clusterDim.y = 1;
      la[0].val.clusterDim.z = 1;
      cfg.attrs = la;
      cfg.numAttrs = 1;
      int n = 0;
      if (e == cudaSuccess) e = cudaOccupancyMaxActiveClusters(&n, kern, &cfg);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();  // not this call's error: clear it
        n = static_cast<int>(model(s, cps));
      }
      c = n > 0 ? n : -1;
    }
    return c > 0 ? c : 0;
  };
  GemvPlan pl = plan_gemv(p.m, p.n, p.k, p.sms, cap);
  if (!pl.ok) pl = plan_gemv(p.m, p.n, p.k, p.sms, p.cc >= 90);  // the model's plan (what pick_gemm_config saw)
  if (!pl.ok) return cudaErrorInvalidConfiguration;
  if (p.m > 8) return launch_gemv_cfg<F, T, 2>(p, pl, stream);
  return launch_gemv_cfg<F, T, 1>(p, pl, stream);
}

}  // namespace vstack::quant
