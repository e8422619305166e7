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
  CHECK(pick_gemm_config(8, 100000, 4096, 16) == GemmConfigId::small32);
  // M > 16: wgmma tiles, BT tokens as small as M allows
  CHECK(pick_gemm_config(17, 8192, 8192, h100) == GemmConfigId::wg64n);
  CHECK(pick_gemm_config(64, 14336, 4096, h100) == GemmConfigId::wg64n);
  // ... unless 64-row weight tiles leave half the SMs idle (N / 64 < SMs / 2): weight streaming
  CHECK(pick_gemm_config(32, 4096, 4096, h100) == GemmConfigId::small16);
  CHECK(pick_gemm_config(64, 4096, 14336, h100) == GemmConfigId::small16);
  CHECK(pick_gemm_config(65, 4096, 4096, h100) == GemmConfigId::wg128n);
  CHECK(pick_gemm_config(65, 8192, 8192, h100) == GemmConfigId::wg128n);
  CHECK(pick_gemm_config(128, 8192, 8192, h100) == GemmConfigId::wg128n);
  CHECK(pick_gemm_config(256, 8192, 8192, h100) == GemmConfigId::wg128);
  CHECK(pick_gemm_config(257, 8192, 8192, h100) == GemmConfigId::wg256);
  CHECK(pick_gemm_config(8192, 8192, 8192, h100) == GemmConfigId::wg256);
  // without wgmma (other GPUs / targets): the mma.sync configs
  CHECK(mma_sync_config(1, 8192, 8192, h100) == GemmConfigId::gemv);
  CHECK(mma_sync_config(64, 4096, 4096, h100) == GemmConfigId::small16);
  CHECK(mma_sync_config(256, 8192, 8192, h100) == GemmConfigId::mid);
  CHECK(mma_sync_config(257, 8192, 8192, h100) == GemmConfigId::large);
  CHECK(!is_wgmma_config(mma_sync_config(1024, 8192, 8192, h100)));
  CHECK(is_wgmma_config(GemmConfigId::wg256));
  CHECK(!is_wgmma_config(GemmConfigId::large));
}

template <class C>
void check_wgmma_traits() {
  STATIC_REQUIRE(C::SMEM_BYTES <= 227 * 1024);
  STATIC_REQUIRE(C::STAGE_BYTES % 1024 == 0);               // SW128 x blocks stay 1 KB aligned
  STATIC_REQUIRE(C::X_BYTES % 1024 == 0);                   // codes and scales start 128-byte aligned
  STATIC_REQUIRE(C::X_BYTES + C::W_BYTES + C::S_BYTES <= C::STAGE_BYTES);
  STATIC_REQUIRE(C::Y_OFF >= C::STAGES * C::STAGE_BYTES);   // the output tile has its own buffer
  STATIC_REQUIRE(C::BT <= 256 && C::BW * 1 >= 16);          // TMA box limits (scales: >= 16 bytes)
  STATIC_REQUIRE(C::THREADS % 128 == 0);
  // setmaxnreg split: producer + consumers within the 64K register file
  STATIC_REQUIRE(C::REGS_PRODUCER * 128 + C::REGS_CONSUMER * 128 * C::NWG <= 65536);
}

TEST_CASE("wgmma tile traits are consistent", "[quant][heuristics]") {
  check_wgmma_traits<CfgWg256>();
  check_wgmma_traits<CfgWg128>();
  check_wgmma_traits<CfgWg128n>();
  check_wgmma_traits<CfgWg64n>();
  STATIC_REQUIRE(CfgWg256::BW == 128);
  STATIC_REQUIRE(CfgWg256::THREADS == 384);
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
