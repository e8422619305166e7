// Which launches have completed, per application stream, without an event per launch.
//
// Note [Eviction fences]
// Rationale: a page may move only when no in-flight work can use it, because
// cuMemUnmap does not wait for running kernels (measured). Recording an event
// after every launch would cost the fast path a driver call.
// Approach: every launch that references pool pages takes a sequence number
// from one global counter, stamps the pages with it (Page::last_use) and raises
// its stream's `launched` mark. Only when the pool needs to know (eviction,
// promotion, free) does flush() record one event per stream covering all its
// launches so far; completed events advance the stream's `done` mark. A page
// last used at seq n on stream s is idle once s.done >= n.
// Per-thread default streams cannot be flushed from another thread, so their
// launches record an event at once (`eager`).
// Limitations: a page used from several streams waits for all of them
// (conservative); launches captured into a graph are not stamped (they do
// not run until the graph is launched, which is stamped then).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>

#include "pool/prim/vmm.hpp"
#include "tiers/backend.hpp"

namespace vstack::pool {

struct StreamState {
  prim::Stream handle = nullptr;
  bool eager = false;                   // per-thread default stream
  std::atomic<uint64_t> launched{0};    // highest seq launched on it
  uint64_t recorded = 0;                // highest seq covered by an event
  uint64_t done = 0;                    // highest seq known complete
  std::deque<std::pair<uint64_t, tiers::FencePtr>> inflight;  // (seq, fence), increasing

  void note_launch(uint64_t seq) {
    uint64_t cur = launched.load(std::memory_order_relaxed);
    while (cur < seq && !launched.compare_exchange_weak(cur, seq, std::memory_order_relaxed)) {
    }
  }
};

// Marker for a page used from more than one stream.
inline StreamState* const kManyStreams = reinterpret_cast<StreamState*>(uintptr_t{1});

class StreamTable {
 public:
  explicit StreamTable(prim::Vmm& vmm) : vmm_(vmm) {}

  // LOCKING: pool lock shared or exclusive. nullptr if not seen yet.
  StreamState* find(prim::Stream s, bool per_thread) const {
    auto it = map_.find(key(s, per_thread));
    return it == map_.end() ? nullptr : it->second.get();
  }
  // LOCKING: pool lock exclusive.
  StreamState* get(prim::Stream s, bool per_thread);
  // Record an event covering every launch on st so far (not for capturing streams).
  // LOCKING: pool lock exclusive, or shared by the owning thread of an eager stream.
  Status flush(StreamState& st);
  // Advance st.done from completed fences. LOCKING: as flush().
  void poll(StreamState& st);
  // Wait until every launch on st with seq <= n completed. LOCKING: exclusive.
  Status wait(StreamState& st, uint64_t n);
  // Is every launch on st with seq <= n complete (after poll)?
  bool done_through(StreamState& st, uint64_t n);
  // A stream is being destroyed: wait for its work. Its state is kept (pages
  // point to it). LOCKING: exclusive.
  Status forget(prim::Stream s);

  template <class F>
  void for_each(F&& f) {
    for (auto& [k, v] : map_) f(*v);
  }

 private:
  static uint64_t key(prim::Stream s, bool per_thread);

  prim::Vmm& vmm_;
  std::unordered_map<uint64_t, std::unique_ptr<StreamState>> map_;
};

}  // namespace vstack::pool
