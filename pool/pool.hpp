// The pager.
//
// Glossary
//   granule     2 MiB: the VMM granularity of every location type here
//               (device, HOST, HOST_NUMA; measured on H100/H200, driver 580).
//   page        the unit of residency and migration: a run of granules,
//               Config::page_bytes (default 32 MiB). An allocation smaller
//               than a page is one page of its rounded size; the last page of
//               an allocation may be shorter.
//   allocation  one application cuMemAlloc*: one reserved VA range, N pages.
//   chunk       the physical backing of one page on one tier (tiers::Chunk).
//   tier        a class of chunks (tiers::Backend): tiers_[0] is the gpu tier,
//               the others are slower, in config order.
//   reference   (allocation, pages [first, last)) that a launch, copy or set
//               may touch. A kernel parameter word pointing into an
//               allocation references its page and every later page (the
//               extent of a tensor is unknown); a copy references exactly
//               its byte range.
//   fault       a launch/copy/set whose references include pages that are not
//               on the gpu tier, not backed yet, or still arriving.
//
// Page states: unbacked (tier < 0, VA unmapped) -> resident on tier t (VA
// mapped to the chunk) -> resident on another tier (migrated). A migration
// copies between the chunks' private staging mappings on a copy stream,
// remaps the application VA at once, and leaves a fence in Page::ready that
// every later user waits for on the device (never on the host).
//
// Invariants (validate(), checked after every operation with checks=expensive):
//   for each tier t: t.used() - t.charged == sum(bytes of pages on t)
//   committed_ == sum(allocation reserved bytes) <= total capacity (unless overcommit)
//   page_table.find(va) == a for every granule of every allocation a
//   page.fast == (page.tier == 0 && no pending ready fence)
//
// Locking (base/lock_order.hpp): mu_ shared on the launch fast path (scan,
// lookups, stamping), exclusive for everything that changes state.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <span>
#include <vector>

#include "base/config.hpp"
#include "base/function_ref.hpp"
#include "base/lock_order.hpp"
#include "base/stats.hpp"
#include "pool/page_table.hpp"
#include "pool/policy.hpp"
#include "pool/prim/vmm.hpp"
#include "pool/streams.hpp"
#include "tiers/backend.hpp"

namespace vstack::pool {

struct Allocation;

struct Page {
  Allocation* alloc = nullptr;
  uint64_t va = 0;
  uint64_t bytes = 0;
  int tier = -1;          // index into Pool::tiers_; -1 = unbacked
  tiers::Chunk chunk;
  tiers::FencePtr ready;  // data arrives when this passes
  std::atomic<bool> fast{false};              // on the gpu tier and ready
  std::atomic<uint64_t> last_use{0};          // seq of the last launch that referenced it
  std::atomic<StreamState*> last_stream{nullptr};
};

struct Allocation {
  uint64_t va = 0;
  uint64_t size = 0;      // requested bytes
  uint64_t reserved = 0;  // granule-rounded
  bool pinned = false;    // RuleAction::pin_gpu
  bool opaque = false;    // RuleAction::opaque
  uint32_t backed = 0;    // pages with a chunk
  std::unique_ptr<Page[]> pages;
  uint32_t npages = 0;
};

struct Ref {
  Allocation* alloc;
  uint32_t first, last;  // pages [first, last)
};

// References of one launch/copy/set, deduplicated by allocation.
class RefSet {
 public:
  void add(Allocation* a, uint32_t first, uint32_t last);
  std::span<const Ref> refs() const { return {refs_.data(), refs_.size()}; }
  bool empty() const { return refs_.empty(); }
  void clear() { refs_.clear(); }

 private:
  std::vector<Ref> refs_;
};

// Where an allocation may live (from the config rule that matched it).
struct Placement {
  bool pinned = false;  // RuleAction::pin_gpu: backed on the gpu at once, never evicted
  bool opaque = false;  // RuleAction::opaque: backed at once, moved only when the device is idle
};

struct PoolOptions {
  uint64_t page_bytes = 32 * kMiB;
  bool overcommit = false;
  std::string eviction = "lru";
};

class Pool {
 public:
  // tiers[0] must be the gpu tier. `stats` receives the counters (tiers[i] <-> stats.tiers[i]).
  static Result<std::unique_ptr<Pool>> create(prim::Vmm& vmm, std::vector<std::unique_ptr<tiers::Backend>> tiers,
                                              const PoolOptions& opts, Stats& stats);
  ~Pool();

