// Tile shapes of the FP4 dequant-GEMM and the launch heuristic: plain constexpr
// code, tested on the CPU (tests/quant/test_heuristics.cpp).
#pragma once

#include <cstdint>

#include "quant/gemv_plan.hpp"

namespace vstack::quant {

enum class GemmConfigId : int { small16 = 0, small32 = 1, mid = 2, large = 3, gemv = 4, wg256 = 5, wg128 = 6,
                                wg128n = 7, wg64n = 8 };
inline constexpr int kNumGemmConfigs = 9;
// The wgmma configs need an sm_90a build on a cc 9.0 device; elsewhere they run as this mma.sync config.
constexpr bool is_wgmma_config(GemmConfigId id) { return static_cast<int>(id) >= static_cast<int>(GemmConfigId::wg256); }

// One CTA computes a BM x BN tile of y; its warps form WARPS_M x WARPS_N x
// WARPS_K; each warp owns a (BM/WARPS_M) x (BN/WARPS_N) tile and one 64-wide
// slice of the CTA's k-tile (BK = 64 * WARPS_K), reduced through shared memory
// at the end (in-CTA split-K: at M <= 16 a CTA has too little work per k-tile to
// hide HBM latency with one warp per tile).
template <int BM_, int BN_, int WM_, int WN_, int WK_, int STAGES_>
struct GemmTraits {
  static constexpr int BM = BM_, BN = BN_, WARPS_M = WM_, WARPS_N = WN_, WARPS_K = WK_, STAGES = STAGES_;
  static constexpr int THREADS = 32 * WM_ * WN_ * WK_;
  static constexpr int BK = 64 * WK_;
  static constexpr int WTM = BM / WM_, WTN = BN / WN_;
  static constexpr int MT = WTM / 16, NT = WTN / 8;  // mma tiles per warp (m16n8k16)
  static_assert(WTM % 16 == 0 && WTN % 8 == 0 && BN % 16 == 0, "warp tile");
  // x tile: BM rows of BK bf16, 16-byte chunks XOR-swizzled by (row & 7) for ldmatrix.
  static constexpr int A_BYTES = BM * BK * 2;
  // W tile: BN rows of BK/2 bytes. Lanes of a half-warp read 8 bytes at n*pitch + r*8
  // (n = 0..3, r = 0..3): conflict-free when pitch % 128 is 32 or 96.
  static constexpr int W_ROW = BK / 2;
  static constexpr int W_PITCH = W_ROW % 64 == 0 ? W_ROW + 32 : W_ROW;
  static_assert(W_PITCH % 128 == 32 || W_PITCH % 128 == 96, "W pitch");
  static constexpr int W_BYTES = BN * W_PITCH;
  static constexpr int S_BYTES = WK_ * BN * 4;  // up to 4 scale bytes per row per 64-slice
  static constexpr int STAGE_BYTES = A_BYTES + W_BYTES + S_BYTES;
  static constexpr int C_PITCH = BN + 4;  // fp32 epilogue tile, padded
  static constexpr int C_BYTES = BM * C_PITCH * 4;
  static constexpr int PIPE_BYTES = STAGES * STAGE_BYTES > C_BYTES ? STAGES * STAGE_BYTES : C_BYTES;
  // + 16-entry fp32 code table (64 B) + 256-entry code-pair and scale tables (1 KB each)
  static constexpr int SMEM_BYTES = PIPE_BYTES + 64 + 2048;
};

using CfgSmall16 = GemmTraits<16, 16, 1, 1, 4, 6>;   // 128 threads, 66 KB
using CfgSmall32 = GemmTraits<16, 32, 1, 1, 4, 6>;   // 128 threads, 81 KB
using CfgMid = GemmTraits<64, 64, 1, 2, 2, 4>;       // 128 threads, 90 KB
using CfgLarge = GemmTraits<128, 128, 2, 4, 1, 4>;   // 256 threads, 82 KB
// Every sm_80+ part gives a CTA at least 99 KB of dynamic shared memory (sm_86 / sm_89; A100 163 KB).
inline constexpr int kSmemSm80Plus = 99 * 1024;
static_assert(CfgSmall16::SMEM_BYTES <= kSmemSm80Plus && CfgSmall32::SMEM_BYTES <= kSmemSm80Plus &&
                  CfgMid::SMEM_BYTES <= kSmemSm80Plus && CfgLarge::SMEM_BYTES <= kSmemSm80Plus,
              "the mma.sync configs run on every sm_80+ GPU");

// Hopper wgmma configs (quant/gemm_wgmma.cuh, Note [Transposed wgmma GEMM]): a CTA computes
// BT tokens (rows of x; the wgmma N) x BW = 64 * NWG weight rows (columns of y) with NWG
// consumer warpgroups and a TMA producer warpgroup, through STAGES shared-memory stages of one
// 64-wide k chunk each: x as one SW128 block [BT][64] bf16, the codes [BW][32 B], the chunk
// scales [BW][<= 4 B]; the [BT][BW] output tile has its own buffer (CTAs are persistent: the
// producer streams the next tile's chunks during the epilogue). NWG = 3 compiles (setmaxnreg
// split 24 / 160) but measured slower than 2 (H100, 2026-11-22: 437-554 vs 671 TFLOPS).
template <int BT_, int NWG_, int STAGES_, int KG_ = 2>
struct WgmmaTraits {
  static constexpr int BT = BT_, NWG = NWG_, BW = 64 * NWG_, STAGES = STAGES_;
  static constexpr int KG = KG_;  // k16 steps per wgmma commit group (quant/gemm_wgmma.cuh)
  // + one producer warpgroup (its first lane issues the TMA); with two consumer warpgroups the
  // register file is split by setmaxnreg (the cap at entry is 65536 / 384 -> 168).
  static constexpr int THREADS = 128 * (NWG_ + 1);
  static constexpr int REGS_PRODUCER = NWG_ == 3 ? 24 : NWG_ == 2 ? 40 : 0;
  static constexpr int REGS_CONSUMER = NWG_ == 3 ? 160 : NWG_ == 2 ? 232 : 0;
  static constexpr int X_BYTES = BT * 128;
  static constexpr int W_BYTES = BW * 32;
  static constexpr int S_BYTES = BW * 4;
  static constexpr int STAGE_BYTES = (X_BYTES + W_BYTES + S_BYTES + 1023) / 1024 * 1024;  // SW128: 1 KB aligned
  static constexpr int Y_PITCH = BW + 8;  // 2-byte elements; conflict-free transposing stores
  static constexpr int Y_BYTES = BT * Y_PITCH * 2;
  static constexpr int Y_OFF = STAGES * STAGE_BYTES;  // own buffer: the next tile's chunks stream meanwhile
  static constexpr int BAR_OFF = Y_OFF + (Y_BYTES + 127) / 128 * 128;    // full[STAGES], empty[STAGES]
  static constexpr int LUT_OFF = BAR_OFF + (16 * STAGES + 63) / 64 * 64;  // 256 u32: packed scales
  static constexpr int SMEM_BYTES = 1024 + LUT_OFF + 1024;                // + alignment slack of the base
  static_assert(BT % 64 == 0 && BT <= 256, "wgmma N / TMA box");
  static_assert(NWG >= 1 && NWG <= 3, "consumer warpgroups");
};
using CfgWg256 = WgmmaTraits<256, 2, 4, 4>;  // 384 threads, 219 KB; one wgmma group per 64-wide chunk
using CfgWg128 = WgmmaTraits<128, 2, 8>;   // 384 threads, 205 KB
using CfgWg128n = WgmmaTraits<128, 1, 8>;  // 256 threads, 172 KB: 64 weight rows, twice the CTAs
using CfgWg64n = WgmmaTraits<64, 1, 8>;    // 256 threads, 100 KB: two CTAs per SM

// Note [Split tail]. The wgmma GEMM's CTAs are persistent: `grid` CTAs take work items
// blockIdx.x, + grid, ... With T whole tiles the last round runs T % grid tiles and leaves the
// other SMs idle (14336 x 4096, M = 1024: 448 tiles = 3 rounds + 52 tiles on 132 SMs, the
// kernel at 82 % of its cycles active, ncu). Where that tail fills at most half the CTAs and the
// CTA has two consumer warpgroups, each tail tile becomes two items of half its weight rows (64,
// one warpgroup's) whose k chunks the two warpgroups share (even / odd chunks), reduced through
// shared memory in a fixed order: the last round takes half a tile's time (3.5 rounds instead of
// 4 above), and the sum is still deterministic. Items [0, whole) are whole tiles (whole is a
// multiple of the grid, so they fill the first rounds), items [whole, items) tail halves.
struct WgSchedule {
  int64_t whole;   // whole-tile items: tile item / ksplit, K slice item % ksplit
  int64_t items;   // whole + 2 * (tiles - whole / ksplit)
  int64_t grid;    // CTAs to launch: min(resident, items)
  int ksplit = 1;  // K slices per tile (Note [K split])
  int kcs = 0;     // 64-wide chunks per K slice (the last may hold fewer)
};
// Note [K split]. Where the output tiles fill at most half of the CTA slots (mid M on N = 4096:
// 4096 x 14336, M = 32 has 64 tiles of 64 x 64 for 264 slots), the K chunks of each tile are split
// into up to kWgMaxKSplit slices of at least kWgMinSliceChunks chunks, one work item each, that
// meet in a split-K workspace (quant/splitk_workspace.hpp): each item stores its fp32 partials,
// the last to arrive sums them in slice order, so y does not depend on which finishes first.
// The tail split above applies only without a K split. The last item must keep its loads of a slice
// in flight together: summed with the slice loop innermost (one L2 round trip per partial), 4096 x
// 4096 M = 128 took 34.9 us instead of 20.5. The split runs in its own kernel instance (KS), so that
// the kernels without it keep their code: compiled into one, M = 128 / 256 cells without a split
// ran 4-10 % slower.
// Measured (H100, 2026-11-22, nvfp4, us, no split -> the chosen split; forced splits in brackets):
// wg64n M = 32: 4096 x 4096 27.2 -> 15.6 (S = 4; S2 18.2, S8 24.5), 4096 x 14336 87.4 -> 38.3 (S = 4;
// S2 49.7, S8 45.3), 8192 x 8192 52.2 -> 41.0 (S = 2; S4 47.0); wg128n M = 128: 4096 x 4096 29.0 ->
// 20.3 (S = 2; S4 26.5), 4096 x 14336 92.3 -> 53.7 (S = 2; S4 59.7); wg128 M = 256: 4096 x 14336
// 79.7 -> 69.4 (S = 2), 4096 x 4096 25.8 -> 26.1 (S = 2; S4 34.3). The rule below picks the fastest
// of the forced splits in each of these cells but the last (within 2 %).
inline constexpr int kWgMaxKSplit = 8;
inline constexpr int kWgMinSliceChunks = 8;
constexpr int wg_ksplit(int64_t tiles, int64_t resident, int64_t kc_total) {
  if (tiles < 1 || 2 * tiles > resident) return 1;
  int64_t s = resident / tiles;
  if (s > kWgMaxKSplit) s = kWgMaxKSplit;
  if (s > kc_total / kWgMinSliceChunks) s = kc_total / kWgMinSliceChunks;
  return s < 1 ? 1 : static_cast<int>(s);
}
// ksplit (1..kWgMaxKSplit) is taken as ceil(kc_total / kcs) slices of kcs = ceil(kc_total / ksplit)
// chunks, so that no slice is empty.
constexpr WgSchedule wg_schedule(int64_t tiles, int64_t resident, bool can_split, int64_t kc_total = 0,
                                 int ksplit = 1) {
  if (ksplit > 1 && kc_total > 1) {
    const int64_t kcs = (kc_total + ksplit - 1) / ksplit, s = (kc_total + kcs - 1) / kcs;
    if (s > 1) {
      const int64_t items = tiles * s;
      return {items, items, items < resident ? items : resident, static_cast<int>(s), static_cast<int>(kcs)};
    }
  }
  const int kcs = static_cast<int>(kc_total);
  const int64_t tail = tiles % resident;
  if (can_split && tail > 0 && 2 * tail <= resident) {
    const int64_t items = tiles + tail;
    return {tiles - tail, items, items < resident ? items : resident, 1, kcs};
  }
  return {tiles, tiles, tiles < resident ? tiles : resident, 1, kcs};
}
// The workspace of a K-split schedule: BT x BW fp32 partials per (tile, slice), one counter per tile.
constexpr int64_t wg_ws_floats(int64_t tiles, int ksplit, int bt, int bw) { return tiles * ksplit * bt * bw; }

// M <= 16: the decode kernel (quant/gemv_kernel.cuh, its own plan in gemv_plan.hpp),
// unless x's K slice cannot fit its shared memory (M > 8 and K > 8 * 4096); then (wgmma
// devices, pick_gemm_config) weight streaming with BN = 32 or 64 x 64 wgmma tiles, and on
// the others (mma_sync_config) weight streaming with BN = 32 when that still gives two CTAs
// per SM, else BN = 16 for more CTAs.
// M > 16: wgmma tiles (mma.sync `large` where wgmma is unavailable), the K chunks split over
// CTAs where the tiles are few (Note [K split]): 64 x 64 tiles up to M = 64, then BT >= M with two
// consumer warpgroups (128 weight rows). Before the K split (H100, N = K = 8192, nvfp4), M = 256:
// wg128 0.68x cuBLAS, wg256 0.55x, wg128n 0.47x; M = 512: wg256 0.87x, wg128 0.58x; with it, M = 256
// wg256 0.95x (measurements in pick_gemm_config). wg128n is no longer picked (forced: tests, benches).
// The mma.sync-only choice (GPUs without wgmma, builds for another target): M <= 64 weight
// streaming, M <= 256 64 x 64 tiles, beyond 128 x 128. x_max: gemv_x_max of the device (the decode
// kernel only where x's slice fits its shared memory); clusters: the device and build have them
// (kernels::has_sm90_features), else the decode kernel must fit with S = 1. Its smaller configs
// take at most 90 KB (CfgMid), within every sm_80+ part's 99 KB.
constexpr GemmConfigId mma_sync_config(int64_t m, int64_t n, int64_t k, int sms, int64_t x_max = kGemvXMaxBytes,
                                       bool clusters = true) {
  if (m <= 16 && plan_gemv(m, n, k, sms, clusters, nullptr, 0, x_max).ok) return GemmConfigId::gemv;
  if (m <= 64) return (n / 32 >= 2 * static_cast<int64_t>(sms)) ? GemmConfigId::small32 : GemmConfigId::small16;
  if (m <= 256) return GemmConfigId::mid;
  return GemmConfigId::large;
}

constexpr GemmConfigId pick_gemm_config(int64_t m, int64_t n, int64_t k, int sms) {
  if (m <= 16 && plan_gemv(m, n, k, sms).ok) return GemmConfigId::gemv;
  // M <= 16 where x's slice does not fit the decode kernel (M > 8, K > 32768): weight streaming with
  // BN = 32 where that gives a CTA per SM, else 64 x 64 wgmma tiles with the K split. Measured (H100,
  // 2026-11-22, nvfp4 M = 9..16, us, small16 / small32 / wg64n): 8192 x 40960 241-251 / 160-176 / 198-206,
  // 16384 x 53248 501-541 / 392-434 / 449-479, 4096 x 65536 184-199 / 192-204 / 146-147.
  if (m <= 16) return n / 32 >= sms ? GemmConfigId::small32 : GemmConfigId::wg64n;
  // M <= 64: 64 x 64 tiles, K split where they fill at most half the CTA slots (Note [K split]).
  // Measured (H100, 2026-11-22, nvfp4 M = 32): 4096 x 14336 37.6 us vs 93.2 for the weight-streaming
  // kernel (small16, picked here before the K split), 4096 x 4096 15.4 vs 32.8.
  // Above: two consumer warpgroups, BT >= M (one row of tiles), K split where the tiles are few.
  // Measured (H100, 2026-11-22, nvfp4, forced configs, two runs, us): M = 128 wg128 / wg128n
  // 8192 x 8192 44.8 / 56.5, 14336 x 4096 38.9 / 57.8, 4096 x 14336 41.3 / 55.3, 4096 x 4096 19.0 /
  // 20.6; M = 256 wg256 / wg128 8192 x 8192 58.4 / 71.0, 14336 x 4096 48.0 / 74.5, 4096 x 14336 54.0
  // / 70.5, 4096 x 4096 26.2 / 26.7; at M = 24..64 wg64n was the fastest or within 1 % on all four.
  if (m <= 64) return GemmConfigId::wg64n;
  if (m <= 128) return GemmConfigId::wg128;
  return GemmConfigId::wg256;
}

}  // namespace vstack::quant
