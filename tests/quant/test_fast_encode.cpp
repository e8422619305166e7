// The quantize kernel's encoder (format.hpp, Note [Fast encode]) against the reference
// encoder: every float for the element encoders, the quotient over random and
// adversarial scales, and whole 8-element groups through encode8_fast. (Checked once over
// all 2^32 patterns as well, 2026-11-22: no mismatch; too slow for CI.)
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "quant/format.hpp"

using namespace vstack::quant;

namespace {

struct Nf4Tables {
  uint8_t base[kNf4Buckets];  // 4 * nf4_bucket_base, as the kernel keeps it
  float mid[16];
  Nf4Tables() {
    for (int k = 0; k < kNf4Buckets; ++k) base[k] = static_cast<uint8_t>(4 * nf4_bucket_base(k));
    for (uint32_t i = 0; i < 16; ++i) mid[i] = nf4_mid(i);
  }
};
const Nf4Tables kNf4;

// Calls f(v) for every float of magnitude in [2^lo, 2^hi) (both signs; where the
// encoders' decisions lie) and for every 61st bit pattern elsewhere (NaNs skipped),
// on two threads. Returns the number of v where f returned false, and the first.
template <class F>
std::pair<uint64_t, uint32_t> every_float(int lo, int hi, F f) {
  uint64_t bad[2] = {0, 0};
  uint32_t first[2] = {0, 0};
  const uint64_t dense_lo = static_cast<uint64_t>(lo + 127) << 23, dense_hi = static_cast<uint64_t>(hi + 127) << 23;
  auto run = [&](int t) {
    for (uint64_t sign = 0; sign < 2; ++sign) {
      for (uint64_t m = t; m < 0x7F800001u;) {  // magnitudes up to +Inf
        const uint32_t b = static_cast<uint32_t>(m | (sign << 31));
        if (!f(bits_f32(b)) && bad[t]++ == 0) first[t] = b;
        const uint64_t next = m + ((m >= dense_lo && m < dense_hi) ? 2 : 122);
        m = (m < dense_lo && next > dense_lo) ? dense_lo + t : next;  // enter the dense range at its start
      }
    }
  };
  std::thread th(run, 1);
  run(0);
  th.join();
  return {bad[0] + bad[1], bad[0] ? first[0] : first[1]};
}

}  // namespace

TEST_CASE("fast E2M1 encoder equals e2m1_encode on every float near its decisions", "[quant][fast]") {
  // dense over [2^-3, 2^4): every decision point (0.25 ... 5) and the path switches at 2 and 4
  const auto [bad, first] = every_float(-3, 4, [](float v) { return e2m1_encode_fast(v) == e2m1_encode(v); });
  INFO("first mismatch: bits 0x" << std::hex << first);
  CHECK(bad == 0);
}

TEST_CASE("NF4 decision points and bucket table", "[quant][fast]") {
  for (uint32_t i = 0; i < 15; ++i) {
    CHECK(nf4_mid(i) == (nf4_value(i) + nf4_value(i + 1)) * 0.5f);
    CHECK(nf4_encode(nf4_mid(i)) == i);
    CHECK(nf4_encode(std::nextafter(nf4_mid(i), 9.0f)) == i + 1);
  }
  CHECK(nf4_mid(15) > 2.0f);
  // every bucket holds at most one decision point (so one compare decides)
  for (int k = 0; k + 1 < kNf4Buckets; ++k) CHECK(nf4_bucket_base(k + 1) - nf4_bucket_base(k) <= 1);
  CHECK(nf4_bucket_base(0) == 0);
  CHECK(nf4_bucket_base(kNf4Buckets - 1) == 15);
}

TEST_CASE("fast NF4 encoder equals nf4_encode on every float near its decisions", "[quant][fast]") {
  // dense over [2^-6, 2^2): every decision point (|t| >= 0.0397) and bucket edge, and the clamp at 2
  const auto [bad, first] =
      every_float(-6, 2, [](float v) { return nf4_encode_fast(v, kNf4.base, kNf4.mid) == nf4_encode(v); });
  INFO("first mismatch: bits 0x" << std::hex << first);
  CHECK(bad == 0);
}

