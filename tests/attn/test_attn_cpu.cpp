// CPU tests of attn/: tile and launch-parameter selection, argument validation, and the CPU
// reference the GPU tests compare against.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>

#include "attn/traits.hpp"
#include "attn/validate.hpp"
#include "reference.hpp"

using namespace vstack::attn;

namespace {
constexpr int kH100Sms = 132;
constexpr int kHopperSmemPerBlock = 227 * 1024;
}  // namespace

TEST_CASE("forward tiles fit Hopper and cover whole MMA tiles", "[attn][traits]") {
  for (int d : {64, 128, 256}) {
    const FwdTile t = fwd_tile(d);
    CAPTURE(d);
    CHECK(t.block_m == 16 * t.m_tiles * t.warps);
    CHECK(t.block_n % 16 == 0);
    CHECK(t.smem_bytes <= kHopperSmemPerBlock);
    CHECK(2 * t.smem_bytes <= 228 * 1024);  // two CTAs per SM (see fwd_kernel.cuh)
    // Q tile + K + V tiles, each row padded by 16 bytes.
    CHECK(t.smem_bytes == (t.block_m + 2 * t.block_n) * (d + 8) * 2);
    // fp32 accumulators (O, S) and Q fragments per thread leave room for addresses and
    // fragments within 255 registers (ptxas: no spill at <= 192 here).
    const int regs = t.m_tiles * (d / 2 + t.block_n / 2) + (t.q_in_regs ? t.m_tiles * d / 8 : 0);
    CHECK(regs <= 192);
  }
  CHECK(fwd_tile(64).q_in_regs);
  CHECK(fwd_tile(128).m_tiles == 2);  // K/V fragments reused by two row tiles
  CHECK_FALSE(fwd_tile(256).q_in_regs);
}

TEST_CASE("sm90 forward tiles fit Hopper, the wgmma shapes and the setmaxnreg budget", "[attn][traits]") {
  const int wgmma_n[] = {16, 32, 64, 96, 128, 192, 256};  // kernels/gen_wgmma.py
  auto has_n = [&](int n) {
    for (int x : wgmma_n)
      if (x == n) return true;
    return false;
  };
  for (int d : {64, 128, 256}) {
    const FwdSm90Tile t = fwd_sm90_tile(d);
    CAPTURE(d);
    CHECK(t.block_m == 64 * t.consumer_wgs);
    CHECK(t.consumer_wgs == 2);  // the ping-pong pairs two consumer warpgroups
    CHECK(has_n(t.block_n));     // S = Q K^T: m64 n(block_n)
    CHECK(has_n(d));             // O += P V: m64 n(head_dim)
    CHECK(t.block_n % 16 == 0);
    CHECK(t.block_n <= 256);     // one TMA box of block_n rows
    CHECK(t.stages >= 2);
    CHECK(t.smem_bytes <= kHopperSmemPerBlock);
    // Q + stages x (K + V) in 2-byte elements, + 1 KiB to align the SW128 blocks, + mbarriers.
    CHECK(t.smem_bytes >= t.block_m * d * 2 + t.stages * 2 * t.block_n * d * 2 + 1024 + 4 * t.stages * 8);
    // O and S in fp32, P in 16-bit pairs per consumer thread, under the 240 of setmaxnreg with room.
    CHECK(d / 2 + t.block_n / 2 + t.block_n / 4 <= 192);
    // (1 producer + consumers) warpgroups at 24 / 240 registers fit the 64K register file.
    CHECK(128 * 24 + t.consumer_wgs * 128 * 240 <= 65536);
  }
}

TEST_CASE("backward warp roles cover the CTA", "[attn][traits]") {
  for (int d : {64, 128, 256}) {
    const BwdTile t = bwd_tile(d);
    CAPTURE(d);
    CHECK(t.smem_bytes <= kHopperSmemPerBlock);
    CHECK(t.block_n / 16 * t.p1_q_splits == t.warps);
    CHECK(t.block_n / 16 * t.p2_d_splits == t.warps);
    CHECK(t.block_m / 16 * t.dq_d_splits == t.warps);
    CHECK((t.block_m / t.p1_q_splits) % 16 == 0);
    CHECK((d / t.p2_d_splits) % 16 == 0);
    CHECK((d / t.dq_d_splits) % 16 == 0);
  }
  CHECK(bwd_tile(256).block_n == 64);
}

