// Reference FP4 formats: code tables, rounding, block encoders, error figures, edge cases.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/format.hpp"
#include "quant/ref.hpp"
#include "tests/quant/formats.hpp"

using namespace vstack::quant;

namespace {

double rel_mse(Format f, const std::vector<float>& x, int64_t rows) {
  ref::QTensor q;
  REQUIRE(ref::quantize(x.data(), rows, static_cast<int64_t>(x.size()) / rows, f, Layout::linear, q));
  std::vector<float> y(x.size());
  ref::dequantize(q, y.data());
  double e = 0, s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double d = static_cast<double>(x[i]) - y[i];
    e += d * d;
    s += static_cast<double>(x[i]) * x[i];
  }
  return e / s;
}

std::vector<float> roundtrip(Format f, const std::vector<float>& x) {
  ref::QTensor q;
  REQUIRE(ref::quantize(x.data(), 1, static_cast<int64_t>(x.size()), f, Layout::linear, q));
  std::vector<float> y(x.size());
  ref::dequantize(q, y.data());
  return y;
}

}  // namespace

TEST_CASE("E2M1 code table and round to nearest even", "[quant][format]") {
  const float mags[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (uint32_t c = 0; c < 16; ++c) {
    const float want = (c & 8) ? -mags[c & 7] : mags[c & 7];
    CHECK(e2m1_value(c) == want);
    CHECK(std::signbit(e2m1_value(c)) == ((c & 8) != 0));
    if (c != 8) CHECK(e2m1_encode(want) == c);  // -0 encodes +0
  }
  CHECK(e2m1_encode(-0.0f) == 0u);
  // ties go to the even code
  CHECK(e2m1_encode(0.25f) == 0u);
  CHECK(e2m1_encode(0.75f) == 2u);
  CHECK(e2m1_encode(1.25f) == 2u);
  CHECK(e2m1_encode(1.75f) == 4u);
  CHECK(e2m1_encode(2.5f) == 4u);
  CHECK(e2m1_encode(3.5f) == 6u);
  CHECK(e2m1_encode(5.0f) == 6u);
  CHECK(e2m1_encode(-5.0f) == 14u);
  CHECK(e2m1_encode(std::nextafter(0.25f, 1.0f)) == 1u);
  CHECK(e2m1_encode(std::nextafter(5.0f, 9.0f)) == 7u);
  // saturation, and tiny negatives become +0
  CHECK(e2m1_encode(1e30f) == 7u);
  CHECK(e2m1_encode(-1e30f) == 15u);
  CHECK(e2m1_encode(INFINITY) == 7u);
  CHECK(e2m1_encode(-0.1f) == 0u);
}

TEST_CASE("E2M1 integer pair decode (wgmma GEMM) gives value * 2^-126 / 2^-14", "[quant][format]") {
  for (uint32_t b = 0; b < 256; ++b) {
    const uint32_t vb = e2m1_pair_bits(b, true), vh = e2m1_pair_bits(b, false);
    for (int half = 0; half < 2; ++half) {
      const float want = e2m1_value((b >> (4 * half)) & 15u);
      const uint16_t hb = static_cast<uint16_t>(vb >> (16 * half)), hh = static_cast<uint16_t>(vh >> (16 * half));
      INFO("byte " << b << " half " << half);
      CHECK(std::ldexp(ref::bf16_to_f32(hb), 126) == want);
      CHECK(std::ldexp(ref::f16_to_f32(hh), 14) == want);
      CHECK(std::signbit(ref::bf16_to_f32(hb)) == std::signbit(want));
    }
  }
}

TEST_CASE("E4M3 decode/encode over every code", "[quant][format]") {
  CHECK(e4m3_value(0x00) == 0.0f);
  CHECK(e4m3_value(0x01) == std::ldexp(1.0f, -9));
  CHECK(e4m3_value(0x07) == 7 * std::ldexp(1.0f, -9));
  CHECK(e4m3_value(0x08) == std::ldexp(1.0f, -6));
  CHECK(e4m3_value(0x38) == 1.0f);
  CHECK(e4m3_value(0x7E) == 448.0f);
  CHECK(e4m3_value(0xFE) == -448.0f);
  CHECK(std::isnan(e4m3_value(0x7F)));
  CHECK(std::isnan(e4m3_value(0xFF)));
  for (uint32_t c = 0; c <= 0x7E; ++c) {
    INFO("code " << c);
    CHECK(e4m3_encode_pos(e4m3_value(c)) == c);
    if (c < 0x7E) {  // the midpoint to the next code rounds to the even one of the two
      const float mid = (e4m3_value(c) + e4m3_value(c + 1)) * 0.5f;
      CHECK(e4m3_encode_pos(mid) == ((c & 1) ? c + 1 : c));
      CHECK(e4m3_encode_pos(std::nextafter(mid, 0.0f)) == c);
      CHECK(e4m3_encode_pos(std::nextafter(mid, 1e9f)) == c + 1);
    }
  }
  CHECK(e4m3_encode_pos(464.0f) == 0x7Eu);  // saturates, never NaN
  CHECK(e4m3_encode_pos(1e38f) == 0x7Eu);
  CHECK(e4m3_encode_pos(INFINITY) == 0x7Eu);
  CHECK(e4m3_encode_pos(std::ldexp(1.0f, -11)) == 0u);  // below half the smallest subnormal
  CHECK(e4m3_encode_pos(1e-30f) == 0u);
}

TEST_CASE("E8M0 scale codes", "[quant][format]") {
  CHECK(e8m0_value(127) == 1.0f);
  CHECK(e8m0_value(128) == 2.0f);
  CHECK(e8m0_value(1) == std::ldexp(1.0f, -126));
  CHECK(e8m0_value(0) == std::ldexp(1.0f, -127));
  CHECK(e8m0_value(254) == std::ldexp(1.0f, 127));
  CHECK(std::isnan(e8m0_value(255)));
  CHECK(floor_log2(1.0f) == 0);
  CHECK(floor_log2(6.0f) == 2);
  CHECK(floor_log2(0.75f) == -1);
  CHECK(floor_log2(std::ldexp(1.0f, -149)) == -149);
  CHECK(floor_log2(std::ldexp(3.0f, -140)) == -139);
  CHECK(floor_log2(FLT_MAX) == 127);
}

// Note [E8M0 pairs]: the decode kernel's four-byte E8M0 decode gives e8m0_value's bits for every
// byte, and takes its slow path exactly for words with a 0x00 or 0xFF byte. Every low pair lo
// against high pairs made of bytes near the edges and in the middle, plus random words.
TEST_CASE("E8M0 pairs decode as e8m0_value, special bytes found exactly", "[quant][format]") {
  const uint32_t edge[] = {0, 1, 2, 3, 126, 127, 128, 129, 252, 253, 254, 255};
  std::vector<uint32_t> his;
  for (uint32_t a : edge)
    for (uint32_t b : edge) his.push_back(a | (b << 8));
  std::mt19937 rng(12345);
  for (int i = 0; i < 64; ++i) his.push_back(rng() & 0xFFFFu);
  // e8m0x4_value_normal (Note [MXFP4 without the special bytes]): e8m0_value but 0 for byte 0 and Inf for 255
  int64_t wrong = 0, flag_wrong = 0, normal_wrong = 0;
  for (uint32_t hi : his)
    for (uint32_t lo = 0; lo < 0x10000u; ++lo) {
      const uint32_t w = lo | (hi << 16);
      float s[4], n[4];
      e8m0x4_value(lo, hi, s);
      e8m0x4_value_normal(lo, hi, n);
      bool special = false;
      for (int j = 0; j < 4; ++j) {
        const uint32_t b = (w >> (8 * j)) & 0xFFu;
        special = special || b == 0u || b == 0xFFu;
        wrong += f32_bits(s[j]) != f32_bits(e8m0_value(b));
        const uint32_t want = b == 0u ? 0u : b == 0xFFu ? 0x7F800000u : f32_bits(e8m0_value(b));
        normal_wrong += f32_bits(n[j]) != want;
      }
      flag_wrong += e8m0x4_special(w) != special;
    }
  CHECK(wrong == 0);
  CHECK(flag_wrong == 0);
  CHECK(normal_wrong == 0);
}

TEST_CASE("NF4 table and nearest-value encoding", "[quant][format]") {
  // bitsandbytes' NF4 values
  const double bnb[16] = {-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
                          -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
                          0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
                          0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0};
  for (uint32_t c = 0; c < 16; ++c) {
    CHECK(nf4_value(c) == static_cast<float>(bnb[c]));
    CHECK(nf4_encode(nf4_value(c)) == c);
    if (c < 15) {
      const float mid = (nf4_value(c) + nf4_value(c + 1)) * 0.5f;
      CHECK(nf4_encode(mid) == c);  // exactly on the midpoint: the lower index
      CHECK(nf4_encode(std::nextafter(mid, 2.0f)) == c + 1);
    }
  }
  CHECK(nf4_encode(-3.0f) == 0u);
  CHECK(nf4_encode(3.0f) == 15u);
}

TEST_CASE("block encoders: known bit patterns", "[quant][format]") {
  SECTION("MXFP4: amax 6 -> scale 2^0, exact codes") {
    float x[32];
    uint8_t c[32];
    for (int i = 0; i < 32; ++i) x[i] = e2m1_value(i % 16);
    x[5] = 6.0f;
    const uint32_t sc = encode_block<Format::mxfp4, 32>(x, 1.0f, c);
    CHECK(sc == 127u);
    for (int i = 0; i < 32; ++i) CHECK(c[i] == (i == 5 ? 7u : (i % 16 == 8 ? 0u : static_cast<uint32_t>(i % 16))));
  }
  SECTION("MXFP4: scale exponent is floor(log2(amax)) - 2") {
    float x[32] = {};
    uint8_t c[32];
    x[0] = 100.0f;  // log2 = 6.64 -> 2^4; 100 / 16 = 6.25 -> saturates to 6
    x[1] = -3.0f;   // -3 / 16 = -0.1875 -> +0
    x[2] = 24.0f;   // 1.5 -> code 3
    CHECK(encode_block<Format::mxfp4, 32>(x, 1.0f, c) == 127u + 4);
    CHECK(c[0] == 7u);
    CHECK(c[1] == 0u);
    CHECK(c[2] == 3u);
  }
  SECTION("NVFP4: block scale = E4M3(amax / (6 g))") {
    float x[16];
    uint8_t c[16];
    for (int i = 0; i < 16; ++i) x[i] = -static_cast<float>(i) * 0.25f;  // amax 3.75
    const float g = 0.5f;
    const uint32_t sc = encode_block<Format::nvfp4, 16>(x, g, c);
    CHECK(sc == e4m3_encode_pos(3.75f / 3.0f));  // 1.25 -> 0x3A
    CHECK(sc == 0x3Au);
    const float s = e4m3_value(sc) * g;  // 0.625
    for (int i = 0; i < 16; ++i) CHECK(c[i] == e2m1_encode(x[i] / s));
    CHECK(c[15] == (8u | 7u));  // -3.75 / 0.625 = -6: code 0b1111
  }
  SECTION("NF4: absmax scale, codes of x / absmax") {
    float x[64];
    uint8_t c[64];
    for (int i = 0; i < 64; ++i) x[i] = nf4_value(i % 16) * 2.0f;
    const uint32_t sc = encode_block<Format::nf4, 64>(x, 1.0f, c);
    float s;
    std::memcpy(&s, &sc, 4);
    CHECK(s == 2.0f);
    for (int i = 0; i < 64; ++i) CHECK(c[i] == static_cast<uint32_t>(i % 16));
  }
}

TEST_CASE("relative MSE on N(0,1) data reproduces the published figures within 2%", "[quant][format]") {
  std::mt19937_64 rng(20261122);
  std::normal_distribution<float> nd;
  std::vector<float> x(int64_t{1} << 22);
  for (auto& v : x) v = nd(rng);
  const double nv = rel_mse(Format::nvfp4, x, 1024);
  const double mx = rel_mse(Format::mxfp4, x, 1024);
  const double nf = rel_mse(Format::nf4, x, 1024);
  const double dq = rel_mse(Format::nf4_dq, x, 1024);
  INFO("nvfp4 " << nv << " mxfp4 " << mx << " nf4 " << nf << " nf4_dq " << dq);
  CHECK(std::abs(nv / 0.00904 - 1) < 0.02);
  CHECK(std::abs(mx / 0.01315 - 1) < 0.02);
  CHECK(std::abs(nf / 0.00843 - 1) < 0.02);
  CHECK(dq < nf * 1.05);  // double quantisation costs little
  CHECK(dq >= nf * 0.99);
}

TEST_CASE("zeros", "[quant][edge]") {
  std::vector<float> x(256, 0.0f);
  x[3] = -0.0f;
  for (Format f : kAllFormats) {
    ref::QTensor q;
    REQUIRE(ref::quantize(x.data(), 4, 64, f, Layout::linear, q));
    const uint8_t zc = static_cast<uint8_t>(zero_code(f) | (zero_code(f) << 4));
    for (uint8_t b : q.codes) CHECK(b == zc);
    for (uint8_t b : q.scales) CHECK(b == 0);
    for (float s2 : q.scale2) CHECK(s2 == (f == Format::mxfp4 ? kMxfp4FoldF16 : 1.0f));  // MXFP4: the range flag
    std::vector<float> y(x.size(), 1.0f);
    ref::dequantize(q, y.data());
    for (float v : y) CHECK(v == 0.0f);
  }
}

TEST_CASE("denormal inputs decode finite and close", "[quant][edge]") {
  // fp32 subnormals up to 2^-127, the smallest E8M0 scale: every format keeps them to half the block's amax.
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = std::ldexp(static_cast<float>(i + 1), -133);
  for (Format f : kAllFormats) {
    INFO("format " << static_cast<int>(f));
    const auto y = roundtrip(f, x);
    for (int i = 0; i < 64; ++i) {
      CHECK(std::isfinite(y[i]));
      CHECK(std::abs(y[i] - x[i]) <= 0.5f * x[63]);
    }
    CHECK(y[63] > 0.0f);
  }
  // MXFP4 keeps subnormals on its grid exactly (scale 2^-127, elements 0.5, 1, 1.5)
  std::vector<float> z(32, 0.0f);
  z[0] = std::ldexp(1.0f, -128);
  z[1] = std::ldexp(1.0f, -127);
  z[2] = std::ldexp(1.5f, -127);
  const auto yz = roundtrip(Format::mxfp4, z);
  for (int i = 0; i < 32; ++i) CHECK(yz[i] == z[i]);
  // below the E8M0 range values flush to zero (the format's limit, not an error)
  std::vector<float> t(32, std::ldexp(1.0f, -140));
  for (float v : roundtrip(Format::mxfp4, t)) CHECK(v == 0.0f);
}

TEST_CASE("+-max: saturating and finite", "[quant][edge]") {
  std::vector<float> x(64, 1.0f);
  x[0] = FLT_MAX;
  x[17] = -FLT_MAX;
  for (Format f : kAllFormats) {
    INFO("format " << static_cast<int>(f));
    const auto y = roundtrip(f, x);
    for (float v : y) CHECK(std::isfinite(v));
    CHECK(y[0] > 0.0f);
    CHECK(y[17] < 0.0f);
  }
  // NVFP4 and NF4 keep the tensor amax exactly representable in magnitude order
  CHECK(roundtrip(Format::nf4, x)[0] == FLT_MAX);
  CHECK(std::abs(roundtrip(Format::nvfp4, x)[0] / FLT_MAX - 1.0f) < 1e-6f);
  // MXFP4: 2^125 scale, 1.99 * 2^127 / 2^125 = 7.99 saturates to 6
  CHECK(roundtrip(Format::mxfp4, x)[0] == std::ldexp(1.5f, 127));
}

TEST_CASE("NaN/Inf policy: the block's scale becomes NaN, other blocks unaffected", "[quant][edge]") {
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    for (Format f : kAllFormats) {
      INFO("format " << static_cast<int>(f) << " value " << bad);
      const int B = block_size(f);
      std::vector<float> x(256);
      for (int i = 0; i < 256; ++i) x[i] = std::sin(0.37f * i) * 3.0f;
      const auto clean = roundtrip(f, x);
      x[B + 1] = bad;  // second block
      ref::QTensor q;
      REQUIRE(ref::quantize(x.data(), 1, 256, f, Layout::linear, q));
      std::vector<float> y(256);
      ref::dequantize(q, y.data());
      for (int i = 0; i < 256; ++i) {
        if (i >= B && i < 2 * B) {
          CHECK(std::isnan(y[i]));
        } else if (f != Format::nf4_dq) {  // NF4_DQ: other blocks share the group scale
          CHECK(y[i] == clean[i]);
        } else {
          CHECK(std::isfinite(y[i]));
        }
      }
    }
  }
  // NVFP4's per-tensor scale ignores non-finite values
  std::vector<float> x(64, 1.0f);
  x[3] = INFINITY;
  ref::QTensor q;
  REQUIRE(ref::quantize(x.data(), 1, 64, Format::nvfp4, Layout::linear, q));
  CHECK(q.scale2[0] == 1.0f / kNvfp4GlobalDiv);
}