namespace {

// Decision points of both element encoders (where a one-ulp error of x / s would change a code).
std::vector<float> thresholds() {
  std::vector<float> t = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  for (uint32_t i = 0; i < 15; ++i) t.push_back(nf4_mid(i));
  const size_t n = t.size();
  for (size_t i = 0; i < n; ++i) t.push_back(-t[i]);
  return t;
}

// Checks quotient<F> against x / s on x = s * u near every threshold and at random;
// returns the number of mismatches (bits of the quotient where |x| >= 2^-100, codes otherwise).
template <Format F>
int check_quotients(float s, std::mt19937& rng, int n_random) {
  const BlockDivisor d = block_divisor<F>(s);
  if (!d.fast) return 0;
  int bad = 0;
  auto one = [&](float x) {
    if (!std::isfinite(x)) return;
    const float want = x / s, got = quotient<F>(x, d);
    if (std::fabs(x) >= 0x1p-100f) {
      bad += f32_bits(want) != f32_bits(got);
    } else {
      bad += encode_quotient_fast<F>(got, kNf4.base, kNf4.mid) != encode_quotient_fast<F>(want, kNf4.base, kNf4.mid);
    }
  };
  static const std::vector<float> ts = thresholds();
  for (float t : ts) {
    float x = t * s;  // RN(t s): x / s is within an ulp or two of t
    for (int k = 0; k < 6; ++k) x = std::nextafter(x, -INFINITY);
    for (int k = 0; k < 13; ++k, x = std::nextafter(x, INFINITY)) one(x);
  }
  std::uniform_real_distribution<float> u(-7.0f, 7.0f);
  std::uniform_int_distribution<int> e(-160, 10);
  for (int i = 0; i < n_random; ++i) {
    one(u(rng) * s);
    one(std::ldexp(u(rng), e(rng)) * s);  // small quotients, down to underflow
  }
  return bad;
}

}  // namespace

TEST_CASE("block quotient without a divide is x / s", "[quant][fast]") {
  std::mt19937 rng(20261122);
  std::uniform_real_distribution<float> m(1.0f, 2.0f);
  int bad = 0;
  SECTION("NVFP4 and NF4_DQ: E4M3 value times a second-level scale") {
    std::uniform_int_distribution<int> ge(-110, 110);
    for (int rep = 0; rep < 60; ++rep) {
      const float g = std::ldexp(m(rng), ge(rng));
      for (uint32_t c = 1; c < 0x7F; ++c) {
        bad += check_quotients<Format::nvfp4>(e4m3_value(c) * g, rng, 20);
        bad += check_quotients<Format::nf4_dq>(e4m3_value(c) * g, rng, 20);
      }
    }
  }
  SECTION("NF4: any fp32 absmax, including the ends of the fast range") {
    std::uniform_int_distribution<int> se(-95, 95);
    for (int rep = 0; rep < 20000; ++rep) bad += check_quotients<Format::nf4>(std::ldexp(m(rng), se(rng)), rng, 20);
    for (float s : {kQuotientMin, kQuotientMax, std::nextafter(kQuotientMin, 1.0f), std::nextafter(kQuotientMax, 0.0f)})
      bad += check_quotients<Format::nf4>(s, rng, 2000);
  }
  SECTION("MXFP4: every E8M0 scale the encoder writes (codes 0..252: floor(log2(amax)) <= 127)") {
    for (uint32_t c = 0; c <= 252; ++c) bad += check_quotients<Format::mxfp4>(e8m0_value(c), rng, 2000);
  }
  CHECK(bad == 0);
}

namespace {

// Codes of got (element j at bits 4j..4j+3) that differ from encode_element's for x at scale s.
template <Format F>
int code_mismatches(uint32_t got, const float (&x)[8], float s, bool zero) {
  int bad = 0;
  for (int j = 0; j < 8; ++j) bad += ((got >> (4 * j)) & 15u) != encode_element<F>(x[j], s, zero);
  return bad;
}

template <Format F>
int check_encode8(const float (&x)[8], float s) {
  const bool zero = !(s > 0.0f);  // as block_is_zero: a scale that underflowed to 0
  return code_mismatches<F>(encode8_fast<F>(x, s, zero, kNf4.base, kNf4.mid), x, s, zero);
}

}  // namespace

