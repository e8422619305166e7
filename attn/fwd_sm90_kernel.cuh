// Forward kernel for Hopper (FlashAttention-3 scheme): TMA loads of K and V by a producer
// warpgroup, wgmma by consumer warpgroups of 64 query rows, softmax in registers overlapped
// with the next tile's Q K^T. Fixed-length batches, no split (attn/fwd_launch.cuh dispatches
// the other cases to the mma.sync kernel of fwd_kernel.cuh). O and LSE mean what they mean there.
//
// Note [sm90 forward pipeline]
// Shared memory: Q [consumer wg][head_dim / 64 SW128 blocks of 64 x 64]; K[stage], V[stage]
// [head_dim / 64 SW128 blocks of block_n x 64]: one TMA box each (the 128-byte swizzle of the
// tensor map is the SW128 layout of kernels/wgmma.cuh). Barriers per stage: full_k, full_v
// (TMA transaction bytes), empty_k, empty_v (one arrival per consumer warp).
// Consumer warpgroup, key tiles t = 0 .. n-1 (S_t = Q K_t^T in fp32 registers, P_t = exp2 of
// S_t scaled and shifted, in 16-bit registers = the A fragments of O += P V):
//   S_0; softmax(S_0) -> P_0
//   for t >= 1: issue S_t; issue O += P_{t-1} V_{t-1}; wait S_t (release K_t); softmax(S_t)
//               while P V runs; wait P V (release V_{t-1}); O *= exp2(m_{t-1} - m_t); P_t
//   O += P_{n-1} V_{n-1}
// so the exponentials of one tile run while the tensor cores work on the other GEMM.
// Ping-pong (kPingpong): the two consumer warpgroups take turns to issue their GEMMs (named
// barriers 3 and 4), so that one warpgroup's softmax runs while the other's GEMMs do. Warpgroup
// 0 goes first; each issue point (S_0; S_t with P_{t-1} V_{t-1}; the last P V) waits for its
// turn and passes it on; warpgroup 1 passes none after its last, so every bar.sync of 256
// threads meets exactly 128 arrivals.
#pragma once

#include <cuda.h>  // CUtensorMap (a type only: the library does not link libcuda)

#include <cmath>

#include "attn/kernel_common.cuh"
#include "attn/mma.cuh"
#include "attn/traits.hpp"
#include "kernels/hopper.cuh"
#include "kernels/wgmma.cuh"

#ifndef VSTACK_ATTN_SM90_PINGPONG
#define VSTACK_ATTN_SM90_PINGPONG 1
#endif

namespace vstack::attn {

struct FwdSm90Params {
  FwdParams p;
  // K and V as 4-d tensors (head_dim, seqlen_k, heads_kv, batch), box (64, block_n, 1, 1), SW128.
  CUtensorMap tk, tv;
};

template <typename T, int D, bool Causal>
__global__ void __launch_bounds__((fwd_sm90_tile(D).consumer_wgs + 1) * 128, 1)
    fwd_sm90_kernel(const __grid_constant__ FwdSm90Params hp) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  namespace wg = vstack::wgmma;
  using namespace vstack::hopper;
  constexpr FwdSm90Tile kT = fwd_sm90_tile(D);
  constexpr int BM = kT.block_m, BN = kT.block_n, S = kT.stages, WGS = kT.consumer_wgs;
  constexpr int KB = D / 64;                    // SW128 blocks per row of Q, K, V
  constexpr int kQBlock = 64 * 128;             // bytes of one 64-row block
  constexpr int kKVBlock = BN * 128;            // bytes of one BN-row block
  constexpr int kTileBytes = KB * kKVBlock;     // one K or V tile
  const FwdParams& p = hp.p;
  const Shape& s = p.s;

  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  unsigned char* sQ = base;
  unsigned char* sK = sQ + WGS * KB * kQBlock;
  unsigned char* sV = sK + S * kTileBytes;
  uint64_t* bars = reinterpret_cast<uint64_t*>(sV + S * kTileBytes);
  uint64_t* full_k = bars;
  uint64_t* full_v = bars + S;
  uint64_t* empty_k = bars + 2 * S;
  uint64_t* empty_v = bars + 3 * S;

  // Causal: the CTAs with the most key tiles (the last query rows) start first.
  const int m_block = Causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int hkv = blockIdx.y, b = blockIdx.z;
  const int g = s.group;
  const int rows = s.seqlen_q * g;
  const int r_begin = m_block * BM;
  if (r_begin >= rows) return;
  const int sq = s.seqlen_q, sk = s.seqlen_k;
  const int off = sk - sq;  // bottom-right causal alignment

  int n_tiles = ceil_div(sk, BN);
  if constexpr (Causal) {
    const int i_last = (min(rows, r_begin + BM) - 1) / g;
    const int kmax = i_last + off + 1;  // keys 0..kmax-1 are visible to some row of this CTA
    n_tiles = min(n_tiles, kmax <= 0 ? 0 : ceil_div(kmax, BN));
  }