TEST_CASE("split over keys only when the GPU would idle", "[attn][traits]") {
  // Decode, GQA 32/8 heads, 16k keys: 8 CTAs unsplit -> split.
  const int dec = choose_num_splits(1, 8, 1 * 4, 16384, 128, kH100Sms);
  CHECK(dec > 1);
  CHECK(dec <= ceil_div(16384, fwd_tile(128).block_n) / 2);
  CHECK(int64_t(dec) * 8 >= kH100Sms);  // at least one wave
  // Prefill: 16 heads x 4k queries x batch 4 is plenty of CTAs.
  CHECK(choose_num_splits(4, 16, 4096, 4096, 128, kH100Sms) == 1);
  // Few keys: nothing to split, whatever the tile.
  for (int d : {64, 128, 256}) CHECK(choose_num_splits(1, 1, 1, 100, d, kH100Sms) == 1);
  CHECK(choose_num_splits(1, 1, 1, 1024, 128, kH100Sms) <= 1024 / kMinKeysPerSplit);
  // Never more than kMaxSplits, never < 1.
  CHECK(choose_num_splits(1, 1, 1, 1 << 24, 64, kH100Sms) <= kMaxSplits);
  CHECK(choose_num_splits(0, 1, 1, 1 << 20, 64, kH100Sms) == 1);
}

namespace {
alignas(16) unsigned char g_buf[64];

vstack_attn_fwd_args_t good_fwd() {
  vstack_attn_fwd_args_t a{};
  a.shape.dtype = VSTACK_DTYPE_BF16;
  a.shape.batch = 2;
  a.shape.heads_q = 8;
  a.shape.heads_kv = 2;
  a.shape.seqlen_q = 100;
  a.shape.seqlen_k = 300;
  a.shape.head_dim = 128;
  a.shape.total_q = 200;
  a.shape.scale = 0.088f;
  a.shape.causal = 1;
  vstack_attn_tensor_t t{g_buf, 8 * 100 * 128, 100 * 128, 128};
  a.q = a.o = t;
  a.k = a.v = vstack_attn_tensor_t{g_buf, 2 * 300 * 128, 300 * 128, 128};
  a.lse = vstack_attn_lse_t{reinterpret_cast<float*>(g_buf), 800, 100};
  return a;
}
}  // namespace

TEST_CASE("validation accepts good arguments and names the bad one", "[attn][validate]") {
  FwdParams p{};
  vstack_attn_fwd_args_t a = good_fwd();
  REQUIRE(validate_fwd(a, &p) == VSTACK_OK);
  CHECK(p.s.group == 4);
  CHECK(p.s.causal);
  CHECK(p.s.scale_log2 == Approx(0.088 * 1.4426950408889634));

  a = good_fwd();
  a.shape.dtype = VSTACK_DTYPE_F32;
  CHECK(validate_fwd(a, &p) == VSTACK_ERR_UNSUPPORTED_DTYPE);
  a = good_fwd();
  a.shape.head_dim = 96;
  CHECK(validate_fwd(a, &p) == VSTACK_ERR_UNSUPPORTED_SHAPE);
  CHECK(std::strstr(vstack_last_error(), "head_dim 96") != nullptr);
  a = good_fwd();
  a.shape.heads_kv = 3;
  CHECK(validate_fwd(a, &p) == VSTACK_ERR_UNSUPPORTED_SHAPE);
  a = good_fwd();
  a.k.row_stride = 132;
  CHECK(validate_fwd(a, &p) == VSTACK_ERR_MISALIGNED);
  CHECK(std::strstr(vstack_last_error(), "k.row_stride") != nullptr);
  a = good_fwd();
  a.v.ptr = g_buf + 2;
  CHECK(validate_fwd(a, &p) == VSTACK_ERR_MISALIGNED);
  a = good_fwd();
  a.o.ptr = nullptr;
  CHECK(validate_fwd(a, &p) == VSTACK_ERR_INVALID_ARGUMENT);
  CHECK(std::strstr(vstack_last_error(), "o.ptr") != nullptr);
  a = good_fwd();
  a.shape.total_q = 199;
  CHECK(validate_fwd(a, &p) == VSTACK_ERR_INVALID_ARGUMENT);
  a = good_fwd();
  a.shape.cu_seqlens_q = reinterpret_cast<const int32_t*>(g_buf);
  CHECK(validate_fwd(a, &p) == VSTACK_ERR_INVALID_ARGUMENT);  // cu_seqlens_k missing
  a.shape.cu_seqlens_k = reinterpret_cast<const int32_t*>(g_buf);
  a.shape.total_q = 7;  // varlen: any total
  CHECK(validate_fwd(a, &p) == VSTACK_OK);
  a = good_fwd();
  a.shape.scale = 0.f;
  CHECK(validate_fwd(a, &p) == VSTACK_ERR_INVALID_ARGUMENT);
  a = good_fwd();
  a.shape.scale = NAN;
  CHECK(validate_fwd(a, &p) == VSTACK_ERR_INVALID_ARGUMENT);
  a = good_fwd();
  a.shape.seqlen_k = 0;
  CHECK(validate_fwd(a, &p) == VSTACK_ERR_INVALID_ARGUMENT);
  a = good_fwd();
  a.num_splits = -1;
  CHECK(validate_fwd(a, &p) == VSTACK_ERR_INVALID_ARGUMENT);
  a = good_fwd();
  a.q.head_stride = -128;
  CHECK(validate_fwd(a, &p) == VSTACK_ERR_UNSUPPORTED_SHAPE);
}

