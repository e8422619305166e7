// Forward kernel (FlashAttention-2 scheme on mma.sync): one CTA per (block_m packed query
// rows, key/value head, batch [x split]); online softmax over key tiles; O in registers.
#pragma once

#include <cmath>

#include "attn/kernel_common.cuh"
#include "attn/mma.cuh"
#include "attn/traits.hpp"

// Two CTAs of 4 warps per SM: ptxas then gives the kernel up to 255 registers. With one
// 16-row tile per warp it used 208 / 212 / 246 at head_dim 64 / 128 / 256 without spilling;
// asking for three CTAs (168 registers) spilled at every head_dim.
#ifndef VSTACK_ATTN_FWD_MINB
#define VSTACK_ATTN_FWD_MINB 2
#endif

namespace vstack::attn {

template <typename T, int D, bool Causal>
__global__ void __launch_bounds__(fwd_tile(D).warps * 32, VSTACK_ATTN_FWD_MINB)
    fwd_kernel(const __grid_constant__ FwdParams p) {
  constexpr FwdTile kT = fwd_tile(D);
  constexpr int BM = kT.block_m, BN = kT.block_n, kThreads = kT.warps * 32, M = kT.m_tiles;
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  constexpr bool kQRegs = kT.q_in_regs;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + BM * kRowStride<D>;
  T* sV = sK + BN * kRowStride<D>;

  const Shape& s = p.s;
  const int m_block = blockIdx.x, hkv = blockIdx.y;
  const int b = blockIdx.z / p.num_splits, split = blockIdx.z % p.num_splits;
  const SeqInfo si = seq_info(s, b);
  const int g = s.group;
  const int rows = si.sq * g;
  const int r_begin = m_block * BM;
  if (r_begin >= rows) return;
  const int off = si.sk - si.sq;  // bottom-right causal alignment

  int n_end = ceil_div(si.sk, BN);
  if constexpr (Causal) {
    const int i_last = (min(rows, r_begin + BM) - 1) / g;
    const int kmax = i_last + off + 1;  // keys 0..kmax-1 are visible to some row of this tile
    n_end = min(n_end, kmax <= 0 ? 0 : ceil_div(kmax, BN));
  }
  int n_begin = 0;
  if (p.num_splits > 1) {
    const int per = ceil_div(n_end, p.num_splits);
    n_begin = split * per;
    n_end = min(n_end, n_begin + per);
  }

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int gq = lane / 4, qd = lane % 4;
  const int warp_row = warp * 16 * M;  // first tile row of this warp; tile mt covers +16 mt

  const T* q_seq = static_cast<const T*>(p.q.ptr) + seq_offset(s, p.q, b, si.q0, 0);
  const T* k_seq = static_cast<const T*>(p.k.ptr) + seq_offset(s, p.k, b, si.k0, hkv);
  const T* v_seq = static_cast<const T*>(p.v.ptr) + seq_offset(s, p.v, b, si.k0, hkv);

  auto load_kv = [&](T* dst, const T* src, int64_t row_stride, int n) {
#pragma unroll
    for (int c = tid; c < BN * kChunks; c += kThreads) {
      const int row = c / kChunks, ch = c % kChunks;
      const int j = n * BN + row;
      const bool valid = j < si.sk;
      cp_async16(dst + swz<D>(row, ch * 8), valid ? src + int64_t(j) * row_stride + ch * 8 : src, valid);
    }
  };

  float acc_o[M][D / 8][4];
  float row_max[M][2], row_sum[M][2];
#pragma unroll
  for (int mt = 0; mt < M; ++mt) {
#pragma unroll
    for (int i = 0; i < D / 8; ++i) acc_o[mt][i][0] = acc_o[mt][i][1] = acc_o[mt][i][2] = acc_o[mt][i][3] = 0.f;
    row_max[mt][0] = row_max[mt][1] = -INFINITY;
    row_sum[mt][0] = row_sum[mt][1] = 0.f;
  }

  if (n_begin < n_end) {
    // Q tile: packed row r -> position r / g of query head hkv * g + r % g.
#pragma unroll
    for (int c = tid; c < BM * kChunks; c += kThreads) {
      const int row = c / kChunks, ch = c % kChunks;
      const int r = r_begin + row;
      const bool valid = r < rows;
      const T* src = q_seq;
      if (valid) src += int64_t(r / g) * p.q.row_stride + int64_t(hkv * g + r % g) * p.q.head_stride + ch * 8;
      cp_async16(sQ + swz<D>(row, ch * 8), src, valid);
    }
    load_kv(sK, k_seq, p.k.row_stride, n_begin);
    cp_async_commit();

    uint32_t q_frag[M][kQRegs ? D / 16 : 1][4];
    int my_i[M][2];  // query positions of this thread's accumulator rows
#pragma unroll
    for (int mt = 0; mt < M; ++mt) {
      my_i[mt][0] = (r_begin + warp_row + mt * 16 + gq) / g;
      my_i[mt][1] = (r_begin + warp_row + mt * 16 + gq + 8) / g;
    }
    const int tile_i0 = r_begin / g;
    // Warps whose rows all lie past the end (decode: a few packed rows in a 128-row tile)
    // skip the math but keep loading and synchronising with the others.
    const bool warp_active = r_begin + warp_row < rows;

    for (int n = n_begin; n < n_end; ++n) {
      cp_async_wait<0>();
      __syncthreads();
      if (kQRegs && n == n_begin && warp_active) {
#pragma unroll
        for (int mt = 0; mt < M; ++mt)
#pragma unroll
          for (int kk = 0; kk < (kQRegs ? D / 16 : 0); ++kk)
            ldsm_x4(q_frag[mt][kk][0], q_frag[mt][kk][1], q_frag[mt][kk][2], q_frag[mt][kk][3],
                    sQ + swz<D>(warp_row + mt * 16 + lane % 16, kk * 16 + (lane / 16) * 8));
      }
      load_kv(sV, v_seq, p.v.row_stride, n);
      cp_async_commit();

      // S = Q K^T for this warp's M x 16 rows x BN keys; each K fragment feeds M MMAs.
      float acc_s[M][BN / 8][4];
      if (warp_active) {
#pragma unroll
      for (int mt = 0; mt < M; ++mt)
#pragma unroll
        for (int i = 0; i < BN / 8; ++i) acc_s[mt][i][0] = acc_s[mt][i][1] = acc_s[mt][i][2] = acc_s[mt][i][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t a[M][4];
#pragma unroll
        for (int mt = 0; mt < M; ++mt) {
          if constexpr (kQRegs) {
            a[mt][0] = q_frag[mt][kk][0]; a[mt][1] = q_frag[mt][kk][1];
            a[mt][2] = q_frag[mt][kk][2]; a[mt][3] = q_frag[mt][kk][3];
          } else {
            ldsm_x4(a[mt][0], a[mt][1], a[mt][2], a[mt][3],
                    sQ + swz<D>(warp_row + mt * 16 + lane % 16, kk * 16 + (lane / 16) * 8));
          }
        }
#pragma unroll
        for (int np = 0; np < BN / 16; ++np) {
          uint32_t b0, b1, b2, b3;
          ldsm_x4(b0, b1, b2, b3, sK + swz<D>(np * 16 + lane % 8 + (lane / 16) * 8, kk * 16 + ((lane / 8) % 2) * 8));
#pragma unroll
          for (int mt = 0; mt < M; ++mt) {
            MmaOp<T>::run(acc_s[mt][2 * np], a[mt], b0, b1);
            MmaOp<T>::run(acc_s[mt][2 * np + 1], a[mt], b2, b3);
          }
        }
      }

      // Mask the key tail and, for causal, keys right of the diagonal.
      const bool tail = (n + 1) * BN > si.sk;
      const bool diag = Causal && (n + 1) * BN - 1 > tile_i0 + off;
      if (tail || diag) {
#pragma unroll
        for (int mt = 0; mt < M; ++mt)
#pragma unroll
          for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int j = n * BN + nt * 8 + 2 * qd + (e & 1);
              const int i = my_i[mt][e >> 1];
              if (j >= si.sk || (Causal && j > i + off)) acc_s[mt][nt][e] = -INFINITY;
            }
      }

      // Online softmax in the log2 domain.
#pragma unroll
      for (int mt = 0; mt < M; ++mt)
#pragma unroll
        for (int ri = 0; ri < 2; ++ri) {
          float mx = -INFINITY;
#pragma unroll
          for (int nt = 0; nt < BN / 8; ++nt)
            mx = fmaxf(mx, fmaxf(acc_s[mt][nt][2 * ri], acc_s[mt][nt][2 * ri + 1]));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          const float m_new = fmaxf(row_max[mt][ri], mx * s.scale_log2);
          const float m_use = m_new == -INFINITY ? 0.f : m_new;
          const float corr = fast_exp2(row_max[mt][ri] - m_use);
          row_max[mt][ri] = m_new;
          float sum = 0.f;
#pragma unroll
          for (int nt = 0; nt < BN / 8; ++nt) {
            acc_s[mt][nt][2 * ri] = fast_exp2(fmaf(acc_s[mt][nt][2 * ri], s.scale_log2, -m_use));
            acc_s[mt][nt][2 * ri + 1] = fast_exp2(fmaf(acc_s[mt][nt][2 * ri + 1], s.scale_log2, -m_use));
            sum += acc_s[mt][nt][2 * ri] + acc_s[mt][nt][2 * ri + 1];
          }
          row_sum[mt][ri] = row_sum[mt][ri] * corr + sum;
#pragma unroll
          for (int dt = 0; dt < D / 8; ++dt) {
            acc_o[mt][dt][2 * ri] *= corr;
            acc_o[mt][dt][2 * ri + 1] *= corr;
          }
        }
      }  // warp_active

      cp_async_wait<0>();
      __syncthreads();  // V[n] has landed; every warp is done with K[n]
      if (n + 1 < n_end) {
        load_kv(sK, k_seq, p.k.row_stride, n + 1);
        cp_async_commit();
      }

      // O += P V: the S accumulators of two adjacent n-tiles form one A fragment; each V
      // fragment feeds M MMAs.
      if (warp_active) {
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        uint32_t a[M][4];
#pragma unroll
        for (int mt = 0; mt < M; ++mt) {
          a[mt][0] = pack2<T>(acc_s[mt][2 * kk][0], acc_s[mt][2 * kk][1]);
          a[mt][1] = pack2<T>(acc_s[mt][2 * kk][2], acc_s[mt][2 * kk][3]);
          a[mt][2] = pack2<T>(acc_s[mt][2 * kk + 1][0], acc_s[mt][2 * kk + 1][1]);
          a[mt][3] = pack2<T>(acc_s[mt][2 * kk + 1][2], acc_s[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          uint32_t b0, b1, b2, b3;
          ldsm_x4_t(b0, b1, b2, b3, sV + swz<D>(kk * 16 + ((lane / 8) % 2) * 8 + lane % 8, dp * 16 + (lane / 16) * 8));
#pragma unroll
          for (int mt = 0; mt < M; ++mt) {
            MmaOp<T>::run(acc_o[mt][2 * dp], a[mt], b0, b1);
            MmaOp<T>::run(acc_o[mt][2 * dp + 1], a[mt], b2, b3);
          }
        }
      }
      }  // warp_active
    }
    cp_async_wait<0>();
  }

  // Epilogue: normalise, write O and LSE (or the split's partials).
  const int hq0 = hkv * g;
#pragma unroll
  for (int mt = 0; mt < M; ++mt)
#pragma unroll
    for (int ri = 0; ri < 2; ++ri) {
      float l = row_sum[mt][ri];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const int r = r_begin + warp_row + mt * 16 + gq + 8 * ri;
      if (r >= rows) continue;
      const int i = r / g, h = hq0 + r % g;
      const float inv = l > 0.f ? 1.f / l : 0.f;
      const float lse = l > 0.f ? (row_max[mt][ri] + log2f(l)) * 0.69314718055994531f
                                : (p.num_splits > 1 ? -INFINITY : INFINITY);
      if (p.num_splits == 1) {
        T* o_row = static_cast<T*>(p.o.ptr) + seq_offset(s, p.o, b, si.q0, h) + int64_t(i) * p.o.row_stride;
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt)
          *reinterpret_cast<uint32_t*>(o_row + dt * 8 + 2 * qd) =
              pack2<T>(acc_o[mt][dt][2 * ri] * inv, acc_o[mt][dt][2 * ri + 1] * inv);
        if (qd == 0) p.lse[lse_offset(s, p.lse_batch_stride, p.lse_head_stride, b, si.q0, h) + i] = lse;
      } else {
        const int64_t prow = (int64_t(split) * s.total_q + si.q0 + i) * s.heads_q + h;
        float* o_row = p.o_part + prow * D;
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt)
          *reinterpret_cast<float2*>(o_row + dt * 8 + 2 * qd) =
              make_float2(acc_o[mt][dt][2 * ri] * inv, acc_o[mt][dt][2 * ri + 1] * inv);
        if (qd == 0) p.lse_part[prow] = lse;
      }
    }
}