  // --- allocation -------------------------------------------------------
  // LOCKING: takes mu_ exclusive.
  Result<prim::DevPtr> allocate(uint64_t bytes, Placement where = Placement{});
  // Frees after every launch that used it completed. not_found if p is not an allocation base.
  Status free(prim::DevPtr p);
  // Frees once the work enqueued on `stream` so far has completed.
  Status free_async(prim::DevPtr p, prim::Stream stream);
  // Memory outside the pool that counts against the gpu tier (pass-through
  // allocations, the application's own cuMemCreate): evicts to make room.
  Status charge_gpu(uint64_t bytes);
  void uncharge_gpu(uint64_t bytes);

  // --- lookups ----------------------------------------------------------
  struct Range {
    prim::DevPtr base;
    uint64_t size;
  };
  // LOCKING: takes mu_ shared.
  bool find(prim::DevPtr p, Range* r) const;
  uint64_t total_capacity() const;
  uint64_t committed() const;
  // The tier index of the page holding p (-1: not backed yet; -2: not in the pool).
  int tier_of(prim::DevPtr p) const;

  // --- references -------------------------------------------------------
  // Add the references of a parameter/extra buffer: every 8-byte word.
  // LOCKING: caller holds a Reader (see below) or no lock at all (then the
  // Allocation pointers must not be used after the next state change).
  void scan_words(const void* data, size_t bytes, RefSet& out) const;
  // Add the pages overlapping [p, p+bytes). No-op if p is not in the pool.
  void add_range(prim::DevPtr p, uint64_t bytes, RefSet& out) const;

  // --- access -----------------------------------------------------------
  struct Target {
    prim::Stream stream = nullptr;
    bool per_thread = false;  // the per-thread default stream (_ptsz or CU_STREAM_PER_THREAD)
    bool capturing = false;   // the stream is being captured: enqueue nothing on it
  };
  // Make the references usable by work enqueued on t.stream, then call
  // `enqueue` (the real driver call) while no page can move, and record the
  // use. Returns enqueue's result, or the pool's failure (OOM when a page
  // cannot be backed anywhere) without calling it.
  // `collect` fills the references under the same lock (so scans see a
  // stable page table).
  using Enqueue = FunctionRef<int()>;
  using Collect = FunctionRef<void(RefSet&)>;
  Result<int> access(const Target& t, Collect collect, Enqueue enqueue);

  // A stream is being destroyed: stop tracking it once its work is done.
  Status stream_destroyed(prim::Stream s);
  // Free deferred frees whose streams have caught up.
  void reap();

  bool validate() const;
  const std::vector<std::unique_ptr<tiers::Backend>>& tiers() const { return tiers_; }
  uint64_t page_bytes() const { return opts_.page_bytes; }

 private:
  Pool(prim::Vmm& vmm, std::vector<std::unique_ptr<tiers::Backend>> tiers, const PoolOptions& opts, Stats& st,
       std::unique_ptr<EvictionPolicy> policy);

  using Mutex = RankedMutex<std::shared_mutex, LockRank::pool>;

  // All below: LOCKING: mu_ exclusive.
  Status fault(const Target& t, const RefSet& refs);
  Status back_page(Page& p, bool want_gpu, const RefSet& keep);
  Status promote(Page& p, const RefSet& keep);
  Status evict_for(uint64_t bytes, const RefSet& keep);
  Status migrate(Page& p, tiers::Chunk dst, int dst_tier);
  Status map_chunk(Page& p, tiers::Chunk c, int tier);
  bool page_idle(Page& p);
  Status wait_idle(Page& p);
  Status wait_busy(Page& p);
  Status wait_all_idle();
  Status release_allocation(Allocation* a);
  void stamp(const RefSet& refs, StreamState* st, uint64_t seq);
  // Take a sequence number, stamp the referenced pages, then enqueue.
  int enqueue_recorded(const RefSet& refs, StreamState& st, Enqueue enqueue);
  void set_fast(Page& p);
  void reap_timings();

  prim::Vmm& vmm_;
  std::vector<std::unique_ptr<tiers::Backend>> tiers_;
  PoolOptions opts_;
  Stats& stats_;
  std::unique_ptr<EvictionPolicy> policy_;
  uint64_t granule_;

  mutable Mutex mu_;
  PageTable table_;
  StreamTable streams_;
  std::atomic<uint64_t> seq_{0};
  uint64_t committed_ = 0;
  uint64_t capacity_ = 0;
  std::vector<std::unique_ptr<Allocation>> allocs_;  // owned; unordered
  prim::Stream up_stream_ = nullptr;    // copies towards the gpu tier
  prim::Stream down_stream_ = nullptr;  // copies away from it

  struct Deferred {
    Allocation* alloc;
    tiers::FencePtr fence;
  };
  std::vector<Deferred> deferred_;

  struct Timing {
    tiers::FencePtr start, end;
    uint64_t bytes;
    int from, to;
  };
  std::vector<Timing> timings_;
};

}  // namespace vstack::pool
