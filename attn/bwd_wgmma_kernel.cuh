// Backward main kernel on Hopper wgmma (sm_90a), head_dim 128: the same scheme as bwd_kernel
// (one CTA per (block of 128 keys, key/value head, batch) walking every packed query row of the
// head group, Note [Packed query rows]; dK, dV summed in registers; dQ added atomically in fp32),
// with the products on the warpgroup tensor-core path instead of mma.sync.
//
// Note [wgmma backward]
// Two warpgroups; warpgroup w owns keys 64w..64w+63 of the CTA's 128. Per query tile of 64 rows:
//   S^T  = K_w Q^T,  dP^T = V_w dO^T        wgmma, A and B from shared memory (K-major both);
//   P^T  = exp2(S^T scale log2e - lse),  dS^T = P^T (dP^T - dsum)     in registers;
//   dV  += P^T dO,   dK  += dS^T Q          wgmma, A = P^T / dS^T straight from the accumulator
//                                            registers (the m64nN C layout is the A layout of
//                                            its k16 slices), B = dO / Q MN-major;
//   dS  -> shared memory as [query][key] (stmatrix .trans), then
//   dQ[:, 64w..64w+63] = dS K[:, 64w..]    wgmma over all 128 keys, A = dS, B = K MN-major,
//                                            staged in shared memory and added to the fp32
//                                            accumulator by a bulk reduce (Note [dQ planes]).
// The transposed products put the keys in M, so P^T and dS^T never go through shared memory
// for dV and dK (FlashAttention-3 does the same). Q, dO, lse and dsum of the next query tile
// are fetched with cp.async during the current one (2 stages). Every operand in shared memory
// is a set of SW128 blocks (kernels/wgmma.cuh, Note [SW128 tiles]).
#pragma once

#include <cmath>

#include "attn/kernel_common.cuh"
#include "attn/mma.cuh"
#include "attn/traits.hpp"
#include "kernels/hopper.cuh"
#include "kernels/wgmma.cuh"

