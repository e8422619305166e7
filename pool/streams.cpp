#include "pool/streams.hpp"

#include <pthread.h>

#include <algorithm>

namespace vstack::pool {

uint64_t StreamTable::key(prim::Stream s, bool per_thread) {
  // A per-thread default stream is one stream per thread behind one handle.
  if (per_thread) return (static_cast<uint64_t>(pthread_self()) << 1) | 1;
  return reinterpret_cast<uint64_t>(s) << 1;
}

StreamState* StreamTable::get(prim::Stream s, bool per_thread) {
  auto& slot = map_[key(s, per_thread)];
  if (!slot) {
    slot = std::make_unique<StreamState>();
    slot->handle = s;
    slot->eager = per_thread;
  }
  return slot.get();
}

Status StreamTable::flush(StreamState& st) {
  const uint64_t launched = st.launched.load(std::memory_order_relaxed);
  if (launched <= st.recorded) return Status::ok();
  prim::Event ev = nullptr;
  VSTACK_TRY(vmm_.event_create(&ev, false));
  auto fence = std::make_shared<tiers::Fence>(vmm_, ev);
  VSTACK_TRY(vmm_.event_record(ev, st.handle));
  st.inflight.emplace_back(launched, std::move(fence));
  st.recorded = launched;
  return Status::ok();
}

void StreamTable::poll(StreamState& st) {
  while (!st.inflight.empty() && st.inflight.front().second->passed()) {
    st.done = st.inflight.front().first;
    st.inflight.pop_front();
  }
  if (st.inflight.empty() && st.recorded >= st.launched.load(std::memory_order_relaxed)) st.done = st.recorded;
}

bool StreamTable::done_through(StreamState& st, uint64_t n) {
  if (st.done >= n) return true;
  poll(st);
  return st.done >= std::min(n, st.launched.load(std::memory_order_relaxed));
}

Status StreamTable::wait(StreamState& st, uint64_t n) {
  if (done_through(st, n)) return Status::ok();
  VSTACK_TRY(flush(st));
  // A page used from several streams carries the highest sequence number of
  // any of them; on this stream, everything launched up to there counts.
  const uint64_t target = std::min(n, st.launched.load(std::memory_order_relaxed));
  for (auto& [seq, fence] : st.inflight) {
    if (seq >= target) {
      VSTACK_TRY(fence->wait());
      break;
    }
  }
  poll(st);
  return Status::ok();
}

Status StreamTable::forget(prim::Stream s) {
  auto it = map_.find(key(s, false));
  if (it == map_.end()) return Status::ok();
  // Everything launched on it must complete before the handle goes away (no
  // event can be recorded on it later). The state itself stays: pages keep
  // pointers to it in Page::last_stream, and a new stream that reuses the
  // handle simply continues its sequence.
  return wait(*it->second, it->second->launched.load());
}

}  // namespace vstack::pool