TEST_CASE("encode8_fast gives encode_element's codes, slow-path scales included", "[quant][fast]") {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  std::uniform_int_distribution<int> ex(-149, 127);
  int bad = 0;
  for (int rep = 0; rep < 200000; ++rep) {
    float x[8];
    const int e = ex(rng);
    for (float& v : x) v = std::ldexp(nd(rng), e);
    float amax = 0;
    for (float v : x) amax = std::fmax(amax, std::fabs(v));
    if (!(amax > 0) || !std::isfinite(amax)) continue;
    // scales as the formats derive them from amax (block_scale_code), outside the fast range too
    bad += check_encode8<Format::nf4>(x, amax);
    bad += check_encode8<Format::nf4_dq>(x, amax * 1.0625f);
    bad += check_encode8<Format::nvfp4>(x, amax / 6.0f);
    bad += check_encode8<Format::mxfp4>(x, e8m0_value(static_cast<uint32_t>(std::max(floor_log2(amax) - 2, -127) + 127)));
  }
  CHECK(bad == 0);
  float x[8] = {1, -2, 3, 0, -0.0f, 5, 6, 7};
  CHECK(encode8_fast<Format::nf4>(x, 7.0f, true, kNf4.base, kNf4.mid) == 0x77777777u);
  CHECK(encode8_fast<Format::nvfp4>(x, 7.0f, true, kNf4.base, kNf4.mid) == 0u);
}

namespace {

template <Format F>
int check_scale_code(BlockStat st, float scale2) {
  float s_want = 0, s_got = 0;
  const uint32_t want = block_scale_code<F>(st, scale2, s_want);
  const uint32_t got = block_scale_code_fast<F>(st, scale2, scale_divisor<F>(scale2), s_got);
  return (want != got) + (f32_bits(s_want) != f32_bits(s_got));
}

}  // namespace

TEST_CASE("block_scale_code_fast equals block_scale_code", "[quant][fast]") {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> m(1.0f, 2.0f);
  std::uniform_int_distribution<int> ea(-149, 127), eg(-140, 110), dq(-12, 2);
  int bad = 0;
  for (int rep = 0; rep < 300000; ++rep) {
    const float amax = rep % 97 == 0 ? 0.0f : std::ldexp(m(rng), ea(rng));
    const BlockStat st{amax, rep % 101 == 0};
    // second-level scales as the formats derive them: amax over a tensor / group >= this block's
    const float big = std::ldexp(amax > 0 ? amax : 1.0f, -dq(rng));
    bad += check_scale_code<Format::nvfp4>(st, nvfp4_global(big));
    bad += check_scale_code<Format::nf4_dq>(st, nf4dq_group_scale(big));
    bad += check_scale_code<Format::nvfp4>(st, std::ldexp(m(rng), eg(rng)));  // any fp32 scale
    bad += check_scale_code<Format::nf4_dq>(st, std::ldexp(m(rng), eg(rng)));
    bad += check_scale_code<Format::mxfp4>(st, 1.0f);
    bad += check_scale_code<Format::nf4>(st, 1.0f);
  }
  for (uint32_t b = 0; b < 0x00800000u; b += 0x1001) bad += check_scale_code<Format::mxfp4>({bits_f32(b), false}, 1.0f);
  CHECK(bad == 0);
}

TEST_CASE("NF4 and NF4_DQ quotients stay within the bucket table (|x/s| <= 2) in the fast path", "[quant][fast]") {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  std::uniform_int_distribution<int> ex(-120, 100), gx(0, 40);
  float worst = 0;
  for (int rep = 0; rep < 300000; ++rep) {
    float x[64];
    const int e = ex(rng);
    for (float& v : x) v = std::ldexp(nd(rng), e) * (rep % 7 == 0 ? 1e-3f : 1.0f);
    BlockStat st{0.0f, false};
    for (float v : x) st.amax = std::fmax(st.amax, std::fabs(v));
    // the group's amax: this block's or up to 2^40 larger (E4M3 subnormal block scales)
    const float g2 = nf4dq_group_scale(std::ldexp(st.amax, gx(rng)));
    for (int f = 0; f < 2; ++f) {
      float s = 0;
      if (f == 0) block_scale_code<Format::nf4>(st, 1.0f, s);
      else block_scale_code<Format::nf4_dq>(st, g2, s);
      if (block_is_zero(st, s) || !block_divisor<Format::nf4>(s).fast) continue;
      for (float v : x) worst = std::fmax(worst, std::fabs(v / s));
    }
  }
  INFO("largest |x/s| " << worst);
  CHECK(worst <= 1.5f * (1.0f + 0x1p-22f));
}