namespace vstack::attn {

struct BwdWgTile {
  static constexpr int kD = 128;
  static constexpr int kBM = 64;    // query rows per tile
  static constexpr int kBN = 128;   // keys per CTA (64 per warpgroup)
  static constexpr int kThreads = 256;
  static constexpr int kKBytes = kBN * kD * 2;   // K (and V): D / 64 blocks of [kBN][64]
  static constexpr int kQBytes = kBM * kD * 2;   // one stage of Q (and dO): D / 64 blocks of [kBM][64]
  static constexpr int kdSBytes = kBM * kBN * 2; // dS: kBN / 64 blocks of [kBM][64]
  static constexpr int kdQBytes = kBM * 64 * 4;  // per warpgroup and stage: its 64 columns of dQ, fp32
  static constexpr int kSmem = 1024 /* alignment slack */ + 2 * kKBytes + 4 * kQBytes + kdSBytes + 4 * kdQBytes + 4 * kBM * 4;
};

// Note [dQ planes]
// The wgmma kernel adds dQ with bulk asynchronous reductions (cp.reduce.async.bulk .add.f32,
// one 16 KiB block per warpgroup and query tile, two staging blocks per warpgroup so that the
// reduce of tile m - 1 is in flight while tile m is staged) instead of one red.global per
// element (which took a third of the kernel's time). For the block to be contiguous, dq_accum is laid out as
// two planes (columns 0..63 and 64..127), each [heads_kv][total_q * group][64] in packed-row
// order (Note [Packed query rows]); within a row the 16-byte chunk c of packed row r is stored
// at chunk c ^ (r % 8) so that the warpgroup's stores to the staging block are free of bank
// conflicts (r counts from the sequence's first packed row, so tiles start at r % 8 = 0).
// bwd_prep_kernel<..., kPacked> writes dsum and lse * log2(e) in the same packed-row order, and
// bwd_dq_kernel<..., kPlanes> reads this layout back.
// Offset in floats of column col (0..127) of packed row r of the head group hkv of the sequence
// that starts at row q0.
__device__ __forceinline__ int64_t dq_plane_offset(const Shape& s, int hkv, int q0, int r, int col) {
  const int64_t row = (int64_t(hkv) * s.total_q + q0) * s.group + r;
  return (col / 64) * int64_t(s.total_q) * s.heads_q * 64 + row * 64 + ((((col % 64) / 4) ^ (r % 8)) * 4) + col % 4;
}

__device__ __forceinline__ void stsm_x4_t(void* p, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(smem_u32(p)), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

__device__ __forceinline__ void cp_async4(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem), "r"(valid ? 4 : 0));
}
// dst[0..bytes) += src[0..bytes) (fp32), asynchronously (bulk copy engine); completion tracked by
// bulk_commit / bulk_wait_read (source may be overwritten) / bulk_wait (done).
__device__ __forceinline__ void bulk_reduce_add_f32(float* dst, const void* src, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst),
               "r"(smem_u32(src)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory"); }
__device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

template <typename T, bool Causal>
__global__ void __launch_bounds__(BwdWgTile::kThreads, 1) bwd_wgmma_kernel(const __grid_constant__ BwdParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  namespace wg = vstack::wgmma;
  using Tl = BwdWgTile;
  constexpr int D = Tl::kD, BM = Tl::kBM, BN = Tl::kBN;
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  unsigned char* sK = base;
  unsigned char* sV = sK + Tl::kKBytes;
  unsigned char* sQ0 = sV + Tl::kKBytes;         // [2 stages]
  unsigned char* sdO0 = sQ0 + 2 * Tl::kQBytes;   // [2 stages]
  unsigned char* sdS = sdO0 + 2 * Tl::kQBytes;
  float* sdQ = reinterpret_cast<float*>(sdS + Tl::kdSBytes);   // [2 warpgroups][2 stages][BM][64], Note [dQ planes]
  float* sLse = sdQ + 4 * BM * 64;                             // [2][BM], lse * log2(e)
  float* sDsum = sLse + 2 * BM;                                 // [2][BM]

  const Shape& s = p.s;
  const int n_block = blockIdx.x, hkv = blockIdx.y, b = blockIdx.z;
  const SeqInfo si = seq_info(s, b);
  const int G = s.group;
  const int rows = si.sq * G;
  const int off = si.sk - si.sq;
  const int j0 = n_block * BN;
  if (j0 >= si.sk) return;

  const int m_end = ceil_div(rows, BM);
  const int m_begin = first_query_tile<Causal>(si, off, G, j0, BM, m_end);

  const int tid = threadIdx.x, w = tid / 128, wi = (tid % 128) / 32, lane = tid % 32;
  const int gq = lane / 4, qd = lane % 4;
  const int hq0 = hkv * G;

  const T* k_seq = static_cast<const T*>(p.k.ptr) + seq_offset(s, p.k, b, si.k0, hkv);
  const T* v_seq = static_cast<const T*>(p.v.ptr) + seq_offset(s, p.v, b, si.k0, hkv);
  const T* q_seq = static_cast<const T*>(p.q.ptr) + seq_offset(s, p.q, b, si.q0, 0);
  const T* do_seq = static_cast<const T*>(p.dout.ptr) + seq_offset(s, p.dout, b, si.q0, 0);
  // lse * log2(e) and dsum of this head group and sequence, in packed-row order (bwd_prep_kernel).
  const int64_t packed0 = (int64_t(hkv) * s.total_q + si.q0) * G;
  const float* lse_seq = p.lse_log2 + packed0;
  const float* dsum_seq = p.dsum + packed0;

  // Chunk ch of row `row` of a tile of `nrows` rows: SW128 block ch / 8, chunk ch % 8 of the row.
  auto tile_off = [](int nrows, int row, int ch) {
    return (ch / 8) * nrows * 128 + int(wg::sw128_offset(row, (ch % 8) * 8));
  };

#pragma unroll
  for (int c = tid; c < BN * kChunks; c += Tl::kThreads) {
    const int row = c / kChunks, ch = c % kChunks;
    const int j = j0 + row;
    const bool valid = j < si.sk;
    cp_async16(sK + tile_off(BN, row, ch), valid ? k_seq + int64_t(j) * p.k.row_stride + ch * 8 : k_seq, valid);
    cp_async16(sV + tile_off(BN, row, ch), valid ? v_seq + int64_t(j) * p.v.row_stride + ch * 8 : v_seq, valid);
  }

  // Packed row r = i * G + hg as (i, hg), advanced without divisions (an integer division per
  // row and tile is ~20 instructions): rows m * BM + tid / kChunks + 16 k of the tiles this
  // thread loads. load_q_tile is called for m_begin, m_begin + 1, ...
  struct RowPos {
    int i, hg;
  };
  const int q16 = 16 / G, r16 = 16 % G, q64 = BM / G, r64 = BM % G;
  auto advance = [G](RowPos a, int q, int r) {
    a.i += q;
    a.hg += r;
    if (a.hg >= G) {
      a.hg -= G;
      ++a.i;
    }
    return a;
  };
  RowPos pos_q{(m_begin * BM + tid / kChunks) / G, (m_begin * BM + tid / kChunks) % G};
  static_assert(Tl::kThreads / kChunks == 16, "rows of one pass of load_q_tile");

  auto load_q_tile = [&](int m, int buf) {
    unsigned char* q_s = sQ0 + buf * Tl::kQBytes;
    unsigned char* do_s = sdO0 + buf * Tl::kQBytes;
    const int ch = tid % kChunks;
    RowPos a = pos_q;
#pragma unroll
    for (int k = 0; k < BM / 16; ++k) {
      const int row = tid / kChunks + 16 * k;
      const bool valid = a.i < si.sq;
      const T* qs = q_seq;
      const T* ds = do_seq;
      if (valid) {
        const int h = hq0 + a.hg;
        qs += int64_t(a.i) * p.q.row_stride + int64_t(h) * p.q.head_stride + ch * 8;
        ds += int64_t(a.i) * p.dout.row_stride + int64_t(h) * p.dout.head_stride + ch * 8;
      }
      cp_async16(q_s + tile_off(BM, row, ch), qs, valid);
      cp_async16(do_s + tile_off(BM, row, ch), ds, valid);
      a = advance(a, q16, r16);
    }
    pos_q = advance(pos_q, q64, r64);
    // Rows past the end read lse = dsum = 0 (zero-filled): their Q and dO rows are zero, so
    // P = 1 there but dP = 0, dS = 0 and P^T dO = 0; their dQ rows are not written.
    if (tid < BM) {
      const int r = m * BM + tid;
      const bool valid = r < rows;
      cp_async4(sLse + buf * BM + tid, valid ? lse_seq + r : lse_seq, valid);
      cp_async4(sDsum + buf * BM + tid, valid ? dsum_seq + r : dsum_seq, valid);
    }
  };

  float acc_dv[D / 2], acc_dk[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) acc_dv[i] = acc_dk[i] = 0.f;

  // Keys of this thread's accumulator rows: j_a + 8 * ((e / 2) % 2).
  const int j_a = j0 + 64 * w + 16 * wi + gq;
  const unsigned char* sK_w = sK + w * 64 * 128;  // A operand rows of this warpgroup (within each block)
  const unsigned char* sV_w = sV + w * 64 * 128;

  // S^T = K_w Q^T, dP^T = V_w dO^T of the tile in stage buf: [64 keys] x [64 queries], k over D;
  // two commit groups (S, then dP).
  float acc_s[BM / 2], acc_dp[BM / 2];
  auto issue_sdp = [&](int buf) {
    const unsigned char* sQ = sQ0 + buf * Tl::kQBytes;
    const unsigned char* sdO = sdO0 + buf * Tl::kQBytes;
    wg::fence_operands(acc_s);
    wg::fence_operands(acc_dp);
    wg::arrive();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wg::mma_ss<BM, T, 0>(acc_s, wg::desc_kmajor(sK_w + (kk / 4) * BN * 128) + 2 * (kk % 4),
                           wg::desc_kmajor(sQ + (kk / 4) * BM * 128) + 2 * (kk % 4), kk > 0);
    wg::commit();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wg::mma_ss<BM, T, 0>(acc_dp, wg::desc_kmajor(sV_w + (kk / 4) * BN * 128) + 2 * (kk % 4),
                           wg::desc_kmajor(sdO + (kk / 4) * BM * 128) + 2 * (kk % 4), kk > 0);
    wg::commit();
  };
  // The stage's cp.async data (this thread's and, after the barrier, everyone's) is visible to wgmma.
  auto wait_stage = [&]() {
    cp_async_wait<0>();
    wg::fence_proxy_async();
    __syncthreads();
  };

  if (m_begin < m_end) load_q_tile(m_begin, 0);
  cp_async_commit();

  // dQ of tile m, staged by this warpgroup, added to dq_accum by the bulk copy engine; the caller
  // has ordered the staging stores (fence_proxy_async, then a barrier).
  auto reduce_dq = [&](int m) {
    if (tid % 128 == 0) {
      const int n = min(BM, rows - m * BM);
      bulk_reduce_add_f32(p.dq_accum + dq_plane_offset(s, hkv, si.q0, m * BM, 64 * w),
                          sdQ + (2 * w + ((m - m_begin) & 1)) * BM * 64, n * 64 * 4);
      bulk_commit();
    }
  };

  for (int m = m_begin; m < m_end; ++m) {
    const int buf = (m - m_begin) & 1;
    wait_stage();
    // dQ of the previous tile: its staging stores are ordered by the barrier above.
    if (m > m_begin) reduce_dq(m - 1);
    // The next tile's loads go out before this tile's products: issued after them (so that the
    // address arithmetic overlaps the wgmmas) they cost registers, 190 bytes of spill and 25%
    // of the speed (H100, 8k).
    if (m + 1 < m_end) load_q_tile(m + 1, buf ^ 1);  // stage buf ^ 1 was last read by tile m - 1
    cp_async_commit();
    issue_sdp(buf);
    const unsigned char* sQ = sQ0 + buf * Tl::kQBytes;
    const unsigned char* sdO = sdO0 + buf * Tl::kQBytes;
    const float* lse = sLse + buf * BM;
    const float* dsum = sDsum + buf * BM;

    wg::wait<1>();
    wg::fence_operands(acc_s);
    // Masks only on tiles that hold the key tail or cross the causal diagonal (NOTES: the
    // per-element division by the group size is expensive).
    const bool tail = j0 + BN > si.sk;
    const bool diag = Causal && j0 + BN - 1 > (m * BM) / G + off;
#pragma unroll
    for (int e = 0; e < BM / 2; ++e) {
      const int c = 8 * (e / 4) + 2 * qd + (e % 2);
      const int j = j_a + 8 * ((e / 2) % 2);
      bool valid = true;
      if (tail) valid = j < si.sk;
      if (Causal && diag) valid = valid && j <= (m * BM + c) / G + off;
      acc_s[e] = valid ? fast_exp2(fmaf(acc_s[e], s.scale_log2, -lse[c])) : 0.f;
    }
    uint32_t a_p[BM / 16][4];
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) a_p[kk][r] = pack2<T>(acc_s[8 * kk + 2 * r], acc_s[8 * kk + 2 * r + 1]);

    wg::wait<0>();
    wg::fence_operands(acc_dp);
    uint32_t a_ds[BM / 16][4];
#pragma unroll
    for (int e = 0; e < BM / 2; ++e) {
      const int c = 8 * (e / 4) + 2 * qd + (e % 2);
      acc_dp[e] = acc_s[e] * (acc_dp[e] - dsum[c]);
    }
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) a_ds[kk][r] = pack2<T>(acc_dp[8 * kk + 2 * r], acc_dp[8 * kk + 2 * r + 1]);

    // dV += P^T dO, dK += dS^T Q: [64 keys] x [D], k over the 64 queries; B MN-major.
    wg::fence_operands(acc_dv);
    wg::fence_operands(acc_dk);
    wg::arrive();
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk)
      wg::mma_rs<D, T, 1>(acc_dv, a_p[kk], wg::desc_mnmajor(sdO, BM * 128) + 128 * kk, 1);
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk)
      wg::mma_rs<D, T, 1>(acc_dk, a_ds[kk], wg::desc_mnmajor(sQ, BM * 128) + 128 * kk, 1);
    wg::commit();

    // dS -> shared memory as [query][key]: block w holds this warpgroup's 64 keys. Matrix i of
    // the x4: keys +8 * (i & 1), queries +8 * (i >> 1); lane l addresses row l % 8 of matrix l / 8.
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk) {
      const int i = lane / 8;
      const int qrow = 16 * kk + 8 * (i >> 1) + lane % 8;
      const int key = 16 * wi + 8 * (i & 1);
      stsm_x4_t(sdS + w * BM * 128 + wg::sw128_offset(qrow, key), a_ds[kk][0], a_ds[kk][1], a_ds[kk][2], a_ds[kk][3]);
    }
    wg::fence_proxy_async();
    if (tid % 128 == 0) bulk_wait_read<1>();  // the staging block of tile m - 2 has been read
    __syncthreads();

    // dQ[:, 64w..64w+63] = dS K[:, 64w..64w+63]: [64 queries] x [64], k over the 128 keys.
    float acc_dq[32];
    wg::fence_operands(acc_dq);
    wg::arrive();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
      wg::mma_ss<64, T, 1>(acc_dq, wg::desc_kmajor(sdS + (kk / 4) * BM * 128) + 2 * (kk % 4),
                           wg::desc_mnmajor(sK + w * BN * 128, BN * 128) + 128 * kk, kk > 0);
    wg::commit();
    wg::wait<0>();
    wg::fence_operands(acc_dq);
    wg::fence_operands(acc_dv);
    wg::fence_operands(acc_dk);

    // Staging block of this warpgroup for tile m: row r, 16-byte chunk c at c ^ (r % 8) (Note [dQ planes]).
    float* stage = sdQ + (2 * w + buf) * BM * 64;