// Note [MXFP4 range flag] (quant/gemv_kernel.cuh): a block that mxfp4_block_folds says folds gives, for
// each of its codes, a product of the code's E2M1 value and the bf16 scale e << 7 that is the block's
// decoded value exactly, in bf16, and 0 or normal (every byte, every code; NaN for the NaN byte 0xFF
// with +-0 codes, as the decode: Inf * 0); one that mxfp4_block_folds_f16 says folds, the same with the
// decode kernel's f16 scale ((e << 10) + (16 << 10)) & 0xFC00, in f16. And the reference's flag is the
// least fold level of the tensor's blocks, judged here from the stored bytes.
TEST_CASE("MXFP4 range flag: the least level at which every block folds", "[quant][format]") {
  for (uint32_t b = 0; b < 256; ++b)
    for (uint32_t c = 0; c < 16; ++c) {
      INFO("byte " << b << " code " << c);
      const float want = decode<Format::mxfp4>(c, e8m0_value(b));
      const float v = element_value(Format::mxfp4, c);
      if (mxfp4_block_folds(b, c)) {
        const float folded = ref::bf16_to_f32(static_cast<uint16_t>(b << 7)) * v;
        if (std::isnan(want)) {
          CHECK(b == 0xFFu);
          CHECK(std::isnan(folded));
        } else {
          CHECK(folded == want);
          CHECK(ref::bf16_to_f32(ref::f32_to_bf16(folded)) == folded);
          CHECK((folded == 0.0f || (std::abs(folded) >= std::ldexp(1.0f, -126) && std::isfinite(folded))));
        }
      }
      if (mxfp4_block_folds_f16(b, c)) {
        CHECK(mxfp4_block_folds(b, c));  // the levels nest
        const float folded = ref::f16_to_f32(static_cast<uint16_t>(((b << 10) + 0x4000u) & 0xFC00u)) * v;
        CHECK(folded == want);
        CHECK(ref::f16_to_f32(ref::f32_to_f16(folded)) == folded);
        CHECK((folded == 0.0f || (std::abs(folded) >= std::ldexp(1.0f, -14) && std::abs(folded) <= 65504.0f)));
      }
      CHECK(mxfp4_fold_level(b, c) == (mxfp4_block_folds_f16(b, c) ? 2u : mxfp4_block_folds(b, c) ? 1u : 0u));
    }
  // the quantize kernel's form: fold bytes, their (min, 255 - max) pairs kept by a per-half min
  auto vmin2 = [](uint32_t a, uint32_t b) {
    return std::min(a & 0xFFFFu, b & 0xFFFFu) | (std::min(a >> 16, b >> 16) << 16);
  };
  const uint32_t kinds[] = {0u, 0x88888888u, 1u, 0x70000000u};  // codes: +-0 only, or not
  for (uint32_t b = 0; b < 256; ++b)
    for (uint32_t c : kinds) {
      INFO("byte " << b << " codes " << c);
      const uint32_t pb = mxfp4_fold_pair(mxfp4_fold_byte(b, c));
      CHECK(mxfp4_range_level(pb) == mxfp4_fold_level(b, c));
      for (uint32_t b2 : {0u, 63u, 64u, 100u, 113u, 114u, 127u, 140u, 141u, 191u, 192u, 255u})
        for (uint32_t c2 : kinds)
          CHECK(mxfp4_range_level(vmin2(pb, mxfp4_fold_pair(mxfp4_fold_byte(b2, c2)))) ==
                std::min(mxfp4_fold_level(b, c), mxfp4_fold_level(b2, c2)));
    }
  CHECK(mxfp4_block_folds(64, 5));
  CHECK(mxfp4_block_folds(191, 5));
  CHECK_FALSE(mxfp4_block_folds(63, 5));
  CHECK_FALSE(mxfp4_block_folds(192, 5));
  CHECK_FALSE(mxfp4_block_folds(255, 1));
  CHECK(mxfp4_block_folds(0, 0x88888888u));  // +-0 codes fold at any byte
  CHECK(mxfp4_block_folds_f16(114, 5));
  CHECK(mxfp4_block_folds_f16(140, 5));
  CHECK_FALSE(mxfp4_block_folds_f16(113, 5));
  CHECK_FALSE(mxfp4_block_folds_f16(141, 5));
  CHECK_FALSE(mxfp4_block_folds_f16(255, 0));  // the NaN block: f16's scale would be finite
  // tensors: N(0,1) rows, then one block of row 1 scaled or replaced
  std::mt19937_64 rng(11);
  std::normal_distribution<float> nd;
  struct Edit {
    const char* what;
    float scale, value;  // elements [first, 96) of the block become value (if not 0) or x * scale
    int first;
    float want;
  };
  const Edit edits[] = {{"none", 1, 0, 64, 2},
                        {"2^-20: f16 no, bf16 yes", 0x1p-20f, 0, 64, 1},
                        {"2^20: f16 no, bf16 yes", 0x1p20f, 0, 64, 1},
                        {"2^-70", 0x1p-70f, 0, 64, 0},
                        {"2^70", 0x1p70f, 0, 64, 0},
                        {"zero block", 0, 0, 64, 2},
                        {"2^-140: byte 0, zero codes", 0x1p-140f, 0, 64, 2},
                        {"2^-126: byte 0", 0x1p-126f, 0, 64, 0},
                        {"NaN block: byte 0xFF, zero codes", 1, NAN, 64, 1},
                        {"one NaN: byte 0xFF, zero codes (FORMAT.md's NaN policy)", 1, NAN, 95, 1}};
  for (const Edit& e : edits) {
    INFO(e.what);
    std::vector<float> x(4 * 256);
    for (auto& v : x) v = nd(rng);
    for (int i = 256 + e.first; i < 256 + 96; ++i) x[i] = e.value != 0 ? e.value : x[i] * e.scale;
    for (Layout l : {Layout::linear, Layout::gemm}) {
      ref::QTensor q;
      REQUIRE(ref::quantize(x.data(), 4, 256, Format::mxfp4, l, q));
      REQUIRE(q.scale2.size() == 1);
      CHECK(q.scale2[0] == e.want);
      uint32_t level = 2;  // from the stored bytes: element (n, k)'s block
      for (int64_t n = 0; n < 4; ++n)
        for (int64_t k = 0; k < 256; k += 32) {
          uint32_t codes = 0;
          for (int64_t j = 0; j < 32; ++j) codes |= ref::code_at(q, n, k + j);
          level = std::min(level, mxfp4_fold_level(q.scales[scale_byte(Format::mxfp4, l, n, k, 256)], codes));
        }
      CHECK(q.scale2[0] == static_cast<float>(level));
    }
  }
}

