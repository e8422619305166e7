// Launch heuristic of the FP4 GEMM and the tile traits it picks from.
#include <catch2/catch.hpp>

#include "quant/env.hpp"
#include "quant/gemm_traits.hpp"
#include "quant/gemv_plan.hpp"
#include "tests/quant/formats.hpp"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <utility>

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
  STATIC_REQUIRE(CfgSmall32::BK == 256);
  STATIC_REQUIRE(CfgLarge::MT == 4);
  STATIC_REQUIRE(CfgLarge::NT == 4);
}

TEST_CASE("wgmma GEMM schedule: K split where the tiles fill at most half the CTAs", "[quant][heuristics]") {
  // 4096 x 14336, M = 32, wg64n (2 CTAs per SM): 64 tiles, 224 chunks -> 4 slices of 56
  STATIC_REQUIRE(wg_ksplit(64, 264, 224) == 4);
  constexpr WgSchedule a = wg_schedule(64, 264, false, 224, wg_ksplit(64, 264, 224));
  STATIC_REQUIRE(a.ksplit == 4);
  STATIC_REQUIRE(a.kcs == 56);
  STATIC_REQUIRE(a.items == 256);
  STATIC_REQUIRE(a.whole == a.items);  // no tail halves with a K split
  STATIC_REQUIRE(a.grid == 256);
  STATIC_REQUIRE(wg_ws_floats(64, a.ksplit, 64, 64) == 64 * 4 * 64 * 64);
  // 8192 x 8192, M = 32: 128 tiles -> 2 slices; 14336 x 4096 (224 tiles) and M >= 1024 cells: none
  STATIC_REQUIRE(wg_ksplit(128, 264, 128) == 2);
  STATIC_REQUIRE(wg_ksplit(224, 264, 64) == 1);
  STATIC_REQUIRE(wg_ksplit(128, 132, 128) == 1);  // 4096^2 M = 1024, wg256
  STATIC_REQUIRE(wg_ksplit(256, 132, 128) == 1);  // 8192^2 M = 1024
  // at most kWgMaxKSplit slices of at least kWgMinSliceChunks chunks
  STATIC_REQUIRE(wg_ksplit(1, 264, 1000) == kWgMaxKSplit);
  STATIC_REQUIRE(wg_ksplit(1, 264, 20) == 2);
  STATIC_REQUIRE(wg_ksplit(1, 264, 15) == 1);
  // a ragged split: 65 chunks in 8 -> slices of 9, the last of 2; 10 chunks in 8 -> 5 slices of 2
  STATIC_REQUIRE(wg_schedule(3, 264, true, 65, 8).kcs == 9);
  STATIC_REQUIRE(wg_schedule(3, 264, true, 65, 8).ksplit == 8);
  STATIC_REQUIRE(wg_schedule(3, 264, true, 10, 8).ksplit == 5);
  STATIC_REQUIRE(wg_schedule(3, 264, true, 1, 8).ksplit == 1);
  // every (tile, slice) is one item; the slices cover the chunks once, none empty
  for (int64_t tiles : {1, 7, 64, 130})
    for (int64_t kc : {1, 2, 9, 64, 65, 224})
      for (int ks = 1; ks <= kWgMaxKSplit; ++ks) {
        const WgSchedule s = wg_schedule(tiles, 264, true, kc, ks);
        if (s.ksplit == 1) continue;
        CHECK(s.items == tiles * s.ksplit);
        CHECK(s.whole == s.items);
        CHECK(s.ksplit <= ks);
        CHECK(static_cast<int64_t>(s.ksplit - 1) * s.kcs < kc);  // the last slice holds a chunk
        CHECK(static_cast<int64_t>(s.ksplit) * s.kcs >= kc);
      }
}

TEST_CASE("wgmma GEMM schedule: a tail round of at most half the CTAs is split in halves", "[quant][heuristics]") {
  // 14336 x 4096, M = 1024, wg256: 448 tiles on 132 SMs = 3 rounds + 52 tiles -> 104 half items
  constexpr WgSchedule a = wg_schedule(448, 132, true);
  STATIC_REQUIRE(a.whole == 396);
  STATIC_REQUIRE(a.items == 396 + 104);
  STATIC_REQUIRE(a.grid == 132);
  // the whole tiles fill complete rounds, and the half items one more round
  STATIC_REQUIRE(a.whole % a.grid == 0);
  STATIC_REQUIRE(a.items - a.whole <= a.grid);
  // a tail of more than half the CTAs stays whole (halves would take a round as well)
  constexpr WgSchedule b = wg_schedule(256, 132, true);  // 8192 x 8192, M = 1024
  STATIC_REQUIRE(b.whole == 256);
  STATIC_REQUIRE(b.items == 256);
  STATIC_REQUIRE(b.grid == 132);
  constexpr WgSchedule c = wg_schedule(128, 132, true);  // 4096 x 4096, M = 1024: one round, no tail
  STATIC_REQUIRE(c.items == 128);
  STATIC_REQUIRE(c.grid == 128);
  // fewer tiles than half the CTAs: every tile is split, one CTA per half
  constexpr WgSchedule d = wg_schedule(6, 132, true);
  STATIC_REQUIRE(d.whole == 0);
  STATIC_REQUIRE(d.items == 12);
  STATIC_REQUIRE(d.grid == 12);
  // exact rounds, or one consumer warpgroup (nothing to share k with): unchanged
  STATIC_REQUIRE(wg_schedule(264, 132, true).items == 264);
  STATIC_REQUIRE(wg_schedule(448, 132, false).items == 448);
  STATIC_REQUIRE(wg_schedule(448, 132, false).grid == 132);
  // every tile is covered once: whole tiles plus two halves of each other tile
  for (int64_t tiles = 1; tiles < 1000; ++tiles)
    for (int64_t resident : {1, 2, 66, 132, 264}) {
      const WgSchedule s = wg_schedule(tiles, resident, true);
      CHECK(s.whole + (s.items - s.whole) / 2 == tiles);
      CHECK((s.items - s.whole) % 2 == 0);
      CHECK(s.grid == std::min(s.items, resident));
      if (s.items != s.whole) {
        CHECK(s.whole % s.grid == 0);
        CHECK(s.items - s.whole <= s.grid);
      }
    }
}