  const int tid = threadIdx.x;
  if (tid == 0) {
    for (int i = 0; i < S; ++i) {
      mbar_init(&full_k[i], 1);
      mbar_init(&full_v[i], 1);
      mbar_init(&empty_k[i], WGS * 4);
      mbar_init(&empty_v[i], WGS * 4);
    }
    fence_barrier_init();
  }
  __syncthreads();

  const int wg_idx = tid / 128;
  if (wg_idx == 0) {
    // Producer warpgroup: one thread issues every load.
    setmaxnreg_dec<24>();
    if (tid == 0) {
      for (int t = 0; t < n_tiles; ++t) {
        const int st = t % S;
        const uint32_t par = ((t / S) & 1) ^ 1;
        mbar_wait(&empty_k[st], par);
        mbar_arrive_expect_tx(&full_k[st], kTileBytes);
#pragma unroll
        for (int kb = 0; kb < KB; ++kb)
          tma_load_4d(sK + st * kTileBytes + kb * kKVBlock, &hp.tk, &full_k[st], kb * 64, t * BN, hkv, b);
        mbar_wait(&empty_v[st], par);
        mbar_arrive_expect_tx(&full_v[st], kTileBytes);
#pragma unroll
        for (int kb = 0; kb < KB; ++kb)
          tma_load_4d(sV + st * kTileBytes + kb * kKVBlock, &hp.tv, &full_v[st], kb * 64, t * BN, hkv, b);
      }
    }
    return;
  }

  setmaxnreg_inc<240>();
  const int c = wg_idx - 1;  // consumer warpgroup
  const int ct = tid - 128 * wg_idx;
  const int warp = ct / 32, lane = ct % 32, gq = lane / 4, qd = lane % 4;
  const int wg_r0 = r_begin + 64 * c;  // first packed row of this warpgroup

  // Q tile of this warpgroup: packed row r -> position r / g of query head hkv * g + r % g.
  unsigned char* sQc = sQ + c * KB * kQBlock;
  {
    const T* q_seq = static_cast<const T*>(p.q.ptr) + seq_offset(s, p.q, b, b * sq, 0);
    constexpr int kChunks = D / 8;
#pragma unroll 4
    for (int i = ct; i < 64 * kChunks; i += 128) {
      const int row = i / kChunks, ch = i % kChunks;
      const int r = wg_r0 + row;
      const bool valid = r < rows;
      const T* src = q_seq;
      if (valid) src += int64_t(r / g) * p.q.row_stride + int64_t(hkv * g + r % g) * p.q.head_stride + ch * 8;
      cp_async16(sQc + (ch / 8) * kQBlock + wg::sw128_offset(row, (ch % 8) * 8), src, valid);
    }
    cp_async_commit();
    cp_async_wait<0>();
    wg::fence_proxy_async();
    named_barrier_sync(1 + c, 128);
  }

