// GPU correctness matrix of the attention kernels through the C API, against the CPU reference
// (tests/attn/reference.hpp): every dtype x head_dim x causal at shapes with lengths that are no
// multiple of any tile, Sq != Sk (both ways), Sq = 1 with long keys (split over keys, automatic
// and forced), one head, many heads, GQA, MQA, both layouts, variable lengths; forward (O, LSE)
// and backward (dq, dk, dv). Outputs are poisoned (NaN bytes) before every call.
// Rule: max|kernel - exact| <= 2 * max|lowp - exact| + atol, lowp = the same math rounded like
// torch's bf16/fp16 matmul/softmax outputs, atol = one rounding unit of the dtype at 1/8.
// Usage: attn_gpu_test [--quick]. Exit status 0 only if every case passed.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "reference.hpp"
#include "vstack/kernels.h"
#include "tests/gpu/cuda_check.hpp"

using namespace vstack::attn::ref;

namespace {


uint16_t to_bits(float x, bool bf16) {
  if (bf16) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return uint16_t(u >> 16);  // x is already a bf16 value
  }
  _Float16 h = static_cast<_Float16>(x);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

float from_bits(uint16_t b, bool bf16) {
  if (bf16) {
    uint32_t u = uint32_t(b) << 16;
    float x;
    std::memcpy(&x, &u, 4);
    return x;
  }
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return float(h);
}

enum class Layout { bhsd, bshd, varlen };

struct Case {
  bool bf16;
  int d, batch, hq, hkv, sq, sk;
  bool causal;
  Layout layout;
  int splits;  // 0 auto, 1 none, n forced
  bool bwd;
  std::string name() const {
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s d%d b%d h%d/%d sq%d sk%d %s %s splits=%d%s", bf16 ? "bf16" : "fp16", d,
                  batch, hq, hkv, sq, sk, causal ? "causal" : "full",
                  layout == Layout::bhsd ? "bhsd" : layout == Layout::bshd ? "bshd" : "varlen", splits,
                  bwd ? " +bwd" : "");
    return buf;
  }
};

// Device buffer of 16-bit elements in the case's layout, mapped from/to the reference layout.
struct Mapper {
  const Problem& p;
  Layout layout;
  std::vector<int> cu_q, cu_k;  // varlen offsets
  // Element index of (b, h, i, d) in the device layout, for a tensor with `heads` heads and
  // `s` maximal rows (fixed layouts) or the cu offsets (varlen).
  int64_t at(int b, int h, int i, int d, int heads, int s, const std::vector<int>& cu) const {
    switch (layout) {
      case Layout::bhsd: return ((int64_t(b) * heads + h) * s + i) * p.head_dim + d;
      case Layout::bshd: return ((int64_t(b) * s + i) * heads + h) * p.head_dim + d;
      case Layout::varlen: return ((int64_t(cu[b]) + i) * heads + h) * p.head_dim + d;
    }
    return 0;
  }
  vstack_attn_tensor_t desc(void* ptr, int heads, int s) const {
    const int64_t D = p.head_dim;
    switch (layout) {
      case Layout::bhsd: return {ptr, heads * s * D, s * D, D};
      case Layout::bshd: return {ptr, s * heads * D, D, heads * D};
      case Layout::varlen: return {ptr, 0, D, heads * D};
    }
    return {};
  }
  int64_t q_elems() const {
    return layout == Layout::varlen ? int64_t(cu_q.back()) * p.heads_q * p.head_dim : p.q_elems();
  }
  int64_t kv_elems() const {
    return layout == Layout::varlen ? int64_t(cu_k.back()) * p.heads_kv * p.head_dim : p.kv_elems();
  }
};

struct DevBuf {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit DevBuf(size_t n) : bytes(n) { CK(cudaMalloc(&ptr, n ? n : 16)); }
  ~DevBuf() { cudaFree(ptr); }
  void poison() { CK(cudaMemset(ptr, 0xff, bytes)); }  // NaN in f16, bf16 and f32
};

std::vector<uint16_t> to_device_layout(const std::vector<float>& ref, const Mapper& m, bool q_side, bool bf16) {
  const Problem& p = m.p;
  const int heads = q_side ? p.heads_q : p.heads_kv;
  const int s = q_side ? p.seqlen_q : p.seqlen_k;
  std::vector<uint16_t> out(q_side ? m.q_elems() : m.kv_elems(), 0);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < (q_side ? p.sq(b) : p.sk(b)); ++i)
        for (int d = 0; d < p.head_dim; ++d) {
          const int64_t r = q_side ? p.q_index(b, h, i, d) : p.kv_index(b, h, i, d);
          out[m.at(b, h, i, d, heads, s, q_side ? m.cu_q : m.cu_k)] = to_bits(ref[r], bf16);
        }
  return out;
}

