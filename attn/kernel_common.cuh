// Shared by the forward and backward kernels: where sequence b lives.
#pragma once

#include "attn/params.hpp"

namespace vstack::attn {

struct SeqInfo {
  int q0;  // first row of sequence b in the row space of q (and of the fp32 workspaces)
  int sq;
  int k0;
  int sk;
};

__device__ __forceinline__ SeqInfo seq_info(const Shape& s, int b) {
  if (s.cu_seqlens_q != nullptr) {
    const int q0 = s.cu_seqlens_q[b], k0 = s.cu_seqlens_k[b];
    return SeqInfo{q0, s.cu_seqlens_q[b + 1] - q0, k0, s.cu_seqlens_k[b + 1] - k0};
  }
  return SeqInfo{b * s.seqlen_q, s.seqlen_q, b * s.seqlen_k, s.seqlen_k};
}

// The kernels with one warp per (query position i, head h) of sequence b = blockIdx.y, 8 warps
// per CTA: grid (ceil(seqlen_q * heads_q / 8), batch). Warps with i >= si.sq have no row.
struct RowHeadWarp {
  int b;
  SeqInfo si;
  int i, h, lane;
};
__device__ __forceinline__ RowHeadWarp row_head_warp(const Shape& s) {
  const int b = blockIdx.y;
  const int idx = blockIdx.x * 8 + threadIdx.x / 32;
  return RowHeadWarp{b, seq_info(s, b), idx / s.heads_q, idx % s.heads_q, static_cast<int>(threadIdx.x % 32)};
}

// Backward: the first packed query tile (tiles of bm rows, Note [Packed query rows]: row =
// position * group + head within the group) that the key block starting at key j0 must visit.
// Causal attention is aligned bottom-right (position i sees keys <= i + off, off = sk - sq), so
// tiles before the one holding the first position that sees j0 are skipped; m_end (the number
// of tiles) when no position does.
template <bool Causal>
__device__ __forceinline__ int first_query_tile(const SeqInfo& si, int off, int group, int j0, int bm, int m_end) {
  if constexpr (!Causal) return 0;
  const int i_min = max(0, j0 - off);  // first position that sees key j0
  return i_min >= si.sq ? m_end : (i_min * group) / bm;
}

// Element offset of (sequence b, head h, position 0) in t.
__device__ __forceinline__ int64_t seq_offset(const Shape& s, const Tensor& t, int b, int row0, int h) {
  const int64_t base = s.cu_seqlens_q != nullptr ? int64_t(row0) * t.row_stride : int64_t(b) * t.batch_stride;
  return base + int64_t(h) * t.head_stride;
}

__device__ __forceinline__ int64_t lse_offset(const Shape& s, int64_t batch_stride, int64_t head_stride,
                                              int b, int q0, int h) {
  return s.cu_seqlens_q != nullptr ? int64_t(h) * head_stride + q0 : int64_t(b) * batch_stride + int64_t(h) * head_stride;
}

}  // namespace vstack::attn
