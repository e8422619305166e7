#include <vector>

#include "pool_fixture.hpp"

using namespace vstack;
using vstack::test::MiB;
using vstack::test::PoolFixture;

TEST_CASE("allocation is lazy: untouched memory costs no chunk", "[pool]") {
  PoolFixture f;
  auto p = f.pool->allocate(10 * MiB);
  REQUIRE(p.is_ok());
  CHECK(f.vmm.live_handles() == 0);
  CHECK(f.pool->committed() == 10 * MiB);
  f.fill(p.value(), 10 * MiB, 1);
  CHECK(f.tier_pages(0) == 3);  // pages of 4 + 4 + 2 MiB
  CHECK(f.vmm.live_handles() == 3);
  CHECK(f.pool->validate());
  CHECK(f.pool->free(p.value()).is_ok());
  CHECK(f.pool->committed() == 0);
  CHECK(f.tier_pages(0) == 0);
  // Chunks are pooled for reuse, not destroyed: a new allocation reuses them.
  auto q = f.pool->allocate(10 * MiB);
  REQUIRE(q.is_ok());
  f.fill(q.value(), 10 * MiB, 2);
  CHECK(f.vmm.live_handles() == 3);
  CHECK(f.stats.tiers[0].chunks_created.load() == 3);
  CHECK(f.check(q.value(), 10 * MiB, 2));
}

TEST_CASE("data survives eviction and promotion cycles byte for byte", "[pool]") {
  PoolFixture f(16 * MiB, 64 * MiB, 4 * MiB);
  std::vector<prim::DevPtr> a;
  for (int i = 0; i < 6; ++i) {  // 6 × 8 MiB = 48 MiB on a 16 MiB gpu tier
    auto p = f.pool->allocate(8 * MiB);
    REQUIRE(p.is_ok());
    a.push_back(p.value());
    f.fill(p.value(), 8 * MiB, static_cast<uint8_t>(i));
    REQUIRE(f.pool->validate());
  }
  CHECK(f.tier_pages(0) * 4 * MiB <= 16 * MiB);
  CHECK(f.stats.global.evictions.load() > 0);
  for (int round = 0; round < 3; ++round) {
    for (int i = 5; i >= 0; --i) {
      CHECK(f.check(a[i], 8 * MiB, static_cast<uint8_t>(i)));
      REQUIRE(f.pool->validate());
    }
  }
  CHECK(f.stats.tiers[1].promotions.load() == 0);  // promotions count on the destination
  CHECK(f.stats.tiers[0].promotions.load() > 0);
  CHECK(f.stats.tiers[0].demotions.load() > 0);
  CHECK(f.stats.tiers[0].bytes_in.load() > 0);
  CHECK(f.stats.tiers[1].faults.load() > 0);
  for (auto p : a) CHECK(f.pool->free(p).is_ok());
  CHECK(f.pool->validate());
}

TEST_CASE("references beyond the gpu tier stay remote but usable", "[pool]") {
  PoolFixture f(8 * MiB, 64 * MiB, 4 * MiB);
  auto p = f.pool->allocate(24 * MiB);  // one launch touches 3× the gpu tier
  REQUIRE(p.is_ok());
  f.fill(p.value(), 24 * MiB, 9);
  CHECK(f.tier_pages(0) == 2);
  CHECK(f.tier_pages(1) == 4);
  CHECK(f.check(p.value(), 24 * MiB, 9));
  CHECK(f.pool->validate());
}

TEST_CASE("allocations beyond every tier fail with out_of_memory and change nothing", "[pool]") {
  PoolFixture f(8 * MiB, 16 * MiB, 4 * MiB);
  auto a = f.pool->allocate(20 * MiB);
  REQUIRE(a.is_ok());
  auto b = f.pool->allocate(6 * MiB);
  REQUIRE_FALSE(b.is_ok());
  CHECK(b.status().code() == Code::out_of_memory);
  CHECK(f.stats.global.oom_returns.load() == 1);
  CHECK(f.pool->committed() == 20 * MiB);
  auto c = f.pool->allocate(4 * MiB);
  CHECK(c.is_ok());
  CHECK(f.pool->validate());
}