// Note [NVFP4 shifted pairs] (quant/gemv_kernel.cuh): an E4M3 byte 0..0x7E shifted 4 bits up in a bf16 half is its
// value times 2^-120 (subnormal bf16 for exponent 0), and the product with an E2M1 value times 2^120 (the kernel's
// table) is the decoded value, exactly. The bytes it does not hold are the ones the range flag excludes.
TEST_CASE("NVFP4: the shifted E4M3 byte is its value times 2^-120", "[quant][format]") {
  for (uint32_t b = 0; b < 256; ++b) {
    INFO("byte " << b);
    CHECK(nvfp4_plain_scale(b) == (b < 0x7F));
    if (!nvfp4_plain_scale(b)) continue;
    const float pair = ref::bf16_to_f32(static_cast<uint16_t>(b << 4));
    CHECK(pair == std::ldexp(e4m3_value(b), -120));
    for (uint32_t c = 0; c < 16; ++c) {
      const float t = ref::bf16_to_f32(ref::f32_to_bf16(element_value(Format::nvfp4, c) * 0x1p120f));
      CHECK(t == std::ldexp(element_value(Format::nvfp4, c), 120));  // the table entry is exact
      const double prod = static_cast<double>(t) * pair;  // exact in double; HMUL2 rounds it to bf16
      CHECK(ref::bf16_to_f32(ref::f32_to_bf16(static_cast<float>(prod))) == prod);
      CHECK(prod == static_cast<double>(element_value(Format::nvfp4, c)) * e4m3_value(b));
      CHECK((prod == 0 || std::abs(prod) >= 0x1p-126));  // normal or zero: no subnormal product
    }
  }
}

