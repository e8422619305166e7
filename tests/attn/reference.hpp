// CPU reference of attention (forward and backward), used by the GPU tests (tests/gpu/attn/)
// and checked itself by tests/attn/. Layout [batch][heads][seq][head_dim], row-major, values
// as float (already representable in the kernel's dtype).
//
// Two modes:
//   exact:   every operation in double, the "fp32 reference" (better than fp32);
//   lowp:    the same math as torch runs it in bf16/fp16: each matmul output and the softmax
//            output are rounded to the dtype (fp32 accumulation inside). The error of lowp
//            against exact is the yardstick: the kernel may be at most twice as far off.
// Variable-length batches: seqlens_q[b], seqlens_k[b] (<= the S dimension of the arrays).
#pragma once

#include <cstdint>
#include <vector>

namespace vstack::attn::ref {

enum class Round { exact, bf16, fp16 };

float round_to(Round r, float x);  // identity for exact

struct Problem {
  int batch = 1, heads_q = 1, heads_kv = 1, seqlen_q = 1, seqlen_k = 1, head_dim = 64;
  std::vector<int> seqlens_q, seqlens_k;  // empty: all full length
  float scale = 0.125f;
  bool causal = false;
  int sq(int b) const { return seqlens_q.empty() ? seqlen_q : seqlens_q[b]; }
  int sk(int b) const { return seqlens_k.empty() ? seqlen_k : seqlens_k[b]; }
  int64_t q_elems() const { return int64_t(batch) * heads_q * seqlen_q * head_dim; }
  int64_t kv_elems() const { return int64_t(batch) * heads_kv * seqlen_k * head_dim; }
  int64_t q_index(int b, int h, int i, int d) const {
    return ((int64_t(b) * heads_q + h) * seqlen_q + i) * head_dim + d;
  }
  int64_t kv_index(int b, int h, int j, int d) const {
    return ((int64_t(b) * heads_kv + h) * seqlen_k + j) * head_dim + d;
  }
  int64_t lse_index(int b, int h, int i) const { return (int64_t(b) * heads_q + h) * seqlen_q + i; }
  // Bottom-right causal alignment.
  bool visible(int b, int i, int j) const { return !causal || j <= i + sk(b) - sq(b); }
};

struct Forward {
  std::vector<float> o;    // q_elems(); rows past sq(b) are 0
  std::vector<float> lse;  // batch * heads_q * seqlen_q; +inf for rows that see no key
};

struct Backward {
  std::vector<float> dq, dk, dv;
};

Forward forward(const Problem& p, const std::vector<float>& q, const std::vector<float>& k,
                const std::vector<float>& v, Round r);

Backward backward(const Problem& p, const std::vector<float>& q, const std::vector<float>& k,
                  const std::vector<float>& v, const std::vector<float>& dout, Round r);

// max |a - b| over the elements where both are finite; infinities must agree exactly
// (returns +inf otherwise, as does a NaN in either).
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);

// flash-attention's rule: err(kernel, exact) <= 2 * err(lowp, exact) + atol (atol covers the
// case where lowp happens to be exact, e.g. outputs that are exactly 0).
bool within_rule(double err_kernel, double err_lowp, double atol);

}  // namespace vstack::attn::ref
