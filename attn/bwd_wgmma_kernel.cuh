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
//                                            added to the fp32 accumulator with red.global.
// The transposed products put the keys in M, so P^T and dS^T never go through shared memory
// for dV and dK (FlashAttention-3 does the same). Q, dO, lse and dsum of the next query tile
// are fetched with cp.async during the current one (2 stages). Every operand in shared memory
// is a set of SW128 blocks (kernels/wgmma.cuh, Note [SW128 tiles]).
#pragma once

#include <cmath>

#include "attn/kernel_common.cuh"
#include "attn/mma.cuh"
#include "attn/traits.hpp"
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
  static constexpr int kSmem = 1024 /* alignment slack */ + 2 * kKBytes + 4 * kQBytes + kdSBytes + 4 * kBM * 4;
};

__device__ __forceinline__ void stsm_x4_t(void* p, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(smem_u32(p)), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

__device__ __forceinline__ void red_add_f32x2(float* dst, float a, float b) {
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(dst), "f"(a), "f"(b) : "memory");
}

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
  float* sLse = reinterpret_cast<float*>(sdS + Tl::kdSBytes);  // [2][BM], log2 domain
  float* sDsum = sLse + 2 * BM;                                 // [2][BM]

  const Shape& s = p.s;
  const int n_block = blockIdx.x, hkv = blockIdx.y, b = blockIdx.z;
  const SeqInfo si = seq_info(s, b);
  const int G = s.group;
  const int rows = si.sq * G;
  const int off = si.sk - si.sq;
  const int j0 = n_block * BN;
  if (j0 >= si.sk) return;

  int m_begin = 0;
  const int m_end = ceil_div(rows, BM);
  if constexpr (Causal) {
    const int i_min = max(0, j0 - off);  // first position that sees key j0
    m_begin = i_min >= si.sq ? m_end : (i_min * G) / BM;
  }

  const int tid = threadIdx.x, w = tid / 128, wi = (tid % 128) / 32, lane = tid % 32;
  const int gq = lane / 4, qd = lane % 4;
  const int hq0 = hkv * G;

  const T* k_seq = static_cast<const T*>(p.k.ptr) + seq_offset(s, p.k, b, si.k0, hkv);
  const T* v_seq = static_cast<const T*>(p.v.ptr) + seq_offset(s, p.v, b, si.k0, hkv);
  const T* q_seq = static_cast<const T*>(p.q.ptr) + seq_offset(s, p.q, b, si.q0, 0);
  const T* do_seq = static_cast<const T*>(p.dout.ptr) + seq_offset(s, p.dout, b, si.q0, 0);
  const float* lse_seq = p.lse + lse_offset(s, p.lse_batch_stride, p.lse_head_stride, b, si.q0, 0);
  const float* dsum_seq = p.dsum + int64_t(si.q0) * s.heads_q;

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

  auto load_q_tile = [&](int m, int buf) {
    unsigned char* q_s = sQ0 + buf * Tl::kQBytes;
    unsigned char* do_s = sdO0 + buf * Tl::kQBytes;
#pragma unroll
    for (int c = tid; c < BM * kChunks; c += Tl::kThreads) {
      const int row = c / kChunks, ch = c % kChunks;
      const int r = m * BM + row;
      const bool valid = r < rows;
      const T* qs = q_seq;
      const T* ds = do_seq;
      if (valid) {
        const int i = r / G, h = hq0 + r % G;
        qs += int64_t(i) * p.q.row_stride + int64_t(h) * p.q.head_stride + ch * 8;
        ds += int64_t(i) * p.dout.row_stride + int64_t(h) * p.dout.head_stride + ch * 8;
      }
      cp_async16(q_s + tile_off(BM, row, ch), qs, valid);
      cp_async16(do_s + tile_off(BM, row, ch), ds, valid);
    }
    if (tid < BM) {
      const int r = m * BM + tid;
      float l = INFINITY, d = 0.f;  // rows past the end: P = exp2(-inf) = 0
      if (r < rows) {
        const int i = r / G, h = hq0 + r % G;
        l = lse_seq[int64_t(h) * p.lse_head_stride + i] * 1.4426950408889634f;
        d = dsum_seq[int64_t(i) * s.heads_q + h];
      }
      sLse[buf * BM + tid] = l;
      sDsum[buf * BM + tid] = d;
    }
  };

  if (m_begin < m_end) load_q_tile(m_begin, 0);
  cp_async_commit();

  float acc_dv[D / 2], acc_dk[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) acc_dv[i] = acc_dk[i] = 0.f;

  // Keys of this thread's accumulator rows: j_a + 8 * ((e / 2) % 2).
  const int j_a = j0 + 64 * w + 16 * wi + gq;
  const unsigned char* sK_w = sK + w * 64 * 128;  // A operand rows of this warpgroup (within each block)
  const unsigned char* sV_w = sV + w * 64 * 128;

  for (int m = m_begin; m < m_end; ++m) {
    const int buf = (m - m_begin) & 1;
    cp_async_wait<0>();
    wg::fence_proxy_async();
    __syncthreads();
    if (m + 1 < m_end) load_q_tile(m + 1, buf ^ 1);
    cp_async_commit();
    const unsigned char* sQ = sQ0 + buf * Tl::kQBytes;
    const unsigned char* sdO = sdO0 + buf * Tl::kQBytes;
    const float* lse2 = sLse + buf * BM;
    const float* dsum = sDsum + buf * BM;

    // S^T = K_w Q^T, dP^T = V_w dO^T: [64 keys] x [64 queries], k over D.
    float acc_s[BM / 2], acc_dp[BM / 2];
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
      acc_s[e] = valid ? fast_exp2(fmaf(acc_s[e], s.scale_log2, -lse2[c])) : 0.f;
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

#pragma unroll
    for (int ri = 0; ri < 2; ++ri) {
      const int r = m * BM + 16 * wi + gq + 8 * ri;
      if (r >= rows) continue;
      float* dst = p.dq_accum + (int64_t(si.q0 + r / G) * s.heads_q + hq0 + r % G) * D + 64 * w + 2 * qd;
#pragma unroll
      for (int t = 0; t < 8; ++t) red_add_f32x2(dst + 8 * t, acc_dq[4 * t + 2 * ri], acc_dq[4 * t + 2 * ri + 1]);
    }
  }
  cp_async_wait<0>();

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