  float acc_o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) acc_o[i] = 0.f;
  float acc_s[BN / 2];
  uint32_t pf[BN / 16][4];
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};
  // Query positions of this thread's two rows (16 * warp + gq and + 8 of the warpgroup's 64).
  const int my_i0 = (wg_r0 + 16 * warp + gq) / g, my_i1 = (wg_r0 + 16 * warp + gq + 8) / g;
  const int wg_i0 = wg_r0 / g;
  const float sl2 = s.scale_log2;

  constexpr bool kPingpong = VSTACK_ATTN_SM90_PINGPONG && WGS == 2;
  auto turn_wait = [&]() {
    if constexpr (kPingpong) named_barrier_sync(3 + c, 256);
  };
  auto turn_pass = [&](bool last) {
    if constexpr (kPingpong)
      if (c == 0 || !last) named_barrier_arrive(3 + (1 - c), 256);
  };
  auto issue_s = [&](int st) {
#pragma unroll
    for (int kb = 0; kb < KB; ++kb) {
      const uint64_t dq = wg::desc_kmajor(sQc + kb * kQBlock);
      const uint64_t dk = wg::desc_kmajor(sK + st * kTileBytes + kb * kKVBlock);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) wg::mma_ss<BN, T, 0>(acc_s, dq + 2 * kk, dk + 2 * kk, (kb | kk) != 0);
    }
  };
  auto issue_pv = [&](int st) {
    const uint64_t dv = wg::desc_mnmajor(sV + st * kTileBytes, kKVBlock);
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) wg::mma_rs<D, T, 1>(acc_o, pf[kk], dv + 128 * kk, 1);
  };
  // Masks tile t, then turns S into exp2(S * scale_log2 - m_new) in place; returns the factors
  // exp2(m_old - m_new) of the two rows and adds the tile to the row sums.
  auto softmax = [&](int t, float (&corr)[2]) {
    const bool tail = (t + 1) * BN > sk;
    const bool diag = Causal && (t + 1) * BN - 1 > wg_i0 + off;
    if (tail || diag) {
#pragma unroll
      for (int e = 0; e < BN / 2; ++e) {
        const int j = t * BN + 8 * (e / 4) + 2 * qd + (e & 1);
        const int i = (e / 2) % 2 ? my_i1 : my_i0;
        if (j >= sk || (Causal && j > i + off)) acc_s[e] = -INFINITY;
      }
    }
#pragma unroll
    for (int ri = 0; ri < 2; ++ri) {
      float mx = -INFINITY;
#pragma unroll
      for (int e4 = 0; e4 < BN / 8; ++e4) mx = fmaxf(mx, fmaxf(acc_s[4 * e4 + 2 * ri], acc_s[4 * e4 + 2 * ri + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(row_max[ri], mx * sl2);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      corr[ri] = fast_exp2(row_max[ri] - m_use);
      row_max[ri] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int e4 = 0; e4 < BN / 8; ++e4) {
        acc_s[4 * e4 + 2 * ri] = fast_exp2(fmaf(acc_s[4 * e4 + 2 * ri], sl2, -m_use));
        acc_s[4 * e4 + 2 * ri + 1] = fast_exp2(fmaf(acc_s[4 * e4 + 2 * ri + 1], sl2, -m_use));
        sum += acc_s[4 * e4 + 2 * ri] + acc_s[4 * e4 + 2 * ri + 1];
      }
      row_sum[ri] = row_sum[ri] * corr[ri] + sum;
    }
  };
  auto pack_p = [&]() {
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
      for (int i = 0; i < 4; ++i) pf[kk][i] = pack2<T>(acc_s[8 * kk + 2 * i], acc_s[8 * kk + 2 * i + 1]);
  };

  if (n_tiles > 0) {
    if (kPingpong && c == 1) named_barrier_arrive(3, 256);  // warpgroup 0 goes first
    mbar_wait(&full_k[0], 0);
    turn_wait();
    wg::fence_operands(acc_s);
    wg::arrive();
    issue_s(0);
    wg::commit();
    turn_pass(false);
    wg::wait<0>();
    wg::fence_operands(acc_s);
    if (lane == 0) mbar_arrive(&empty_k[0]);
    float corr[2];
    softmax(0, corr);
    pack_p();
    for (int t = 1; t < n_tiles; ++t) {
      const int st = t % S, pst = (t - 1) % S;
      mbar_wait(&full_k[st], (t / S) & 1);
      mbar_wait(&full_v[pst], ((t - 1) / S) & 1);
      turn_wait();
      wg::fence_operands(acc_s);
      wg::fence_operands(acc_o);
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) wg::fence_operands(pf[kk]);
      wg::arrive();
      issue_s(st);
      wg::commit();
      issue_pv(pst);
      wg::commit();
      turn_pass(false);
      wg::wait<1>();
      wg::fence_operands(acc_s);
      if (lane == 0) mbar_arrive(&empty_k[st]);
      softmax(t, corr);
      wg::wait<0>();
      wg::fence_operands(acc_o);
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) wg::fence_operands(pf[kk]);
      if (lane == 0) mbar_arrive(&empty_v[pst]);
#pragma unroll
      for (int e = 0; e < D / 2; ++e) acc_o[e] *= corr[(e / 2) % 2];
      pack_p();
    }
    const int lst = (n_tiles - 1) % S;
    mbar_wait(&full_v[lst], ((n_tiles - 1) / S) & 1);
    turn_wait();
    wg::fence_operands(acc_o);
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) wg::fence_operands(pf[kk]);
    wg::arrive();
    issue_pv(lst);
    wg::commit();
    turn_pass(true);
    wg::wait<0>();
    wg::fence_operands(acc_o);
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) wg::fence_operands(pf[kk]);
    // The last V stage is not released: this CTA loads nothing more. (A CTA that went on to
    // another work tile would have to: the producer's next round waits on it; docs/NOTES.md.)
  }

  // Epilogue: normalise, write O and LSE.
  const int hq0 = hkv * g;
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    float l = row_sum[ri];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int r = wg_r0 + 16 * warp + gq + 8 * ri;
    if (r >= rows) continue;
    const int i = r / g, h = hq0 + r % g;
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const float lse = l > 0.f ? (row_max[ri] + log2f(l)) * 0.69314718055994531f : INFINITY;
    T* o_row = static_cast<T*>(p.o.ptr) + seq_offset(s, p.o, b, b * sq, h) + int64_t(i) * p.o.row_stride;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
      *reinterpret_cast<uint32_t*>(o_row + dt * 8 + 2 * qd) =
          pack2<T>(acc_o[4 * dt + 2 * ri] * inv, acc_o[4 * dt + 2 * ri + 1] * inv);
    if (qd == 0) p.lse[lse_offset(s, p.lse_batch_stride, p.lse_head_stride, b, b * sq, h) + i] = lse;
  }
#endif
}

}  // namespace vstack::attn