TEST_CASE("overcommit admits allocations beyond the tiers; backing then fails cleanly", "[pool]") {
  PoolFixture f(4 * MiB, 4 * MiB, 4 * MiB, /*overcommit=*/true);
  auto a = f.pool->allocate(8 * MiB);
  auto b = f.pool->allocate(8 * MiB);
  REQUIRE(a.is_ok());
  REQUIRE(b.is_ok());
  f.fill(a.value(), 8 * MiB, 1);
  auto r = f.pool->access(
      {f.stream, false, false}, [&](pool::RefSet& refs) { f.pool->add_range(b.value(), 8 * MiB, refs); },
      [] { return 0; });
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == Code::out_of_memory);
  CHECK(f.check(a.value(), 8 * MiB, 1));
  CHECK(f.pool->validate());
}

TEST_CASE("a page is not moved while a launch that used it may still run", "[pool]") {
  PoolFixture f(8 * MiB, 64 * MiB, 4 * MiB);
  auto a = f.pool->allocate(8 * MiB);
  auto b = f.pool->allocate(8 * MiB);
  REQUIRE(a.is_ok());
  REQUIRE(b.is_ok());
  f.fill(a.value(), 8 * MiB, 3);
  f.vmm.hold_events(true);  // the device is "slow": recorded events stay pending
  f.fill(b.value(), 8 * MiB, 4);  // evicting a needs a's last use complete
  // The pool must have waited (event_sync completes held events in the fake);
  // a's pages moved and b is on the gpu.
  CHECK(f.tier_pages(0) == 2);
  CHECK(f.stats.global.stall_wait_ns.load() > 0);
  CHECK(f.stats.global.stall_remap_ns.load() > 0);
  f.vmm.hold_events(false);
  f.vmm.complete_events();
  CHECK(f.check(a.value(), 8 * MiB, 3));
  CHECK(f.check(b.value(), 8 * MiB, 4));
}

TEST_CASE("pinned allocations never leave the gpu tier", "[pool]") {
  PoolFixture f(12 * MiB, 64 * MiB, 4 * MiB);
  auto pin = f.pool->allocate(4 * MiB, pool::Placement{true, false});
  REQUIRE(pin.is_ok());
  CHECK(f.tier_pages(0) == 1);  // backed at once
  f.fill(pin.value(), 4 * MiB, 7);
  std::vector<prim::DevPtr> others;
  for (int i = 0; i < 4; ++i) {
    auto p = f.pool->allocate(8 * MiB);
    REQUIRE(p.is_ok());
    others.push_back(p.value());
    f.fill(p.value(), 8 * MiB, static_cast<uint8_t>(i));
  }
  CHECK(f.check(others[0], 8 * MiB, 0));  // was evicted: faults back in
  CHECK(f.stats.tiers[1].faults.load() > 0);
  CHECK(f.check(pin.value(), 4 * MiB, 7));
  // The pinned page itself never faulted: it is on the gpu.
  pool::Pool::Range r{};
  CHECK(f.pool->find(pin.value() + 100, &r));
  CHECK(r.base == pin.value());
  auto too_big = f.pool->allocate(16 * MiB, pool::Placement{true, false});
  CHECK_FALSE(too_big.is_ok());
  CHECK(f.pool->validate());
}

