/* vstack flash attention (attn/): the C API.
 *
 * Semantics (those of flash-attention):
 *   q [batch, heads_q, seqlen_q, head_dim], k and v [batch, heads_kv, seqlen_k, head_dim]
 *   in any layout whose last dimension is contiguous, described by element strides
 *   (so [B, H, S, D] and [B, S, H, D] are both accepted). heads_q % heads_kv == 0:
 *   query head h reads key/value head h / (heads_q / heads_kv) (GQA, MQA).
 *   head_dim in {64, 128, 256}; dtype f16 or bf16; fp32 accumulation.
 *   O = softmax(scale * q k^T [+ causal mask]) v; LSE = log(sum_j exp(scale * q.k_j)).
 *   Causal masks are aligned bottom-right: query i sees key j iff j <= i + seqlen_k - seqlen_q.
 *   A query row that sees no key gets O = 0 and LSE = +inf (as flash-attention does).
 *
 * Variable-length batches: cu_seqlens_q / cu_seqlens_k (device int32, batch + 1 entries,
 * cumulative offsets starting at 0). Sequence b then holds rows cu[b] .. cu[b+1]-1 of q (k, v);
 * batch_stride is ignored and seqlen_q / seqlen_k are the maxima over the batch.
 * total_q must then be cu_seqlens_q[batch] (it sizes workspaces).
 *
 * LSE: float, element (b, h, i) at lse + b * batch_stride + h * head_stride + i
 * (with cu_seqlens: lse + h * head_stride + cu_seqlens_q[b] + i).
 *
 * Memory: no seqlen_q x seqlen_k buffer. The forward's workspace (split over keys, for
 * decode) and the backward's workspace (fp32 dq accumulator, rowsum(dO * O)) are linear
 * in the number of query rows; ask their size with the *_workspace_size functions.
 */
#ifndef VSTACK_ATTN_H
#define VSTACK_ATTN_H

#include "vstack/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vstack_attn_tensor {
  void* ptr;
  int64_t batch_stride; /* elements; ignored with cu_seqlens */
  int64_t head_stride;  /* elements */
  int64_t row_stride;   /* elements between consecutive sequence positions */
} vstack_attn_tensor_t;

typedef struct vstack_attn_lse {
  float* ptr;
  int64_t batch_stride; /* elements; ignored with cu_seqlens */
  int64_t head_stride;  /* elements; rows are contiguous */
} vstack_attn_lse_t;

typedef struct vstack_attn_shape {
  vstack_dtype_t dtype; /* VSTACK_DTYPE_F16 or VSTACK_DTYPE_BF16 */
  int32_t batch;
  int32_t heads_q;
  int32_t heads_kv;
  int32_t seqlen_q; /* the maximum with cu_seqlens */
  int32_t seqlen_k; /* the maximum with cu_seqlens */
  int32_t head_dim;
  const int32_t* cu_seqlens_q; /* NULL for fixed length (then cu_seqlens_k must be NULL too) */
  const int32_t* cu_seqlens_k;
  int32_t total_q; /* rows of q over the batch: batch * seqlen_q, or cu_seqlens_q[batch] */
  float scale;     /* softmax scale, e.g. 1 / sqrt(head_dim) */
  int32_t causal;  /* 0 or 1 */
} vstack_attn_shape_t;

typedef struct vstack_attn_fwd_args {
  vstack_attn_shape_t shape;
  vstack_attn_tensor_t q, k, v;
  vstack_attn_tensor_t o; /* written */
  vstack_attn_lse_t lse;  /* written */
  int32_t num_splits;     /* split over keys: 0 = choose (decode), 1 = never, n = n splits */
  void* workspace;        /* device memory, >= vstack_attn_fwd_workspace_size(); may be NULL if that is 0 */
  size_t workspace_bytes;
} vstack_attn_fwd_args_t;

typedef struct vstack_attn_bwd_args {
  vstack_attn_shape_t shape;
  vstack_attn_tensor_t q, k, v, o, dout;
  vstack_attn_lse_t lse;           /* as written by the forward */
  vstack_attn_tensor_t dq, dk, dv; /* written; dk, dv summed over the query heads of each group */
  void* workspace;                 /* device memory, >= vstack_attn_bwd_workspace_size() */
  size_t workspace_bytes;
} vstack_attn_bwd_args_t;

/* Bytes of workspace the forward needs on the current device (0 without a split). */
VSTACK_API vstack_status_t vstack_attn_fwd_workspace_size(const vstack_attn_fwd_args_t* args, size_t* bytes);
VSTACK_API vstack_status_t vstack_attn_fwd(const vstack_attn_fwd_args_t* args, void* stream);

VSTACK_API vstack_status_t vstack_attn_bwd_workspace_size(const vstack_attn_bwd_args_t* args, size_t* bytes);
VSTACK_API vstack_status_t vstack_attn_bwd(const vstack_attn_bwd_args_t* args, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* VSTACK_ATTN_H */
