// Launch plan of the decode-regime FP4 kernel (M <= 16, quant/gemv_kernel.cuh):
// plain constexpr code, tested on the CPU (tests/quant/test_heuristics.cpp).
//
// A CTA of 8 warps owns R = 128 weight rows and a 1/S slice of K; each warp
// owns 16 rows (one mma tile) for the whole slice, so no reduction inside the
// CTA. The S CTAs of one row block form a thread-block cluster and sum their
// partials through distributed shared memory (fixed order: deterministic, no
// workspace). x's slice sits in shared memory; each warp streams its rows
// through its own ring of cp.async stages (4 chunks = 128 bytes per row each).
//
// Choice of S. A cluster of S CTAs needs S free SMs of one GPC, so the GPU
// holds fewer clusters at once than SMs / S (measured H100, 2026-11-22: 30
// clusters of 4 with one CTA per SM, not 33: a grid of 32 such clusters ran in
// two waves and took twice as long). The plan takes that capacity from a
// callback (the launcher asks cudaOccupancyMaxActiveClusters; CPU tests use
// h100_cluster_model) and minimises
//   waves * (chunks_per_cta + 4) * (1.25 if two CTAs share an SM)
// (4: the stage pipeline's fill; two CTAs of 8 warps on one SM each run slower
// than alone, but hide latency better than one), under x slice <= 64 KB.
// A CTA fits twice per SM when its shared memory is <= kGemvTwoPerSm (not with
// 4 stages per warp: measured, 16 warps on 3 stages ran slower than 8 on 4).
#pragma once

#include <cstdint>

namespace vstack::quant {

inline constexpr int kGemvWarps = 8;
inline constexpr int kGemvThreads = 32 * kGemvWarps;
inline constexpr int kGemvMaxM = 16;
inline constexpr int kGemvMaxSplit = 8;                 // portable cluster size
inline constexpr int64_t kGemvXMaxBytes = 64 * 1024;     // x slice in shared memory
inline constexpr int kGemvLutBytes = 256 * 32 * 4;       // code byte -> value pair, one copy per bank
inline constexpr int kGemvRows = 16;                     // rows per warp (one mma tile)
inline constexpr int kGemvStageChunks = 4;               // 64-wide chunks per stage: 128 bytes per row
inline constexpr int kGemvStages = 4;                    // stages per warp ring: 3 (6 KB of codes) in flight
inline constexpr int kGemvRowPitch = 160;                // 128 + 32: LDS.64 of 8 rows conflict-free
inline constexpr int kGemvScaleOff = kGemvRows * kGemvRowPitch;
inline constexpr int kGemvStageBytes = kGemvScaleOff + kGemvStageChunks * kGemvRows * 4;
inline constexpr int kGemvWarpBytes = kGemvStages * kGemvStageBytes;
inline constexpr int64_t kGemvTwoPerSm = 112 * 1024;     // (228 KB per SM - 1 KB reserved per CTA) / 2

struct GemvPlan {
  bool ok = false;
  int split = 1;         // S: CTAs per row block (cluster size)
  int mrows = 1;         // x rows kept in shared memory: pow2 >= M
  int64_t kc_per_cta = 0;  // 64-wide chunks of K per CTA (the last may have fewer)
  int64_t row_blocks = 0;
  int64_t smem = 0;      // dynamic shared memory bytes
};

constexpr int gemv_mrows(int64_t m) { return m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : m <= 8 ? 8 : 16; }

// x rows cover whole stages (the kernel computes every chunk of a stage).
constexpr int gemv_x_pitch(int64_t kcs) {
  return static_cast<int>((kcs + kGemvStageChunks - 1) / kGemvStageChunks * kGemvStageChunks * 128);
}
constexpr int64_t gemv_smem(int mrows, int64_t kcs) {
  return kGemvLutBytes + int64_t{kGemvWarps} * kGemvWarpBytes + mrows * gemv_x_pitch(kcs);
}

// A model of the cluster capacity of an H100-like GPU for CPU-side use: the SMs'
// TPCs (2 SMs each) spread over 8 GPCs; a cluster of s CTAs, cps CTAs per SM,
// fits floor(2 * cps * tpcs_in_gpc / s) times in a GPC. (The H100 SXM measured
// 30 clusters of 4 at one CTA per SM; this model says 32.)
struct ClusterModel {
  int sms = 132;
  constexpr int64_t operator()(int s, int cps) const {
    const int tpcs = sms / 2, gpcs = 8;
    int64_t total = 0;
    for (int g = 0; g < gpcs; ++g) {
      const int t = tpcs / gpcs + (g < tpcs % gpcs ? 1 : 0);
      total += (2 * cps * t) / s;
    }
    return total;
  }
};

// cap(s, cps): how many clusters of s CTAs the GPU runs at once with cps CTAs per SM (0: none;
// a device without clusters answers 0 for s > 1).
template <class Cap>
constexpr GemvPlan plan_gemv(int64_t m, int64_t n, int64_t k, int sms, const Cap& cap) {
  GemvPlan best{};
  if (m < 1 || m > kGemvMaxM || n < 1 || k < 64 || k % 64 != 0 || sms < 1) return best;
  const int64_t kc = k / 64;
  const int mrows = gemv_mrows(m);
  const int64_t nb = (n + kGemvWarps * kGemvRows - 1) / (kGemvWarps * kGemvRows);
  int64_t best_cost = -1;
  for (int s = 1; s <= kGemvMaxSplit; ++s) {
    if (s > kc) break;
    const int64_t kcs = (kc + s - 1) / s;
    if ((s - 1) * kcs >= kc) continue;  // an empty CTA
    if (mrows * gemv_x_pitch(kcs) > kGemvXMaxBytes) continue;
    const int64_t smem = gemv_smem(mrows, kcs);
    const int cps = smem <= kGemvTwoPerSm ? 2 : 1;
    const int64_t c = cap(s, cps);
    if (c < 1) continue;
    const int64_t waves = (nb + c - 1) / c;
    const int64_t ctas_wave = (nb < c ? nb : c) * s;
    const bool shared = ctas_wave > sms;  // some SMs run two CTAs
    const int64_t cost = waves * (kcs + 4) * (shared ? 5 : 4);
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best.ok = true;
      best.split = s;
      best.mrows = mrows;
      best.kc_per_cta = kcs;
      best.row_blocks = nb;
      best.smem = smem;
    }
  }
  return best;
}

// clusters: the device can launch thread-block clusters (sm_90+); without them S = 1.
constexpr GemvPlan plan_gemv(int64_t m, int64_t n, int64_t k, int sms, bool clusters = true) {
  const ClusterModel model{sms};
  return plan_gemv(m, n, k, sms, [&](int s, int cps) -> int64_t { return s > 1 && !clusters ? 0 : model(s, cps); });
}

}  // namespace vstack::quant
