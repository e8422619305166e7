// Launch plan of the decode-regime FP4 kernel (M <= 16, quant/gemv_kernel.cuh):
// plain constexpr code, tested on the CPU (tests/quant/test_heuristics.cpp).
//
// A CTA of 16 warps owns T tiles of 16 weight rows (one mma tile each) and a
// 1/S slice of K; the warps of a tile split the slice into 16/T contiguous
// runs of chunks and sum their partials in shared memory in warp order. The S CTAs of one row tile form a
// thread-block cluster and sum through distributed shared memory in rank order
// (deterministic, no workspace). Weights go straight from global memory into
// registers (no shared-memory ring; on sm_90 the ring kernels of quant/gemv_ring.cuh and
// quant/gemv_ring_wide.cuh take every M <= 16 shape, Note [Ring kernel], but NF4_DQ with K > 16384),
// so a CTA only holds the code-pair table (64 KB), 32 KB of reduction buffers and x's K slice (<= 128 KB); one CTA of
// 16 warps per SM (registers: __launch_bounds__(512, 1)).
//
// With S > 1 the partials meet either in a cluster (distributed shared memory) or in a global
// workspace (Note [Workspace split] in quant/gemv_kernel.cuh): any S CTAs, no cluster, so the row
// blocks spread over every SM; the launcher offers the workspace where it has one for the stream.
//
// Choice of (S, T): a search over S in {1, 2, 4, 8} (where x's slice fits), T in {1, 2, 4, 8}
// and, for S > 1, clusters or the workspace, for the least modelled time (Note [Decode plan
// cost]). CTAs are persistent along N: as many per slice as fit at once (W(S): the launcher passes the occupancy API's
// count; a model stands in elsewhere), each doing row blocks y, y + W, ... (the next block's
// first loads overlap this one's reduction; the table and x are built once).
//
// Note [Decode plan cost]. Fitted to a sweep of every (S, T) on the bench shapes (H100,
// nvfp4, M = 1..16, 2026-11-22; docs/NOTES.md), in units of 0.01 us:
//   2 x (16 x 64 tile-chunks of the busiest CTA: ceil(blocks / W) x T x chunks per slice)  the stream
//   + 300 per row block a cluster sums through DSMEM (two cluster barriers)          S > 1
//   + 2 per KB of x a CTA loads before it can compute                                 x's slice
//   + 25 if a warp's run is shorter than 8 chunks (two batches)                       short runs
//   + 800 per row block a CTA sums through the workspace instead                  S > 1, workspace
// ties: fewer tiles at S = 1 (shorter runs), more at S > 1 (fewer cluster barriers). On the 20
// sweep cells it picks the best plan in 19 and one 10 % slower (4096^2 M = 16: S2T4 11.8 us, S1T2
// 10.7); the previous rules were up to 25 % slower (4096x14336 M = 4 28.2 -> 23.6 us, M = 16
// 49.4 -> 39.4; 8192^2 M = 8 28.7 -> 26.7, M = 16 40.7 -> 35.7; 4096^2 M = 1 8.6 -> 8.2).
// Re-fitted on the tile layout (quant/FORMAT.md, "Tiles"; sweep of 11 forced plans x the 20 cells,
// nvfp4, H100, 2026-11-22): the loads got faster and a cluster's barriers did not, so the cluster
// term went from 100 to 300 (200-400 all pick the fastest plan within 3 % in every cell; 100 was up
// to 19 % slower: 8192^2 M = 8 S2T8 21.6 us vs S1T1 18.2, 4096^2 M = 16 S2T4 10.5 vs S1T2 8.9,
// 4096x14336 M = 4 S2T4 19.3 vs S1T1 17.2). The 300 was fitted while a cluster's row block paid two
// blocking barriers; since Note [Split sums] (quant/gemv_kernel.cuh) the second one rarely blocks
// (multi-block split plans 9-14 % faster) and the term has not been re-fitted. On the cells swept
// since (docs/NOTES.md, "Plan sweep on large shapes") the plan is the fastest or within 1.5 % in 5 of 6;
// a sweep of the 12 bench cells at M = 4, 8, 16 after Note [Split sums] found no plan faster than the
// model's beyond the run-to-run spread (session 9), so the term stays.
// The workspace term (session 9, nvfp4, µs; the first two cells forced plans of one call, the rest
// bench_fp4.py with the cluster-only kernels alternated in one call): it must lose 4096x14336 M = 8
// (workspace S4T8 21.4 vs cluster S2T4 20.2-20.6: > 412), 8192^2 M = 16 (S2T8 27.5 vs 26.0-26.5:
// > 300) and 8192x28672 M = 16 (S8T8 83.4-83.5 vs cluster S8T8 82.1-82.8: > 599), and win 8192x28672
// M = 8 (S4T8 63.5-64.0 vs cluster S8T8 67.7-67.8: < 1142) and 4096x14336 M = 16 (S4T8 24.9-25.7 vs
// cluster S8T8 31.4-31.5: < 1236); 800, the middle of (599, 1142).
#pragma once

#include <cstdint>

#include "quant/format.hpp"
#include "quant/layout.hpp"

