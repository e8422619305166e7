// Kernel-side parameters of the attention kernels: plain structs, passed by value
// (__grid_constant__) to every kernel. Strides are in elements; head_dim is contiguous.
//
// Note [Packed query rows]
// A CTA works for one key/value head. The query rows it sees are the seqlen_q x g rows
// of the g = heads_q / heads_kv query heads that share that key/value head, packed as
// r = i * g + (h % g) (i the position, h the query head). For decode (seqlen_q = 1) with
// GQA this fills the 16-row MMA tiles with heads instead of padding, and the K/V tile in
// shared memory serves all heads of the group. The causal mask uses i = r / g.
#pragma once

#include <cstdint>

namespace vstack::attn {

struct Tensor {
  void* ptr;
  int64_t batch_stride, head_stride, row_stride;
};

struct Shape {
  int batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
  int group;  // heads_q / heads_kv
  const int32_t* cu_seqlens_q;  // nullptr: fixed length
  const int32_t* cu_seqlens_k;
  int total_q;  // rows of q over the batch
  float scale;
  float scale_log2;  // scale * log2(e): the kernels use exp2
  bool causal;
};

struct FwdParams {
  Shape s;
  Tensor q, k, v, o;
  float* lse;
  int64_t lse_batch_stride, lse_head_stride;
  int num_splits;  // 1: write o, lse; > 1: write the partials below, then combine
  float* o_part;   // [num_splits][total_q][heads_q][head_dim]
  float* lse_part; // [num_splits][total_q][heads_q]
};

struct BwdParams {
  Shape s;
  Tensor q, k, v, o, dout, dq, dk, dv;
  float* lse;
  int64_t lse_batch_stride, lse_head_stride;
  float* dq_accum;  // [total_q][heads_q][head_dim], fp32, unscaled; hd128 on wgmma: Note [dQ planes]
  float* dsum;      // [total_q][heads_q]: rowsum(dO * O); hd128 on wgmma: packed-row order
  float* lse_log2;  // [total_q * heads_q]: lse * log2(e), wgmma kernel only (Note [dQ planes] order, as its dsum)
};

}  // namespace vstack::attn