TEST_CASE("workspace sizes are linear in the query rows", "[attn][validate]") {
  FwdParams p{};
  vstack_attn_fwd_args_t a = good_fwd();
  REQUIRE(validate_fwd(a, &p) == VSTACK_OK);
  CHECK(fwd_workspace_bytes(p.s, 1) == 0);
  const size_t rows = 3 * 200 * 8;
  CHECK(fwd_workspace_bytes(p.s, 3) >= rows * 128 * 4 + rows * 4);
  CHECK(fwd_workspace_bytes(p.s, 3) < rows * 128 * 4 + rows * 4 + 512);
  FwdParams c{};
  alignas(256) static unsigned char ws[1];
  fwd_workspace_carve(p.s, 3, ws, &c);
  CHECK(reinterpret_cast<unsigned char*>(c.lse_part) - ws >= ptrdiff_t(rows * 128 * 4));
  CHECK(bwd_workspace_bytes(p.s) >= 200 * 8 * (128 + 1) * 4);
}

// ---- the CPU reference ----

namespace {
using namespace vstack::attn::ref;

std::vector<float> randn(size_t n, std::mt19937& rng, Round r) {
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> x(n);
  for (auto& e : x) e = round_to(r, dist(rng));
  return x;
}
}  // namespace

TEST_CASE("rounding to bf16 and fp16", "[attn][reference]") {
  CHECK(round_to(Round::bf16, 1.0f) == 1.0f);
  CHECK(round_to(Round::bf16, 1.0f + 1.0f / 256) == 1.0f);          // tie -> even
  CHECK(round_to(Round::bf16, 1.0f + 3.0f / 256) == 1.0f + 1.0f / 64);  // tie -> even (up)
  CHECK(round_to(Round::fp16, 1.0f + 1.0f / 4096) == 1.0f);
  CHECK(round_to(Round::fp16, 65520.f) == INFINITY);
  CHECK(round_to(Round::exact, 0.1f) == 0.1f);
}

TEST_CASE("reference forward on cases with a known answer", "[attn][reference]") {
  Problem p;
  p.heads_q = 2;
  p.heads_kv = 1;
  p.seqlen_q = 3;
  p.seqlen_k = 5;
  p.head_dim = 64;
  std::mt19937 rng(1);
  auto q = randn(p.q_elems(), rng, Round::exact);
  std::vector<float> k(p.kv_elems(), 0.5f);  // identical keys: uniform softmax
  auto v = randn(p.kv_elems(), rng, Round::exact);
  const Forward f = forward(p, q, k, v, Round::exact);
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 3; ++i) {
      double qk = 0;
      for (int d = 0; d < 64; ++d) qk += q[p.q_index(0, h, i, d)] * 0.5;
      CHECK(f.lse[p.lse_index(0, h, i)] == Approx(qk * p.scale + std::log(5.0)).epsilon(1e-5));
      for (int d = 0; d < 64; ++d) {
        double mean = 0;
        for (int j = 0; j < 5; ++j) mean += v[p.kv_index(0, 0, j, d)] / 5.0;
        CHECK(f.o[p.q_index(0, h, i, d)] == Approx(mean).margin(1e-6));
      }
    }
  // Causal, bottom-right: with seqlen_q 3 > seqlen_k 2 the first row sees nothing, the second
  // sees key 0 only.
  p.causal = true;
  p.seqlen_k = 2;
  k = randn(p.kv_elems(), rng, Round::exact);
  v = randn(p.kv_elems(), rng, Round::exact);
  const Forward c = forward(p, q, k, v, Round::exact);
  CHECK(std::isinf(c.lse[p.lse_index(0, 1, 0)]));
  CHECK(c.lse[p.lse_index(0, 1, 0)] > 0);
  for (int d = 0; d < 64; ++d) {
    CHECK(c.o[p.q_index(0, 1, 0, d)] == 0.f);
    CHECK(c.o[p.q_index(0, 1, 1, d)] == Approx(v[p.kv_index(0, 0, 0, d)]).margin(1e-6));
  }
}