namespace vstack::quant {

inline constexpr int kGemvWarps = 16;
inline constexpr int kGemvThreads = 32 * kGemvWarps;
inline constexpr int kGemvMaxM = 16;
inline constexpr int kGemvRows = 16;                     // rows per CTA (one mma tile)
inline constexpr int kGemvMaxSplit = 8;                  // portable cluster size
inline constexpr int kGemvBatch = 4;                     // chunks per register batch (two batches in flight)
inline constexpr int kGemvMinRun = 8;                    // chunks per warp (two batches) under which a run costs extra
inline constexpr int kGemvMinBlocks = 1;                 // __launch_bounds__ minimum CTAs per SM (<= 128 registers)
inline constexpr int64_t kGemvXMaxBytes = 128 * 1024;    // x slice at most (where the device has room)
inline constexpr int kGemvLutBytes = 256 * 256;          // code byte -> value pair, one copy per bank, 256-byte rows
inline constexpr int kGemvRedBytes = 2 * kGemvWarps * 16 * 16 * 4;  // the warps' partials + the row block's sums
inline constexpr int64_t kGemvSmemH100 = 227 * 1024;     // dynamic shared memory per CTA at most (H100, H200)

struct GemvPlan {
  bool ok = false;
  int split = 1;           // S: CTAs per row tile (cluster size)
  int mrows = 1;           // x rows kept in shared memory: pow2 >= M
  int64_t kc_per_cta = 0;  // 64-wide chunks of K per CTA (the last may have fewer)
  int tiles = 1;           // 16-row tiles per CTA (1, 2, 4, 8)
  int64_t kc_per_warp = 0; // chunks per warp: ceil(kc_per_cta / (16 / tiles))
  int64_t row_blocks = 0;  // row blocks: ceil(N / (16 * tiles))
  int64_t workers = 0;     // CTAs along N (persistent: each does row blocks y, y + workers, ...)
  int64_t smem = 0;        // dynamic shared memory bytes
  int ctas_per_sm = 0;     // resident CTAs per SM this plan assumes
  bool ws = false;         // S > 1 summed through the global workspace (no cluster)
};

// x's slice at most on a device whose CTAs get at most smem_optin bytes of dynamic shared memory
// (cudaDevAttrMaxSharedMemoryPerBlockOptin: H100 227 KB, A100 163 KB, sm_86 / sm_89 99 KB): beside
// the table and the reduction buffers, 128 KB on Hopper, 67 KB on an A100, nothing on sm_86 / sm_89
// (there the decode regime takes the weight-streaming kernel, pick_gemm_config).
// (128 bytes stay for the kernel's static shared memory: 4 in the workspace instance.)
constexpr int64_t gemv_x_max(int64_t smem_optin) {
  const int64_t room = smem_optin - kGemvLutBytes - kGemvRedBytes - 128;
  return room < 0 ? 0 : room < kGemvXMaxBytes ? room : kGemvXMaxBytes;
}

constexpr int gemv_mrows(int64_t m) { return m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : m <= 8 ? 8 : 16; }

constexpr int64_t gemv_x_pitch(int64_t kcs) { return kcs * 128; }  // bytes per x row in shared memory
// The table, the reduction buffers, x.
constexpr int64_t gemv_smem(int mrows, int64_t kcs) { return kGemvLutBytes + kGemvRedBytes + mrows * gemv_x_pitch(kcs); }
// The most dynamic shared memory a plan can ask for on a device that gives a CTA up to smem_optin
// (the kernels' opt-in, and the stand-in size of the workspace plans' occupancy query).
constexpr int gemv_smem_cap(int64_t smem_optin) {
  const int64_t most = gemv_smem(kGemvMaxM, kGemvXMaxBytes / (kGemvMaxM * 128));
  return static_cast<int>(most < smem_optin ? most : smem_optin);
}
constexpr int gemv_ctas_per_sm(int64_t smem) {
  const int64_t c = kGemvSmemH100 / (smem + 1024);  // 1 KB reserved per CTA
  return static_cast<int>(c < kGemvMinBlocks ? c : kGemvMinBlocks);
}

// Clusters of s CTAs the device runs at once, as modelled where the occupancy API is not at hand
// (H100, 132 SMs, one ~200 KB CTA per SM, cudaOccupancyMaxActiveClusters: 66 of 2, 30 of 4, 15 of 8;
// not 33 and 16: a cluster must fit in one GPC).
constexpr int64_t gemv_workers_model(int sms, int s) {
  return s == 1 ? sms : s == 2 ? sms / 2 : s == 4 ? sms / 4 * 10 / 11 : sms / s * 15 / 16;
}

inline constexpr int64_t kGemvCostChunk = 2;      // per tile-chunk of the busiest CTA
inline constexpr int64_t kGemvCostCluster = 300;  // per row block summed across a cluster
inline constexpr int64_t kGemvCostXBytes = 512;   // x bytes per CTA per unit
inline constexpr int64_t kGemvCostShortRun = 25;  // a warp's run under kGemvMinRun chunks
inline constexpr int64_t kGemvCostWs = 800;       // per row block summed through the workspace
inline constexpr int64_t kSplitKWsMaxBytes = 64 << 20;  // a launch's split-K workspace at most (decode and wgmma GEMM)

// The workspace of a plan summed through it: each (row block, slice)'s 16 x rows partials in fp32, then
// one arrival counter per row block (Note [Workspace split]).
constexpr int64_t gemv_ws_floats(const GemvPlan& p) { return p.row_blocks * p.split * kGemvRows * p.tiles * 16; }
constexpr int64_t gemv_ws_bytes(const GemvPlan& p) { return 4 * gemv_ws_floats(p) + 4 * p.row_blocks; }

// The plan of (S, T) = (split, tiles) given the workers W(S); ok = false where x's slice fits no S.
// ws: S > 1 sums through the workspace (then W(S) is the resident CTAs / S). x_max: gemv_x_max of the device.
constexpr GemvPlan gemv_plan_for(int64_t m, int64_t n, int64_t k, int s, int t, int64_t workers, bool ws = false,
                                 int64_t x_max = kGemvXMaxBytes) {
  GemvPlan p{};
  const int64_t kc = k / 64, kcs = (kc + s - 1) / s;
  const int mrows = gemv_mrows(m);
  if (s > kc || (s - 1) * kcs >= kc || mrows * gemv_x_pitch(kcs) > x_max || workers < 1) return p;
  p.ok = true;
  p.split = s;
  p.tiles = t;
  p.mrows = mrows;
  p.kc_per_cta = kcs;
  p.kc_per_warp = (kcs + kGemvWarps / t - 1) / (kGemvWarps / t);
  p.row_blocks = ((n + kGemvRows - 1) / kGemvRows + t - 1) / t;
  p.workers = workers < p.row_blocks ? workers : p.row_blocks;
  p.smem = gemv_smem(mrows, kcs);
  p.ctas_per_sm = gemv_ctas_per_sm(p.smem);
  p.ws = ws && s > 1;
  if (p.ws && gemv_ws_bytes(p) > kSplitKWsMaxBytes) p.ok = false;
  return p;
}

// Modelled time of a plan (Note [Decode plan cost]), 0.01 us, times 16 plus the tie-break.
constexpr int64_t gemv_plan_cost(const GemvPlan& p) {
  const int64_t blocks = (p.row_blocks + p.workers - 1) / p.workers;  // per worker, the busiest
  int64_t c = kGemvCostChunk * blocks * p.tiles * p.kc_per_cta;
  if (p.split > 1) c += (p.ws ? kGemvCostWs : kGemvCostCluster) * blocks;
  c += p.mrows * gemv_x_pitch(p.kc_per_cta) / kGemvCostXBytes;
  if (p.kc_per_warp < kGemvMinRun) c += kGemvCostShortRun;
  return c * 16 + (p.split == 1 ? p.tiles : -p.tiles);  // ties: fewer tiles at S = 1, more with clusters
}

// clusters: the device can launch thread-block clusters (sm_90+).
// workers[s] (s = 1, 2, 4, 8; may be null): the clusters of s CTAs that run at once.
// ws_ctas: the CTAs that run at once when S > 1 sums through a workspace; 0: no workspace.
// Without clusters and workspace, S = 1. x_max: gemv_x_max of the device.
constexpr GemvPlan plan_gemv(int64_t m, int64_t n, int64_t k, int sms, bool clusters = true,
                             const int64_t* workers = nullptr, int64_t ws_ctas = 0, int64_t x_max = kGemvXMaxBytes) {
  GemvPlan best{};
  if (m < 1 || m > kGemvMaxM || n < 1 || k < 64 || k % 64 != 0 || sms < 1) return best;
  int64_t best_cost = 0;
  auto consider = [&](const GemvPlan& p) {
    if (!p.ok) return;
    const int64_t c = gemv_plan_cost(p);
    if (!best.ok || c < best_cost) {
      best = p;
      best_cost = c;
    }
  };
  for (int s = 1; s <= kGemvMaxSplit; s *= 2)
    for (int t = 1; t <= 8; t *= 2) {
      if (s == 1 || clusters)
        consider(gemv_plan_for(m, n, k, s, t, workers ? workers[s] : gemv_workers_model(sms, s), false, x_max));
      if (s > 1 && ws_ctas > 0) consider(gemv_plan_for(m, n, k, s, t, ws_ctas / s, true, x_max));
    }
  return best;
}

// Note [Ring kernel] (quant/gemv_ring.cuh). On sm_90 a producer warp streams the weight's chunks into
// a ring of shared-memory slots and 16 consumer warps each take one chunk of every stage. S = 1. The
// first version (session 11) held x's whole K in shared memory beside the ring (M <= 4 at K = 8192), one
// tile per row block, a stage being 16 chunks of one tile copied by two 1-D bulk copies; since session
// 12 x's slices travel in the stages (Note [Streamed x]), a stage covering G tiles, and session 13
// removed x resident (as fast or slower everywhere: Note [Streamed x]). The code-pair table sits at
// shared address 0x10000 so that a lookup's address is one PRMT (no base add): the sums and the
// barriers live below it (region A), the slots above it (region B).
inline constexpr int kRingWarps = 16;                     // consumer warps; one producer warp besides
inline constexpr int kRingThreads = 32 * (kRingWarps + 1);
inline constexpr int kRingChunks = 16;                    // chunks per stage: one per consumer warp
inline constexpr int kRingMaxSlots = 8;                   // slots at most (also the barriers' room)
inline constexpr int kRingSlots = 6;                      // slots used where they fit
inline constexpr int kRingPrefetchStages = 2;             // of the first row block, L2-prefetched before the PDL wait
// (the wide kernel at every GX 2..7: 0 and 8 stages slower, 4 slower or within 0.4 %; H200, session 41)
inline constexpr int kRingEarlyStages = 2;                // whose weights are loaded before the PDL wait (Note [Early weights])
inline constexpr int64_t kRingLutAddr = 0x10000;          // shared address of the table
inline constexpr int64_t kRingBaseMax = 4096;             // dynamic shared memory starts at most here
inline constexpr int64_t kRingSmem = 227 * 1024;          // dynamic shared memory of a CTA (H100: all)

// Note [Early weights]. The kernel launches as a programmatic dependent (PDL) of the kernel before it
// and triggers its own dependents at once, so a call's CTAs enter as the previous call's leave and
// wait in griddepcontrol.wait until the last of them has finished: ~1-1.5 us after the median one
// (H100, %globaltimer per CTA, 8192^2 and 4096x14336 M = 1 / 16; docs/NOTES.md "Where a decode call's
// time goes"). The first stage then arrived 0.7-0.9 us after the wait. The producer now issues the
// weight boxes (codes, scales) of the CTA's first kRingEarlyStages stages before the wait and their x
// boxes after it, the other stages as before; the L2 prefetch covers the stages after those. The
// weights are read before the previous kernel has finished: include/vstack/fp4.h states the
// condition (vstack's kernels that write weights do not trigger dependents early). Two stages, not
// the ring: with all six the first stage's x queued behind six stages of weights (first data 1.3-1.8
// us after the wait against 0.7-0.9) and M = 16 ran 2-7 % slower; with 2 every cell of 27 (3 shapes x
// M = 1, 8, 16 x NVFP4, MXFP4, NF4) ran 0.4-4.3 % faster than with none (median of two alternations;
// 1 stage and 3 were in between), but 4096^2 M = 16 2.4-4.2 % slower (not understood; docs/NOTES.md).
// The wide kernel's producer issues those boxes as soon as it has initialised the barriers, before the CTA
// barrier that waits for the consumers' table (32 KB of shared stores at ~128 bytes a cycle: ~0.13 us of
// every CTA's start), so they travel while the table is built: 0.977x the time over 80 cells (four
// formats, the four bar shapes, M = 1..16; NF4 formats 0.93-0.98, 4096^2 0.93-0.99, none slower than
// 1.003; H200, session 33; bench/RESULTS.md). The ring kernel's did not gain as a whole (2048x8192
// 0.96-0.97 at M <= 8, 1.00-1.01 at M = 16; 28672x4096 1.00-1.02; its loop got one SASS instruction
// longer), so it still issues them after the barrier. The wide instances take 3 stages at MT = 1 where
// GX >= 6, at GX 5 where the columns are packed, and for NF4 / NF4_DQ at GX 3 and 5, and 4 at GX 4
// (wide_early_stages, sessions 40, 41 and 46). VSTACK_GEMV_RING_EARLY=<n> (0..kRingMaxSlots) sets the count
// for benchmarks.

// The ring kernel's buffers, valid wherever dynamic shared memory starts in [0, kRingBaseMax]: region
// A, [0, 0x10000 - kRingBaseMax) from the start of dynamic shared memory, holds the consumer warps'
// sums (two buffers of [16 warps][8 MT columns][kRingSumPitch] fp32, ring_red_bytes) and then the barriers
// (full[kRingMaxSlots], empty[kRingMaxSlots]), the same for every launch of an instance; region B,
// kRingSmem - 0x20000 bytes from the table's end (shared address 0x20000), the slots, which RingLayout
// describes.
struct RingLayout {
  bool ok = false;
  int64_t x = 0;           // a slot's x chunks, from its start (after the codes and scales)
  int64_t x_pitch = 0;     // bytes per chunk of x in a slot: its M rows of 64 values
  int groups = 0;          // G tiles per row block (Note [Streamed x])
  int64_t slot_bytes = 0;  // codes of 16 chunks, then their scales, then x's chunks
  int slots = 0;           // in B from its start, at most kRingMaxSlots
};

constexpr int64_t ring_slot_bytes(int scale_bytes) { return kRingChunks * (512 + 16 * scale_bytes); }
inline constexpr int64_t kRingABytes = kRingLutAddr - kRingBaseMax;                   // A, below the table, any base
inline constexpr int64_t kRingBBytes = kRingSmem - kRingLutAddr - kGemvLutBytes;      // B, above it, any base
// The sums of a row block: [16 warps][8 MT columns][kRingSumPitch] fp32, a column's 16 rows first; the
// pitch of 20 makes both the warps' fragment stores (lanes: 8 rows x 4 column pairs) and the
// epilogue's reads (consecutive rows) free of bank conflicts.
inline constexpr int kRingSumPitch = 20;
constexpr int64_t ring_red_bytes(int64_t m) { return 2 * kRingWarps * 8 * (m > 8 ? 2 : 1) * kRingSumPitch * 4; }
static_assert(ring_red_bytes(kGemvMaxM) + 2 * kRingMaxSlots * 8 <= kRingABytes, "the sums and the barriers fit A");

// Note [Streamed x]. Each slot carries x's slice of the stage beside the weight's chunks, and a stage
// covers G tiles (a row block) x 16 / G chunks (so x need not fit beside the ring: M >= 8 at K = 8192):
// consumer warp w takes tile w / (16 / G), chunk w % (16 / G) of every stage, so a slice of x serves
// G tiles. The producer loads a stage with three TMA box copies (codes, scales: boxes of G tiles x
// 16 / G chunks of the tile layout; x: 16 / G chunks x M rows, 128-byte swizzled; chunks >= K / 64
// zero-filled): a 1-D bulk copy per tile and x row cost ~22 ns each on the H100 (8192^2 M = 1,
// G = 4: 9 copies per stage 21.2 us against 3 per stage 16.9), and the box copies are one per
// operand whatever G and M. x's box has exactly M rows: a box of 8 rows zero-filling those past M
// was slower the fewer rows were real (28672x8192, G = 1: M = 1 69.6 us, M = 8 55.5). The mma
// columns past M read whatever lies after the chunk's rows (never stored). The slots sit in region
// B only, 1024-byte aligned (the swizzle follows the shared address bits; B starts at 0x20000).
// Against x resident (session 12, H100, final kernels, two alternations): at M = 1 as fast or up to 7 %
// faster in 16 of the 18 NVFP4 / MXFP4 / NF4 cells of six shapes (mxfp4 14336x4096 14.6-14.9 -> 13.7-13.8
// us, nvfp4 4096x14336 14.6 -> 14.1), the other two +0.6 and +0.8 % (28672x8192, within the spread),
// NF4_DQ 9-25 % faster; at M = 2..8 as fast or up to 10 % faster (4096x14336 nvfp4 M = 2 16.0 -> 14.3).
inline constexpr int64_t kRingSlotAlign = 1024;
inline constexpr int kRingMinSlots = 3;  // 75 KB in flight where the slots are 25 KB (M <= 8 at G = 1, M = 16 at G = 2)
static_assert(kRingEarlyStages <= kRingMinSlots, "the early stages are the first slots of the ring");
constexpr int64_t ring_x_rows(int64_t m) { return m > 8 ? 16 : 8; }  // x rows per chunk in a slot
constexpr RingLayout ring_layout(int64_t m, int scale_bytes, int g) {
  RingLayout l{};
  if (m < 1 || m > kGemvMaxM || (g != 1 && g != 2 && g != 4 && g != 8)) return l;
  l.groups = g;
  l.x_pitch = m * 128;  // bytes per chunk of x: its M rows of 64 k values
  l.x = round_up(ring_slot_bytes(scale_bytes), kRingSlotAlign);
  // room for the last chunk's ldmatrix rows past M (8 or 16 rows from its first)
  l.slot_bytes = round_up(l.x + kRingChunks / g * ring_x_rows(m) * 128, kRingSlotAlign);
  const int64_t n_b = kRingBBytes / l.slot_bytes;
  l.slots = static_cast<int>(n_b < kRingMaxSlots ? n_b : kRingMaxSlots);
  l.ok = l.slots >= kRingMinSlots;
  return l;
}

// Tiles per row block of the streamed-x ring for an n x k weight over `sms` CTAs: of the G in {1, 2, 4,
// 8} whose layout fits, the one with the least modelled time of the busiest CTA, rounds of row blocks
// x (G tiles x K / 64 chunks + kRingRowBlockCost), the larger on ties. The constant, in chunks, is a
// row block's own cost (its pipeline fill and drain, its sums), fitted to 28672x8192 with every G
// forced (H100, nvfp4, M = 1..8, session 12: 0.8 us against 3.1 per tile of 128 chunks); the model
// then orders the G of 14336x4096, 8192^2 and 4096^2 as measured (docs/NOTES.md, "Streamed x").
inline constexpr int64_t kRingRowBlockCost = 33;
// That model: `tiles` tiles in row blocks of `per_block` over `sms` CTAs, K / 64 = kc chunks a tile.
constexpr int64_t ring_rows_cost(int64_t tiles, int64_t per_block, int64_t kc, int sms) {
  const int64_t blocks = (tiles + per_block - 1) / per_block;
  return (blocks + sms - 1) / sms * (per_block * kc + kRingRowBlockCost);
}
constexpr int ring_groups(int64_t m, int64_t n, int64_t k, int scale_bytes, int sms) {
  const int64_t tiles = (n + kGemvRows - 1) / kGemvRows;
  int best = 0;
  int64_t best_cost = 0;
  for (int g = 1; g <= 8; g *= 2) {
    if (!ring_layout(m, scale_bytes, g).ok) continue;
    const int64_t cost = ring_rows_cost(tiles, g, k / 64, sms);
    if (best == 0 || cost <= best_cost) {
      best = g;
      best_cost = cost;
    }
  }
  return best;
}

// The decode launcher's choice (forced: -1 unset, 0 off, 1 on wherever it fits): kRingNone (the
// register-load kernel), or the G > 0 of the streamed-x ring (Note [Streamed x]); forced_g > 0 forces
// that G wherever its layout fits. The ring where the device has it (has_ring: sm_90 builds, cc >= 90,
// its shared memory); NF4_DQ only where a row spans at most two scale2 groups (K <= 64 kDqGroup;
// quant/gemv_ring.cuh).
inline constexpr int kRingNone = -1;
constexpr int gemv_ring_mode(int64_t m, int64_t n, int64_t k, Format f, bool has_ring, int forced, int sms,
                             int forced_g = 0) {
  if (!has_ring || forced == 0 || m < 1 || m > kGemvMaxM || n < 1 || k < 64 || k % 64 != 0 || sms < 1)
    return kRingNone;
  if (f == Format::nf4_dq && k > 64 * kDqGroup) return kRingNone;
  const int sb = chunk_scale_bytes(f);
  if (forced_g > 0 && ring_layout(m, sb, forced_g).ok) return forced_g;
  const int g = ring_groups(m, n, k, sb, sms);
  return g > 0 ? g : kRingNone;
}

// Note [Wide row blocks] (quant/gemv_ring_wide.cuh). A row block's G tiles share a stage of 16 chunks
// (G x 16 / G), so G is a power of two, and where the tiles are not a multiple of G x SMs the busiest
// CTA's stages are rounded up: 14336x4096 (896 tiles) at M <= 8 takes G = 8, 112 row blocks on 132 SMs,
// 32 stages each (G = 1, 28 stages a CTA in seven row blocks, ran 1.07-1.14x slower: each row block
// pays its fill, drain and sums, and loads x again). The wide kernel takes a row block of GX =
// ceil(tiles / SMs) tiles, any GX, slice-major: for each slice of 16 chunks of K, x's slice is loaded
// once (its own two buffers) and each warp keeps its chunk's fragments in registers across the GX
// tiles, while the stages bring one tile x 16 chunks each (the G = 1 boxes). So every warp has one
// tile-chunk a stage, a CTA GX x K / 1024 stages in one row block, and x's fragments are read once a
// slice for GX tiles instead of once a stage. One round only: the row block's sums (GX tiles x 16 warps
// of fragments) alias the slots once the last stage is consumed. Instances GX = 2..7, within 112
// registers (kWideThreads; the sums take GX x MT x 4). NF4_DQ where a
// row's blocks lie in one scale2 group (K / 64 divides kDqGroup: one value per row and tile), or in two
// at GX <= kWideDq2Max (4096x14336).
// Measured (H100, driver 580.159.04, 2026-11-23, bench_fp4.py, bf16, the choosing call: wide two runs,
// base one or two; bench/RESULTS.md "Session 17"), wide against the G plans at M = 1 / 8 / 16, the four
// formats' range:
//   GX 2 (4096^2) 0.90-0.92 / 0.92-0.95 / 0.94-1.00; (4096x14336) 0.95-0.98 / 0.96-0.99 / 0.93-0.99, and
//        0.98-1.01 / 0.99-1.02 / 0.96-1.00 in a later call of four alternations (within its spread, +-2 %)
//   GX 3 (6144x4096) 0.83-0.84 / 0.85-0.86 / 0.87-0.92
//   GX 4 (8192^2) 0.94-0.97 / 0.97-0.98 / 1.00-1.06
//   GX 5 (10240x8192) 0.86-0.93 / 0.88-0.94 / 0.86-0.90
//   GX 6 (12288x4096) NVFP4, NF4 0.99 / 1.01-1.02 / 0.98, NF4_DQ 0.95 / 0.97 / 0.94, MXFP4 1.06 / 1.09 / 1.00
//   GX 7 (14336x4096) 0.94-0.96 / 0.97-0.98 / 1.02-1.15 but MXFP4 1.02 / 1.05 at M <= 8
// The row-block model (ring_rows_cost) predicted 0.77-0.88 where GX is not a power of two and 1.00 where
// it is: it counts a CTA's stages, but where the G plan already reads 78-80 % of the HBM stream
// (12288x4096, 14336x4096 at M <= 8) there is little left to gain, and where it reads 55-70 % (4096^2,
// 6144x4096, M = 16) x's fragments read once a slice pay even at a power of two. The losses are the
// instances that spill at the 96-register cap: MXFP4 (the E8M0 pair decode) at MT = 1, GX >= 6 (32 bytes),
// and MT = 2 at GX = 7 (16-64 bytes); and 8192^2 at M = 16 (GX = 4), not understood (session 19: the
// ring's depth, below). The launcher took the wide kernel where it was faster (ring_wide_pays, until
// session 20).
// Session 18 (same H100, four alternations a call): MT = 2 with 112 registers (a producer warpgroup
// lending its registers, kWideThreads) against 96, both forced: GX 5 0.98-0.99, GX 6 0.97-1.01, GX 2-3
// 0.98-1.01, GX 4 still 1.01-1.05 against the G plan (so not the spills); GX 7 against the G plan NVFP4
// 0.97, NF4_DQ 1.00, NF4 1.01, MXFP4 1.04, so GX 7 is taken for NVFP4 only. The launcher's choice at
// M = 16 against session 17's: 0.99 over 28 cells, 14336x4096 NVFP4 0.95 (64.7 -> 67.9 % of the read
// stream), 4096x14336 / 4096^2 NVFP4 0.97, MXFP4 at GX 6 1.015 (bench/RESULTS.md "Session 18").
// Session 19: the x buffers moved to region A where they fit (kWideXAddr; 7 slots at MT = 2 instead of 3,
// 8 at MT = 1 instead of 7) and the ring became R GX slots with constant slot indices in the consumers'
// unrolled loop (wide_ring_slots: ~7 SASS fewer per tile-chunk at MT = 2 GX = 4, 107 -> 99.5). Forced
// wherever an instance applies, against HEAD's choice (four alternations; bench/RESULTS.md "Session
// 19"): geometric mean 0.969 over 84 cells (the slots alone 0.989); at M = 16 0.90-0.99 everywhere, the
// G plans it now replaces included (8192^2 GX 4 0.94-0.99, 14336x4096 GX 7 0.93-0.97); at M <= 8 0.93-1.01
// but MXFP4 at GX 7 (14336x4096, M = 8) 1.017 against the G plan. So every MT = 2 instance pays, and
// MT = 1 but MXFP4 at GX = 7. Session 17's unexplained loss at 8192^2 M = 16 was mostly the ring's depth:
// the slots alone took it from 1.01-1.05x the G plan to 0.95-1.01x, the constant slots to 0.94-0.99x.
// Session 20: MT = 1 with the producer warpgroup too (kWideThreads), forced, against the launcher's
// choice at M = 1 / 8 (four alternations): MXFP4 GX 7 0.934 / 0.970 against the G plan, 0.95 against
// the 17-warp instance; GX 6 MXFP4 0.983 / 0.973; the other cells of GX 4, 6, 7 0.98-1.00. So the wide
// kernel is taken wherever an instance applies (ring_wide_tiles).
inline constexpr int kRingWideMax = 7;
// The wide kernel's CTA: the ring kernel's 16 consumer warps (8 where chunks add by FFMA: wide_chunk_warps
// below) and a producer warpgroup (one lane works) that hands registers to the consumers with
// setmaxnreg, 112 against 96 (a 544-thread CTA of 17 warps gets no more than 96: docs/NOTES.md). The
// MT = 2 instances spilled 8-64 bytes at 96 and none or a few bytes (MXFP4 at GX >= 5) at 112. A CTA
// launches with 96 a thread (640 threads) and setmaxnreg moves registers within the CTA's own pool only
// (120 for the consumers hung). MT = 1 kept 17 warps until session 20: with session 18's ring it
// measured 1-3 % slower at GX = 7 and within 1 % elsewhere; with session 19's (deeper, constant slots)
// 0.93-0.97x at MXFP4 GX = 7 (the instance that spilled 32 bytes at 96) and 0.97-1.00x elsewhere (Note
// [Wide row blocks]).
inline constexpr int kWideProducerRegs = 24;
// A CTA of 16 / cw consumer warps and the producer warpgroup; its registers at launch, and the
// consumers' after setmaxnreg: all that the producer warpgroup lends, at most 240 (setmaxnreg's limit
// is 256).
constexpr int wide_warps(int cw) { return kRingChunks / cw; }
constexpr int wide_threads(int cw) { return 32 * (wide_warps(cw) + 4); }
constexpr int wide_launch_regs(int cw) { return 65536 / wide_threads(cw) / 8 * 8; }
constexpr int wide_consumer_regs(int cw) {
  const int r = (wide_threads(cw) * wide_launch_regs(cw) - 128 * kWideProducerRegs) / (32 * wide_warps(cw)) / 8 * 8;
  return r < 240 ? r : 240;
}
// The 16-warp CTA: 640 threads, 96 registers at launch, 112 for the consumers.
inline constexpr int kWideThreads = wide_threads(1);
inline constexpr int kWideLaunchRegs = wide_launch_regs(1);
inline constexpr int kWideConsumerRegs = wide_consumer_regs(1);
static_assert(kRingWarps * 32 * kWideConsumerRegs + 128 * kWideProducerRegs <= kWideThreads * kWideLaunchRegs,
              "setmaxnreg within the CTA's registers");
constexpr bool ring_wide_instance(int64_t gx) { return gx >= 2 && gx <= kRingWideMax; }
// Chunks of a stage per consumer warp (CW) in the wide instances (wide_chunk_warps, below; Note [Two chunks a warp]).
// CW = 2: 8 consumer warps (wide_threads: 384, registers up to 240 after setmaxnreg) take chunks w and
// w + 8 of every stage; the epilogue adds half as many partial sums, and each warp has two chunks'
// lookups to overlap where it had one. Taken wherever the chunks add into the sums by FFMA
// (wide_chunks_by_ffma): the NF4 formats, and NVFP4 and MXFP4 where their columns are packed or they take
// the fp32 scale path; where their scales are in A the mma accumulates through the warp's chunks instead,
// one chain, and 16 warps of one chunk stay.
// Note [Two chunks a warp] (H100, driver 580.159.04, 2026-11-24, bench_fp4.py bf16, three alternations a
// call against 16 warps; bench/RESULTS.md "Session 24"): NF4 / NF4_DQ at M = 16 0.95-0.99 (14336x4096
// NF4_DQ 73.0 -> 75.9 % of the read stream), at M = 1 / 8 0.97-1.00. NVFP4 (two sets of sums, so that no
// mma chain runs through both chunks) 0.98-1.03: not taken. MXFP4 lost: 1.13-1.22x with a fold vote per
// chunk, 1.02-1.05x with one vote for both chunks, 1.00-1.07x on the fp32-scale path without the fold.
// An upper bound measured first (an epilogue adding one warp's sums, wrong results): 0.93-0.95 at
// 14336x4096 M = 16, 0.98-1.0 at 4096x14336.
// The same choice at both MT (measured at both).
// pack: the packed instances too (Note [Packed columns]: their chunks add into the sums by FFMA); MXFP4's
// since its loop has a copy without the E8M0 special-byte branch (Note [MXFP4 without the special bytes] in
// quant/gemv_kernel.cuh). Then every unpacked instance on the fp32 scale path (H200, driver 580.159.04,
// 2026-11-29, lab fcw against a control built the same way, three rotated rounds, M = 3, 4, 8; bench/RESULTS.md
// "Session 36"): NVFP4 bf16 (MT = 1, GX 2, 3, 6, 7) 0.952-0.962 at GX 3 and 6, 0.975-0.987 at GX 7, 0.982-0.991
// at 4096^2, 0.993-1.000 at 4096x14336; MXFP4 at M = 8 (M <= 4 is packed) f16 0.897 at GX 7 (14336x4096: the
// 16-warp instance had no flagged copy, since it spilled; 69.1 -> 77.1 % of the read stream), 0.948 at GX 6,
// 0.970-0.992 elsewhere, bf16 GX 2, 3 0.969-0.991. The instances that stayed: 0.998-1.004. Session 35's nvcw2
// (two chunks at every NVFP4 instance) measured the other side: 1.02-1.04 where the scales are in A (GX 4,
// M = 16). With two chunks a warp the fp32 path then beat the scales in A for bf16 x at GX 4, 5 and at MT = 2
// (lab sa2: 0.967-0.974 and 0.979-0.993, 4096x14336 M = 16 1.004), not for f16 x (1.04-1.06 at MT = 2), so
// nvfp4_scale_in_a sent every bf16 wide instance to the fp32 path (Note [NVFP4 scale in A]); since session 42 the
// MT = 2 ones take the scales in A again at one chunk a warp, with pairs made by a shift (Note [NVFP4 shifted
// pairs] in quant/gemv_kernel.cuh), where the tensor's range flag holds.
// Note [Packed columns]. At M = 1 the wide kernel's mma uses one of its 8 columns, yet a chunk of NVFP4
// (four scale groups: one a k16 step) costs each lane 16 FFMA and 8 scale conversions to scale the four
// steps' partials of all 8 columns. Where M x NG <= 8 (NG = chunk_groups: NVFP4 4, MXFP4 2), column
// m NG + j instead holds x row m for the steps of scale group j and zero for the others (those lanes'
// ldmatrix rows point at a zero line of the x buffer: no instruction a slice), so one mma chain over the
// chunk's four steps leaves each (row, group) partial in its own column: a lane's four sums are four
// (row, group) pairs, each scaled by one FFMA, and the epilogue adds a row's NG columns (in the lane and
// across a lane pair) before the warps' sums meet. NVFP4 per tile-chunk: 4 FFMA and 2 + 4 conversions (one
// PRMT picks the lane's two groups) against 16 and 4 + 8. MXFP4: 4 FFMA against 8, the same E8M0 decode. NF4
// (one group a chunk) gains nothing. The cost: the four mma of a chunk are one chain where they were four
// (the next tile's lookups overlap it). SASS of the NVFP4 bf16 loop: 64 instructions a tile-chunk against
// 78.5 (GX 4), the same ~19 % at every GX; MXFP4 3-4 %. No instance spills (the unpacked MXFP4 f16 GX = 7
// one spills 24 bytes).
// Measured (H200, driver 580.159.04, 2026-11-28, bench_fp4.py --decode, one library with and without
// VSTACK_GEMV_PACK=0, three rounds in rotated order, bench/RESULTS.md "Session 32"), unpacked / packed:
// NVFP4 M = 1, 2 1.018-1.043 over GX 2..6 (8192^2 M = 1 11.70 -> 11.22 us, 74.6 -> 77.8 % of the read
// stream; 4096x14336 74.1 -> 76.5 %), 1.006-1.008 at GX 7, bf16 and f16 alike; M = 4 (not packed) 1.000.
// MXFP4 f16 M <= 4 1.007-1.015, 1.06 at GX 7 (the spill); bf16 at GX 2-3 0.992-1.005. A first version
// whose epilogue added a row's NG columns from shared memory (4 x 16 reads an output) ran 0.5-1.4 % slower
// than unpacked at GX 7 (14336x4096) and 0.6-3.7 % faster at GX 2 and 4.
// Packed, NVFP4's chunks add into the sums by FFMA as NF4's do, so it takes two chunks a warp too (Note [Two
// chunks a warp]): against one (lab builds, same call, three rounds) 0.983-0.994 at GX 4..7 and 4096x14336,
// 1.000 at 4096^2, 0.999-1.003 at GX 3 (M = 1, 2; 8192^2 M = 1 11.25 -> 11.10 us, 78.6 % of the stream).
// MXFP4's packed instances stayed at one then: two ran 1.08-1.12x (the E8M0 decode's branch, as unpacked in
// session 24); without the branch two gained (Note [MXFP4 without the special bytes]). Until session 37 bf16
// MXFP4 did not pack from GX 4, where it folded its scales into A (Note [No MXFP4 fold at M <= 8] in
// quant/gemv_kernel.cuh).
// Whether MXFP4's kernel of MT column tiles folds its scales into A (bf16 by the warp's vote or the range flag,
// f16 by the flag: quant/gemv_kernel.cuh) rather than taking the fp32 path: at MT = 2 outside the wide kernel,
// whose instances take the fp32 path at two chunks a warp (Note [MXFP4 fp32 path at M > 8] in
// quant/gemv_kernel.cuh). gx: the wide instance's GX (0: any other kernel).
constexpr bool mxfp4_folds(int mt, int gx) { return mt == 2 && gx == 0; }
// MXFP4's wide instances at MT = 2 decode E8M0 in pairs in their loop copy with the special bytes up to this GX,
// and byte by byte above it (Note [MXFP4 fp32 path at M > 8]).
inline constexpr int kWideMxPairsMaxGx = 2;
// Whether MXFP4's fp32 path decodes a chunk's four E8M0 bytes as pairs (Note [E8M0 pairs] in quant/format.hpp)
// rather than byte by byte: wherever MXFP4 does not fold, but in the wide instances at MT = 2 above
// kWideMxPairsMaxGx, whose loop copy with the special bytes (flagged: false) decodes byte by byte. flagged: the
// loop copy without the special bytes (Note [MXFP4 without the special bytes]).
constexpr bool mxfp4_e8m0_pairs(int mt, int gx, bool flagged) {
  return !mxfp4_folds(mt, gx) && (mt == 1 || flagged || gx <= kWideMxPairsMaxGx);
}
// Scale groups of a 64-k chunk.
constexpr int chunk_groups(Format f) { return 64 / block_size(f); }
// Whether NVFP4's block scales multiply the A fragments in x's dtype (Note [NVFP4 scale in A] in
// quant/gemv_kernel.cuh, with the measurements) at MT column tiles, in every kernel where the columns are not
// packed: f16 x always; bf16 x at MT = 2 only. bf16's MT = 1 wide instances take the fp32 path and so two
// chunks a warp (wide_chunks_by_ffma), which measured faster at every GX (session 36 against bf16 pairs made by
// widening f16 ones; session 42 against the shifted pairs at two chunks a warp, each with its own sums:
// 1.00-1.03). Its MT = 2 wide instances take the shifted pairs where the tensor's range flag holds
// (nvfp4_shifted_pairs), else the fp32 path, at one chunk a warp either way.
constexpr bool nvfp4_scale_in_a(bool bf16, int mt) { return !bf16 || mt == 2; }
// Whether NVFP4's wide instance of GX tiles at MT column tiles takes bf16 scale pairs by a shift (Note [NVFP4
// shifted pairs] in quant/gemv_kernel.cuh) where the tensor's range flag holds: bf16 x at MT = 2, one chunk a
// warp (scale in A). Its table holds the E2M1 values times 2^120.
constexpr bool nvfp4_shifted_pairs(bool bf16, int mt, int gx) { return bf16 && mt == 2 && ring_wide_instance(gx); }
// The PRMT selector of k16 step stp's pair (Note [NVFP4 shifted pairs]): from the scale words of rows g (bytes 0..3)
// and g + 8 (4..7), bytes stp, sign(stp), 4 + stp, sign(4 + stp) (a nibble with bit 3 set copies the sign bit).
constexpr uint32_t nvfp4_shifted_pair_sel(int stp) {
  const uint32_t a = static_cast<uint32_t>(stp), b = a + 4;
  return a | ((8 | a) << 4) | (b << 8) | ((8 | b) << 12);
}
// Whether the wide kernel packs its columns at M (every GX and x dtype).
constexpr bool wide_pack(Format f, int64_t m) {
  const int ng = chunk_groups(f);
  return ng > 1 && m >= 1 && m * ng <= 8;
}
// Whether the wide instance's chunks add into the sums by FFMA, each chunk's mma starting from zero (the
// NF4 formats; NVFP4 and MXFP4 where their columns are packed or they take the fp32 scale path), rather than
// accumulating in the mma through the warp's chunks (the scales in A: nvfp4_scale_in_a, MXFP4's fold). MXFP4's
// wide instances have the fp32 path at MT = 1 (Note [No MXFP4 fold at M <= 8]) and at MT = 2 (Note [MXFP4 fp32
// path at M > 8]).
constexpr bool wide_chunks_by_ffma(Format f, bool bf16, int mt, int gx, bool pack) {
  if (f == Format::nvfp4) return pack || !nvfp4_scale_in_a(bf16, mt);
  if (f == Format::mxfp4) return pack || !mxfp4_folds(mt, gx);
  return true;
}
// Chunks of a stage per consumer warp (Note [Two chunks a warp]): two wherever they add by FFMA.
constexpr int wide_chunk_warps(Format f, bool bf16, int mt, int gx, bool pack) {
  return wide_chunks_by_ffma(f, bf16, mt, gx, pack) ? 2 : 1;
}
// Note [Early x]. At MT = 2 the wide instance's producer waits for the kernel before (griddepcontrol.wait)
// and issues slice 0's x box (16 chunks x 16 rows, 32 KB) right after its early weights, before the CTA
// barrier that waits for the consumers' table build; at MT = 1 it issues it after that barrier, as the
// other slices. H200, driver 580.159.04, 2026-12-01, three rotated rounds against the same kernels without
// it (bench/RESULTS.md "Session 40", lab 3 of docs/labs/): M = 9..16 0.93-1.00 (4096^2 NF4 M = 16 0.932,
// 44.0 -> 47.2 % of the read stream; 8192^2 0.98-0.99; 4096x14336 0.97-1.00), M <= 8 0.996-1.005 (its
// kernels are unchanged). At MT = 1 too (lab 2 of session 39, with the MXFP4 flag load also moved early)
// NF4 at GX 2 lost 1-2 %; MXFP4's 1-7 % there was the flag move's alone (lab 3b, session 40: 1.01-1.07 at
// every M with x where it was).
constexpr bool wide_early_x(int mt) { return mt == 2; }
// The wide instance's early weight stages (Note [Early weights]), at MT = 1: a whole slice (4) where GX = 4; 3 where
// GX >= 6, at GX = 5 where the columns are packed (pk: NVFP4 M <= 2, MXFP4 M <= 4), and for NF4 and NF4_DQ at
// GX = 3 and 5; else kRingEarlyStages.
// H200, driver 580.159.04, 2026-12-01, three rotated rounds of VSTACK_GEMV_RING_EARLY = 3 against 2 on one library
// (bench/RESULTS.md "Session 40"): at M <= 8 GX 6 and 7 (12288 and 14336 x 4096 / 8192) 0.971-0.999 in every
// format, GX 5 (10240x4096) 0.975-0.989 but NVFP4 M = 4, 8 1.005-1.008; GX 3 (6144x4096) NF4 0.961-0.974, NF4_DQ
// 0.991-0.998, NVFP4 / MXFP4 0.98-1.024; GX 4 (8192^2) NF4 / NF4_DQ 0.992-0.999, NVFP4 / MXFP4 0.999-1.010; GX 2
// 0.98-1.03; at M = 16 1.00-1.04 at K = 4096 (slice 0's x, 32 KB, queues behind the early weights: Note [Early
// x]). Session 41 timed the rule of session 40 (3 wherever MT = 1 and GX >= 5, or NF4 formats and GX >= 3) as
// built against 2 everywhere (the variable), bf16 and f16 x: GX 3 NF4 0.963-0.982, NF4_DQ 0.990-1.002; GX 4 NF4
// formats 0.992-1.002; GX 5..7 M <= 8 0.974-0.999, but GX 5's unpacked NVFP4 / MXFP4 (NVFP4 M = 4, 8, MXFP4 M = 8)
// 1.003-1.011; every other cell 0.995-1.003. Hence the pk term (those instances keep 2).
// At GX 4 and MT = 1 the ring holds two slices (Note [Two slices at GX 4]) and one whole slice, 4 stages,
// goes early: session 46 (H200, 2026-12-02, VSTACK_GEMV_RING_EARLY on one library, 8192^2 M = 1, 4, 8, three
// rotated rounds) timed 4 against the counts chosen with 4 slots (3 NF4 formats, 2 NVFP4 / MXFP4): MXFP4
// 0.972-0.983, NF4 0.985-0.991, NF4_DQ 0.987-0.994, NVFP4 0.981-0.982 packed (M = 1), 0.985-0.998
// unpacked; 3 against them: NVFP4 / MXFP4 0.982-0.994, the NF4 formats 0.999-1.002; 2 against 3 for the NF4
// formats 1.013-1.023.
constexpr int wide_early_stages(Format f, int gx, int mt, bool pk) {
  if (mt == 1 && gx == 4) return gx;
  const bool three = gx >= 6 || (gx == 5 && pk) || (uses_nf4_table(f) && gx >= 3);
  return mt == 1 && three ? 3 : kRingEarlyStages;
}
// NF4_DQ: the instances up to this GX also take K whose rows span two scale2 groups (K / 64 <= kDqGroup
// and not a divisor of it: three values a row and tile in registers), the others one group only.
inline constexpr int kWideDq2Max = 3;

// An x buffer: 16 chunks x 8 (M <= 8) or 16 rows of 128 bytes; the ldmatrix rows past M stay in it.
constexpr int64_t wide_x_bytes(int mt) { return kRingChunks * 8 * mt * 128; }
// Where columns are packed (M <= 4), the last 128-byte line of each MT = 1 x buffer is zero: the mma
// columns read it at the steps of the other scale groups (Note [Packed columns]); x fills 16 M lines.
inline constexpr int kWideZeroLine = static_cast<int>(wide_x_bytes(1) / 128) - 1;
static_assert(kRingChunks * 4 <= kWideZeroLine, "the packed M's x lines lie below the zero line");
constexpr int64_t wide_slot_bytes(int sb) { return round_up(ring_slot_bytes(sb), kRingSlotAlign); }
// The wide kernel's region A holds only its barriers (its sums alias B), so x buffers go there too, from
// kWideXAddr (1 KB-aligned for the swizzle, above the barriers wherever dynamic shared memory starts):
// both at MT = 1 (16 KB each), one at MT = 2 (32 KB); the rest lie in B before the slots. (Session 19:
// this gave MT = 2 seven slots instead of three, MT = 1 eight instead of seven.)
inline constexpr int64_t kWideXAddr = 0x8000;
static_assert(kWideXAddr % kRingSlotAlign == 0 && kWideXAddr >= kRingBaseMax + (2 * kRingMaxSlots + 4) * 8,
              "the x buffers in A clear the barriers");
constexpr int wide_x_in_a(int mt) {
  const int64_t n = (kRingLutAddr - kWideXAddr) / wide_x_bytes(mt);
  return static_cast<int>(n < 2 ? n : 2);
}
// The most slots that fit B beside the x buffers not in A.
constexpr int wide_slots(int sb, int mt) {
  const int64_t n = (kRingBBytes - (2 - wide_x_in_a(mt)) * wide_x_bytes(mt)) / wide_slot_bytes(sb);
  return static_cast<int>(n < kRingMaxSlots ? n : kRingMaxSlots);
}
// The ring of the GX instance: R slices of K a round, R GX slots, so the slot of stage (slice s, tile t)
// is (s mod R) GX + t, a constant in the consumers' unrolled loop (Note [Wide row blocks], session 19).
// Note [Two slices at GX 4]. The ring's depth is a balance between the bytes in flight (Little's law: the H200
// streams 1.4x the H100's bytes at about the same latency) and what a deeper ring costs: an unrolled loop of
// R GX stages and, at a CTA's start, more stages' boxes queued ahead of the first ones. Lab r45 (H200,
// 2026-12-02, 3 rotated rounds, docs/labs/s45_r45_two_slices_gx45.patch; bench/RESULTS.md "Session 45") gave
// GX 4 and 5 two slices a round, with region A below the x buffers holding the slots region B lacks:
// - GX 4, MT = 1 (8 slots, all in B): NF4 and NF4_DQ 0.975-0.981 at 8192^2 M = 1..8, NVFP4 f16 0.976-0.994,
//   NVFP4 bf16 and MXFP4 0.991-1.004; kept. As built, in a later call: NF4 0.974-0.978, NF4_DQ 0.975-0.980
//   (8192^2 M = 8 74.7 -> 76.2 % of the read stream), NVFP4 f16 0.976-0.995, NVFP4 bf16 0.996-1.003, MXFP4
//   0.991-1.002; every other cell of 8192^2 and 4096x14336 0.997-1.003; y bit-identical (matmul_digest.py);
// - GX 4, MT = 2 (8 slots, one in A): 1.015-1.031 but NVFP4 bf16 0.98-0.99; not kept; session 53's lab x1 (one x
//   buffer, all 8 slots in B, docs/labs/s53_x1_one_x_buffer_gx4.patch) 1.00-1.04 (NVFP4 1.00, MXFP4 1.03-1.04);
// - GX 5 (10 slots; K = 4096, four slices a CTA): 1.016-1.049 at every M; not kept;
// - GX 2 with 10 slots (lab g2, docs/labs/s45_g2_ten_slots_gx2.patch): 4096x14336 MXFP4 1.009-1.024, MT = 2
//   1.017-1.025 but NVFP4 1.00-1.008, NVFP4 bf16 M = 4, 8 0.985-0.988 (f16 1.007); not kept.
//   Re-measured in session 53 (bench/RESULTS.md "Session 53"): 1.00-1.04 of head at GX 2, and 0.99-1.06 of that
//   with its round rolled into a loop (36-62 % less SASS). The ring's depth limits the three large shapes' instances
//   (a slot less costs up to 7 %), but no way tried to add depth has paid.
// So: below GX = 4, as many slices as fit (GX = 2: 6 or 8 slots, GX = 3: 6); at GX = 4, two where MT = 1
// (8 slots) and one where MT = 2; above, one. (Session 19 had found 8 slots ~1 % slower than 4 at MT = 1 GX = 4
// on the H100.) With 8 slots a whole slice of early weights pays there (wide_early_stages, session 46).
constexpr int wide_ring_slices(int gx, int sb, int mt) {
  if (gx == 4) return mt == 1 && 2 * gx <= wide_slots(sb, mt) ? 2 : 1;
  return gx > 4 || wide_slots(sb, mt) / gx < 1 ? 1 : wide_slots(sb, mt) / gx;
}
constexpr int wide_ring_slots(int gx, int sb, int mt) { return wide_ring_slices(gx, sb, mt) * gx; }
static_assert(wide_slots(1, 2) >= kRingWideMax && wide_slots(4, 2) >= kRingWideMax,
              "a slot per tile of the widest instance beside the x buffers");
// The launch's RingLayout for GX tiles a row block: G = 1's boxes (16 chunks of one tile; x 16 chunks x
// M rows), the slots after the x buffers in B (x = 0: a slot holds no x).
constexpr RingLayout wide_layout(int64_t m, int scale_bytes, int gx) {
  RingLayout l{};
  l.groups = 1;
  l.x_pitch = m * 128;
  l.slot_bytes = wide_slot_bytes(scale_bytes);
  l.slots = wide_ring_slots(gx, scale_bytes, m > 8 ? 2 : 1);
  l.ok = m >= 1 && m <= kGemvMaxM && ring_wide_instance(gx) && l.slots <= wide_slots(scale_bytes, m > 8 ? 2 : 1);
  return l;
}
// The wide kernel's sums of its P = GX tiles: [16 warps][8 MT columns][wide_sum_pitch(P)] fp32, a column's
// P x 16 rows contiguous. The epilogue's reads (a warp: 32 consecutive rows of one column) are then
// contiguous, one shared-memory wavefront each; with session 17's [warp][tile][column][row] at a pitch of
// 20 floats, tiles lay 0 mod 32 floats apart and every read was 2-way. A pitch of 4 mod 16 keeps the
// fragment stores (lanes: rows g, columns 2 r apart) on 32 banks. Measured (H100, 2026-11-23, bench_fp4.py,
// 4 alternations): 0.981 over the 84 decode cells, 0.96-0.97 at GX 6-7 M = 16; an epilogue without the
// traffic at all (a wrong-result lab) would be 0.92-0.94 there (docs/NOTES.md, session 21).
constexpr int wide_sum_pitch(int p) { return 16 * p + 4; }
// Where the sums go once the loop is done: from kWideXAddr to the end of dynamic shared memory (the x
// buffers, the code table and region B are all free then; at least this many bytes for any base). Until
// session 22 they used region B only, and at MT = 2 GX 6 and 7 took two passes (wide_pass(2) was 5).
inline constexpr int64_t kWideSumBytes = kRingSmem - kWideXAddr;
// Tiles whose sums fit at once with 16 / CW consumer warps (16: MT = 1 24, MT = 2 11): every instance's
// (the kernel asserts it). Measured against the two passes (H100, 2026-11-23, bench_fp4.py, 4
// alternations): M = 16 at GX 6 0.972-0.980, at GX 7 0.988-0.992, 0.997 over the 84 decode cells.
constexpr int wide_pass(int mt, int cw = 1) {
  int p = 0;
  while (static_cast<int64_t>(wide_warps(cw)) * 8 * mt * wide_sum_pitch(p + 1) * 4 <= kWideSumBytes) ++p;
  return p;
}

// GX of the wide kernel for the decode launcher, or 0 (then gemv_ring_mode's G): GX = ceil(tiles / sms)
// where that is an instance and the ring applies (the caller asked gemv_ring_mode); since session 20 it
// measured faster than the G plans at every instance (Note [Wide row blocks]).
// forced (VSTACK_GEMV_RING_WIDE): -1 unset or 1, wherever an instance applies; 0 never (tests, benchmarks).
// GX 2's stages take 5-14 % longer than GX 3's and 4's at M <= 8 (session 54's fit over K), and a CTA of the same
// work at GX 4 is 2-7 % faster at K = 14336; cluster pairs splitting K there (GX 4 each, rank 1's sums sent to rank
// 0, docs/labs/s54_pair_split.patch) were correct and 4-11 % slower, so GX 2 stays unsplit (bench/RESULTS.md).
constexpr int ring_wide_tiles(int64_t m, int64_t n, int64_t k, Format f, int sms, int forced = -1) {
  if (forced == 0 || m < 1 || m > kGemvMaxM || n < 1 || k < 64 || k % 64 != 0 || sms < 1) return 0;
  const int64_t kc = k / 64, tiles = (n + kGemvRows - 1) / kGemvRows, gx = (tiles + sms - 1) / sms;
  if (!ring_wide_instance(gx) || (f == Format::nf4_dq && (kc > kDqGroup || (kDqGroup % kc != 0 && gx > kWideDq2Max))))
    return 0;
  return static_cast<int>(gx);
}

}  // namespace vstack::quant
