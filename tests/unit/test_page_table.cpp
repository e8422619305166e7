#include <catch2/catch.hpp>

#include "pool/page_table.hpp"

using vstack::pool::Allocation;
using vstack::pool::PageTable;

TEST_CASE("page table maps every granule of a range and nothing else", "[page_table]") {
  PageTable t;
  auto* a = reinterpret_cast<Allocation*>(0x1000);
  auto* b = reinterpret_cast<Allocation*>(0x2000);
  const uint64_t base = 0x7f0000000000ull;
  t.set(base, 6ull << 20, a);
  t.set(base + (6ull << 20), 2ull << 20, b);
  CHECK(t.find(base) == a);
  CHECK(t.find(base + (6ull << 20) - 1) == a);
  CHECK(t.find(base + (6ull << 20)) == b);
  CHECK(t.find(base + (8ull << 20)) == nullptr);
  CHECK(t.find(base - 1) == nullptr);
  CHECK(t.find(0) == nullptr);
  CHECK(t.find(42) == nullptr);
  CHECK(t.find(~0ull) == nullptr);
  CHECK(t.find(1ull << 48) == nullptr);
  t.set(base, 6ull << 20, nullptr);
  CHECK(t.find(base) == nullptr);
  CHECK(t.find(base + (6ull << 20)) == b);
}

TEST_CASE("page table spans a level-1 boundary", "[page_table]") {
  PageTable t;
  auto* a = reinterpret_cast<Allocation*>(0x1000);
  const uint64_t l1 = 1ull << (PageTable::kGranuleShift + PageTable::kL2Bits);  // 8 GiB
  t.set(5 * l1 - (2ull << 20), 4ull << 20, a);
  CHECK(t.find(5 * l1 - 1) == a);
  CHECK(t.find(5 * l1 + (2ull << 20) - 1) == a);
  CHECK(t.find(5 * l1 + (2ull << 20)) == nullptr);
}