TEST_CASE("reference GQA equals repeated key/value heads", "[attn][reference]") {
  Problem g;
  g.heads_q = 4;
  g.heads_kv = 2;
  g.seqlen_q = 4;
  g.seqlen_k = 6;
  g.causal = true;
  Problem m = g;
  m.heads_kv = 4;
  std::mt19937 rng(2);
  auto q = randn(g.q_elems(), rng, Round::exact);
  auto k = randn(g.kv_elems(), rng, Round::exact);
  auto v = randn(g.kv_elems(), rng, Round::exact);
  std::vector<float> k4(m.kv_elems()), v4(m.kv_elems());
  for (int h = 0; h < 4; ++h)
    for (int j = 0; j < 6; ++j)
      for (int d = 0; d < 64; ++d) {
        k4[m.kv_index(0, h, j, d)] = k[g.kv_index(0, h / 2, j, d)];
        v4[m.kv_index(0, h, j, d)] = v[g.kv_index(0, h / 2, j, d)];
      }
  CHECK(max_abs_diff(forward(g, q, k, v, Round::exact).o, forward(m, q, k4, v4, Round::exact).o) == 0.0);
  auto dout = randn(g.q_elems(), rng, Round::exact);
  const Backward bg = backward(g, q, k, v, dout, Round::exact);
  const Backward bm = backward(m, q, k4, v4, dout, Round::exact);
  CHECK(max_abs_diff(bg.dq, bm.dq) == 0.0);
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 6; ++j)
      for (int d = 0; d < 64; ++d)
        CHECK(bg.dk[g.kv_index(0, h, j, d)] ==
              Approx(double(bm.dk[m.kv_index(0, 2 * h, j, d)]) + bm.dk[m.kv_index(0, 2 * h + 1, j, d)]).margin(1e-6));
}

TEST_CASE("reference backward matches finite differences", "[attn][reference]") {
  Problem p;
  p.heads_q = 2;
  p.heads_kv = 1;
  p.seqlen_q = 3;
  p.seqlen_k = 4;
  p.causal = true;
  p.scale = 0.3f;
  std::mt19937 rng(3);
  auto q = randn(p.q_elems(), rng, Round::exact);
  auto k = randn(p.kv_elems(), rng, Round::exact);
  auto v = randn(p.kv_elems(), rng, Round::exact);
  auto dout = randn(p.q_elems(), rng, Round::exact);
  const Backward g = backward(p, q, k, v, dout, Round::exact);
  auto loss = [&](const std::vector<float>& qq, const std::vector<float>& kk, const std::vector<float>& vv) {
    const Forward f = forward(p, qq, kk, vv, Round::exact);
    double s = 0;
    for (size_t x = 0; x < f.o.size(); ++x) s += double(f.o[x]) * dout[x];
    return s;
  };
  const float eps = 1e-2f;
  auto numeric = [&](std::vector<float>& x, size_t idx, int which) {
    const float keep = x[idx];
    x[idx] = keep + eps;
    const double up = which == 0 ? loss(x, k, v) : which == 1 ? loss(q, x, v) : loss(q, k, x);
    x[idx] = keep - eps;
    const double dn = which == 0 ? loss(x, k, v) : which == 1 ? loss(q, x, v) : loss(q, k, x);
    x[idx] = keep;
    return (up - dn) / (2 * eps);
  };
  for (size_t idx : {size_t(0), size_t(70), size_t(200), size_t(383)}) {
    auto qc = q, kc = k, vc = v;
    const size_t kidx = idx % k.size();
    CHECK(g.dq[idx] == Approx(numeric(qc, idx, 0)).margin(2e-3));
    CHECK(g.dk[kidx] == Approx(numeric(kc, kidx, 1)).margin(2e-3));
    CHECK(g.dv[kidx] == Approx(numeric(vc, kidx, 2)).margin(2e-3));
  }
}

TEST_CASE("the lowp reference is off by about the dtype's rounding, the rule can fail", "[attn][reference]") {
  Problem p;
  p.heads_q = 2;
  p.heads_kv = 2;
  p.seqlen_q = 17;
  p.seqlen_k = 33;
  p.head_dim = 64;
  std::mt19937 rng(4);
  auto q = randn(p.q_elems(), rng, Round::bf16);
  auto k = randn(p.kv_elems(), rng, Round::bf16);
  auto v = randn(p.kv_elems(), rng, Round::bf16);
  const Forward ex = forward(p, q, k, v, Round::exact);
  const Forward lo = forward(p, q, k, v, Round::bf16);
  const double e = max_abs_diff(ex.o, lo.o);
  CHECK(e > 0.0);
  CHECK(e < 0.05);
  // A kernel that were wrong by one position would break the rule.
  auto bad = ex.o;
  bad[5] += 0.1f;
  CHECK_FALSE(within_rule(max_abs_diff(bad, ex.o), e, 1e-5));
  CHECK(within_rule(max_abs_diff(lo.o, ex.o), e, 0.0));
}
