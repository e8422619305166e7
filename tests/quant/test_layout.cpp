// GEMM layout: byte permutation, pack/unpack round trips, per-element addressing.
#include <catch2/catch.hpp>

#include <random>
#include <set>
#include <vector>

#include "quant/layout.hpp"
#include "quant/ref.hpp"
#include "tests/quant/formats.hpp"

using namespace vstack::quant;

TEST_CASE("GEMM byte permutation is a bijection and its inverse", "[quant][layout]") {
  std::set<int> seen;
  for (int b = 0; b < 32; ++b) {
    const int p = gemm_byte_perm(b);
    CHECK(p >= 0);
    CHECK(p < 32);
    seen.insert(p);
    CHECK(gemm_byte_unperm(p) == b);
  }
  CHECK(seen.size() == 32);
  // lane r of an MMA quad finds the bytes of k = 16s + 2r (+1) and 16s + 8 + 2r (+1) at 8r + 2s (+1)
  for (int r = 0; r < 4; ++r)
    for (int s = 0; s < 4; ++s) {
      CHECK(gemm_byte_perm((16 * s + 2 * r) / 2) == 8 * r + 2 * s);
      CHECK(gemm_byte_perm((16 * s + 8 + 2 * r) / 2) == 8 * r + 2 * s + 1);
    }
}

TEST_CASE("GEMM code bytes: 512-byte (16-row tile, chunk) blocks in tile-major order", "[quant][layout]") {
  constexpr int64_t N = 48, K = 192;  // 3 tiles x 3 chunks
  std::set<int64_t> seen;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; k += 2) {
      const int64_t b = code_byte(Layout::gemm, n, k, K);
      CHECK(b >= 0);
      CHECK(b < sizes(Format::nvfp4, Layout::gemm, N, K).codes_bytes);
      seen.insert(b);
      CHECK(b / 512 == (n / 16) * (K / 64) + k / 64);  // block (tile, chunk)
      CHECK(b % 512 / 32 == n % 16);                    // the row's 32 bytes in row order
    }
  CHECK(seen.size() == static_cast<size_t>(N * K / 2));
  // scales: per (tile, chunk) one run of 16 rows, rows g and g + 8 adjacent
  std::set<int64_t> sseen;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t kc = 0; kc < K / 64; ++kc) {
      const int64_t b = gemm_scale_chunk(n, kc, K, 4);
      CHECK(b / 64 == (n / 16) * (K / 64) + kc);
      CHECK(b % 64 == (2 * (n % 8) + (n % 16) / 8) * 4);
      CHECK(b == scale_byte(Format::nvfp4, Layout::gemm, n, kc * 64, K));
      sseen.insert(b);
    }
  CHECK(sseen.size() == static_cast<size_t>(N * K / 64));
  CHECK(sizes(Format::nvfp4, Layout::gemm, N, K).scales_bytes == N * K / 64 * 4);
  for (int nl = 0; nl < 32; ++nl) CHECK(gemm_scale_slot(nl) == 16 * (nl / 16) + 2 * (nl % 8) + (nl % 16) / 8);
  // lane (g, r) of a warp: its 8 fragment bytes of row g at g * 32 + r * 8, of row g + 8 256 bytes on
  for (int g = 0; g < 8; ++g)
    for (int r = 0; r < 4; ++r)
      for (int s = 0; s < 4; ++s)
        for (int h = 0; h < 2; ++h) {
          const int64_t n = 16 + g + 8 * h, kc = 2;  // tile 1, chunk 2
          const int64_t base = (1 * (K / 64) + kc) * 512 + 256 * h + g * 32 + r * 8;
          CHECK(code_byte(Layout::gemm, n, kc * 64 + 16 * s + 2 * r, K) == base + 2 * s);
          CHECK(code_byte(Layout::gemm, n, kc * 64 + 16 * s + 8 + 2 * r, K) == base + 2 * s + 1);
        }
}