#pragma unroll
    for (int ri = 0; ri < 2; ++ri) {
      const int r = 16 * wi + gq + 8 * ri;
#pragma unroll
      for (int t = 0; t < 8; ++t) {
        const int col = 8 * t + 2 * qd;
        *reinterpret_cast<float2*>(stage + r * 64 + (((col / 4) ^ (r % 8)) * 4) + col % 4) =
            make_float2(acc_dq[4 * t + 2 * ri], acc_dq[4 * t + 2 * ri + 1]);
      }
    }
    wg::fence_proxy_async();  // reduced by reduce_dq(m) after the next barrier
  }
  if (m_begin < m_end) {
    hopper::named_barrier_sync(1 + w, 128);
    reduce_dq(m_end - 1);
  }
  cp_async_wait<0>();
  if (tid % 128 == 0) bulk_wait();

  // dK = scale * dS^T Q; dV = P^T dO.
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    const int j = j_a + 8 * ri;
    if (j >= si.sk) continue;
    T* dk_row = static_cast<T*>(p.dk.ptr) + seq_offset(s, p.dk, b, si.k0, hkv) + int64_t(j) * p.dk.row_stride;
    T* dv_row = static_cast<T*>(p.dv.ptr) + seq_offset(s, p.dv, b, si.k0, hkv) + int64_t(j) * p.dv.row_stride;
#pragma unroll
    for (int t = 0; t < D / 8; ++t) {
      const int col = 8 * t + 2 * qd;
      *reinterpret_cast<uint32_t*>(dk_row + col) =
          pack2<T>(acc_dk[4 * t + 2 * ri] * s.scale, acc_dk[4 * t + 2 * ri + 1] * s.scale);
      *reinterpret_cast<uint32_t*>(dv_row + col) = pack2<T>(acc_dv[4 * t + 2 * ri], acc_dv[4 * t + 2 * ri + 1]);
    }
  }
#else
  __trap();  // built without sm_90a features: launch_bwd does not dispatch here
#endif
}

}  // namespace vstack::attn
