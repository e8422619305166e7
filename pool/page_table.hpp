// VA -> allocation lookup for the launch fast path: lock-free, allocation-free.
//
// A two-level radix table over the 48-bit VA space in granule (2 MiB) units:
// level 1 has 2^15 slots (one per 8 GiB), each pointing at a level-2 array of
// 4096 slots (one per granule). Level-2 arrays are created on first insert and
// never freed (32 KiB each), so a reader never sees one disappear. Readers
// hold the pool lock shared; writers hold it exclusive, so an Allocation*
// read here stays valid for the reader's critical section.
// Words that are not canonical user addresses (small integers, sizes, floats)
// are rejected by the first comparison.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace vstack::pool {

struct Allocation;

class PageTable {
 public:
  static constexpr int kGranuleShift = 21;
  static constexpr int kL2Bits = 12;
  static constexpr int kVaBits = 48;
  static constexpr int kL1Bits = kVaBits - kGranuleShift - kL2Bits;

  PageTable() : l1_(new std::atomic<Slot*>[1u << kL1Bits]) {
    for (uint32_t i = 0; i < (1u << kL1Bits); ++i) l1_[i].store(nullptr, std::memory_order_relaxed);
  }
  ~PageTable() {
    for (uint32_t i = 0; i < (1u << kL1Bits); ++i) delete[] l1_[i].load();
  }
  PageTable(const PageTable&) = delete;
  PageTable& operator=(const PageTable&) = delete;

  // The allocation containing va, or nullptr. Callable concurrently with itself.
  Allocation* find(uint64_t va) const {
    if (va >> kVaBits) return nullptr;
    const uint64_t g = va >> kGranuleShift;
    Slot* l2 = l1_[g >> kL2Bits].load(std::memory_order_acquire);
    if (!l2) return nullptr;
    return l2[g & ((1u << kL2Bits) - 1)].load(std::memory_order_acquire);
  }

  // LOCKING: pool lock exclusive. [va, va+bytes) must be granule aligned.
  void set(uint64_t va, uint64_t bytes, Allocation* a) {
    for (uint64_t g = va >> kGranuleShift; g < (va + bytes) >> kGranuleShift; ++g) {
      std::atomic<Slot*>& s1 = l1_[g >> kL2Bits];
      Slot* l2 = s1.load(std::memory_order_acquire);
      if (!l2) {
        l2 = new Slot[1u << kL2Bits];
        for (uint32_t i = 0; i < (1u << kL2Bits); ++i) l2[i].store(nullptr, std::memory_order_relaxed);
        s1.store(l2, std::memory_order_release);
      }
      l2[g & ((1u << kL2Bits) - 1)].store(a, std::memory_order_release);
    }
  }

 private:
  using Slot = std::atomic<Allocation*>;
  std::unique_ptr<std::atomic<Slot*>[]> l1_;
};

}  // namespace vstack::pool