// Merges the splits: O = sum_s exp(lse_s - lse) O_s, lse = log sum_s exp(lse_s).
// One warp per (query position, head); grid (ceil(seqlen_q * heads_q / 8), batch).
template <typename T, int D>
__global__ void __launch_bounds__(256) fwd_combine_kernel(const __grid_constant__ FwdParams p) {
  const Shape& s = p.s;
  const auto [b, si, i, h, lane] = row_head_warp(s);
  if (i >= si.sq) return;
  const int64_t rows_all = int64_t(s.total_q) * s.heads_q;
  const int64_t prow = int64_t(si.q0 + i) * s.heads_q + h;
  float lmax = -INFINITY;
  for (int sp = 0; sp < p.num_splits; ++sp) lmax = fmaxf(lmax, p.lse_part[sp * rows_all + prow]);
  constexpr int E = D / 32;
  float acc[E];
#pragma unroll
  for (int e = 0; e < E; ++e) acc[e] = 0.f;
  float lse = INFINITY;
  if (lmax != -INFINITY) {
    float sum = 0.f;
    for (int sp = 0; sp < p.num_splits; ++sp) sum += expf(p.lse_part[sp * rows_all + prow] - lmax);
    lse = lmax + logf(sum);
    for (int sp = 0; sp < p.num_splits; ++sp) {
      const float w = expf(p.lse_part[sp * rows_all + prow] - lse);
      const float* src = p.o_part + (sp * rows_all + prow) * D + lane * E;
#pragma unroll
      for (int e = 0; e < E; ++e) acc[e] += w * src[e];
    }
  }
  T* o_row = static_cast<T*>(p.o.ptr) + seq_offset(s, p.o, b, si.q0, h) + int64_t(i) * p.o.row_stride + lane * E;
#pragma unroll
  for (int e = 0; e < E; e += 2) *reinterpret_cast<uint32_t*>(o_row + e) = pack2<T>(acc[e], acc[e + 1]);
  if (lane == 0) p.lse[lse_offset(s, p.lse_batch_stride, p.lse_head_stride, b, si.q0, h) + i] = lse;
}

}  // namespace vstack::attn