TEST_CASE("sizes and shape rules", "[quant][layout]") {
  CHECK(shape_ok(Format::nvfp4, Layout::linear, 1, 16));
  CHECK_FALSE(shape_ok(Format::nvfp4, Layout::linear, 1, 8));
  CHECK_FALSE(shape_ok(Format::mxfp4, Layout::gemm, 4, 96));
  CHECK(shape_ok(Format::mxfp4, Layout::gemm, 3, 128));
  CHECK_FALSE(shape_ok(Format::nf4, Layout::gemm, 0, 64));
  const Sizes a = sizes(Format::nvfp4, Layout::gemm, 17, 128);
  CHECK(a.codes_bytes == 32 * 64);  // rows padded to 16-row tiles
  CHECK(a.scales_bytes == 2 * 32 * 4);  // 2 chunks x Npad 32 x 4 E4M3
  CHECK(a.scale2_count == 2);  // the tensor scale and the range flag
  CHECK(sizes(Format::nvfp4, Layout::linear, 1, 16).scale2_count == 2);
  CHECK(sizes(Format::mxfp4, Layout::linear, 1, 32).scale2_count == 1);
  const Sizes b = sizes(Format::nf4_dq, Layout::linear, 1, 64 * 513);
  CHECK(b.scales_bytes == 513);
  CHECK(b.scale2_count == 3);
  CHECK(sizes(Format::nf4, Layout::linear, 2, 64).scales_bytes == 8);
  CHECK(sizes(Format::mxfp4, Layout::gemm, 16, 64).scales_bytes == 32);
}

TEST_CASE("pack to the GEMM layout and back is lossless; elements agree", "[quant][layout]") {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> nd;
  for (Format f : kAllFormats) {
    for (auto [N, K] : {std::pair<int64_t, int64_t>{1, 64}, {17, 192}, {33, 64 * 260}, {16, 128}}) {
      INFO("format " << static_cast<int>(f) << " N " << N << " K " << K);
      std::vector<float> x(N * K);
      for (auto& v : x) v = nd(rng) * 3.0f;
      ref::QTensor lin, gem, direct;
      REQUIRE(ref::quantize(x.data(), N, K, f, Layout::linear, lin));
      REQUIRE(ref::to_gemm(lin, gem));
      REQUIRE(ref::quantize(x.data(), N, K, f, Layout::gemm, direct));
      CHECK(direct.codes == gem.codes);
      CHECK(direct.scales == gem.scales);
      CHECK(direct.scale2 == gem.scale2);
      const ref::QTensor back = ref::to_linear(gem);
      CHECK(back.codes == lin.codes);
      CHECK(back.scales == lin.scales);
      // per-element addressing agrees
      for (int64_t n = 0; n < N; n += 5)
        for (int64_t k = 0; k < K; k += 3) {
          REQUIRE(ref::code_at(gem, n, k) == ref::code_at(lin, n, k));
          REQUIRE(ref::scale_at(gem, n, k) == ref::scale_at(lin, n, k));
        }
      // the padding rows of the scale table are zero
      const int64_t npad = gemm_npad(N), sb = chunk_scale_bytes(f);
      for (int64_t kc = 0; kc < K / 64; ++kc)
        for (int64_t n = N; n < npad; ++n)
          for (int64_t i = 0; i < sb; ++i) REQUIRE(gem.scales[gemm_scale_chunk(n, kc, K, static_cast<int>(sb)) + i] == 0);
      std::vector<float> y1(N * K), y2(N * K);
      ref::dequantize(lin, y1.data());
      ref::dequantize(gem, y2.data());
      CHECK(y1 == y2);
    }
  }
}

TEST_CASE("to_gemm refuses K not a multiple of 64", "[quant][layout]") {
  std::vector<float> x(32 * 3, 1.0f);
  ref::QTensor lin, gem;
  REQUIRE(ref::quantize(x.data(), 3, 32, Format::mxfp4, Layout::linear, lin));
  CHECK_FALSE(ref::to_gemm(lin, gem));
  CHECK_FALSE(ref::quantize(x.data(), 3, 32, Format::mxfp4, Layout::gemm, gem));
}