TEST_CASE("charging the gpu tier evicts pages to make room", "[pool]") {
  PoolFixture f(8 * MiB, 64 * MiB, 4 * MiB);
  auto a = f.pool->allocate(8 * MiB);
  REQUIRE(a.is_ok());
  f.fill(a.value(), 8 * MiB, 5);
  CHECK(f.tier_pages(0) == 2);
  CHECK(f.pool->charge_gpu(4 * MiB).is_ok());
  CHECK(f.tier_pages(0) == 1);
  CHECK_FALSE(f.pool->charge_gpu(8 * MiB).is_ok());
  f.pool->uncharge_gpu(4 * MiB);
  CHECK(f.check(a.value(), 8 * MiB, 5));
}

TEST_CASE("free_async releases only after the stream passed the free", "[pool]") {
  PoolFixture f;
  auto a = f.pool->allocate(4 * MiB);
  REQUIRE(a.is_ok());
  f.fill(a.value(), 4 * MiB, 1);
  f.vmm.hold_events(true);
  CHECK(f.pool->free_async(a.value(), f.stream).is_ok());
  f.pool->reap();
  CHECK(f.pool->committed() == 4 * MiB);  // still pending
  f.vmm.complete_events();
  f.pool->reap();
  CHECK(f.pool->committed() == 0);
  f.vmm.hold_events(false);
}

TEST_CASE("a chunk creation failure is reported and loses nothing", "[pool]") {
  PoolFixture f(8 * MiB, 64 * MiB, 4 * MiB);
  auto a = f.pool->allocate(8 * MiB);
  REQUIRE(a.is_ok());
  f.fill(a.value(), 8 * MiB, 8);
  auto b = f.pool->allocate(8 * MiB);
  REQUIRE(b.is_ok());
  f.vmm.fail_next_create(100);  // neither the host chunks for eviction nor gpu chunks can be made
  auto r = f.pool->access(
      {f.stream, false, false}, [&](pool::RefSet& refs) { f.pool->add_range(b.value(), 8 * MiB, refs); },
      [] { return 0; });
  CHECK_FALSE(r.is_ok());
  f.vmm.fail_next_create(0);
  CHECK(f.pool->validate());
  CHECK(f.check(a.value(), 8 * MiB, 8));
}

TEST_CASE("the word scan finds pointers anywhere in a parameter buffer", "[pool][scan]") {
  PoolFixture f(16 * MiB, 64 * MiB, 4 * MiB);
  auto a = f.pool->allocate(12 * MiB);
  REQUIRE(a.is_ok());
  struct Params {
    int n;
    float alpha;
    uint64_t ptr;  // into the 2nd page
    uint64_t junk[3];
  } prm{3, 1.5f, a.value() + 5 * MiB, {0, 42, ~0ull}};
  pool::RefSet refs;
  f.pool->scan_words(&prm, sizeof(prm), refs);
  REQUIRE(refs.refs().size() == 1);
  CHECK(refs.refs()[0].first == 1);
  CHECK(refs.refs()[0].last == 3);
  CHECK(f.stats.global.scan_hits.load() == 1);
}

TEST_CASE("eviction takes the least recently used page first", "[pool][lru]") {
  PoolFixture f(12 * MiB, 64 * MiB, 4 * MiB);  // room for three 4 MiB pages
  auto a = f.pool->allocate(4 * MiB), b = f.pool->allocate(4 * MiB), c = f.pool->allocate(4 * MiB);
  REQUIRE((a.is_ok() && b.is_ok() && c.is_ok()));
  f.fill(a.value(), 4 * MiB, 1);
  f.fill(b.value(), 4 * MiB, 2);
  f.fill(c.value(), 4 * MiB, 3);
  CHECK(f.check(a.value(), 4 * MiB, 1));  // a is now the most recent; b the least
  auto d = f.pool->allocate(4 * MiB);
  REQUIRE(d.is_ok());
  f.fill(d.value(), 4 * MiB, 4);
  CHECK(f.pool->tier_of(b.value()) == 1);
  CHECK(f.pool->tier_of(a.value()) == 0);
  CHECK(f.pool->tier_of(c.value()) == 0);
  CHECK(f.pool->tier_of(d.value()) == 0);
  // Next victim: c (a and d were used after it).
  CHECK(f.check(b.value(), 4 * MiB, 2));
  CHECK(f.pool->tier_of(c.value()) == 1);
  CHECK(f.pool->tier_of(b.value()) == 0);
  CHECK(f.pool->tier_of(0x10) == -2);
}

