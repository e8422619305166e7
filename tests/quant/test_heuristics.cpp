// Launch heuristic of the FP4 GEMM and the tile traits it picks from.
#include <catch2/catch.hpp>

#include "quant/gemm_traits.hpp"

using namespace vstack::quant;

template <class C>
void check_traits() {
  STATIC_REQUIRE(C::SMEM_BYTES <= 227 * 1024);          // Hopper's per-block limit
  STATIC_REQUIRE(C::THREADS <= 256);
  STATIC_REQUIRE(C::C_BYTES <= C::PIPE_BYTES);           // the epilogue reuses the pipeline's memory
  STATIC_REQUIRE(C::STAGE_BYTES % 16 == 0);              // cp.async targets stay 16-byte aligned
  STATIC_REQUIRE(C::W_PITCH % 16 == 0);
  STATIC_REQUIRE(C::BN * 1 >= 16);                       // one 16-byte scale chunk at least
}

TEST_CASE("GEMM tile traits are consistent", "[quant][heuristics]") {
  check_traits<CfgSmall16>();
  check_traits<CfgSmall32>();
  check_traits<CfgMid>();
  check_traits<CfgLarge>();
  check_traits<CfgGemv>();
  STATIC_REQUIRE(CfgSmall32::BK == 256);
  STATIC_REQUIRE(CfgLarge::MT == 4);
  STATIC_REQUIRE(CfgLarge::NT == 4);
}

TEST_CASE("launch heuristic selection", "[quant][heuristics]") {
  constexpr int h100 = 132;
  // M <= 4 with x resident (pow2(M) * K * 2 <= 64 KB): the weight-only pipeline
  CHECK(pick_gemm_config(1, 8192, 8192, h100) == GemmConfigId::gemv);
  CHECK(pick_gemm_config(1, 4096, 14336, h100) == GemmConfigId::gemv);
  CHECK(pick_gemm_config(2, 8192, 8192, h100) == GemmConfigId::gemv);
  CHECK(pick_gemm_config(3, 8192, 8192, h100) == GemmConfigId::gemv);   // 4 rows x 16 KB = 64 KB
  CHECK(pick_gemm_config(4, 4096, 4096, h100) == GemmConfigId::gemv);
  CHECK(pick_gemm_config(3, 8192, 8256, h100) == GemmConfigId::small16); // just over 64 KB
  CHECK(pick_gemm_config(4, 4096, 14336, h100) == GemmConfigId::small16);
  // decode regime beyond that: weight streaming, BN chosen for >= 2 CTAs per SM
  CHECK(pick_gemm_config(8, 8192, 8192, h100) == GemmConfigId::small16);    // 256 < 264 CTAs of BN=32
  CHECK(pick_gemm_config(16, 14336, 4096, h100) == GemmConfigId::small32);  // 448 CTAs
  CHECK(pick_gemm_config(16, 4096, 4096, h100) == GemmConfigId::small16);
  CHECK(pick_gemm_config(64, 4096, 4096, h100) == GemmConfigId::small16);
  CHECK(pick_gemm_config(8, 100000, 4096, 16) == GemmConfigId::small32);
  CHECK(pick_gemm_config(65, 8192, 8192, h100) == GemmConfigId::mid);
  CHECK(pick_gemm_config(256, 8192, 8192, h100) == GemmConfigId::mid);
  CHECK(pick_gemm_config(257, 8192, 8192, h100) == GemmConfigId::large);
  CHECK(pick_gemm_config(8192, 8192, 8192, h100) == GemmConfigId::large);
}

TEST_CASE("x-resident shared memory sizes", "[quant][heuristics]") {
  STATIC_REQUIRE(CfgGemv::XRES);
  STATIC_REQUIRE(CfgGemv::STAGE_BYTES == CfgGemv::W_BYTES + CfgGemv::S_BYTES);
  STATIC_REQUIRE(CfgGemv::SMEM_MAX <= 227 * 1024);
  STATIC_REQUIRE(CfgGemv::XOFF % 128 == 0);
  CHECK(CfgGemv::smem_bytes(1, 8192) == CfgGemv::XOFF + 16384);
  CHECK(CfgGemv::smem_bytes(3, 8192) == CfgGemv::XOFF + 65536);
  CHECK(CfgSmall16::smem_bytes(16, 8192) == CfgSmall16::SMEM_BYTES);
  // four x-resident CTAs fit an SM (227 KB) at M = 1, K = 8192
  CHECK(4 * CfgGemv::smem_bytes(1, 8192) <= 227 * 1024);
}
