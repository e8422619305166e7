// Tile shapes of the FP4 dequant-GEMM and the launch heuristic: plain constexpr
// code, tested on the CPU (tests/quant/test_heuristics.cpp).
#pragma once

#include <cstdint>

#include "quant/gemv_plan.hpp"

namespace vstack::quant {

enum class GemmConfigId : int { small16 = 0, small32 = 1, mid = 2, large = 3, gemv = 4 };
inline constexpr int kNumGemmConfigs = 5;

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

// M <= 16: the decode kernel (quant/gemv_kernel.cuh, its own plan in gemv_plan.hpp),
// unless x's K slice cannot fit its shared memory (M > 8 and K > 8 * 2048).
// M <= 64: weight streaming (BM = 16; more than one row of CTAs re-reads W from L2).
// Pick BN = 32 when that still gives two CTAs per SM, else BN = 16 for more CTAs.
// M <= 256: 64 x 64 tiles. Beyond: 128 x 128.
constexpr GemmConfigId pick_gemm_config(int64_t m, int64_t n, int64_t k, int sms) {
  if (m <= 16 && plan_gemv(m, n, k, sms).ok) return GemmConfigId::gemv;
  if (m <= 64) return (n / 32 >= 2 * static_cast<int64_t>(sms)) ? GemmConfigId::small32 : GemmConfigId::small16;
  if (m <= 256) return GemmConfigId::mid;
  return GemmConfigId::large;
}

}  // namespace vstack::quant
