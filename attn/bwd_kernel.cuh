// Backward kernels (FlashAttention-2 scheme on mma.sync):
//   bwd_prep_kernel:  dsum = rowsum(dO * O) per query row, and zero the fp32 dQ accumulator;
//   bwd_kernel:       one CTA per (block_n keys, key/value head, batch) walks every packed query
//                     row of its head group (Note [Packed query rows]), so dK and dV of a group
//                     are summed in registers; dQ is added atomically in fp32;
//   bwd_dq_kernel:    dq = scale * dq_accum, in the output dtype.
#pragma once

#include <cmath>

#include "attn/kernel_common.cuh"
#include "attn/mma.cuh"
#include "attn/traits.hpp"

namespace vstack::attn {

// One warp per (query position, head); grid (ceil(seqlen_q * heads_q / 8), batch).
// kPacked (the wgmma kernel): dsum and lse * log2(e) in packed-row order (Note [dQ planes]),
// so that the main kernel reads 64 consecutive values per query tile.
template <typename T, int D, bool kPacked = false>
__global__ void __launch_bounds__(256) bwd_prep_kernel(const __grid_constant__ BwdParams p) {
  const Shape& s = p.s;
  const auto [b, si, i, h, lane] = row_head_warp(s);
  if (i >= si.sq) return;
  constexpr int E = D / 32;
  const T* o = static_cast<const T*>(p.o.ptr) + seq_offset(s, p.o, b, si.q0, h) + int64_t(i) * p.o.row_stride + lane * E;
  const T* d = static_cast<const T*>(p.dout.ptr) + seq_offset(s, p.dout, b, si.q0, h) + int64_t(i) * p.dout.row_stride + lane * E;
  float acc = 0.f;
#pragma unroll
  for (int e = 0; e < E; ++e) acc += to_float<T>(o[e]) * to_float<T>(d[e]);
#pragma unroll
  for (int w = 16; w >= 1; w /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, w);
  const int64_t prow = int64_t(si.q0 + i) * s.heads_q + h;
  if constexpr (kPacked) {
    if (lane == 0) {
      const int64_t packed = (int64_t(h / s.group) * s.total_q + si.q0) * s.group + int64_t(i) * s.group + h % s.group;
      p.dsum[packed] = acc;
      p.lse_log2[packed] =
          p.lse[lse_offset(s, p.lse_batch_stride, p.lse_head_stride, b, si.q0, h) + i] * 1.4426950408889634f;
    }
  } else {
    if (lane == 0) p.dsum[prow] = acc;
  }
  float* dqa = p.dq_accum + prow * D + lane * E;
#pragma unroll
  for (int e = 0; e < E; ++e) dqa[e] = 0.f;
}

// kPlanes: dq_accum in the layout of the wgmma kernel (Note [dQ planes], head_dim 128 only);
// else [total_q][heads_q][D].
template <typename T, int D, bool kPlanes = false>
__global__ void __launch_bounds__(256) bwd_dq_kernel(const __grid_constant__ BwdParams p) {
  const Shape& s = p.s;
  const auto [b, si, i, h, lane] = row_head_warp(s);
  if (i >= si.sq) return;
  constexpr int E = D / 32;
  const float* src;
  if constexpr (kPlanes) {
    static_assert(D == 128, "dQ planes hold 128 columns");
    const int r = i * s.group + h % s.group;  // packed row (Note [Packed query rows])
    const int64_t row = (int64_t(h / s.group) * s.total_q + si.q0) * s.group + r;
    const int c = lane % 16;                  // this lane's 16-byte chunk of its plane
    src = p.dq_accum + (lane / 16) * int64_t(s.total_q) * s.heads_q * 64 + row * 64 + ((c ^ (r % 8)) * 4);
  } else {
    src = p.dq_accum + (int64_t(si.q0 + i) * s.heads_q + h) * D + lane * E;
  }
  T* dst = static_cast<T*>(p.dq.ptr) + seq_offset(s, p.dq, b, si.q0, h) + int64_t(i) * p.dq.row_stride + lane * E;
#pragma unroll
  for (int e = 0; e < E; e += 2) *reinterpret_cast<uint32_t*>(dst + e) = pack2<T>(src[e] * s.scale, src[e + 1] * s.scale);
}

template <typename T, int D, bool Causal>
__global__ void __launch_bounds__(bwd_tile(D).warps * 32)
    bwd_kernel(const __grid_constant__ BwdParams p) {
  constexpr BwdTile kT = bwd_tile(D);
  constexpr int BM = kT.block_m, BN = kT.block_n, kThreads = kT.warps * 32;
  constexpr int kChunks = D / 8;
  constexpr int kKeyGroups = BN / 16;
  constexpr int QW = BM / kT.p1_q_splits;  // phase 1: queries per warp
  constexpr int DC = D / kT.p2_d_splits;   // phase 2: dK/dV columns per warp
  constexpr int DQC = D / kT.dq_d_splits;  // dQ: columns per warp
  static_assert(kKeyGroups * kT.p1_q_splits == kT.warps && kKeyGroups * kT.p2_d_splits == kT.warps &&
                (BM / 16) * kT.dq_d_splits == kT.warps, "warp roles must cover the CTA");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sK = reinterpret_cast<T*>(smem_raw);
  constexpr int kTileQ = BM * kRowStride<D>;
  T* sV = sK + BN * kRowStride<D>;
  T* sQbuf = sV + BN * kRowStride<D>;  // [2][kTileQ]
  T* sdObuf = sQbuf + 2 * kTileQ;      // [2][kTileQ]
  T* sP = sdObuf + 2 * kTileQ;         // P^T  [BN][BM]
  T* sdS = sP + BN * kRowStride<BM>;   // dS^T [BN][BM]
  float* sLse = reinterpret_cast<float*>(sdS + BN * kRowStride<BM>);  // [2][BM], log2 domain
  float* sDsum = sLse + 2 * BM;                           // [2][BM]

  const Shape& s = p.s;
  const int n_block = blockIdx.x, hkv = blockIdx.y, b = blockIdx.z;
  const SeqInfo si = seq_info(s, b);
  const int g = s.group;
  const int rows = si.sq * g;
  const int off = si.sk - si.sq;
  const int j0 = n_block * BN;
  if (j0 >= si.sk) return;

  const int m_end = ceil_div(rows, BM);
  const int m_begin = first_query_tile<Causal>(si, off, g, j0, BM, m_end);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int gq = lane / 4, qd = lane % 4;
  const int hq0 = hkv * g;

  const T* k_seq = static_cast<const T*>(p.k.ptr) + seq_offset(s, p.k, b, si.k0, hkv);
  const T* v_seq = static_cast<const T*>(p.v.ptr) + seq_offset(s, p.v, b, si.k0, hkv);
  const T* q_seq = static_cast<const T*>(p.q.ptr) + seq_offset(s, p.q, b, si.q0, 0);
  const T* do_seq = static_cast<const T*>(p.dout.ptr) + seq_offset(s, p.dout, b, si.q0, 0);
  const float* lse_seq = p.lse + lse_offset(s, p.lse_batch_stride, p.lse_head_stride, b, si.q0, 0);
  const float* dsum_seq = p.dsum + int64_t(si.q0) * s.heads_q;

#pragma unroll
  for (int c = tid; c < BN * kChunks; c += kThreads) {
    const int row = c / kChunks, ch = c % kChunks;
    const int j = j0 + row;
    const bool valid = j < si.sk;
    cp_async16(sK + swz<D>(row, ch * 8), valid ? k_seq + int64_t(j) * p.k.row_stride + ch * 8 : k_seq, valid);
    cp_async16(sV + swz<D>(row, ch * 8), valid ? v_seq + int64_t(j) * p.v.row_stride + ch * 8 : v_seq, valid);
  }

  auto load_q_tile = [&](int m, int buf) {
    T* dq_s = sQbuf + buf * kTileQ;
    T* ddo_s = sdObuf + buf * kTileQ;
#pragma unroll
    for (int c = tid; c < BM * kChunks; c += kThreads) {
      const int row = c / kChunks, ch = c % kChunks;
      const int r = m * BM + row;
      const bool valid = r < rows;
      const T* qs = q_seq;
      const T* ds = do_seq;
      if (valid) {
        const int i = r / g, h = hq0 + r % g;
        qs += int64_t(i) * p.q.row_stride + int64_t(h) * p.q.head_stride + ch * 8;
        ds += int64_t(i) * p.dout.row_stride + int64_t(h) * p.dout.head_stride + ch * 8;
      }
      cp_async16(dq_s + swz<D>(row, ch * 8), qs, valid);
      cp_async16(ddo_s + swz<D>(row, ch * 8), ds, valid);
    }
    if (tid < BM) {
      const int r = m * BM + tid;
      float l = INFINITY, d = 0.f;  // rows past the end: P = exp2(-inf) = 0
      if (r < rows) {
        const int i = r / g, h = hq0 + r % g;
        l = lse_seq[int64_t(h) * p.lse_head_stride + i] * 1.4426950408889634f;
        d = dsum_seq[int64_t(i) * s.heads_q + h];
      }
      sLse[buf * BM + tid] = l;
      sDsum[buf * BM + tid] = d;
    }
  };

  if (m_begin < m_end) load_q_tile(m_begin, 0);
  cp_async_commit();

  // Phase-2 role: 16 keys x DC columns of dK and dV.
  const int kg2 = warp % kKeyGroups, dh2 = warp / kKeyGroups;
  float acc_dv[DC / 8][4], acc_dk[DC / 8][4];
#pragma unroll
  for (int i = 0; i < DC / 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_dv[i][e] = acc_dk[i][e] = 0.f;

  // Phase-1 role: 16 keys x QW queries of S^T and dP^T.
  const int kg1 = warp % kKeyGroups, qs1 = warp / kKeyGroups;
  const int j_a = j0 + kg1 * 16 + gq;  // keys of this thread's accumulator rows (and +8)

  for (int m = m_begin; m < m_end; ++m) {
    const int buf = (m - m_begin) & 1;
    cp_async_wait<0>();
    __syncthreads();
    if (m + 1 < m_end) load_q_tile(m + 1, buf ^ 1);
    cp_async_commit();
    const T* sQ = sQbuf + buf * kTileQ;
    const T* sdO = sdObuf + buf * kTileQ;
    const float* lse2 = sLse + buf * BM;
    const float* dsum = sDsum + buf * BM;

    // Phase 1: S^T = K Q^T and dP^T = V dO^T.
    {
      float acc_s[QW / 8][4], acc_dp[QW / 8][4];
#pragma unroll
      for (int i = 0; i < QW / 8; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_s[i][e] = acc_dp[i][e] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t ak[4], av[4];
        ldsm_x4(ak[0], ak[1], ak[2], ak[3], sK + swz<D>(kg1 * 16 + lane % 16, kk * 16 + (lane / 16) * 8));
        ldsm_x4(av[0], av[1], av[2], av[3], sV + swz<D>(kg1 * 16 + lane % 16, kk * 16 + (lane / 16) * 8));
#pragma unroll
        for (int np = 0; np < QW / 16; ++np) {
          const int qrow = qs1 * QW + np * 16 + lane % 8 + (lane / 16) * 8;
          const int qcol = kk * 16 + ((lane / 8) % 2) * 8;
          uint32_t b0, b1, b2, b3;
          ldsm_x4(b0, b1, b2, b3, sQ + swz<D>(qrow, qcol));
          MmaOp<T>::run(acc_s[2 * np], ak, b0, b1);
          MmaOp<T>::run(acc_s[2 * np + 1], ak, b2, b3);
          ldsm_x4(b0, b1, b2, b3, sdO + swz<D>(qrow, qcol));
          MmaOp<T>::run(acc_dp[2 * np], av, b0, b1);
          MmaOp<T>::run(acc_dp[2 * np + 1], av, b2, b3);
        }
      }
      // Masks only on tiles that hold the key tail or cross the causal diagonal: the per-element
      // test divides by the group size, which cost half the causal backward's speed when done
      // on every tile.
      const bool tail = j0 + BN > si.sk;
      const bool diag = Causal && j0 + BN - 1 > (m * BM) / g + off;
#pragma unroll
      for (int nt = 0; nt < QW / 8; ++nt) {
        const int qc = qs1 * QW + nt * 8 + 2 * qd;  // tile column of e = 0 (and +1)
        float pv[4], dsv[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int c = qc + (e & 1);
          const int j = j_a + (e >= 2 ? 8 : 0);
          bool valid = true;
          if (tail) valid = j < si.sk;
          if (Causal && diag) valid = valid && j <= (m * BM + c) / g + off;
          const float pe = valid ? fast_exp2(fmaf(acc_s[nt][e], s.scale_log2, -lse2[c])) : 0.f;
          pv[e] = pe;
          dsv[e] = pe * (acc_dp[nt][e] - dsum[c]);
        }
        *reinterpret_cast<uint32_t*>(sP + swz<BM>(kg1 * 16 + gq, qc)) = pack2<T>(pv[0], pv[1]);
        *reinterpret_cast<uint32_t*>(sP + swz<BM>(kg1 * 16 + gq + 8, qc)) = pack2<T>(pv[2], pv[3]);
        *reinterpret_cast<uint32_t*>(sdS + swz<BM>(kg1 * 16 + gq, qc)) = pack2<T>(dsv[0], dsv[1]);
        *reinterpret_cast<uint32_t*>(sdS + swz<BM>(kg1 * 16 + gq + 8, qc)) = pack2<T>(dsv[2], dsv[3]);
      }
    }
    __syncthreads();

    // Phase 2: dV += P^T dO, dK += dS^T Q (16 keys x DC columns per warp).
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk) {
      uint32_t ap[4], ads[4];
      ldsm_x4(ap[0], ap[1], ap[2], ap[3], sP + swz<BM>(kg2 * 16 + lane % 16, kk * 16 + (lane / 16) * 8));
      ldsm_x4(ads[0], ads[1], ads[2], ads[3], sdS + swz<BM>(kg2 * 16 + lane % 16, kk * 16 + (lane / 16) * 8));
#pragma unroll
      for (int dp = 0; dp < DC / 16; ++dp) {
        const int brow = kk * 16 + ((lane / 8) % 2) * 8 + lane % 8;
        const int bcol = dh2 * DC + dp * 16 + (lane / 16) * 8;
        uint32_t b0, b1, b2, b3;
        ldsm_x4_t(b0, b1, b2, b3, sdO + swz<D>(brow, bcol));
        MmaOp<T>::run(acc_dv[2 * dp], ap, b0, b1);
        MmaOp<T>::run(acc_dv[2 * dp + 1], ap, b2, b3);
        ldsm_x4_t(b0, b1, b2, b3, sQ + swz<D>(brow, bcol));
        MmaOp<T>::run(acc_dk[2 * dp], ads, b0, b1);
        MmaOp<T>::run(acc_dk[2 * dp + 1], ads, b2, b3);
      }
    }

    // dQ += dS K (16 queries x DQC columns per warp), added to the fp32 accumulator.
    {
      const int qg = warp % (BM / 16), dhq = warp / (BM / 16);
      float acc_dq[DQC / 8][4];
#pragma unroll
      for (int i = 0; i < DQC / 8; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_dq[i][e] = 0.f;
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        uint32_t a[4];
        const int mi = lane / 8;
        ldsm_x4_t(a[0], a[1], a[2], a[3], sdS + swz<BM>(kk * 16 + (mi / 2) * 8 + lane % 8, qg * 16 + (mi % 2) * 8));
#pragma unroll
        for (int dp = 0; dp < DQC / 16; ++dp) {
          uint32_t b0, b1, b2, b3;
          ldsm_x4_t(b0, b1, b2, b3,
                    sK + swz<D>(kk * 16 + ((lane / 8) % 2) * 8 + lane % 8, dhq * DQC + dp * 16 + (lane / 16) * 8));
          MmaOp<T>::run(acc_dq[2 * dp], a, b0, b1);
          MmaOp<T>::run(acc_dq[2 * dp + 1], a, b2, b3);
        }
      }
#pragma unroll
      for (int ri = 0; ri < 2; ++ri) {
        const int r = m * BM + qg * 16 + gq + 8 * ri;
        if (r >= rows) continue;
        float* dst = p.dq_accum + (int64_t(si.q0 + r / g) * s.heads_q + hq0 + r % g) * D + dhq * DQC + 2 * qd;
#pragma unroll
        for (int dt = 0; dt < DQC / 8; ++dt) {
#if __CUDA_ARCH__ >= 900  // the vector atomic (sm_90+): one L2 operation for the pair
          atomicAdd(reinterpret_cast<float2*>(dst + dt * 8), make_float2(acc_dq[dt][2 * ri], acc_dq[dt][2 * ri + 1]));
#else
          atomicAdd(dst + dt * 8, acc_dq[dt][2 * ri]);
          atomicAdd(dst + dt * 8 + 1, acc_dq[dt][2 * ri + 1]);
#endif
        }
      }
    }
  }
  cp_async_wait<0>();

  // dK = scale * dS^T Q; dV = P^T dO.
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    const int j = j0 + kg2 * 16 + gq + 8 * ri;
    if (j >= si.sk) continue;
    T* dk_row = static_cast<T*>(p.dk.ptr) + seq_offset(s, p.dk, b, si.k0, hkv) + int64_t(j) * p.dk.row_stride;
    T* dv_row = static_cast<T*>(p.dv.ptr) + seq_offset(s, p.dv, b, si.k0, hkv) + int64_t(j) * p.dv.row_stride;
#pragma unroll
    for (int dt = 0; dt < DC / 8; ++dt) {
      const int col = dh2 * DC + dt * 8 + 2 * qd;
      *reinterpret_cast<uint32_t*>(dk_row + col) = pack2<T>(acc_dk[dt][2 * ri] * s.scale, acc_dk[dt][2 * ri + 1] * s.scale);
      *reinterpret_cast<uint32_t*>(dv_row + col) = pack2<T>(acc_dv[dt][2 * ri], acc_dv[dt][2 * ri + 1]);
    }
  }
}

}  // namespace vstack::attn