std::vector<float> from_device_layout(const std::vector<uint16_t>& dev, const Mapper& m, bool q_side, bool bf16) {
  const Problem& p = m.p;
  const int heads = q_side ? p.heads_q : p.heads_kv;
  const int s = q_side ? p.seqlen_q : p.seqlen_k;
  std::vector<float> out(q_side ? p.q_elems() : p.kv_elems(), 0.f);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < (q_side ? p.sq(b) : p.sk(b)); ++i)
        for (int d = 0; d < p.head_dim; ++d) {
          const int64_t r = q_side ? p.q_index(b, h, i, d) : p.kv_index(b, h, i, d);
          out[r] = from_bits(dev[m.at(b, h, i, d, heads, s, q_side ? m.cu_q : m.cu_k)], bf16);
        }
  return out;
}

struct Verdict {
  bool ok = true;
  std::string detail;
  void check(const char* what, const std::vector<float>& kernel, const std::vector<float>& exact,
             const std::vector<float>& lowp, double atol) {
    const double ek = max_abs_diff(kernel, exact), el = max_abs_diff(lowp, exact);
    const bool pass = within_rule(ek, el, atol);
    char buf[160];
    std::snprintf(buf, sizeof buf, " %s %.2e/%.2e%s", what, ek, el, pass ? "" : "(!)");
    detail += buf;
    ok = ok && pass;
  }
};

