// Random sequences of pool operations against a simple model: every live
// allocation's bytes are known; after each step the pool validates and a
// random allocation is checked byte for byte.
#include <map>
#include <random>

#include "pool_fixture.hpp"

using namespace vstack;
using vstack::test::MiB;
using vstack::test::PoolFixture;

TEST_CASE("random operation sequences keep data and invariants", "[pool][random]") {
  const uint64_t seed = GENERATE(1, 2, 3, 4);
  std::mt19937_64 rng(seed);
  PoolFixture f(16 * MiB, 48 * MiB, 4 * MiB);
  struct Model {
    uint64_t bytes;
    uint8_t seed;
  };
  std::map<prim::DevPtr, Model> live;
  uint64_t committed = 0;
  for (int step = 0; step < 400; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 3 || live.empty()) {  // allocate (often past capacity)
      const uint64_t bytes = (1 + rng() % 12) * MiB - (rng() % 2) * 12345;
      auto p = f.pool->allocate(bytes);
      const uint64_t reserved = (bytes + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
      if (committed + reserved > 64 * MiB) {
        REQUIRE_FALSE(p.is_ok());
        REQUIRE(p.status().code() == Code::out_of_memory);
      } else {
        REQUIRE(p.is_ok());
        const auto s = static_cast<uint8_t>(rng());
        f.fill(p.value(), bytes, s);
        live[p.value()] = {bytes, s};
        committed += reserved;
      }
    } else if (op < 5) {  // free
      auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
      REQUIRE(f.pool->free(it->first).is_ok());
      committed -= (it->second.bytes + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
      live.erase(it);
    } else if (op < 7) {  // rewrite
      auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
      it->second.seed = static_cast<uint8_t>(rng());
      f.fill(it->first, it->second.bytes, it->second.seed);
    } else {  // verify
      auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
      REQUIRE(f.check(it->first, it->second.bytes, it->second.seed));
    }
    REQUIRE(f.pool->committed() == committed);
    REQUIRE(f.pool->validate());
    REQUIRE(f.stats.tiers[0].used_bytes.load() <= 16 * MiB);
  }
  for (auto& [p, m] : live) REQUIRE(f.check(p, m.bytes, m.seed));
}