// NVFP4's range flag (scale2[1], FORMAT.md): 1 where every scale byte is plain, which the encoder gives every finite
// block, tiny ones too (subnormal scale bytes); 0 where a block holds NaN or Inf (the NaN byte).
TEST_CASE("NVFP4's range flag", "[quant][format]") {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  struct Edit {
    const char* what;
    float value;  // written at x[300] (row 1, block 2)
    float scale;  // block 3 of row 2 scaled by it
    float want;
  };
  const Edit edits[] = {{"none", 1.0f, 1.0f, kNvfp4Plain},
                        {"a tiny block: subnormal scale byte", 1.0f, 0x1p-16f, kNvfp4Plain},
                        {"NaN", NAN, 1.0f, 0.0f},
                        {"Inf", INFINITY, 1.0f, 0.0f},
                        {"-Inf", -INFINITY, 1.0f, 0.0f}};
  for (const Edit& e : edits) {
    INFO(e.what);
    std::vector<float> x(4 * 256);
    for (auto& v : x) v = nd(rng);
    if (e.value != 1.0f) x[300] = e.value;
    for (int i = 512 + 48; i < 512 + 64; ++i) x[i] *= e.scale;
    for (Layout l : {Layout::linear, Layout::gemm}) {
      ref::QTensor q;
      REQUIRE(ref::quantize(x.data(), 4, 256, Format::nvfp4, l, q));
      REQUIRE(q.scale2.size() == 2);
      CHECK(q.scale2[1] == e.want);
      const uint8_t sc = q.scales[scale_byte(Format::nvfp4, l, 2, 48, 256)];
      if (e.scale != 1.0f) CHECK(sc < 8);  // exponent 0
      bool plain = true;
      for (uint8_t b : q.scales) plain = plain && nvfp4_plain_scale(b);
      CHECK(q.scale2[1] == (plain ? kNvfp4Plain : 0.0f));
    }
  }
}

