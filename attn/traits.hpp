// Tile shapes of the attention kernels and the launch heuristics: plain constexpr code,
// compiled by the host compiler too, so that tests/attn/ checks them on the CPU.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define VSTACK_ATTN_HD __host__ __device__
#else
#define VSTACK_ATTN_HD
#endif

namespace vstack::attn {

// Forward: each warp owns m_tiles x 16 query rows; the CTA walks the key/value tiles of
// block_n keys. Shared-memory bandwidth bounds an mma.sync attention: every warp reads the whole
// K and V tiles through ldmatrix, so a warp with two 16-row tiles reuses each K/V fragment for
// two MMAs and halves that traffic per FLOP (measured on H100: one tile per warp ran hd128 at
// 226 TFLOPS). Q stays in registers where they allow it.
struct FwdTile {
  int warps;
  int m_tiles;  // 16-row MMA tiles per warp
  int block_m;  // = 16 * m_tiles * warps
  int block_n;
  bool q_in_regs;
  int smem_bytes;
};

// Key tile of the hd128 forward: with two row tiles per warp a 64-key tile needs 255 registers
// and spills 44 bytes; 32 keys fit in 251 without spilling and ran 262 TFLOPS (16k, causal off;
// one row tile per warp with 64 keys: 226). Overridable to compare (-DVSTACK_ATTN_FWD_BN128=64).
#ifndef VSTACK_ATTN_FWD_BN128
#define VSTACK_ATTN_FWD_BN128 32
#endif
VSTACK_ATTN_HD constexpr FwdTile fwd_tile(int head_dim) {
  const int warps = 4;
  // Registers per thread (fp32 accumulators): O = m_tiles * head_dim / 2, S = m_tiles * block_n / 2,
  // Q fragments = m_tiles * head_dim / 8 when kept in registers.
  const int m_tiles = head_dim <= 128 ? 2 : 1;
  const int block_n = head_dim == 128 ? VSTACK_ATTN_FWD_BN128 : 64;
  const bool q_in_regs = head_dim <= 64;
  const int block_m = 16 * m_tiles * warps;
  // Q, K, V tiles of 2-byte elements (rows padded, see mma.cuh), one buffer each (K[j+1] is fetched while P V[j] runs).
  const int smem = (block_m + 2 * block_n) * (head_dim + 8) * 2;  // rows padded by 16 bytes
  return FwdTile{warps, m_tiles, block_m, block_n, q_in_regs, smem};
}

// Forward on Hopper (fwd_sm90_kernel.cuh): warp-specialised, one producer warpgroup (TMA loads of
// K and V) and `consumer_wgs` warpgroups of 64 query rows each (wgmma; S and P stay in registers).
// K and V tiles of block_n keys in `stages` buffers, each an SW128 block per 64 head-dim columns.
// Registers per consumer thread: O = head_dim / 2, S = block_n / 2 (fp32), P = block_n / 4 (16-bit
// pairs): 160 at hd128 / 128 keys, 176 at hd256 / 64 keys, under the 240 that setmaxnreg gives.
struct FwdSm90Tile {
  int consumer_wgs;
  int block_m;  // = 64 * consumer_wgs
  int block_n;
  int stages;
  int smem_bytes;  // Q + stages x (K + V) + 1 KiB for the 1024-byte alignment + the mbarriers
};

VSTACK_ATTN_HD constexpr FwdSm90Tile fwd_sm90_tile(int head_dim) {
  const int wgs = 2;
  const int block_m = 64 * wgs;
  const int block_n = head_dim <= 128 ? 128 : 64;
  const int stages = 2;
  const int smem = block_m * head_dim * 2 + stages * 2 * block_n * head_dim * 2 + 1024 + 256;
  return FwdSm90Tile{wgs, block_m, block_n, stages, smem};
}

// Backward: a CTA owns block_n keys of one key/value head and loops over the packed
// query rows in tiles of block_m. Its 8 warps take three roles in turn:
//   phase 1: S^T, dP^T for (block_n keys) x (block_m queries): key groups of 16 x query splits;
//   phase 2: dV += P^T dO, dK += dS^T Q: key groups of 16 x head_dim splits;
//   dQ += dS K, added atomically to an fp32 buffer: query groups of 16 x head_dim splits.
struct BwdTile {
  int warps;
  int block_m;
  int block_n;
  int p1_q_splits;   // phase 1: warps = block_n / 16 * p1_q_splits
  int p2_d_splits;   // phase 2: warps = block_n / 16 * p2_d_splits
  int dq_d_splits;   // dQ:      warps = block_m / 16 * dq_d_splits
  int smem_bytes;
};

VSTACK_ATTN_HD constexpr BwdTile bwd_tile(int head_dim) {
  const int warps = 8;
  const int block_m = 64;
  // 128 keys halve the dQ atomics (ptxas: 253/255 registers, no spill at head_dim 64/128), but
  // dK and dV for 16 x 256 columns would not fit in registers (255 + 56 bytes of spill at 64 keys).
  const int block_n = head_dim <= 128 ? 128 : 64;
  const int p1 = warps / (block_n / 16);
  const int p2 = warps / (block_n / 16);
  const int dq = warps / (block_m / 16);
  // K, V; Q and dO double-buffered; P^T and dS^T; lse and rowsum(dO*O) per query row, double-buffered.
  const int smem = 2 * block_n * (head_dim + 8) * 2 + 2 * 2 * block_m * (head_dim + 8) * 2 +
                   2 * block_n * (block_m + 8) * 2 + 2 * 2 * block_m * 4;  // rows padded by 16 bytes
  return BwdTile{warps, block_m, block_n, p1, p2, dq, smem};
}

// Upper bound on splits over keys (sizes the combine kernel's loop, not a hard limit of it).
constexpr int kMaxSplits = 128;
// A split's fixed cost (partial O written in fp32, read back by the combine) is worth paying only
// over a few hundred keys.
constexpr int kMinKeysPerSplit = 256;

VSTACK_ATTN_HD constexpr int ceil_div(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }

// Split over keys: only when the CTAs of an unsplit launch would leave most of the GPU idle
// (decode: seqlen_q = 1 with long keys). Aims at about two waves of CTAs, keeps at least two
// key tiles and kMinKeysPerSplit keys per split.
VSTACK_ATTN_HD constexpr int choose_num_splits(int batch, int heads_kv, int packed_rows_max, int seqlen_k,
                                int head_dim, int num_sms) {
  const FwdTile t = fwd_tile(head_dim);
  const int64_t ctas = int64_t(batch) * heads_kv * ceil_div(packed_rows_max, t.block_m);
  const int n_blocks = ceil_div(seqlen_k, t.block_n);
  if (ctas <= 0 || n_blocks < 4 || ctas >= int64_t(num_sms) * 8 / 10) return 1;
  int splits = ceil_div(int64_t(num_sms) * 2, ctas);
  if (splits > n_blocks / 2) splits = n_blocks / 2;
  if (splits > seqlen_k / kMinKeysPerSplit) splits = seqlen_k / kMinKeysPerSplit;
  if (splits > kMaxSplits) splits = kMaxSplits;
  return splits < 1 ? 1 : splits;
}

}  // namespace vstack::attn