TEST_CASE("lru policy: idle pages first, then oldest use", "[pool][lru]") {
  auto lru = pool::make_policy("lru");
  REQUIRE(lru);
  CHECK(pool::make_policy("belady") == nullptr);
  pool::Page p[4];
  std::vector<pool::Candidate> c = {{&p[0], 50, true}, {&p[1], 10, false}, {&p[2], 30, true}, {&p[3], 5, true}};
  lru->order(c);
  CHECK(c[0].page == &p[3]);
  CHECK(c[1].page == &p[2]);
  CHECK(c[2].page == &p[0]);
  CHECK(c[3].page == &p[1]);  // busy: would make the fault wait for the device
}

TEST_CASE("a page's first touch backs every page of its allocation", "[pool]") {
  PoolFixture f(16 * MiB, 64 * MiB, 4 * MiB);
  auto a = f.pool->allocate(12 * MiB);
  REQUIRE(a.is_ok());
  CHECK(f.pool->tier_of(a.value()) == -1);
  f.fill(a.value() + 5 * MiB, 1 * MiB, 9);  // touches the middle page only
  for (uint64_t off = 0; off < 12 * MiB; off += 4 * MiB) CHECK(f.pool->tier_of(a.value() + off) >= 0);
}

TEST_CASE("pages last used on a destroyed stream can still be evicted", "[pool][streams]") {
  PoolFixture f(8 * MiB, 64 * MiB, 4 * MiB);
  auto a = f.pool->allocate(8 * MiB);
  REQUIRE(a.is_ok());
  f.stream = reinterpret_cast<prim::Stream>(0x1234);
  f.fill(a.value(), 8 * MiB, 6);
  REQUIRE(f.pool->stream_destroyed(f.stream).is_ok());
  f.stream = reinterpret_cast<prim::Stream>(0x5678);
  auto b = f.pool->allocate(8 * MiB);
  REQUIRE(b.is_ok());
  f.fill(b.value(), 8 * MiB, 7);  // evicts a, whose last use was on the destroyed stream
  CHECK(f.pool->tier_of(a.value()) == 1);
  CHECK(f.check(a.value(), 8 * MiB, 6));
  CHECK(f.check(b.value(), 8 * MiB, 7));
  CHECK(f.pool->validate());
}

TEST_CASE("a page used from two streams waits for both before it moves", "[pool][streams]") {
  PoolFixture f(8 * MiB, 64 * MiB, 4 * MiB);
  auto a = f.pool->allocate(8 * MiB);
  REQUIRE(a.is_ok());
  const auto sa = reinterpret_cast<prim::Stream>(0xA0), sb = reinterpret_cast<prim::Stream>(0xB0);
  f.stream = sa;
  f.fill(a.value(), 8 * MiB, 1);
  f.vmm.hold_events(true);  // from here on the "device" does not finish by itself
  f.fill(a.value(), 8 * MiB, 2);  // on stream A
  f.stream = sb;
  f.fill(a.value(), 8 * MiB, 3);  // on stream B: a's pages now carry B's (higher) sequence number
  const uint64_t before = f.vmm.syncs();
  auto b = f.pool->allocate(8 * MiB);
  REQUIRE(b.is_ok());
  f.stream = reinterpret_cast<prim::Stream>(0xC0);
  f.fill(b.value(), 8 * MiB, 4);  // evicts a: must wait for A's launch as well as B's
  CHECK(f.vmm.syncs() - before >= 2);
  f.vmm.hold_events(false);
  f.vmm.complete_events();
  CHECK(f.check(a.value(), 8 * MiB, 3));
}
