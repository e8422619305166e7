#include "attn/validate.hpp"

#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/status.hpp"

namespace vstack::attn {
namespace {

using kernels::fail;

constexpr size_t align256(size_t n) { return (n + 255) / 256 * 256; }

vstack_status_t check_tensor(const char* name, const vstack_attn_tensor_t& t) {
  if (t.ptr == nullptr) return fail(VSTACK_ERR_INVALID_ARGUMENT, "attn: %s.ptr is NULL", name);
  if (reinterpret_cast<uintptr_t>(t.ptr) % 16 != 0)
    return fail(VSTACK_ERR_MISALIGNED, "attn: %s.ptr %p is not 16-byte aligned", name, t.ptr);
  // The kernels move rows in 16-byte pieces: every stride must keep that alignment.
  const int64_t strides[3] = {t.batch_stride, t.head_stride, t.row_stride};
  const char* names[3] = {"batch_stride", "head_stride", "row_stride"};
  for (int i = 0; i < 3; ++i) {
    if (strides[i] < 0)
      return fail(VSTACK_ERR_UNSUPPORTED_SHAPE, "attn: %s.%s = %lld is negative", name, names[i],
                  static_cast<long long>(strides[i]));
    if (strides[i] % 8 != 0)
      return fail(VSTACK_ERR_MISALIGNED, "attn: %s.%s = %lld is not a multiple of 8 elements (16 bytes)", name,
                  names[i], static_cast<long long>(strides[i]));
  }
  return VSTACK_OK;
}

vstack_status_t check_lse(const vstack_attn_lse_t& l) {
  if (l.ptr == nullptr) return fail(VSTACK_ERR_INVALID_ARGUMENT, "attn: lse.ptr is NULL");
  if (reinterpret_cast<uintptr_t>(l.ptr) % 4 != 0) return fail(VSTACK_ERR_MISALIGNED, "attn: lse.ptr is not 4-byte aligned");
  if (l.batch_stride < 0 || l.head_stride < 0) return fail(VSTACK_ERR_UNSUPPORTED_SHAPE, "attn: lse strides must be >= 0");
  return VSTACK_OK;
}

}  // namespace

vstack_status_t validate_shape(const vstack_attn_shape_t& in, Shape* out) {
  if (in.dtype != VSTACK_DTYPE_F16 && in.dtype != VSTACK_DTYPE_BF16)
    return fail(VSTACK_ERR_UNSUPPORTED_DTYPE, "attn: dtype %d: only f16 and bf16 are supported", int(in.dtype));
  if (in.head_dim != 64 && in.head_dim != 128 && in.head_dim != 256)
    return fail(VSTACK_ERR_UNSUPPORTED_SHAPE, "attn: head_dim %d: supported are 64, 128, 256", in.head_dim);
  if (in.batch < 1 || in.heads_q < 1 || in.heads_kv < 1 || in.seqlen_q < 1 || in.seqlen_k < 1)
    return fail(VSTACK_ERR_INVALID_ARGUMENT,
                "attn: batch %d, heads_q %d, heads_kv %d, seqlen_q %d, seqlen_k %d: each must be >= 1", in.batch,
                in.heads_q, in.heads_kv, in.seqlen_q, in.seqlen_k);
  if (in.heads_q % in.heads_kv != 0)
    return fail(VSTACK_ERR_UNSUPPORTED_SHAPE, "attn: heads_q %d is not a multiple of heads_kv %d", in.heads_q,
                in.heads_kv);
  if ((in.cu_seqlens_q == nullptr) != (in.cu_seqlens_k == nullptr))
    return fail(VSTACK_ERR_INVALID_ARGUMENT, "attn: give both cu_seqlens_q and cu_seqlens_k, or neither");
  const bool varlen = in.cu_seqlens_q != nullptr;
  if (!varlen && int64_t(in.total_q) != int64_t(in.batch) * in.seqlen_q)
    return fail(VSTACK_ERR_INVALID_ARGUMENT, "attn: total_q %d != batch * seqlen_q = %lld", in.total_q,
                static_cast<long long>(int64_t(in.batch) * in.seqlen_q));
  if (varlen && in.total_q < 0) return fail(VSTACK_ERR_INVALID_ARGUMENT, "attn: total_q %d < 0", in.total_q);
  if (!std::isfinite(in.scale) || !(in.scale > 0.f))
    return fail(VSTACK_ERR_INVALID_ARGUMENT, "attn: scale %g must be finite and > 0", double(in.scale));
  if (in.causal != 0 && in.causal != 1) return fail(VSTACK_ERR_INVALID_ARGUMENT, "attn: causal must be 0 or 1");
  const int group = in.heads_q / in.heads_kv;
  // Packed query rows (seqlen_q x group) and key indices are ints in the kernels; grid.y/z limits.
  if (int64_t(in.seqlen_q) * group > std::numeric_limits<int32_t>::max() / 2)
    return fail(VSTACK_ERR_UNSUPPORTED_SHAPE, "attn: seqlen_q * heads_q / heads_kv too large");
  if (in.heads_kv > 65535 || in.batch > 65535)
    return fail(VSTACK_ERR_UNSUPPORTED_SHAPE, "attn: heads_kv and batch must be <= 65535");
  *out = Shape{in.batch, in.heads_q, in.heads_kv, in.seqlen_q, in.seqlen_k, in.head_dim, group,
               in.cu_seqlens_q, in.cu_seqlens_k, in.total_q, in.scale,
               in.scale * 1.4426950408889634f, in.causal != 0};
  return VSTACK_OK;
}

static Tensor to_tensor(const vstack_attn_tensor_t& t) {
  return Tensor{t.ptr, t.batch_stride, t.head_stride, t.row_stride};
}

vstack_status_t validate_fwd(const vstack_attn_fwd_args_t& a, FwdParams* out) {
  FwdParams p{};
  vstack_status_t st = validate_shape(a.shape, &p.s);
  if (st != VSTACK_OK) return st;
  const char* names[4] = {"q", "k", "v", "o"};
  const vstack_attn_tensor_t* ts[4] = {&a.q, &a.k, &a.v, &a.o};
  for (int i = 0; i < 4; ++i)
    if ((st = check_tensor(names[i], *ts[i])) != VSTACK_OK) return st;
  if ((st = check_lse(a.lse)) != VSTACK_OK) return st;
  if (a.num_splits < 0) return fail(VSTACK_ERR_INVALID_ARGUMENT, "attn: num_splits %d < 0", a.num_splits);
  if (int64_t(a.shape.batch) * (a.num_splits > 0 ? a.num_splits : 1) > 65535)
    return fail(VSTACK_ERR_UNSUPPORTED_SHAPE, "attn: batch * num_splits must be <= 65535");
  p.q = to_tensor(a.q);
  p.k = to_tensor(a.k);
  p.v = to_tensor(a.v);
  p.o = to_tensor(a.o);
  p.lse = a.lse.ptr;
  p.lse_batch_stride = a.lse.batch_stride;
  p.lse_head_stride = a.lse.head_stride;
  p.num_splits = 1;
  *out = p;
  return VSTACK_OK;
}

vstack_status_t validate_bwd(const vstack_attn_bwd_args_t& a, BwdParams* out) {
  BwdParams p{};
  vstack_status_t st = validate_shape(a.shape, &p.s);
  if (st != VSTACK_OK) return st;
  const char* names[8] = {"q", "k", "v", "o", "dout", "dq", "dk", "dv"};
  const vstack_attn_tensor_t* ts[8] = {&a.q, &a.k, &a.v, &a.o, &a.dout, &a.dq, &a.dk, &a.dv};
  for (int i = 0; i < 8; ++i)
    if ((st = check_tensor(names[i], *ts[i])) != VSTACK_OK) return st;
  if ((st = check_lse(a.lse)) != VSTACK_OK) return st;
  p.q = to_tensor(a.q);
  p.k = to_tensor(a.k);
  p.v = to_tensor(a.v);
  p.o = to_tensor(a.o);
  p.dout = to_tensor(a.dout);
  p.dq = to_tensor(a.dq);
  p.dk = to_tensor(a.dk);
  p.dv = to_tensor(a.dv);
  p.lse = a.lse.ptr;
  p.lse_batch_stride = a.lse.batch_stride;
  p.lse_head_stride = a.lse.head_stride;
  *out = p;
  return VSTACK_OK;
}

size_t fwd_workspace_bytes(const Shape& s, int num_splits) {
  if (num_splits <= 1) return 0;
  const size_t rows = size_t(num_splits) * size_t(s.total_q) * size_t(s.heads_q);
  return align256(rows * size_t(s.head_dim) * 4) + align256(rows * 4);
}

size_t bwd_workspace_bytes(const Shape& s) {
  const size_t rows = size_t(s.total_q) * size_t(s.heads_q);
  return align256(rows * size_t(s.head_dim) * 4) + 2 * align256(rows * 4);
}

void fwd_workspace_carve(const Shape& s, int num_splits, void* ws, FwdParams* p) {
  const size_t rows = size_t(num_splits) * size_t(s.total_q) * size_t(s.heads_q);
  p->o_part = static_cast<float*>(ws);
  p->lse_part = reinterpret_cast<float*>(static_cast<char*>(ws) + align256(rows * size_t(s.head_dim) * 4));
}

void bwd_workspace_carve(const Shape& s, void* ws, BwdParams* p) {
  const size_t rows = size_t(s.total_q) * size_t(s.heads_q);
  p->dq_accum = static_cast<float*>(ws);
  p->dsum = reinterpret_cast<float*>(static_cast<char*>(ws) + align256(rows * size_t(s.head_dim) * 4));
  p->lse_log2 = reinterpret_cast<float*>(reinterpret_cast<char*>(p->dsum) + align256(rows * 4));
}

}  // namespace vstack::attn
