// One conformance suite over every tier backend and adaptor.
#include <catch2/catch.hpp>

#include "pool/prim/fake_vmm.hpp"
#include "tiers/adaptors/fault_injection.hpp"
#include "tiers/tiers.hpp"

using namespace vstack;
namespace {
constexpr uint64_t MiB = 1ull << 20;

struct Gpu {
  static std::unique_ptr<tiers::Backend> make(prim::Vmm& v, uint64_t cap) {
    return tiers::make_gpu_tier(v, {TierKind::gpu, 0, 0, "", cap, false}, nullptr);
  }
};
struct Host {
  static std::unique_ptr<tiers::Backend> make(prim::Vmm& v, uint64_t cap) {
    return tiers::make_host_tier(v, {TierKind::host, 0, 0, "", cap, false}, nullptr);
  }
};
struct Peer {
  static std::unique_ptr<tiers::Backend> make(prim::Vmm& v, uint64_t cap) {
    return tiers::make_peer_tier(v, {TierKind::peer, 1, 0, "", cap, false}, nullptr);
  }
};
struct Injected {  // never fires: must behave exactly like the inner backend
  static std::unique_ptr<tiers::Backend> make(prim::Vmm& v, uint64_t cap) {
    return std::make_unique<tiers::FaultInjection>(Host::make(v, cap));
  }
};
struct Limited {
  static std::unique_ptr<tiers::Backend> make(prim::Vmm& v, uint64_t cap) {
    return std::make_unique<tiers::Limit>(Host::make(v, 4 * cap), cap);
  }
};
}  // namespace

TEMPLATE_TEST_CASE("tier backend conformance", "[tiers]", Gpu, Host, Peer, Injected, Limited) {
  prim::FakeVmm vmm;
  auto t = TestType::make(vmm, 16 * MiB);
  REQUIRE(t->capacity() == 16 * MiB);
  REQUIRE(t->mapped());

  SECTION("acquire up to capacity, then out_of_memory") {
    auto a = t->acquire(8 * MiB);
    auto b = t->acquire(8 * MiB);
    REQUIRE(a.is_ok());
    REQUIRE(b.is_ok());
    CHECK(t->used() == 16 * MiB);
    auto c = t->acquire(2 * MiB);
    CHECK(c.status().code() == Code::out_of_memory);
    CHECK(t->used() == 16 * MiB);
    t->release(std::move(a).value());
    t->release(std::move(b).value());
    CHECK(t->used() == 0);
    CHECK(t->validate());
  }
  SECTION("staging mappings are writable and chunks are reused") {
    auto a = t->acquire(4 * MiB);
    REQUIRE(a.is_ok());
    auto* p = reinterpret_cast<uint32_t*>(a.value().staging);
    p[0] = 0xfeedbeef;
    const auto handle = a.value().handle;
    t->release(std::move(a).value());
    auto again = t->acquire(4 * MiB);
    REQUIRE(again.is_ok());
    CHECK(again.value().handle == handle);
    CHECK(reinterpret_cast<uint32_t*>(again.value().staging)[0] == 0xfeedbeef);
    t->release(std::move(again).value());
  }
  SECTION("pooled chunks of another size are dropped to make room") {
    auto a = t->acquire(12 * MiB);
    REQUIRE(a.is_ok());
    t->release(std::move(a).value());
    auto b = t->acquire(8 * MiB);
    REQUIRE(b.is_ok());
    CHECK(t->validate());
    t->release(std::move(b).value());
  }
  SECTION("charges count against capacity") {
    REQUIRE(t->charge(10 * MiB).is_ok());
    CHECK(t->acquire(8 * MiB).status().code() == Code::out_of_memory);
    CHECK(t->charge(8 * MiB).code() == Code::out_of_memory);
    t->uncharge(10 * MiB);
    CHECK(t->used() == 0);
  }
  SECTION("driver refusal is out_of_memory with nothing leaked") {
    vmm.fail_next_create();
    CHECK(t->acquire(2 * MiB).status().code() == Code::out_of_memory);
    CHECK(t->used() == 0);
    CHECK(vmm.live_handles() == 0);
  }
}

TEST_CASE("fault injection fails the chosen acquires", "[tiers]") {
  prim::FakeVmm vmm;
  tiers::FaultInjection t(Host::make(vmm, 64 * MiB));
  t.fail_every(2);
  auto a = t.acquire(2 * MiB);
  auto b = t.acquire(2 * MiB);
  CHECK(a.is_ok());
  CHECK(b.status().code() == Code::out_of_memory);
  CHECK(t.injected() == 1);
  t.release(std::move(a).value());
}