bool run_case(const Case& c, std::mt19937& rng) {
  Problem p;
  p.batch = c.batch;
  p.heads_q = c.hq;
  p.heads_kv = c.hkv;
  p.seqlen_q = c.sq;
  p.seqlen_k = c.sk;
  p.head_dim = c.d;
  p.causal = c.causal;
  p.scale = 1.0f / std::sqrt(float(c.d)) * 1.3f;  // not the default, to catch a dropped scale
  Mapper m{p, c.layout, {0}, {0}};
  if (c.layout == Layout::varlen) {
    // Lengths from 0 (an empty sequence) to the maximum, always including the maximum.
    std::uniform_int_distribution<int> lq(0, c.sq), lk(0, c.sk);
    for (int b = 0; b < c.batch; ++b) {
      int a = b == 0 ? c.sq : lq(rng), k = b == 0 ? c.sk : lk(rng);
      if (b == 1) a = 0;
      p.seqlens_q.push_back(a);
      p.seqlens_k.push_back(k);
      m.cu_q.push_back(m.cu_q.back() + a);
      m.cu_k.push_back(m.cu_k.back() + k);
    }
  }
  const Round rnd = c.bf16 ? Round::bf16 : Round::fp16;
  std::normal_distribution<float> dist(0.f, 1.f);
  auto gen = [&](int64_t n) {
    std::vector<float> x(n);
    for (auto& e : x) e = round_to(rnd, dist(rng));
    return x;
  };
  auto q = gen(p.q_elems()), k = gen(p.kv_elems()), v = gen(p.kv_elems()), dout = gen(p.q_elems());
  // Zero the rows past each sequence's end so that the reference and the device agree on them.
  if (c.layout == Layout::varlen)
    for (int b = 0; b < p.batch; ++b)
      for (int d = 0; d < p.head_dim; ++d) {
        for (int h = 0; h < p.heads_q; ++h)
          for (int i = p.sq(b); i < p.seqlen_q; ++i) q[p.q_index(b, h, i, d)] = dout[p.q_index(b, h, i, d)] = 0.f;
        for (int h = 0; h < p.heads_kv; ++h)
          for (int j = p.sk(b); j < p.seqlen_k; ++j) k[p.kv_index(b, h, j, d)] = v[p.kv_index(b, h, j, d)] = 0.f;
      }

  const size_t qb = m.q_elems() * 2, kb = m.kv_elems() * 2;
  DevBuf dq_(qb), dk_(kb), dv_(kb), dout_(qb), do_(qb), ddq(qb), ddk(kb), ddv(kb);
  const int total_q = c.layout == Layout::varlen ? m.cu_q.back() : c.batch * c.sq;
  DevBuf dlse(size_t(p.batch) * p.heads_q * p.seqlen_q * 4 + 16);
  DevBuf dcu_q(m.cu_q.size() * 4), dcu_k(m.cu_k.size() * 4);
  auto up = [](DevBuf& b, const std::vector<uint16_t>& h) {
    CK(cudaMemcpy(b.ptr, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  };
  up(dq_, to_device_layout(q, m, true, c.bf16));
  up(dk_, to_device_layout(k, m, false, c.bf16));
  up(dv_, to_device_layout(v, m, false, c.bf16));
  up(dout_, to_device_layout(dout, m, true, c.bf16));
  CK(cudaMemcpy(dcu_q.ptr, m.cu_q.data(), m.cu_q.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dcu_k.ptr, m.cu_k.data(), m.cu_k.size() * 4, cudaMemcpyHostToDevice));

  vstack_attn_shape_t shape{};
  shape.dtype = c.bf16 ? VSTACK_DTYPE_BF16 : VSTACK_DTYPE_F16;
  shape.batch = p.batch;
  shape.heads_q = p.heads_q;
  shape.heads_kv = p.heads_kv;
  shape.seqlen_q = p.seqlen_q;
  shape.seqlen_k = p.seqlen_k;
  shape.head_dim = p.head_dim;
  shape.total_q = total_q;
  shape.scale = p.scale;
  shape.causal = c.causal;
  if (c.layout == Layout::varlen) {
    shape.cu_seqlens_q = static_cast<const int32_t*>(dcu_q.ptr);
    shape.cu_seqlens_k = static_cast<const int32_t*>(dcu_k.ptr);
  }
  vstack_attn_lse_t lse_desc{static_cast<float*>(dlse.ptr), int64_t(p.heads_q) * p.seqlen_q, p.seqlen_q};
  if (c.layout == Layout::varlen) lse_desc = {static_cast<float*>(dlse.ptr), 0, total_q};

  vstack_attn_fwd_args_t fa{};
  fa.shape = shape;
  fa.q = m.desc(dq_.ptr, p.heads_q, p.seqlen_q);
  fa.k = m.desc(dk_.ptr, p.heads_kv, p.seqlen_k);
  fa.v = m.desc(dv_.ptr, p.heads_kv, p.seqlen_k);
  fa.o = m.desc(do_.ptr, p.heads_q, p.seqlen_q);
  fa.lse = lse_desc;
  fa.num_splits = c.splits;
  size_t ws_bytes = 0;
  if (vstack_attn_fwd_workspace_size(&fa, &ws_bytes) != VSTACK_OK) {
    std::printf("FAIL %s: workspace size: %s\n", c.name().c_str(), vstack_last_error());
    return false;
  }
  DevBuf ws(ws_bytes);
  fa.workspace = ws_bytes ? ws.ptr : nullptr;
  fa.workspace_bytes = ws_bytes;
  do_.poison();
  dlse.poison();
  vstack_status_t st = vstack_attn_fwd(&fa, nullptr);
  CK(cudaDeviceSynchronize());
  if (st != VSTACK_OK) {
    std::printf("FAIL %s: fwd: %s: %s\n", c.name().c_str(), vstack_status_string(st), vstack_last_error());
    return false;
  }
  std::vector<uint16_t> o_dev(m.q_elems());
  CK(cudaMemcpy(o_dev.data(), do_.ptr, qb, cudaMemcpyDeviceToHost));
  std::vector<float> lse_dev_raw(size_t(p.batch) * p.heads_q * p.seqlen_q);
  CK(cudaMemcpy(lse_dev_raw.data(), dlse.ptr, lse_dev_raw.size() * 4, cudaMemcpyDeviceToHost));
  std::vector<float> lse_dev(lse_dev_raw.size(), 0.f);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h)
      for (int i = 0; i < p.sq(b); ++i)
        lse_dev[p.lse_index(b, h, i)] = c.layout == Layout::varlen ? lse_dev_raw[size_t(h) * total_q + m.cu_q[b] + i]
                                                                   : lse_dev_raw[p.lse_index(b, h, i)];
  // The reference leaves lse 0 on padding rows (varlen); so does lse_dev.
  const Forward ex = forward(p, q, k, v, Round::exact), lo = forward(p, q, k, v, rnd);
  const double atol = (c.bf16 ? 1.0 / 256 : 1.0 / 2048) / 8;
  Verdict verdict;
  verdict.check("O", from_device_layout(o_dev, m, true, c.bf16), ex.o, lo.o, atol);
  verdict.check("LSE", lse_dev, ex.lse, lo.lse, atol);

  if (c.bwd) {
    vstack_attn_bwd_args_t ba{};
    ba.shape = shape;
    ba.q = fa.q;
    ba.k = fa.k;
    ba.v = fa.v;
    ba.o = fa.o;
    ba.dout = m.desc(dout_.ptr, p.heads_q, p.seqlen_q);
    ba.lse = lse_desc;
    ba.dq = m.desc(ddq.ptr, p.heads_q, p.seqlen_q);
    ba.dk = m.desc(ddk.ptr, p.heads_kv, p.seqlen_k);
    ba.dv = m.desc(ddv.ptr, p.heads_kv, p.seqlen_k);
    size_t bws = 0;
    if (vstack_attn_bwd_workspace_size(&ba, &bws) != VSTACK_OK) {
      std::printf("FAIL %s: bwd workspace size: %s\n", c.name().c_str(), vstack_last_error());
      return false;
    }
    DevBuf bw(bws);
    bw.poison();  // the kernels must initialise what they accumulate into
    ba.workspace = bw.ptr;
    ba.workspace_bytes = bws;
    ddq.poison();
    ddk.poison();
    ddv.poison();
    st = vstack_attn_bwd(&ba, nullptr);
    CK(cudaDeviceSynchronize());
    if (st != VSTACK_OK) {
      std::printf("FAIL %s: bwd: %s: %s\n", c.name().c_str(), vstack_status_string(st), vstack_last_error());
      return false;
    }
    std::vector<uint16_t> hq(m.q_elems()), hk(m.kv_elems()), hv(m.kv_elems());
    CK(cudaMemcpy(hq.data(), ddq.ptr, qb, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hk.data(), ddk.ptr, kb, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hv.data(), ddv.ptr, kb, cudaMemcpyDeviceToHost));
    const Backward gex = backward(p, q, k, v, dout, Round::exact), glo = backward(p, q, k, v, dout, rnd);
    verdict.check("dQ", from_device_layout(hq, m, true, c.bf16), gex.dq, glo.dq, atol);
    verdict.check("dK", from_device_layout(hk, m, false, c.bf16), gex.dk, glo.dk, atol);
    verdict.check("dV", from_device_layout(hv, m, false, c.bf16), gex.dv, glo.dv, atol);
  }
  std::printf("%s %s:%s\n", verdict.ok ? "ok  " : "FAIL", c.name().c_str(), verdict.detail.c_str());
  return verdict.ok;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  std::random_device seed;  // fresh inputs every run; the seed is printed to reproduce
  const unsigned s = seed();
  std::printf("attn_gpu_test seed %u\n", s);
  std::mt19937 rng(s);
  std::vector<Case> cases;
  for (bool bf16 : {true, false})
    for (int d : {64, 128, 256})
      for (bool causal : {false, true}) {
        cases.push_back({bf16, d, 2, 4, 4, 128, 128, causal, Layout::bhsd, 0, true});     // tile multiples
        cases.push_back({bf16, d, 1, 6, 2, 77, 201, causal, Layout::bhsd, 0, true});      // GQA, Sq < Sk, ragged
        cases.push_back({bf16, d, 2, 1, 1, 300, 123, causal, Layout::bhsd, 0, true});     // one head, Sq > Sk
        cases.push_back({bf16, d, 1, 8, 1, 1, 1500, causal, Layout::bhsd, 0, true});      // decode, MQA, auto split
        cases.push_back({bf16, d, 2, 4, 2, 1, 700, causal, Layout::bshd, 3, false});      // decode, forced split
        cases.push_back({bf16, d, 1, 3, 3, 200, 200, causal, Layout::bshd, 0, true});     // [B, S, H, D]
        cases.push_back({bf16, d, 3, 4, 2, 150, 170, causal, Layout::varlen, 0, true});   // variable lengths
        // Several rounds through the K/V stages of the sm90 forward (forward only: the CPU reference
        // of the backward is slow at these lengths): GQA with Sq < Sk, then Sq > Sk (causal rows that
        // see no key) in [B, S, H, D], then decode without a split.
        cases.push_back({bf16, d, 1, 4, 2, 520, 700, causal, Layout::bhsd, 1, false});
        cases.push_back({bf16, d, 2, 2, 2, 600, 333, causal, Layout::bshd, 1, false});
        cases.push_back({bf16, d, 1, 8, 1, 1, 1100, causal, Layout::bhsd, 1, false});
        if (!quick) {
          cases.push_back({bf16, d, 1, 16, 16, 65, 65, causal, Layout::bhsd, 0, true});   // many heads
          cases.push_back({bf16, d, 1, 4, 4, 333, 333, causal, Layout::bhsd, 4, true});   // forced split, prefill
          cases.push_back({bf16, d, 2, 2, 1, 1, 1, causal, Layout::bhsd, 0, true});       // one key
        }
      }
  int failed = 0;
  for (const Case& c : cases) failed += run_case(c, rng) ? 0 : 1;
  std::printf("attn_gpu_test: %zu cases, %d failed\n", cases.size(), failed);
  return failed == 0 ? 0 : 1;
}