TEST_CASE("launch heuristic selection", "[quant][heuristics]") {
  constexpr int h100 = 132;
  // decode regime M <= 16: the decode kernel, whatever the shape
  for (int64_t m : {1, 2, 3, 4, 8, 9, 16})
    for (auto [n, k] : {std::pair<int64_t, int64_t>{8192, 8192}, {4096, 4096}, {14336, 4096}, {4096, 14336}, {64, 64}})
      CHECK(pick_gemm_config(m, n, k, h100) == GemmConfigId::gemv);
  // M > 16: wgmma tiles, BT tokens as small as M allows
  CHECK(pick_gemm_config(17, 8192, 8192, h100) == GemmConfigId::wg64n);
  CHECK(pick_gemm_config(64, 14336, 4096, h100) == GemmConfigId::wg64n);
  // ... also where 64-row weight tiles leave half the SMs idle (N / 64 < SMs / 2): the K split
  // fills them (Note [K split])
  CHECK(pick_gemm_config(32, 4096, 4096, h100) == GemmConfigId::wg64n);
  CHECK(pick_gemm_config(64, 4096, 14336, h100) == GemmConfigId::wg64n);
  // then two consumer warpgroups with BT >= M: 128 tokens up to M = 128, 256 beyond
  CHECK(pick_gemm_config(65, 4096, 4096, h100) == GemmConfigId::wg128);
  CHECK(pick_gemm_config(65, 8192, 8192, h100) == GemmConfigId::wg128);
  CHECK(pick_gemm_config(128, 8192, 8192, h100) == GemmConfigId::wg128);
  CHECK(pick_gemm_config(129, 8192, 8192, h100) == GemmConfigId::wg256);
  CHECK(pick_gemm_config(256, 8192, 8192, h100) == GemmConfigId::wg256);
  CHECK(pick_gemm_config(257, 8192, 8192, h100) == GemmConfigId::wg256);
  CHECK(pick_gemm_config(8192, 8192, 8192, h100) == GemmConfigId::wg256);
  // without wgmma (other GPUs / targets): the mma.sync configs; beyond the decode kernel, weight
  // streaming with BN chosen for >= 2 CTAs per SM, then 64 x 64 and 128 x 128 tiles
  CHECK(mma_sync_config(1, 8192, 8192, h100) == GemmConfigId::gemv);
  CHECK(mma_sync_config(17, 14336, 4096, h100) == GemmConfigId::small32);  // 448 CTAs
  CHECK(mma_sync_config(17, 4096, 4096, h100) == GemmConfigId::small16);
  CHECK(mma_sync_config(32, 100000, 4096, 16) == GemmConfigId::small32);
  CHECK(mma_sync_config(65, 8192, 8192, h100) == GemmConfigId::mid);
  CHECK(mma_sync_config(8192, 8192, 8192, h100) == GemmConfigId::large);
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

TEST_CASE("decode kernel plan", "[quant][heuristics]") {
  constexpr int h100 = 132;
  STATIC_REQUIRE(plan_gemv(1, 8192, 8192, h100).ok);
  STATIC_REQUIRE(!plan_gemv(17, 8192, 8192, h100).ok);
  STATIC_REQUIRE(!plan_gemv(1, 8192, 8200, h100).ok);  // K % 64
  // The bench shapes: the plans the cost model picks are the fastest of a sweep of every (S, T)
  // (Note [Decode plan cost]). M = 1: no split (x fits), one CTA per SM.
  STATIC_REQUIRE(plan_gemv(1, 8192, 8192, h100).split == 1);
  STATIC_REQUIRE(plan_gemv(1, 8192, 8192, h100).ctas_per_sm == kGemvMinBlocks);
  STATIC_REQUIRE(plan_gemv(1, 4096, 14336, h100).split == 1);
  STATIC_REQUIRE(plan_gemv(1, 8192, 8192, h100).tiles == 1);
  // 4096^2: two tiles per row block give 128 blocks, one per CTA, and runs of 8 chunks (8.2 us
  // against 8.6 with one tile: two blocks per CTA of 4-chunk runs)
  STATIC_REQUIRE(plan_gemv(1, 4096, 4096, h100).split == 1);
  STATIC_REQUIRE(plan_gemv(1, 4096, 4096, h100).tiles == 2);
  // 14336 x 4096: one tile per row block (896 blocks balance better on 132 CTAs than 448: 19.7 vs
  // 21.9 us at M = 1)
  STATIC_REQUIRE(plan_gemv(1, 14336, 4096, h100).tiles == 1);
  // 4096 x 14336 at M = 4 loads 112 KB of x per CTA with S = 1, and still S = 1 wins on the tile
  // layout: 17.2 us against 19.3 for S = 2 with 4 tiles (one row block per cluster; 23.6 us against
  // 28.2 for S = 1 on the layout before)
  STATIC_REQUIRE(plan_gemv(4, 4096, 14336, h100).split == 1);
  STATIC_REQUIRE(plan_gemv(4, 4096, 14336, h100).tiles == 1);
  // 4096^2 M = 16: 8.9 us (S1T2) against 10.5 (S2T4)
  STATIC_REQUIRE(plan_gemv(16, 4096, 4096, h100).split == 1);
  STATIC_REQUIRE(plan_gemv(16, 4096, 4096, h100).tiles == 2);
  // M = 16: x (16 rows x 128 chunks = 256 KB) needs S >= 2; with clusters, 8 tiles per row block
  // mean one block (two cluster barriers) per cluster: 35.7 us against 40.7 with 2 tiles
  STATIC_REQUIRE(plan_gemv(16, 8192, 8192, h100).split == 2);
  STATIC_REQUIRE(plan_gemv(16, 8192, 8192, h100).tiles == 8);
  STATIC_REQUIRE(plan_gemv(16, 8192, 8192, h100).kc_per_warp == 32);
  STATIC_REQUIRE(plan_gemv(8, 8192, 8192, h100).split == 1);  // x fits (128 KB): 18.2 us against 21.6 (S2T8)
  STATIC_REQUIRE(plan_gemv(16, 4096, 14336, h100).split == 8);  // 39.4 us against 49.4 (S = 4, 4 tiles)
  STATIC_REQUIRE(plan_gemv(16, 4096, 14336, h100).tiles == 8);
  // short slices: K = 2048 is 32 chunks; four tiles give runs of 8
  STATIC_REQUIRE(plan_gemv(16, 8192, 2048, h100).tiles == 4);
  // persistent CTAs: one per SM at M = 1 (512 row blocks of 16 rows on 132 workers)
  STATIC_REQUIRE(plan_gemv(1, 8192, 8192, h100).workers == 132);
  // small N: 64 row tiles on 132 SMs; a cluster's two barriers per row block cost more (modelled)
  // than the idle SMs
  STATIC_REQUIRE(plan_gemv(1, 1024, 4096, h100).split == 1);
  STATIC_REQUIRE(plan_gemv(1, 1024, 4096, h100).workers == 64);
  // the launcher's measured worker counts replace the model: with room for only 16 CTAs of S = 1
  // (say, less shared memory), clusters of 2 win
  {
    constexpr int64_t few[kGemvMaxSplit + 1] = {0, 16, 66, 0, 30, 0, 0, 0, 15};
    STATIC_REQUIRE(plan_gemv(1, 1024, 4096, h100, true, few).split == 2);
    STATIC_REQUIRE(plan_gemv(1, 8192, 8192, h100, true, few).split == 2);
    STATIC_REQUIRE(plan_gemv(1, 8192, 8192, h100, true, few).workers == 64);
    STATIC_REQUIRE(plan_gemv(1, 8192, 8192, h100, false, few).split == 1);  // sm_80: no clusters
  }
  // with a split-K workspace (Note [Workspace split]; 132 CTAs at once): where the row blocks do not
  // spread over 15 clusters of 8, S CTAs anywhere on the device (session 9, nvfp4, µs): 4096 x 14336
  // M = 16 S4T8 24.9-25.7 against S8T8 in clusters 31.4-31.5; 8192 x 28672 M = 8 S4T8 63.5-64.0
  // against S8T8 in clusters 67.7-67.8
  STATIC_REQUIRE(plan_gemv(16, 4096, 14336, h100, true, nullptr, h100).ws);
  STATIC_REQUIRE(plan_gemv(16, 4096, 14336, h100, true, nullptr, h100).split == 4);
  STATIC_REQUIRE(plan_gemv(16, 4096, 14336, h100, true, nullptr, h100).tiles == 8);
  STATIC_REQUIRE(plan_gemv(16, 4096, 14336, h100, true, nullptr, h100).workers == 32);  // of 33 per slice
  STATIC_REQUIRE(plan_gemv(8, 8192, 28672, h100, true, nullptr, h100).ws);
  STATIC_REQUIRE(plan_gemv(8, 8192, 28672, h100, true, nullptr, h100).split == 4);
  // and not where a cluster balances as well: 8192^2 M = 16 S2T8 26.0-26.5 us in clusters, 27.5
  // through the workspace; 4096 x 14336 M = 8 S2T4 20.2-20.6 in clusters, S4T8 21.4; 8192 x 28672
  // M = 16 S8T8 82.1-82.8 in clusters, 83.4-83.5 through the workspace
  STATIC_REQUIRE(!plan_gemv(16, 8192, 28672, h100, true, nullptr, h100).ws);
  STATIC_REQUIRE(!plan_gemv(16, 8192, 8192, h100, true, nullptr, h100).ws);
  STATIC_REQUIRE(plan_gemv(16, 8192, 8192, h100, true, nullptr, h100).split == 2);
  STATIC_REQUIRE(!plan_gemv(8, 4096, 14336, h100, true, nullptr, h100).ws);
  STATIC_REQUIRE(!plan_gemv(1, 8192, 28672, h100, true, nullptr, h100).ws);
  // without clusters (sm_80) the workspace makes the shapes whose x does not fit one CTA plannable
  STATIC_REQUIRE(!plan_gemv(16, 4096, 14336, h100, false).ok);
  STATIC_REQUIRE(plan_gemv(16, 4096, 14336, h100, false, nullptr, h100).ws);
  // a workspace over kSplitKWsMaxBytes is not planned: 2^20 rows at S = 8 would need 512 MB
  STATIC_REQUIRE(!gemv_plan_for(16, int64_t{1} << 20, 8192, 8, 8, 16, true).ok);
  STATIC_REQUIRE(gemv_plan_for(16, int64_t{1} << 20, 8192, 8, 8, 16, false).ok);
  STATIC_REQUIRE(gemv_ws_bytes(gemv_plan_for(16, 4096, 14336, 4, 8, 33, true)) == 4 * (32 * 4 * 128 * 16) + 4 * 32);
  // the H100's cluster capacity (cudaOccupancyMaxActiveClusters, ~200 KB CTAs): 66 of 2, 30 of 4, 15 of 8
  STATIC_REQUIRE(gemv_workers_model(h100, 2) == 66);
  STATIC_REQUIRE(gemv_workers_model(h100, 4) == 30);
  STATIC_REQUIRE(gemv_workers_model(h100, 8) == 15);
  for (int64_t m = 1; m <= 16; ++m)
    for (auto [n, k] : {std::pair<int64_t, int64_t>{8192, 8192}, {4096, 4096}, {14336, 4096}, {4096, 14336},
                        {64, 64}, {333, 1088}, {129, 320}, {100000, 64 * 300}, {256, 16384}, {512, 64 * 520}}) {
      INFO("m " << m << " n " << n << " k " << k);
      const GemvPlan p = plan_gemv(m, n, k, h100);
      if (m > 8 && k > 64 * 512) {  // x slice of 16 rows cannot fit 128 KB with 8 CTAs per cluster
        CHECK(!p.ok);
        CHECK(pick_gemm_config(m, n, k, h100) == (n / 32 >= h100 ? GemmConfigId::small32 : GemmConfigId::wg64n));
        CHECK(mma_sync_config(m, n, k, h100) == (n / 32 >= 2 * h100 ? GemmConfigId::small32 : GemmConfigId::small16));
        continue;
      }
      REQUIRE(p.ok);
      CHECK(p.mrows >= m);
      CHECK(p.split >= 1);
      CHECK(p.split <= kGemvMaxSplit);
      CHECK(p.split * p.kc_per_cta >= k / 64);         // covers K
      CHECK((p.split - 1) * p.kc_per_cta < k / 64);    // no empty CTA
      CHECK((p.tiles == 1 || p.tiles == 2 || p.tiles == 4 || p.tiles == 8));
      CHECK(p.kc_per_warp * (kGemvWarps / p.tiles) >= p.kc_per_cta);  // the runs cover the slice
      CHECK(p.mrows * gemv_x_pitch(p.kc_per_cta) <= kGemvXMaxBytes);
      CHECK(p.smem <= 227 * 1024);                     // Hopper's per-block limit
      CHECK(kGemvWarps * kGemvRows * 16 * 4 + p.tiles * kGemvRows * 16 * 4 <= kGemvRedBytes);
      CHECK(p.workers >= 1);
      CHECK(p.workers <= p.row_blocks);
      CHECK(p.workers == std::min(gemv_workers_model(h100, p.split), p.row_blocks));
      CHECK(p.ctas_per_sm >= 1);
      CHECK(p.row_blocks * kGemvRows * p.tiles >= n);
      CHECK((p.row_blocks - 1) * kGemvRows * p.tiles < n);
      // the search is exhaustive: no (S, T) of S, T in {1, 2, 4, 8} has a lower modelled cost
      for (int s = 1; s <= kGemvMaxSplit; s *= 2)
        for (int t = 1; t <= 8; t *= 2) {
          const GemvPlan o = gemv_plan_for(m, n, k, s, t, gemv_workers_model(h100, s));
          if (o.ok) CHECK(gemv_plan_cost(p) <= gemv_plan_cost(o));
          if (s == p.split && t == p.tiles) CHECK(o.ok);
        }
      CHECK(!p.ws);  // no workspace offered
      // without clusters (sm_80): one CTA per row tile, when x fits
      const GemvPlan q = plan_gemv(m, n, k, h100, false);
      if (q.ok) CHECK(q.split == 1);
      CHECK(q.ok == (p.mrows * gemv_x_pitch(k / 64) <= kGemvXMaxBytes));
      // with a workspace for 132 CTAs: never worse (modelled) than without, and still the cheapest plan
      const GemvPlan w = plan_gemv(m, n, k, h100, true, nullptr, h100);
      REQUIRE(w.ok);
      CHECK(gemv_plan_cost(w) <= gemv_plan_cost(p));
      if (w.ws) {
        CHECK(w.split > 1);
        CHECK(w.workers == std::min<int64_t>(h100 / w.split, w.row_blocks));
        CHECK(gemv_ws_bytes(w) <= kSplitKWsMaxBytes);
      }
      for (int s = 2; s <= kGemvMaxSplit; s *= 2)
        for (int t = 1; t <= 8; t *= 2)
          if (const GemvPlan o = gemv_plan_for(m, n, k, s, t, h100 / s, true); o.ok)
            CHECK(gemv_plan_cost(w) <= gemv_plan_cost(o));
      // sm_80 with a workspace: S = 1 where x fits and it is cheaper, else the workspace
      const GemvPlan r = plan_gemv(m, n, k, h100, false, nullptr, h100);
      REQUIRE(r.ok);
      CHECK((r.split == 1 || r.ws));
    }
}

TEST_CASE("decode kernel plan on parts with less shared memory than an H100", "[quant][heuristics]") {
  // cudaDevAttrMaxSharedMemoryPerBlockOptin: H100 232448, A100 166912, sm_86 / sm_89 101376
  constexpr int64_t h100_smem = 232448, a100_smem = 166912, sm86_smem = 101376;
  STATIC_REQUIRE(gemv_x_max(h100_smem) == kGemvXMaxBytes);
  STATIC_REQUIRE(gemv_x_max(a100_smem) == a100_smem - kGemvLutBytes - kGemvRedBytes - 128);
  STATIC_REQUIRE(gemv_x_max(sm86_smem) == sm86_smem - kGemvLutBytes - kGemvRedBytes - 128);
  STATIC_REQUIRE(gemv_x_max(64 * 1024) == 0);
  STATIC_REQUIRE(gemv_smem_cap(h100_smem) == gemv_smem(kGemvMaxM, kGemvXMaxBytes / (kGemvMaxM * 128)));
  STATIC_REQUIRE(gemv_smem_cap(a100_smem) == a100_smem);
  // A100 (108 SMs, no clusters): M = 1 at K = 8192 fits (16 KB of x), M = 16 only through the
  // workspace, and where nothing fits the mma.sync configs take the decode regime
  constexpr int a100 = 108;
  constexpr int64_t ax = gemv_x_max(a100_smem);
  STATIC_REQUIRE(plan_gemv(1, 8192, 8192, a100, false, nullptr, 0, ax).ok);
  STATIC_REQUIRE(!plan_gemv(16, 8192, 8192, a100, false, nullptr, 0, ax).ok);
  STATIC_REQUIRE(plan_gemv(16, 8192, 8192, a100, false, nullptr, a100, ax).ws);
  STATIC_REQUIRE(mma_sync_config(1, 8192, 8192, a100, ax, false) == GemmConfigId::gemv);
  STATIC_REQUIRE(mma_sync_config(16, 8192, 8192, a100, ax, false) == GemmConfigId::small32);  // N / 32 >= 2 x SMs
  STATIC_REQUIRE(mma_sync_config(16, 4096, 8192, a100, ax, false) == GemmConfigId::small16);
  STATIC_REQUIRE(mma_sync_config(8, 14336, 4096, a100, ax, false) == GemmConfigId::gemv);  // 64 KB of x
  STATIC_REQUIRE(mma_sync_config(9, 14336, 4096, a100, ax, false) == GemmConfigId::small32);  // 16 rows: 128 KB
  // sm_86: x has 3 KB, so M = 1 up to K = 1536, nothing beyond
  constexpr int64_t sx = gemv_x_max(sm86_smem);
  STATIC_REQUIRE(mma_sync_config(1, 4096, 1024, 84, sx, false) == GemmConfigId::gemv);
  STATIC_REQUIRE(mma_sync_config(1, 4096, 4096, 84, sx, false) == GemmConfigId::small16);
  STATIC_REQUIRE(mma_sync_config(1, 14336, 4096, 84, sx, false) == GemmConfigId::small32);
  for (const int64_t optin : {h100_smem, a100_smem, sm86_smem, int64_t{120 * 1024}})
    for (int64_t m = 1; m <= 16; ++m)
      for (auto [n, k] : {std::pair<int64_t, int64_t>{8192, 8192}, {4096, 4096}, {14336, 4096}, {4096, 14336},
                          {64, 64}, {333, 1088}, {129, 320}, {100000, 64 * 300}, {256, 16384}, {512, 64 * 520}})
        for (const bool clusters : {false, true})
          for (const int64_t ws : {int64_t{0}, int64_t{108}}) {
            INFO("smem " << optin << " m " << m << " n " << n << " k " << k << " clusters " << clusters << " ws " << ws);
            const int64_t xm = gemv_x_max(optin);
            const GemvPlan p = plan_gemv(m, n, k, 108, clusters, nullptr, ws, xm);
            // what the launcher asks for fits the device, and its opt-in covers every plan
            if (p.ok) {
              CHECK(p.mrows * gemv_x_pitch(p.kc_per_cta) <= xm);
              CHECK(p.smem + 128 <= optin);
              CHECK(p.smem <= gemv_smem_cap(optin));
              CHECK((p.split == 1 || clusters || p.ws));
            }
            // the decode regime's config is the decode kernel exactly where it has an S = 1 / cluster plan
            const GemmConfigId c = mma_sync_config(m, n, k, 108, xm, clusters);
            CHECK((c == GemmConfigId::gemv) == plan_gemv(m, n, k, 108, clusters, nullptr, 0, xm).ok);
            CHECK(!is_wgmma_config(c));
          }
}

// Note [Ring kernel]: the launcher's choice follows the device, the forcing, NF4_DQ's scale2 groups
// and the shapes (the layout's own checks: the next test case).
TEST_CASE("decode ring kernel: where it runs", "[quant][heuristics]") {
  auto mode = [](int64_t m, int64_t n, int64_t k, Format f, bool has = true, int forced = -1, int fg = 0) {
    return gemv_ring_mode(m, n, k, f, has, forced, 132, fg);
  };
  CHECK(mode(1, 8192, 8192, Format::nvfp4) == 4);
  CHECK(mode(1, 8192, 8192, Format::nvfp4, true, 1) == 4);
  CHECK(mode(1, 8192, 8192, Format::nvfp4, true, 1, 2) == 2);  // a forced G
  CHECK(mode(1, 8192, 8192, Format::nvfp4, true, 0) == kRingNone);
  CHECK(mode(1, 8192, 8192, Format::nvfp4, false, 1) == kRingNone);
  CHECK(mode(2, 8192, 8192, Format::nvfp4) == 4);     // 128 row blocks of 4 tiles
  CHECK(mode(8, 8192, 8192, Format::nvfp4) == 4);
  CHECK(mode(16, 8192, 8192, Format::nvfp4) == 4);
  CHECK(mode(4, 4096, 14336, Format::nvfp4) == 2);    // 128 of 2
  CHECK(mode(16, 4096, 4096, Format::nvfp4) == 2);
  CHECK(mode(16, 14336, 4096, Format::nvfp4) == 8);   // 112 of 8
  CHECK(mode(8, 14336, 8192, Format::nvfp4) == 8);    // one row block of 8 tiles, not 7 of one tile each
  CHECK(mode(4, 1104, 8192, Format::nvfp4) == 1);     // 69 tiles: one per CTA
  CHECK(mode(2, 28672, 8192, Format::nvfp4) == 2);    // 7 rounds of 2 tiles, not 2 of 8
  CHECK(mode(16, 1040, 8192, Format::nvfp4) == 2);    // 65 tiles, but G = 1 does not fit M = 16
  CHECK(mode(16, 8192, 8192, Format::nvfp4, true, 1, 1) == 4);  // forced G = 1 does not fit M = 16
  CHECK(mode(1, 8192, 28672, Format::nvfp4) == 4);
  CHECK(mode(1, 8192, 65536, Format::nvfp4) == 4);   // x's K need not fit anywhere
  CHECK(mode(1, 8192, 16384, Format::nf4_dq) == 4);  // a row spans at most two scale2 groups
  CHECK(mode(1, 8192, 16448, Format::nf4_dq, true, 1) == kRingNone);  // it may span three
  CHECK(mode(1, 8192, 16448, Format::nf4) == 4);
  CHECK(mode(17, 8192, 8192, Format::nvfp4) == kRingNone);
  CHECK(mode(1, 8192, 100, Format::nvfp4) == kRingNone);
  CHECK(mode(0, 8192, 8192, Format::nvfp4) == kRingNone);
}

// The ring kernel's row-block sums, [16 warps][8 MT columns][kRingSumPitch] fp32 (quant/gemv_ring.cuh):
// each fragment store of a warp (lane: row g + 8 h, column 2 r + c) hits 32 distinct banks, and the
// epilogue's reads (a warp: 32 consecutive output rows of 16 G, or 16 rows of two M columns at G = 1)
// at most two lanes per bank.
TEST_CASE("decode ring kernel: the sums' layout has no bank conflict on store, at most 2-way on read",
          "[quant][heuristics]") {
  constexpr int P = kRingSumPitch;
  for (int mt = 0; mt < 2; ++mt)
    for (int e = 0; e < 4; ++e) {  // the store of acc[mt][e]: row g + 8 (e >> 1), column 8 mt + 2 r + (e & 1)
      std::set<int> banks;
      for (int lane = 0; lane < 32; ++lane) {
        const int g = lane >> 2, r = lane & 3;
        banks.insert(((8 * mt + 2 * r + (e & 1)) * P + g + 8 * (e >> 1)) % 32);
      }
      CHECK(banks.size() == 32);
    }
  for (int lg = 4; lg <= 7; ++lg)  // log2(16 G), G = 1, 2, 4, 8
    for (int mc : {8, 16})
      for (int w = 0; w < kRingChunks >> (lg - 4); ++w)
        for (int t0 = 0; t0 < 512; t0 += 32) {  // a warp of the epilogue, reading warp w's sums
          const int c = kRingChunks >> (lg - 4);
          std::map<int, int> per_bank;
          for (int tid = t0; tid < t0 + 32; ++tid) {
            const int nl = tid & ((1 << lg) - 1), m = (tid >> lg) % mc;
            ++per_bank[(((nl >> 4) * c * mc + w * mc + m) * P + (nl & 15)) % 32];
          }
          for (const auto& [bank, n] : per_bank) CHECK(n <= 2);
        }
}

// Note [Streamed x]: each slot holds the stage's codes, scales and x's chunks (M rows of 128 bytes
// each, and room for the last chunk's ldmatrix rows past M), 1024-byte aligned in region B (the TMA's
// 128-byte swizzle follows the address bits), and the tile choice takes the least modelled time of the
// busiest CTA (its chunks and its row blocks' own cost) among the G that fit.
TEST_CASE("decode ring kernel, streamed x: layout and tiles per row block", "[quant][heuristics]") {
  for (int sb : {1, 2, 4})
    for (int64_t m = 1; m <= kGemvMaxM; ++m)
      for (int g : {1, 2, 4, 8}) {
        INFO("m " << m << " sb " << sb << " g " << g);
        const RingLayout l = ring_layout(m, sb, g);
        const int64_t c = kRingChunks / g, xr = m > 8 ? 16 : 8;
        CHECK(l.groups == g);
        CHECK(l.x_pitch == m * 128);
        CHECK(l.x >= kRingChunks * (512 + 16 * sb));  // after the codes and scales
        CHECK(l.x % 1024 == 0);
        CHECK(l.slot_bytes >= l.x + ((c - 1) * m + xr) * 128);  // the last chunk's 8 or 16 ldmatrix rows
        CHECK(l.slot_bytes % 1024 == 0);
        CHECK(ring_red_bytes(m) >= 2 * kRingWarps * (m > 8 ? 16 : 8) * kGemvRows * 4);  // two buffers of the sums
        CHECK(ring_red_bytes(m) + 2 * kRingMaxSlots * 8 <= kRingABytes);  // the sums, then the barriers, in A
        CHECK(l.slots * l.slot_bytes <= kRingBBytes);           // every slot in B, from its start (0x20000)
        CHECK(l.slots <= kRingMaxSlots);
        CHECK(l.ok == (l.slots >= kRingMinSlots));
        if (g >= 2 || m <= 8) CHECK(l.ok);  // all but M > 8 at one tile per row block
      }
  CHECK_FALSE(ring_layout(16, 4, 1).ok);  // 41 KB slots: two fit
  CHECK(ring_layout(8, 4, 1).slots == 3);
  CHECK(ring_layout(8, 4, 4).slots == 7);
  CHECK_FALSE(ring_layout(1, 4, 3).ok);
  CHECK_FALSE(ring_layout(0, 4, 1).ok);
  // the tile choice against a direct sum over the busiest CTA's row blocks: its chunks, and a row
  // block's own cost
  for (int64_t m : {1, 8, 16})
    for (int64_t k : {4096, 8192})
      for (int64_t n = 16; n <= 40000; n += 16 * 37)
        for (int sms : {8, 132}) {
          const int g = ring_groups(m, n, k, 4, sms);
          REQUIRE(g > 0);
          const int64_t tiles = (n + 15) / 16;
          auto busiest = [&](int gg) {
            int64_t worst = 0;  // row blocks b, b + sms, ... per CTA b
            for (int64_t b = 0; b < sms; ++b) {
              int64_t c = 0;
              for (int64_t rb = b; rb * gg < tiles; rb += sms) c += gg * (k / 64) + kRingRowBlockCost;
              worst = std::max(worst, c);
            }
            return worst;
          };
          for (int o : {1, 2, 4, 8})
            if (ring_layout(m, 4, o).ok) CHECK(busiest(g) <= busiest(o));
        }
  // the G measured fastest (H100, session 12)
  CHECK(ring_groups(2, 28672, 8192, 4, 132) == 2);
  CHECK(ring_groups(16, 28672, 8192, 4, 132) == 2);
  CHECK(ring_groups(2, 14336, 4096, 4, 132) == 8);
  CHECK(ring_groups(8, 8192, 8192, 4, 132) == 4);
  CHECK(ring_groups(8, 4096, 14336, 4, 132) == 2);
  CHECK(ring_groups(8, 4096, 4096, 4, 132) == 2);
}

// Note [Wide row blocks]: two x buffers (the last chunk's 8 or 16 ldmatrix rows inside), those that fit
// in region A from kWideXAddr (above the barriers, below the table), the rest and then R GX slots, 1 KB-
// aligned, in region B; a pass of sums fits B; the choice is GX = ceil(tiles / SMs) where that is an
// instance (2..7), unless forced off.
TEST_CASE("decode ring kernel, wide row blocks: layout and choice", "[quant][heuristics]") {
  CHECK(wide_x_in_a(1) == 2);  // 2 x 16 KB in [0x8000, 0x10000)
  CHECK(wide_x_in_a(2) == 1);  // 32 KB
  for (int mt : {1, 2}) {
    CHECK(kWideXAddr + wide_x_in_a(mt) * wide_x_bytes(mt) <= kRingLutAddr);
    CHECK(kWideXAddr >= kRingBaseMax + (2 * kRingMaxSlots + 4) * 8);  // the barriers below, at any base
  }
  for (int sb : {1, 2, 4})
    for (int64_t m = 1; m <= kGemvMaxM; ++m)
      for (int gx = 2; gx <= kRingWideMax; ++gx) {
        INFO("m " << m << " sb " << sb << " gx " << gx);
        const int mt = m > 8 ? 2 : 1;
        const RingLayout l = wide_layout(m, sb, gx);
        CHECK(l.ok);
        CHECK(l.groups == 1);  // the G = 1 boxes: 16 chunks of one tile, x 16 chunks x M rows
        CHECK(l.x_pitch == m * 128);
        CHECK((kRingChunks - 1) * m * 128 + (m > 8 ? 16 : 8) * 128 <= wide_x_bytes(mt));
        CHECK(wide_x_bytes(mt) % kRingSlotAlign == 0);
        CHECK(l.slot_bytes >= kRingChunks * (512 + 16 * sb));
        CHECK(l.slot_bytes % kRingSlotAlign == 0);
        // R slices a round, a slot per (slice, tile): as many rounds' worth as fit, at least one
        const int rs = wide_ring_slices(gx, sb, mt);
        CHECK(l.slots == rs * gx);
        CHECK(rs >= 1);
        CHECK((gx > 4 ? rs == 1 : gx == 4 ? rs == (mt == 1 ? 2 : 1) : (rs + 1) * gx > wide_slots(sb, mt)));
        CHECK(l.slots >= kRingMinSlots);
        CHECK(l.slots <= kRingMaxSlots);
        // the early stages (Note [Early weights]) are slots of the ring: the kernel would clamp the count
        for (Format f : kAllFormats)
          if (chunk_scale_bytes(f) == sb)
            for (bool pk : {false, true}) {
              CHECK(wide_early_stages(f, gx, mt, pk) <= l.slots);
              // a whole slice (4 stages) early at GX 4, MT = 1 (session 46)
              if (gx == 4 && mt == 1) CHECK(wide_early_stages(f, gx, mt, pk) == gx);
            }
        CHECK((2 - wide_x_in_a(mt)) * wide_x_bytes(mt) + l.slots * l.slot_bytes <= kRingBBytes);
        CHECK(static_cast<int64_t>(kRingWarps) * 8 * mt * wide_sum_pitch(wide_pass(mt)) * 4 <= kWideSumBytes);
        CHECK(static_cast<int64_t>(kRingWarps) * 8 * mt * wide_sum_pitch(wide_pass(mt) + 1) * 4 > kWideSumBytes);
        CHECK(wide_pass(mt) >= 1);
      }
  CHECK(wide_slots(4, 1) == 8);  // 9 KB slots: 11 fit B, capped; 7 beside a 32 KB x buffer at MT = 2
  CHECK(wide_slots(4, 2) == 7);
  CHECK(wide_ring_slots(2, 4, 2) == 6);  // three slices a round
  CHECK(wide_ring_slots(4, 4, 1) == 8);  // two slices a round at GX = 4, MT = 1 (Note [Two slices at GX 4])
  CHECK(wide_ring_slots(4, 4, 2) == 4);
  CHECK(wide_ring_slots(3, 4, 1) == 6);
  CHECK(wide_ring_slots(5, 4, 1) == 5);
  CHECK(!wide_layout(16, 4, 8).ok);  // no instance
  CHECK((2 * kRingMaxSlots + 4) * 8 <= kRingABytes);  // full, empty, and the x buffers' two pairs
  CHECK(wide_pass(1) >= kRingWideMax);  // one pass at every GX, M <= 8
  CHECK(wide_pass(2) >= kRingWideMax);  // and M > 8
  // the sums' space, from kWideXAddr to the end of the dynamic shared memory of a CTA based at 0 (any
  // base leaves more), covers the x buffers in A, the table and region B
  CHECK(kWideXAddr + kWideSumBytes == kRingSmem);
  CHECK(kWideXAddr + wide_x_in_a(2) * wide_x_bytes(2) <= kRingLutAddr);
  for (int gx = 0; gx <= 9; ++gx) CHECK(ring_wide_instance(gx) == (gx >= 2 && gx <= 7));
  // the ring kernel's 16 consumer warps and a producer warpgroup whose registers setmaxnreg lends to the
  // consumers, within the CTA's pool, and within a sub-partition (4 consumer warps, 1 producer)
  STATIC_REQUIRE(kWideThreads == 640);
  STATIC_REQUIRE(kWideLaunchRegs == 96);
  STATIC_REQUIRE(kWideConsumerRegs % 8 == 0);
  STATIC_REQUIRE(kWideConsumerRegs > kWideLaunchRegs);
  STATIC_REQUIRE(kRingWarps * 32 * kWideConsumerRegs + 128 * kWideProducerRegs <= 640 * kWideLaunchRegs);
  STATIC_REQUIRE(4 * 32 * kWideConsumerRegs + 32 * kWideProducerRegs <= 16384);
  // CW chunks a warp (Note [Two chunks a warp]): 16 warps are the constants above (112 for the consumers); 8 (NF4)
  // launch 384 threads at 168 registers and take 240 after setmaxnreg, within the pool and a sub-partition
  STATIC_REQUIRE(kWideConsumerRegs == 112);
  STATIC_REQUIRE(wide_warps(2) == 8);
  STATIC_REQUIRE(wide_threads(2) == 384);
  STATIC_REQUIRE(wide_launch_regs(2) == 168);
  STATIC_REQUIRE(wide_consumer_regs(2) == 240);
  STATIC_REQUIRE(wide_warps(2) * 32 * wide_consumer_regs(2) + 128 * kWideProducerRegs <= 384 * wide_launch_regs(2));
  STATIC_REQUIRE(2 * 32 * wide_consumer_regs(2) + 32 * kWideProducerRegs <= 16384);
  // Two wherever the chunks add into the sums by FFMA: the NF4 formats always; NVFP4 and MXFP4 where packed,
  // and unpacked where they take the fp32 scale path (NVFP4: not nvfp4_scale_in_a; MXFP4: every wide instance);
  // one where the scales are in A and the mma accumulates through the chunks.
  for (bool bf16 : {true, false})
    for (int mt = 1; mt <= 2; ++mt)
      for (int gx = 2; gx <= kRingWideMax; ++gx) {
        CHECK(wide_chunk_warps(Format::nf4, bf16, mt, gx, false) == 2);
        CHECK(wide_chunk_warps(Format::nf4_dq, bf16, mt, gx, false) == 2);
        CHECK(wide_chunk_warps(Format::nvfp4, bf16, 1, gx, true) == 2);
        CHECK(wide_chunk_warps(Format::mxfp4, bf16, 1, gx, true) == 2);
        CHECK(wide_chunk_warps(Format::nvfp4, bf16, mt, gx, false) == (nvfp4_scale_in_a(bf16, mt) ? 1 : 2));
        // MXFP4 unpacked: the fp32 path at every GX and MT (bf16 at MT = 1 since session 37, MT = 2 since 38)
        CHECK(wide_chunk_warps(Format::mxfp4, bf16, mt, gx, false) == 2);
      }
  CHECK(wide_chunk_warps(Format::nvfp4, true, 1, 2, false) == 2);   // bf16's fp32 path at GX 2 (4096x14336)
  CHECK(wide_chunk_warps(Format::nvfp4, true, 1, 4, false) == 2);   // and at GX 4 (8192^2) since session 36
  CHECK(wide_chunk_warps(Format::nvfp4, false, 1, 2, false) == 1);  // f16: the scale in A at every GX
  CHECK(wide_chunk_warps(Format::nvfp4, true, 2, 2, false) == 1);   // M > 8 with bf16 x: shifted pairs (session 42)
  CHECK(wide_chunk_warps(Format::nvfp4, false, 2, 2, false) == 1);  // f16 x: the scales in A
  // MXFP4 folds at MT = 2 outside the wide kernel only; its fp32 path decodes E8M0 as pairs but in the wide
  // instances' copy with the special bytes at MT = 2 above GX 2 (Note [MXFP4 fp32 path at M > 8])
  STATIC_REQUIRE(mxfp4_folds(2, 0));
  STATIC_REQUIRE(!mxfp4_folds(1, 0));
  STATIC_REQUIRE(!mxfp4_folds(2, 2));
  STATIC_REQUIRE(!mxfp4_folds(2, kRingWideMax));
  STATIC_REQUIRE(!mxfp4_e8m0_pairs(2, 0, false));
  STATIC_REQUIRE(!mxfp4_e8m0_pairs(2, 0, true));
  STATIC_REQUIRE(mxfp4_e8m0_pairs(1, 0, false));
  for (int gx = 2; gx <= kRingWideMax; ++gx) {
    CHECK(mxfp4_e8m0_pairs(1, gx, false));
    CHECK(mxfp4_e8m0_pairs(2, gx, true));
    CHECK(mxfp4_e8m0_pairs(2, gx, false) == (gx == 2));
  }
  CHECK(wide_warps(2) * 2 == kRingChunks);
  for (int mt = 1; mt <= 2; ++mt) {
    CHECK(wide_pass(mt, 2) >= wide_pass(mt, 1));  // fewer warps' sums: at least as many tiles at once
    CHECK(static_cast<int64_t>(wide_warps(2)) * 8 * mt * wide_sum_pitch(wide_pass(mt, 2)) * 4 <= kWideSumBytes);
  }
  // The epilogue's sums of each instance, [warp][column][wide_sum_pitch(GX)] (quant/gemv_ring_wide.cuh).
  // Each fragment store of a warp (lane: row 16 tt + g + 8 h, column 8 mt + 2 r + c) hits 32 distinct
  // banks. The reads: thread i, row i % (16 GX) of column i / (16 GX); a warp whose 32 rows lie in one
  // column reads 32 distinct banks (one wavefront), one that spans two columns at most two lanes a bank.
  for (int mt = 1; mt <= 2; ++mt)
    for (int gx = 2; gx <= kRingWideMax; ++gx) {
      const int mc = 8 * mt, sp = wide_sum_pitch(gx);
      for (int tt = 0; tt < gx; ++tt)
        for (int f = 0; f < mt; ++f)  // the store of acc[tt][f][e]
          for (int e = 0; e < 4; ++e) {
            std::set<int> banks;
            for (int lane = 0; lane < 32; ++lane) {
              const int g = lane >> 2, r = lane & 3;
              banks.insert(((8 * f + 2 * r + (e & 1)) * sp + 16 * tt + g + 8 * (e >> 1)) % 32);
            }
            CHECK(banks.size() == 32);
          }
      for (int t0 = 0; t0 < 16 * gx * mc; t0 += 32) {
        std::map<int, int> per_bank;
        for (int i = t0; i < t0 + 32 && i < 16 * gx * mc; ++i) {
          const int nl = i % (16 * gx), m = i / (16 * gx);
          ++per_bank[(m * sp + nl) % 32];
        }
        int most = 0;
        for (const auto& [bank, n] : per_bank) most = std::max(most, n);
        CHECK(most <= (t0 / (16 * gx) == std::min(t0 + 31, 16 * gx * mc - 1) / (16 * gx) ? 1 : 2));
      }
    }
  auto wide = [](int64_t m, int64_t n, int64_t k, Format f = Format::nvfp4, int forced = -1) {
    return ring_wide_tiles(m, n, k, f, 132, forced);
  };
  // the bench shapes and the measured choice (Note [Wide row blocks])
  CHECK(wide(1, 14336, 4096) == 7);   // 896 tiles: 128 row blocks of 7, against 112 of G = 8
  CHECK(wide(8, 14336, 4096) == 7);
  CHECK(wide(16, 14336, 4096) == 7);  // MT = 2: every instance pays (session 19)
  CHECK(wide(16, 14336, 4096, Format::nf4) == 7);
  CHECK(wide(16, 14336, 4096, Format::mxfp4) == 7);
  CHECK(wide(16, 14336, 4096, Format::nf4_dq) == 7);
  CHECK(wide(1, 14336, 4096, Format::mxfp4) == 7);  // MXFP4 at MT = 1, GX = 7: faster since session 20
  CHECK(wide(8, 14336, 4096, Format::mxfp4) == 7);
  CHECK(wide(1, 12288, 4096, Format::mxfp4) == 6);
  CHECK(wide(1, 10240, 8192, Format::mxfp4) == 5);
  CHECK(wide(1, 8192, 8192) == 4);    // 512 tiles: GX = 4, as G = 4 in the row-block model
  CHECK(wide(8, 8192, 8192) == 4);
  CHECK(wide(16, 8192, 8192) == 4);
  CHECK(wide(1, 4096, 14336) == 2);
  CHECK(wide(16, 4096, 14336) == 2);
  CHECK(wide(16, 4096, 4096) == 2);
  CHECK(wide(1, 28672, 8192) == 0);   // GX = 14: no instance
  CHECK(wide(16, 12288, 4096) == 6);
  CHECK(wide(1, 6144, 4096) == 3);
  CHECK(wide(16, 10240, 8192) == 5);
  CHECK(wide(1, 2048, 4096) == 0);    // 128 tiles: GX = 1
  CHECK(wide(1, 14336, 4096, Format::nf4_dq) == 7);    // K / 64 = 64 divides 256: one scale2 group a row
  CHECK(wide(1, 14336, 4160, Format::nf4_dq) == 0);    // 65 chunks: two groups, at GX 7 > kWideDq2Max
  CHECK(wide(1, 4096, 14336, Format::nf4_dq) == 2);    // 224 chunks: two groups, GX 2
  CHECK(wide(16, 4096, 14336, Format::nf4_dq) == 2);
  CHECK(wide(1, 6144, 4160, Format::nf4_dq) == 3);     // GX 3 = kWideDq2Max
  CHECK(wide(1, 4096, 16448, Format::nf4_dq) == 0);    // 257 chunks: three groups a row
  CHECK(wide(1, 14336, 4160, Format::nvfp4) == 7);
  CHECK(wide(1, 14336, 4096, Format::nvfp4, 0) == 0);  // forced off
  CHECK(wide(17, 14336, 4096) == 0);
  CHECK(wide(1, 14336, 100) == 0);
  CHECK(wide(16, 14336, 4096, Format::nvfp4, 1) == 7);  // forced: wherever an instance applies
  CHECK(wide(16, 8192, 8192, Format::nvfp4, 1) == 4);
  CHECK(wide(1, 2048, 4096, Format::nvfp4, 1) == 0);
  CHECK(wide(1, 28672, 8192, Format::nvfp4, 1) == 0);
  // over a sweep: GX = ceil(tiles / SMs), one round, where an instance applies
  for (int64_t m : {1, 8, 16})
    for (int64_t k : {1024, 4096, 4160, 8192, 14336, 16448})
      for (int64_t n = 16; n <= 16000; n += 16 * 29)
        for (int sms : {20, 132})
          for (Format f : kAllFormats) {
            INFO("m " << m << " n " << n << " k " << k << " sms " << sms << " f " << static_cast<int>(f));
            const int64_t tiles = (n + 15) / 16, gx_min = (tiles + sms - 1) / sms;
            const bool applies = ring_wide_instance(gx_min) && (f != Format::nf4_dq || kDqGroup % (k / 64) == 0 ||
                                                                (k / 64 <= kDqGroup && gx_min <= kWideDq2Max));
            CHECK(ring_wide_tiles(m, n, k, f, sms, 1) == (applies ? gx_min : 0));
            const int gx = ring_wide_tiles(m, n, k, f, sms);
            CHECK(gx == (applies ? gx_min : 0));
            if (gx > 0) CHECK((tiles + gx - 1) / gx <= sms);  // one round
          }
}

// Note [Packed columns]: where the wide kernel packs a row's scale groups into columns of the mma tile.
TEST_CASE("the wide kernel packs columns where M x the scale groups fit 8", "[quant][heuristics]") {
  STATIC_REQUIRE(chunk_groups(Format::nvfp4) == 4);
  STATIC_REQUIRE(chunk_groups(Format::mxfp4) == 2);
  STATIC_REQUIRE(chunk_groups(Format::nf4) == 1);
  STATIC_REQUIRE(chunk_groups(Format::nf4_dq) == 1);
  // every GX and x dtype (Note [No MXFP4 fold at M <= 8] in quant/gemv_kernel.cuh)
  CHECK(wide_pack(Format::nvfp4, 1));
  CHECK(wide_pack(Format::nvfp4, 2));
  CHECK(!wide_pack(Format::nvfp4, 3));  // 12 columns
  CHECK(!wide_pack(Format::nvfp4, 16));
  for (int64_t m = 1; m <= 4; ++m) CHECK(wide_pack(Format::mxfp4, m));  // MXFP4: M <= 4
  CHECK(!wide_pack(Format::mxfp4, 5));
  for (int64_t m = 1; m <= 16; ++m) {  // one scale group a chunk: nothing to pack
    CHECK(!wide_pack(Format::nf4, m));
    CHECK(!wide_pack(Format::nf4_dq, m));
  }
  CHECK(!wide_pack(Format::nvfp4, 0));
}

// Note [NVFP4 scale in A], Note [NVFP4 shifted pairs]: the measured choice of the scale-in-A path (f16 x everywhere;
// bf16 x at MT = 2, by shifted pairs in the wide instances; bf16's MT = 1 wide instances take the fp32 path at two
// chunks a warp).
TEST_CASE("NVFP4's scales multiply A with f16 x, and with bf16 x only at MT = 2", "[quant][heuristics]") {
  CHECK(nvfp4_scale_in_a(true, 2));  // every kernel at M = 9..16
  CHECK(!nvfp4_scale_in_a(true, 1));
  CHECK(nvfp4_scale_in_a(false, 2));
  CHECK(nvfp4_scale_in_a(false, 1));
  for (int gx = 0; gx <= kRingWideMax; ++gx) {
    INFO("gx " << gx);
    CHECK(!nvfp4_shifted_pairs(false, 1, gx));  // f16 converts E4M3 pairs in one instruction
    CHECK(!nvfp4_shifted_pairs(false, 2, gx));
    CHECK(!nvfp4_shifted_pairs(true, 1, gx));   // bf16 at MT = 1: the fp32 path (1.00-1.03 with the pairs)
    CHECK(nvfp4_shifted_pairs(true, 2, gx) == (gx >= 2));  // the wide instances only
    if (gx >= 2) {
      CHECK(wide_chunk_warps(Format::nvfp4, true, 1, gx, false) == 2);
      CHECK(wide_chunk_warps(Format::nvfp4, true, 2, gx, false) == 1);  // one chunk a warp measured best
      CHECK(wide_chunk_warps(Format::nvfp4, false, 2, gx, false) == 1);
    }
  }
}

// Note [NVFP4 shifted pairs]: the selectors, through PTX prmt's default mode (a selector nibble's bits 0..2 pick
// one of the 8 source bytes, bit 3 replaces it by copies of its sign bit), make step j's pair of the bytes j of
// rows g and g + 8, 4 bits up in each bf16 half, for plain bytes (0..0x7E) on every byte position.
TEST_CASE("NVFP4's shifted pairs: the PRMT selectors", "[quant][heuristics]") {
  auto prmt = [](uint32_t a, uint32_t b, uint32_t sel) {
    const uint64_t src = a | (static_cast<uint64_t>(b) << 32);
    uint32_t r = 0;
    for (int n = 0; n < 4; ++n) {
      const uint32_t s = (sel >> (4 * n)) & 0xFu;
      uint32_t byte = static_cast<uint32_t>(src >> (8 * (s & 7u))) & 0xFFu;
      if (s & 8u) byte = (byte & 0x80u) ? 0xFFu : 0u;
      r |= byte << (8 * n);
    }
    return r;
  };
  CHECK(nvfp4_shifted_pair_sel(0) == 0xC480u);
  CHECK(nvfp4_shifted_pair_sel(3) == 0xF7B3u);
  std::mt19937 rng(11);
  for (int trial = 0; trial < 2000; ++trial) {
    uint32_t a = 0, b = 0;  // plain bytes, the ends of the range among them
    for (int j = 0; j < 4; ++j) {
      const uint32_t u = trial < 2 ? (trial == 0 ? 0u : 0x7Eu) : rng() % 0x7Fu, v = rng() % 0x7Fu;
      a |= u << (8 * j);
      b |= v << (8 * j);
    }
    for (int stp = 0; stp < 4; ++stp) {
      const uint32_t pair = prmt(a, b, nvfp4_shifted_pair_sel(stp)) << 4;
      CHECK((pair & 0xFFFFu) == ((a >> (8 * stp)) & 0xFFu) << 4);
      CHECK((pair >> 16) == ((b >> (8 * stp)) & 0xFFu) << 4);
    }
  }
}

// The settings the launchers read to force a plan (quant/env.hpp): out-of-range values mean unset.
TEST_CASE("forcing settings from the environment", "[quant][heuristics]") {
  const char* n = "VSTACK_TEST_SETTING";
  unsetenv(n);
  CHECK(env_flag(n) == -1);
  CHECK(env_pow2(n, 8) == 0);
  CHECK(env_int_in(n, 1, 8, -5) == -5);
  setenv(n, "", 1);
  CHECK(env_flag(n) == -1);
  CHECK(env_pow2(n, 8) == 0);
  for (const char* v : {"1", "2", "4", "8"}) {
    setenv(n, v, 1);
    CHECK(env_pow2(n, 8) == std::atoi(v));
    CHECK(env_flag(n) == 1);
  }
  for (const char* v : {"0", "3", "6", "16", "-2", "x"}) {
    setenv(n, v, 1);
    CHECK(env_pow2(n, 8) == 0);
  }
  setenv(n, "0", 1);
  CHECK(env_flag(n) == 0);
  setenv(n, "5", 1);
  CHECK(env_int_in(n, 1, 8, -5) == 5);
  CHECK(env_int_in(n, 6, 8, -5) == -5);
  unsetenv(n);
}