namespace {

// scaled_block + encode8_quotients against block_scale_code + encode_element on one 8-element group
// with block statistics st (the group may be part of a larger block); 0 when the block is not clean
// (the kernel takes encode8_fast's path for it, checked above).
template <Format F>
int check_clean(const float (&x)[8], BlockStat st, float scale2, int& clean_blocks) {
  const BlockDivisor d2 = scale_divisor<F>(scale2);
  const ScaledBlock b = scaled_block<F>(st, scale2, d2, scale2_fast(scale2, d2));  // as the kernel calls it
  float s = 0;
  const uint32_t sc = block_scale_code<F>(st, scale2, s);
  if (!b.clean) return 0;
  ++clean_blocks;
  const bool zero = block_is_zero(st, s);
  return (b.sc != sc) + (f32_bits(b.d.s) != f32_bits(s)) +
         code_mismatches<F>(encode8_quotients<F>(x, b.d, kNf4.base, kNf4.mid), x, s, zero);
}

}  // namespace

TEST_CASE("scaled_block and encode8_quotients give the reference codes for every clean block", "[quant][fast]") {
  // Note [Clean blocks]: the quantize kernel's straight-line path. Zero blocks (all zeros, or a
  // scale that rounds to 0 below the group's: NF4_DQ at gx > 17) must come out as the zero code;
  // blocks with NaN/Inf or a scale outside the quotient range must not be clean.
  std::mt19937 rng(13);
  std::normal_distribution<float> nd;
  std::uniform_int_distribution<int> ex(-140, 120), gx(0, 24);
  int bad = 0, clean = 0, not_clean = 0;
  for (int rep = 0; rep < 200000; ++rep) {
    float x[8];
    const int e = ex(rng);
    for (float& v : x) v = rep % 53 == 0 ? 0.0f : std::ldexp(nd(rng), e);
    if (rep % 61 == 0) x[rep % 8] = rep % 2 ? INFINITY : NAN;
    const BlockStat st = block_stat(x);
    const float big = std::ldexp(st.amax > 0 ? st.amax : 1.0f, gx(rng));  // the tensor's / group's amax
    const int before = clean;
    bad += check_clean<Format::nvfp4>(x, st, nvfp4_global(big), clean);
    bad += check_clean<Format::mxfp4>(x, st, 1.0f, clean);
    bad += check_clean<Format::nf4>(x, st, 1.0f, clean);
    bad += check_clean<Format::nf4_dq>(x, st, nf4dq_group_scale(big), clean);
    not_clean += 4 - (clean - before);
    if (st.bad) bad += clean != before;  // NaN/Inf: never clean
  }
  INFO(clean << " clean, " << not_clean << " not");
  CHECK(bad == 0);
  CHECK(clean > 500000);  // the test covers the path it is about
  CHECK(not_clean > 10000);
}

TEST_CASE("scale2_fast puts every NVFP4 / NF4_DQ block scale at 0 or in the quotient range", "[quant][fast]") {
  // What scaled_block's one test of scale2 stands for (Note [Clean blocks]): s = e4m3_value(sc) * scale2 for
  // every finite E4M3 code, at the range's ends and at scale2 spread over it.
  std::vector<float> scale2s = {kScale2FastMin, kScale2FastMax, std::nextafter(kScale2FastMax, 0.0f), 1.0f};
  std::mt19937 rng(29);
  std::uniform_real_distribution<float> ex(-81.0f, 81.0f);
  for (int i = 0; i < 2000; ++i) scale2s.push_back(std::exp2(ex(rng)));
  int bad = 0, checked = 0;
  for (float s2 : scale2s) {
    REQUIRE(scale2_fast(s2, scale_divisor<Format::nf4_dq>(s2)));
    for (uint32_t sc = 0; sc < 0x7F; ++sc) {  // 0x7F is the NaN code
      const float s = e4m3_value(sc) * s2;
      bad += sc == 0 ? s != 0.0f : !(s >= kQuotientMin && s <= kQuotientMax);
      ++checked;
    }
  }
  CHECK(checked == 127 * static_cast<int>(scale2s.size()));
  CHECK(bad == 0);
  // just outside the range scale2_fast says no, and the blocks take the general path
  for (float s2 : {std::nextafter(kScale2FastMin, 0.0f), std::nextafter(kScale2FastMax, INFINITY)})
    CHECK_FALSE(scale2_fast(s2, scale_divisor<Format::nf4_dq>(s2)));
}
