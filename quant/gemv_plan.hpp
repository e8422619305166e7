// Launch plan of the decode-regime FP4 kernel (M <= 16, quant/gemv_kernel.cuh):
// plain constexpr code, tested on the CPU (tests/quant/test_heuristics.cpp).
//
// A CTA of 16 warps owns T tiles of 16 weight rows (one mma tile each) and a
// 1/S slice of K; the warps of a tile split the slice into 16/T contiguous
// runs of chunks and sum their partials in shared memory in warp order. The S CTAs of one row tile form a
// thread-block cluster and sum through distributed shared memory in rank order
// (deterministic, no workspace). Weights go straight from global memory into
// registers (no shared-memory ring), so a CTA only holds the code-pair table
// (64 KB), 32 KB of reduction buffers and x's K slice (<= 128 KB); one CTA of
// 16 warps per SM (registers: __launch_bounds__(512, 1)).
//
// Choice of S: the smallest S whose x slice fits kGemvXMaxBytes; more only while the grid would leave SMs without a CTA (small N), and
// never beyond one wave. CTAs are persistent along N: as many per slice as fit
// at once, each doing row blocks y, y + gridDim.y, ... (the next block's first
// loads overlap this one's reduction; the table and x are built once). Then tiles per CTA (T): the 16 warps
// split as T tiles x 16/T runs of K; T grows while a run would be shorter than
// kGemvMinRun chunks (large M forces small slices) and the grid keeps >= one
// CTA per SM.
#pragma once

#include <cstdint>

namespace vstack::quant {

inline constexpr int kGemvWarps = 16;
inline constexpr int kGemvThreads = 32 * kGemvWarps;
inline constexpr int kGemvMaxM = 16;
inline constexpr int kGemvRows = 16;                     // rows per CTA (one mma tile)
inline constexpr int kGemvMaxSplit = 8;                  // portable cluster size
inline constexpr int kGemvBatch = 4;                     // chunks per register batch (two batches in flight)
inline constexpr int kGemvMinRun = 4;                    // chunks per warp the plan aims for at least (S = 1)
inline constexpr int kGemvMinRunSplit = 8;               // ... with split K (two cluster.sync per row block)
inline constexpr int kGemvMinBlocks = 1;                 // __launch_bounds__ minimum CTAs per SM (<= 128 registers)
inline constexpr int64_t kGemvXMaxBytes = 128 * 1024;    // x slice at most
inline constexpr int kGemvLutBytes = 256 * 256;          // code byte -> value pair, one copy per bank, 256-byte rows
inline constexpr int kGemvRedBytes = 2 * kGemvWarps * 16 * 16 * 4;  // the warps' partials + the row block's sums
inline constexpr int64_t kGemvSmPerSm = 227 * 1024;      // shared memory per SM usable by CTAs (H100)

struct GemvPlan {
  bool ok = false;
  int split = 1;           // S: CTAs per row tile (cluster size)
  int mrows = 1;           // x rows kept in shared memory: pow2 >= M
  int64_t kc_per_cta = 0;  // 64-wide chunks of K per CTA (the last may have fewer)
  int tiles = 1;           // 16-row tiles per CTA (1, 2, 4, 8)
  int64_t kc_per_warp = 0; // chunks per warp: ceil(kc_per_cta / (8 / tiles))
  int64_t row_blocks = 0;  // row blocks: ceil(N / (16 * tiles))
  int64_t workers = 0;     // CTAs along N (persistent: each does row blocks y, y + workers, ...)
  int64_t smem = 0;        // dynamic shared memory bytes
  int ctas_per_sm = 0;     // resident CTAs per SM this plan assumes
};

constexpr int gemv_mrows(int64_t m) { return m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : m <= 8 ? 8 : 16; }

constexpr int64_t gemv_x_pitch(int64_t kcs) { return kcs * 128; }  // bytes per x row in shared memory
// The table, the reduction buffers, x.
constexpr int64_t gemv_smem(int mrows, int64_t kcs) { return kGemvLutBytes + kGemvRedBytes + mrows * gemv_x_pitch(kcs); }
constexpr int gemv_ctas_per_sm(int64_t smem) {
  const int64_t c = kGemvSmPerSm / (smem + 1024);  // 1 KB reserved per CTA
  return static_cast<int>(c < kGemvMinBlocks ? c : kGemvMinBlocks);
}

// clusters: the device can launch thread-block clusters (sm_90+); without them S = 1.
constexpr GemvPlan plan_gemv(int64_t m, int64_t n, int64_t k, int sms, bool clusters = true) {
  GemvPlan p{};
  if (m < 1 || m > kGemvMaxM || n < 1 || k < 64 || k % 64 != 0 || sms < 1) return p;
  const int64_t kc = k / 64;
  const int mrows = gemv_mrows(m);
  const int64_t tiles = (n + kGemvRows - 1) / kGemvRows;
  const int smax = clusters ? kGemvMaxSplit : 1;
  auto fits = [&](int s, int64_t limit) {
    const int64_t kcs = (kc + s - 1) / s;
    return s <= kc && (s - 1) * kcs < kc && mrows * gemv_x_pitch(kcs) <= limit;
  };
  int s = 0;
  for (int t = 1; t <= smax && s == 0; ++t)
    if (fits(t, kGemvXMaxBytes)) s = t;
  if (s == 0) return p;
  auto cps_of = [&](int t) { return gemv_ctas_per_sm(gemv_smem(mrows, (kc + t - 1) / t)); };
  // Small N: split further while fewer CTAs than SMs and the grid stays one wave.
  while (s < smax && tiles * s < sms && fits(s + 1, kGemvXMaxBytes) && tiles * (s + 1) <= int64_t{sms} * cps_of(s + 1))
    ++s;
  p.ok = true;
  p.split = s;
  p.mrows = mrows;
  p.kc_per_cta = (kc + s - 1) / s;
  // Tiles per CTA: more while a warp's run would be shorter than the minimum run and the grid keeps
  // a CTA per SM (a short run pays a row block's reduction every few chunks). Measured (H100,
  // nvfp4): 14336 x 4096, S = 1, runs of 4 chunks with one tile 20.6 us (M = 1) vs 22.6 with two
  // (896 blocks balance better over 132 CTAs than 448); 8192^2 M = 16, S = 2: one tile 50.7 us,
  // two 42.8 (each block also pays two cluster barriers).
  const int min_run = s > 1 ? kGemvMinRunSplit : kGemvMinRun;
  while (p.tiles < kGemvWarps && (p.kc_per_cta * p.tiles + kGemvWarps - 1) / kGemvWarps < min_run &&
         (tiles + 2 * p.tiles - 1) / (2 * p.tiles) * s >= sms)
    p.tiles *= 2;
  p.kc_per_warp = (p.kc_per_cta + kGemvWarps / p.tiles - 1) / (kGemvWarps / p.tiles);
  p.row_blocks = (tiles + p.tiles - 1) / p.tiles;
  p.smem = gemv_smem(mrows, p.kc_per_cta);
  p.ctas_per_sm = cps_of(s);
  // The launcher asks the occupancy API; this model (an eighth less for clusters) stands in.
  const int64_t w = s == 1 ? int64_t{sms} * p.ctas_per_sm : int64_t{sms} * p.ctas_per_sm / s * 7 / 8;
  p.workers = w < p.row_blocks ? w : p.row_blocks;
  return p;
}

}  // namespace vstack::quant