TEST_CASE("bf16/f16 conversions round to nearest even", "[quant][format]") {
  CHECK(ref::f32_to_bf16(1.0f) == 0x3F80);
  CHECK(ref::f32_to_bf16(ref::bf16_to_f32(0x3F80) + std::ldexp(1.0f, -8)) == 0x3F80);  // tie -> even
  CHECK(ref::f32_to_bf16(ref::bf16_to_f32(0x3F81) + std::ldexp(1.0f, -8)) == 0x3F82);
  CHECK(std::isnan(ref::bf16_to_f32(ref::f32_to_bf16(NAN))));
  CHECK(ref::f32_to_f16(1.0f) == 0x3C00);
  CHECK(ref::f32_to_f16(65520.0f) == 0x7C00);  // overflows to inf
  CHECK(ref::f16_to_f32(0x0001) == std::ldexp(1.0f, -24));
}

// The first index where two equal-sized buffers differ, or -1 (Catch would print millions of elements).
template <typename V>
int64_t first_difference(const V& a, const V& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof a[i]) != 0) return static_cast<int64_t>(i);
  return -1;
}

// The reference splits large tensors over threads (ref::set_threads): every byte it writes must be the one the
// serial walk writes. A tensor of 1028 x 4096 (each step above its threading threshold, so 4 threads take 4
// ranges), with the facts that span ranges placed in the last one: the largest |x| (NVFP4's tensor scale), a
// block of tiny values (MXFP4's range flag drops to 0 only there), NaN / Inf blocks, and an NF4_DQ group scale
// 2^20 larger than the rest.
TEST_CASE("the reference's bytes do not depend on its threads", "[quant][format]") {
  const int64_t rows = 1028, cols = 4096;  // NF4_DQ: 257 groups, so 4 equal ranges would split one
  std::mt19937_64 rng(7);
  std::normal_distribution<float> nd;
  std::vector<float> x(rows * cols);
  for (auto& v : x) v = nd(rng);
  const int64_t last = (rows - 3) * cols;                              // in the last of 4 ranges
  x[last + 5] = 1000.0f;                                              // the tensor's amax
  for (int i = 0; i < 32; ++i) x[last + 64 + i] = std::ldexp(nd(rng), -120);  // an E8M0 byte near 0
  x[last + 200] = NAN;
  x[last + 300] = INFINITY;
  for (int64_t i = 0; i < 256 * 64; ++i) x[(rows - 1) * cols - 256 * 64 + i] *= std::ldexp(1.0f, 20);
  for (Format f : kAllFormats) {
    for (Layout l : {Layout::linear, Layout::gemm}) {
      INFO("format " << static_cast<int>(f) << " layout " << static_cast<int>(l));
      ref::QTensor q1, q4;
      std::vector<float> y1(x.size()), y4(x.size());
      ref::set_threads(1);
      REQUIRE(ref::quantize(x.data(), rows, cols, f, l, q1));
      ref::dequantize(q1, y1.data());
      const ref::QTensor lin1 = l == Layout::gemm ? ref::to_linear(q1) : q1;
      ref::set_threads(4);
      REQUIRE(ref::quantize(x.data(), rows, cols, f, l, q4));
      ref::dequantize(q4, y4.data());
      const ref::QTensor lin4 = l == Layout::gemm ? ref::to_linear(q4) : q4;
      ref::set_threads(0);
      CHECK(first_difference(q1.codes, q4.codes) == -1);
      CHECK(first_difference(q1.scales, q4.scales) == -1);
      CHECK(first_difference(q1.scale2, q4.scale2) == -1);
      CHECK(first_difference(y1, y4) == -1);  // bit patterns: the NaN block's NaNs compare too
      CHECK(first_difference(lin1.codes, lin4.codes) == -1);
      CHECK(first_difference(lin1.scales, lin4.scales) == -1);
      if (f == Format::mxfp4) CHECK(q4.scale2[0] == 0.0f);  // the tiny block's level, found in the last range
    }
  }
}
