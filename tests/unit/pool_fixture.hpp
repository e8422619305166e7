// A pool over FakeVmm with small tiers, for CPU tests. Device VAs are host
// addresses here, so tests read and write pages directly.
#pragma once

#include <catch2/catch.hpp>

#include <cstring>
#include <memory>

#include "pool/pool.hpp"
#include "pool/prim/fake_vmm.hpp"
#include "tiers/tiers.hpp"

namespace vstack::test {

inline constexpr uint64_t MiB = 1ull << 20;

struct PoolFixture {
  prim::FakeVmm vmm;
  Stats stats;
  std::unique_ptr<pool::Pool> pool;
  prim::Stream stream = reinterpret_cast<prim::Stream>(0x77);

  explicit PoolFixture(uint64_t gpu = 16 * MiB, uint64_t host = 64 * MiB, uint64_t page = 4 * MiB,
                       bool overcommit = false) {
    std::vector<std::unique_ptr<tiers::Backend>> t;
    TierConfig g{TierKind::gpu, 0, 0, "", gpu, false};
    TierConfig h{TierKind::host, 0, 0, "", host, false};
    t.push_back(tiers::make_gpu_tier(vmm, g, &stats.tiers[0]));
    t.push_back(tiers::make_host_tier(vmm, h, &stats.tiers[1]));
    pool::PoolOptions o;
    o.page_bytes = page;
    o.overcommit = overcommit;
    auto p = pool::Pool::create(vmm, std::move(t), o, stats);
    REQUIRE(p.is_ok());
    pool = std::move(p).value();
  }

  // Make [p, p+n) usable as a copy would, then run `body` "on the device".
  template <class F>
  int touch(prim::DevPtr p, uint64_t n, F&& body) {
    auto r = pool->access(
        {stream, false, false}, [&](pool::RefSet& refs) { pool->add_range(p, n, refs); },
        [&]() -> int {
          body();
          return 0;
        });
    REQUIRE(r.is_ok());
    return r.value();
  }
  void fill(prim::DevPtr p, uint64_t n, uint8_t seed) {
    touch(p, n, [&] {
      auto* b = reinterpret_cast<uint8_t*>(p);
      for (uint64_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 131 + (i >> 12));
    });
  }
  bool check(prim::DevPtr p, uint64_t n, uint8_t seed) {
    bool ok = true;
    touch(p, n, [&] {
      auto* b = reinterpret_cast<const uint8_t*>(p);
      for (uint64_t i = 0; i < n && ok; ++i) ok = b[i] == static_cast<uint8_t>(seed + i * 131 + (i >> 12));
    });
    return ok;
  }
  uint64_t tier_pages(int t) const { return stats.tiers[t].pages.load(); }
};

}  // namespace vstack::test
