#include "pool/pool.hpp"

#include <time.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "base/check.hpp"
#include "base/log.hpp"

namespace vstack::pool {

namespace {

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t round_up(uint64_t v, uint64_t m) { return (v + m - 1) / m * m; }

bool keeps(const RefSet& keep, const Page& p) {
  const Allocation* a = p.alloc;
  const uint32_t i = static_cast<uint32_t>(&p - a->pages.get());
  for (const Ref& r : keep.refs())
    if (r.alloc == a && i >= r.first && i < r.last) return true;
  return false;
}

}  // namespace

// --- RefSet ---------------------------------------------------------------

void RefSet::add(Allocation* a, uint32_t first, uint32_t last) {
  for (Ref& r : refs_) {
    if (r.alloc == a) {
      r.first = std::min(r.first, first);
      r.last = std::max(r.last, last);
      return;
    }
  }
  refs_.push_back({a, first, last});
}

// --- construction ------------------------------------------------------------

Pool::Pool(prim::Vmm& vmm, std::vector<std::unique_ptr<tiers::Backend>> tiers, const PoolOptions& opts, Stats& st,
           std::unique_ptr<EvictionPolicy> policy)
    : vmm_(vmm),
      tiers_(std::move(tiers)),
      opts_(opts),
      stats_(st),
      policy_(std::move(policy)),
      granule_(vmm.granularity({})),
      streams_(vmm) {
  for (auto& t : tiers_) capacity_ += t->capacity();
}

Result<std::unique_ptr<Pool>> Pool::create(prim::Vmm& vmm, std::vector<std::unique_ptr<tiers::Backend>> tiers,
                                           const PoolOptions& opts, Stats& stats) {
  if (tiers.empty() || tiers[0]->kind() != TierKind::gpu)
    return Status(Code::invalid_value, "the first tier must be the gpu tier");
  if (tiers.size() > static_cast<size_t>(kMaxTiers)) return Status(Code::invalid_value, "too many tiers");
  const uint64_t g = vmm.granularity({});
  if (opts.page_bytes == 0 || opts.page_bytes % g != 0)
    return Status(Code::invalid_value, "page size must be a multiple of the granule");
  auto policy = make_policy(opts.eviction);
  if (!policy) return Status(Code::invalid_value, "unknown eviction policy '" + opts.eviction + "'");
  std::unique_ptr<Pool> p(new Pool(vmm, std::move(tiers), opts, stats, std::move(policy)));
  VSTACK_TRY(vmm.stream_create(&p->up_stream_));
  VSTACK_TRY(vmm.stream_create(&p->down_stream_));
  stats.tier_count.store(static_cast<int>(p->tiers_.size()));
  for (size_t i = 0; i < p->tiers_.size(); ++i) {
    auto& ts = stats.tiers[i];
    std::snprintf(ts.name, sizeof(ts.name), "%s", p->tiers_[i]->name().c_str());
    std::snprintf(ts.kind, sizeof(ts.kind), "%s", tier_kind_name(p->tiers_[i]->kind()));
    ts.capacity_bytes.store(p->tiers_[i]->capacity());
  }
  return p;
}

Pool::~Pool() {
  std::unique_lock g(mu_);
  for (auto& a : allocs_) (void)release_allocation(a.get());
  allocs_.clear();
  deferred_.clear();
  timings_.clear();
  if (up_stream_) (void)vmm_.stream_destroy(up_stream_);
  if (down_stream_) (void)vmm_.stream_destroy(down_stream_);
}

// --- allocation ---------------------------------------------------------------

Result<prim::DevPtr> Pool::allocate(uint64_t bytes, Placement where) {
  if (bytes == 0) return Status(Code::invalid_value, "zero-byte allocation");
  std::unique_lock g(mu_);
  reap_timings();
  const uint64_t reserved = round_up(bytes, granule_);
  if (!opts_.overcommit && committed_ + reserved > capacity_) {
    // Deferred frees may give the room back.
    g.unlock();
    reap();
    g.lock();
    if (committed_ + reserved > capacity_) {
      add(stats_.global.oom_returns, 1);
      return Status(Code::out_of_memory, "allocation of " + std::to_string(bytes) + " bytes exceeds the capacity of all tiers (" +
                                             std::to_string(capacity_ - committed_) + " bytes left)");
    }
  }
  auto a = std::make_unique<Allocation>();
  a->size = bytes;
  a->reserved = reserved;
  a->pinned = where.pinned;
  a->opaque = where.opaque;
  VSTACK_TRY(vmm_.reserve(reserved, granule_, &a->va));
  a->npages = static_cast<uint32_t>((reserved + opts_.page_bytes - 1) / opts_.page_bytes);
  a->pages.reset(new Page[a->npages]);
  for (uint32_t i = 0; i < a->npages; ++i) {
    Page& p = a->pages[i];
    p.alloc = a.get();
    p.va = a->va + uint64_t{i} * opts_.page_bytes;
    p.bytes = std::min(opts_.page_bytes, reserved - uint64_t{i} * opts_.page_bytes);
  }
  // Pinned pages must live on the gpu; opaque ones may be reached through
  // pointers we never see, so they are backed at once (never left unmapped).
  if (a->pinned || a->opaque) {
    RefSet keep;
    keep.add(a.get(), 0, a->npages);
    for (uint32_t i = 0; i < a->npages; ++i) {
      Status s = back_page(a->pages[i], true, keep);
      if (s && a->pinned && a->pages[i].tier != 0) s = Status(Code::out_of_memory, "no room on the gpu tier for a pinned allocation");
      if (!s) {
        (void)release_allocation(a.get());
        add(stats_.global.oom_returns, 1);
        return s;
      }
    }
  }
  table_.set(a->va, reserved, a.get());
  committed_ += reserved;
  add(stats_.global.allocations, 1);
  add(stats_.global.allocated_bytes, reserved);
  prim::DevPtr va = a->va;
  allocs_.push_back(std::move(a));
  VSTACK_EXPENSIVE(VSTACK_CHECK(validate()));
  return va;
}

Status Pool::release_allocation(Allocation* a) {
  // LOCKING: mu_ exclusive. Pages must be idle.
  for (uint32_t i = 0; i < a->npages; ++i) {
    Page& p = a->pages[i];
    if (p.tier < 0) continue;
    Status s = vmm_.unmap(p.va, p.bytes);
    if (!s) return s;
    p.chunk.busy = p.ready;  // a copy into the chunk may still be in flight
    tiers_[p.tier]->release(std::move(p.chunk));
    sub(stats_.tiers[p.tier].pages, 1);
    p.tier = -1;
    p.fast.store(false);
  }
  return vmm_.release(a->va, a->reserved);
}

Status Pool::free(prim::DevPtr ptr) {
  std::unique_lock g(mu_);
  Allocation* a = table_.find(ptr);
  if (!a || a->va != ptr) return Status(Code::not_found, "not a pool allocation base");
  for (uint32_t i = 0; i < a->npages; ++i) VSTACK_TRY(wait_idle(a->pages[i]));
  table_.set(a->va, a->reserved, nullptr);
  VSTACK_TRY(release_allocation(a));
  committed_ -= a->reserved;
  sub(stats_.global.allocations, 1);
  sub(stats_.global.allocated_bytes, a->reserved);
  auto it = std::find_if(allocs_.begin(), allocs_.end(), [a](auto& u) { return u.get() == a; });
  VSTACK_CHECK(it != allocs_.end());
  std::swap(*it, allocs_.back());
  allocs_.pop_back();
  return Status::ok();
}

Status Pool::free_async(prim::DevPtr ptr, prim::Stream stream) {
  std::unique_lock g(mu_);
  Allocation* a = table_.find(ptr);
  if (!a || a->va != ptr) return Status(Code::not_found, "not a pool allocation base");
  prim::Event ev = nullptr;
  VSTACK_TRY(vmm_.event_create(&ev, false));
  auto fence = std::make_shared<tiers::Fence>(vmm_, ev);
  // Recorded by the calling thread: CU_STREAM_PER_THREAD lands on its own stream.
  VSTACK_TRY(vmm_.event_record(ev, stream));
  // The VA stays reserved (and in the page table) until the stream catches up,
  // so nothing else can be placed there while enqueued work may still use it.
  deferred_.push_back({a, std::move(fence)});
  return Status::ok();
}

void Pool::reap() {
  std::vector<prim::DevPtr> ready;
  {
    std::unique_lock g(mu_);
    for (auto it = deferred_.begin(); it != deferred_.end();) {
      if (it->fence->passed()) {
        ready.push_back(it->alloc->va);
        it = deferred_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (prim::DevPtr p : ready) {
    Status s = free(p);
    if (!s) log::warn("deferred free of {:#x} failed: {}", p, s.to_string());
  }
}

Status Pool::charge_gpu(uint64_t bytes) {
  std::unique_lock g(mu_);
  Status s = tiers_[0]->charge(bytes);
  if (s.code() == Code::out_of_memory) {
    VSTACK_TRY(evict_for(bytes, RefSet{}));
    s = tiers_[0]->charge(bytes);
  }
  if (!s) add(stats_.global.oom_returns, 1);
  return s;
}

void Pool::uncharge_gpu(uint64_t bytes) { tiers_[0]->uncharge(bytes); }

// --- lookups ------------------------------------------------------------------

bool Pool::find(prim::DevPtr p, Range* r) const {
  std::shared_lock g(mu_);
  const Allocation* a = table_.find(p);
  if (!a) return false;
  if (r) *r = {a->va, a->size};
  return true;
}

uint64_t Pool::total_capacity() const { return capacity_; }

int Pool::tier_of(prim::DevPtr p) const {
  std::shared_lock g(mu_);
  const Allocation* a = table_.find(p);
  if (!a) return -2;
  return a->pages[(p - a->va) / opts_.page_bytes].tier;
}

uint64_t Pool::committed() const {
  std::shared_lock g(mu_);
  return committed_;
}

// --- references -----------------------------------------------------------------

void Pool::scan_words(const void* data, size_t bytes, RefSet& out) const {
  const auto* b = static_cast<const unsigned char*>(data);
  uint64_t hits = 0;
  const size_t n = bytes / 8;
  for (size_t i = 0; i < n; ++i) {
    uint64_t w;
    std::memcpy(&w, b + i * 8, 8);
    Allocation* a = table_.find(w);
    if (!a) continue;
    ++hits;
    out.add(a, static_cast<uint32_t>((w - a->va) / opts_.page_bytes), a->npages);
  }
  add(stats_.global.scan_words, n);
  if (hits) add(stats_.global.scan_hits, hits);
}

void Pool::add_range(prim::DevPtr p, uint64_t bytes, RefSet& out) const {
  Allocation* a = table_.find(p);
  if (!a || bytes == 0) return;
  const uint64_t end = std::min(p + bytes, a->va + a->reserved);
  out.add(a, static_cast<uint32_t>((p - a->va) / opts_.page_bytes),
          static_cast<uint32_t>((end - a->va + opts_.page_bytes - 1) / opts_.page_bytes));
}

// --- access ---------------------------------------------------------------------

void Pool::stamp(const RefSet& refs, StreamState* st, uint64_t seq) {
  for (const Ref& r : refs.refs()) {
    for (uint32_t i = r.first; i < r.last; ++i) {
      Page& p = r.alloc->pages[i];
      uint64_t cur = p.last_use.load(std::memory_order_relaxed);
      while (cur < seq && !p.last_use.compare_exchange_weak(cur, seq, std::memory_order_relaxed)) {
      }
      StreamState* prev = p.last_stream.load(std::memory_order_relaxed);
      if (prev != st && prev != kManyStreams) {
        StreamState* want = prev == nullptr ? st : kManyStreams;
        if (!p.last_stream.compare_exchange_strong(prev, want, std::memory_order_relaxed) && prev != st)
          p.last_stream.store(kManyStreams, std::memory_order_relaxed);
      }
    }
  }
}

Result<int> Pool::access(const Target& t, Collect collect, Enqueue enqueue) {
  thread_local RefSet refs;
  // Fast path: every referenced page on the gpu and ready, stream known.
  {
    std::shared_lock g(mu_);
    refs.clear();
    collect(refs);
    if (refs.empty()) return enqueue();
    if (t.capturing) {
      bool all_backed = true;
      for (const Ref& r : refs.refs()) all_backed = all_backed && r.alloc->backed == r.alloc->npages;
      if (all_backed) return enqueue();  // captured work runs at graph launch, which is checked then
    } else {
      StreamState* st = streams_.find(t.stream, t.per_thread);
      bool fast = st != nullptr;
      for (const Ref& r : refs.refs()) {
        for (uint32_t i = r.first; i < r.last && fast; ++i) fast = r.alloc->pages[i].fast.load(std::memory_order_acquire);
        if (!fast) break;
      }
      if (fast) return enqueue_recorded(refs, *st, enqueue);
    }
  }
  // Slow path: fault handling under the exclusive lock.
  const uint64_t t0 = now_ns();
  std::unique_lock g(mu_);
  refs.clear();
  collect(refs);
  add(stats_.global.launches_faulted, 1);
  Status s = fault(t, refs);
  if (!s) {
    add(stats_.global.stall_ns, now_ns() - t0);
    if (s.code() == Code::out_of_memory) add(stats_.global.oom_returns, 1);
    return s;
  }
  const int rc = t.capturing ? enqueue() : enqueue_recorded(refs, *streams_.get(t.stream, t.per_thread), enqueue);
  add(stats_.global.stall_ns, now_ns() - t0);
  VSTACK_EXPENSIVE(VSTACK_CHECK(validate()));
  return rc;
}

int Pool::enqueue_recorded(const RefSet& refs, StreamState& st, Enqueue enqueue) {
  // LOCKING: mu_ held (shared or exclusive): no page can move until the work is enqueued.
  const uint64_t seq = seq_.fetch_add(1, std::memory_order_relaxed) + 1;
  stamp(refs, &st, seq);
  st.note_launch(seq);
  const int rc = enqueue();
  if (st.eager) (void)streams_.flush(st);  // only this thread uses its per-thread stream
  return rc;
}

Status Pool::fault(const Target& t, const RefSet& refs) {
  // LOCKING: mu_ exclusive.
  reap_timings();
  // 1. Back every page of every referenced allocation: a kernel may reach any
  //    of them, and an unbacked page is unmapped. Referenced pages go to the
  //    gpu (evicting); the others only where there is room.
  for (const Ref& r : refs.refs()) {
    Allocation* a = r.alloc;
    if (a->backed == a->npages) continue;
    for (uint32_t i = 0; i < a->npages; ++i)
      if (a->pages[i].tier < 0) VSTACK_TRY(back_page(a->pages[i], i >= r.first && i < r.last, refs));
  }
  if (t.capturing) return Status::ok();
  // 2. Promote referenced pages that live on a slower tier.
  for (const Ref& r : refs.refs()) {
    for (uint32_t i = r.first; i < r.last; ++i) {
      Page& p = r.alloc->pages[i];
      if (p.tier != 0) {
        add(stats_.tiers[p.tier].faults, 1);
        VSTACK_TRY(promote(p, refs));
      }
    }
  }
  // 3. Order the launch after data still arriving.
  for (const Ref& r : refs.refs()) {
    for (uint32_t i = 0; i < r.alloc->npages; ++i) {
      Page& p = r.alloc->pages[i];
      if (p.ready && !p.ready->passed()) VSTACK_TRY(vmm_.stream_wait(t.stream, p.ready->event()));
      set_fast(p);
    }
  }
  return Status::ok();
}

void Pool::set_fast(Page& p) {
  if (p.ready && p.ready->passed()) p.ready.reset();
  p.fast.store(p.tier == 0 && !p.ready, std::memory_order_release);
}

Status Pool::map_chunk(Page& p, tiers::Chunk c, int tier) {
  // LOCKING: mu_ exclusive. p is unbacked.
  Status s = vmm_.map(p.va, p.bytes, c.handle);
  if (!s) {
    tiers_[tier]->release(std::move(c));
    return s;
  }
  // A reused chunk may still be read by the copy that emptied it.
  p.ready = std::move(c.busy);
  p.chunk = std::move(c);
  p.tier = tier;
  ++p.alloc->backed;
  add(stats_.tiers[tier].pages, 1);
  add(stats_.global.backed_pages, 1);
  set_fast(p);
  return Status::ok();
}

Status Pool::back_page(Page& p, bool want_gpu, const RefSet& keep) {
  // LOCKING: mu_ exclusive.
  auto c = tiers_[0]->acquire(p.bytes);
  if (!c && want_gpu && c.status().code() == Code::out_of_memory) {
    Status e = evict_for(p.bytes, keep);
    if (e) c = tiers_[0]->acquire(p.bytes);
  }
  if (c) return map_chunk(p, std::move(c).value(), 0);
  for (int t = 1; t < static_cast<int>(tiers_.size()); ++t) {
    auto ct = tiers_[t]->acquire(p.bytes);
    if (ct) return map_chunk(p, std::move(ct).value(), t);
  }
  return Status(Code::out_of_memory, "no tier has room for a " + std::to_string(p.bytes) + "-byte page");
}

Status Pool::promote(Page& p, const RefSet& keep) {
  // LOCKING: mu_ exclusive.
  auto c = tiers_[0]->acquire(p.bytes);
  if (!c) {
    if (c.status().code() != Code::out_of_memory) return c.status();
    if (!evict_for(p.bytes, keep)) return Status::ok();  // nothing can make room: stays remote (still mapped)
    c = tiers_[0]->acquire(p.bytes);
    if (!c) return Status::ok();
  }
  Status s = wait_idle(p);
  if (s) s = migrate(p, std::move(c).value(), 0);
  return s;
}

Status Pool::evict_for(uint64_t bytes, const RefSet& keep) {
  // LOCKING: mu_ exclusive. Frees at least `bytes` on the gpu tier, or fails
  // with out_of_memory having moved what it could.
  std::vector<Candidate> cand;
  for (auto& a : allocs_) {
    if (a->pinned) continue;
    for (uint32_t i = 0; i < a->npages; ++i) {
      Page& p = a->pages[i];
      if (p.tier != 0 || keeps(keep, p)) continue;
      cand.push_back({&p, p.last_use.load(std::memory_order_relaxed), page_idle(p)});
    }
  }
  policy_->order(cand);
  // Among the policy's first picks, an idle page of exactly the size wanted frees a
  // chunk the caller can take as it is; any other size must be destroyed and
  // a new chunk created (waiting for the copy that emptied it).
  constexpr size_t kSizeLookahead = 16;
  std::stable_partition(cand.begin(), cand.begin() + static_cast<long>(std::min(cand.size(), kSizeLookahead)),
                        [bytes](const Candidate& c) { return c.idle && c.page->bytes == bytes; });
  auto& gpu = *tiers_[0];
  uint64_t freed = 0;
  for (const Candidate& c : cand) {
    if (gpu.used() + bytes <= gpu.capacity()) return Status::ok();
    Page& v = *c.page;
    if (v.tier != 0 || v.alloc->pinned || keeps(keep, v)) continue;  // the policy's pick is checked, not trusted
    // Demote to the first slower tier with room.
    for (int t = 1; t < static_cast<int>(tiers_.size()); ++t) {
      if (v.alloc->opaque && tiers_[t]->kind() == TierKind::nvme) continue;
      auto dst = tiers_[t]->acquire(v.bytes);
      if (!dst) continue;
      VSTACK_TRY(wait_idle(v));
      VSTACK_TRY(migrate(v, std::move(dst).value(), t));
      add(stats_.global.evictions, 1);
      freed += v.bytes;
      break;
    }
  }
  if (gpu.used() + bytes <= gpu.capacity()) return Status::ok();
  return Status(Code::out_of_memory, "cannot evict enough from the gpu tier (freed " + std::to_string(freed) + " bytes)");
}

Status Pool::migrate(Page& p, tiers::Chunk dst, int to) {
  // LOCKING: mu_ exclusive. p is idle and backed on tier p.tier != to.
  const int from = p.tier;
  prim::Stream s = to < from ? up_stream_ : down_stream_;
  auto fail = [&](Status st) {
    tiers_[to]->release(std::move(dst));
    return st;
  };
  if (dst.busy && !dst.busy->passed()) {
    Status st = vmm_.stream_wait(s, dst.busy->event());
    if (!st) return fail(st);
  }
  if (p.ready && !p.ready->passed()) {
    Status st = vmm_.stream_wait(s, p.ready->event());
    if (!st) return fail(st);
  }
  prim::Event e0 = nullptr, e1 = nullptr;
  Status st = vmm_.event_create(&e0, true);
  if (!st) return fail(st);
  auto start = std::make_shared<tiers::Fence>(vmm_, e0);
  st = vmm_.event_create(&e1, true);
  if (!st) return fail(st);
  auto end = std::make_shared<tiers::Fence>(vmm_, e1);
  st = vmm_.event_record(e0, s);
  if (st) st = vmm_.copy_async(dst.staging, p.chunk.staging, p.bytes, s);
  if (st) st = vmm_.event_record(e1, s);
  if (!st) return fail(st);
  // Remap the application's VA now: nothing in flight uses the page (it is
  // idle) and later users wait for `end` on the device.
  const uint64_t t_remap = now_ns();
  st = vmm_.unmap(p.va, p.bytes);
  if (!st) return fail(st);
  st = vmm_.map(p.va, p.bytes, dst.handle);
  if (!st) {
    // Put the old mapping back; the page stays where it was.
    Status back = vmm_.map(p.va, p.bytes, p.chunk.handle);
    if (!back) log::error("page {:#x}: remap failed and restoring the old mapping failed: {}", p.va, back.to_string());
    return fail(st);
  }
  add(stats_.global.stall_remap_ns, now_ns() - t_remap);
  tiers::Chunk old = std::move(p.chunk);
  old.busy = end;
  tiers_[from]->release(std::move(old));
  dst.busy.reset();
  p.chunk = std::move(dst);
  p.tier = to;
  p.ready = end;
  p.fast.store(false, std::memory_order_release);
  sub(stats_.tiers[from].pages, 1);
  add(stats_.tiers[to].pages, 1);
  add(stats_.tiers[from].bytes_out, p.bytes);
  add(stats_.tiers[to].bytes_in, p.bytes);
  if (to < from) {
    add(stats_.tiers[to].promotions, 1);
  } else {
    add(stats_.tiers[from].demotions, 1);
  }
  timings_.push_back({std::move(start), std::move(end), p.bytes, from, to});
  return Status::ok();
}

void Pool::reap_timings() {
  // LOCKING: mu_ exclusive.
  for (auto it = timings_.begin(); it != timings_.end();) {
    if (!it->end->passed()) {
      ++it;
      continue;
    }
    auto ms = vmm_.event_elapsed_ms(it->start->event(), it->end->event());
    if (ms) {
      const auto ns = static_cast<uint64_t>(ms.value() * 1e6);
      add(stats_.tiers[it->from].copy_out_ns, ns);
      add(stats_.tiers[it->to].copy_in_ns, ns);
    }
    it = timings_.erase(it);
  }
}

// --- idleness --------------------------------------------------------------------

bool Pool::page_idle(Page& p) {
  StreamState* s = p.last_stream.load(std::memory_order_relaxed);
  const uint64_t n = p.last_use.load(std::memory_order_relaxed);
  if (s == nullptr) return true;
  if (p.alloc->opaque || s == kManyStreams) {
    bool idle = true;
    streams_.for_each([&](StreamState& st) { idle = idle && streams_.done_through(st, p.alloc->opaque ? ~0ull : n); });
    return idle;
  }
  return streams_.done_through(*s, n);
}

Status Pool::wait_idle(Page& p) {
  // LOCKING: mu_ exclusive.
  if (page_idle(p)) return Status::ok();
  const uint64_t t0 = now_ns();
  Status s = wait_busy(p);
  add(stats_.global.stall_wait_ns, now_ns() - t0);
  return s;
}

Status Pool::wait_busy(Page& p) {
  // LOCKING: mu_ exclusive.
  if (p.alloc->opaque) return wait_all_idle();
  StreamState* s = p.last_stream.load(std::memory_order_relaxed);
  const uint64_t n = p.last_use.load(std::memory_order_relaxed);
  if (s != kManyStreams) return streams_.wait(*s, n);
  Status r = Status::ok();
  streams_.for_each([&](StreamState& st) {
    if (r) r = streams_.wait(st, n);
  });
  return r;
}

Status Pool::wait_all_idle() {
  Status r = Status::ok();
  streams_.for_each([&](StreamState& st) {
    if (r) r = streams_.wait(st, st.launched.load());
  });
  return r;
}

Status Pool::stream_destroyed(prim::Stream s) {
  std::unique_lock g(mu_);
  return streams_.forget(s);
}

// --- validation ------------------------------------------------------------------

bool Pool::validate() const {
  // LOCKING: caller holds mu_ (any mode) or the pool is quiescent.
  std::vector<uint64_t> on(tiers_.size(), 0);
  uint64_t committed = 0;
  for (auto& a : allocs_) {
    committed += a->reserved;
    uint32_t backed = 0;
    for (uint32_t i = 0; i < a->npages; ++i) {
      const Page& p = a->pages[i];
      if (p.tier >= 0) {
        ++backed;
        on[p.tier] += p.bytes;
        if (p.chunk.bytes != p.bytes) return false;
      }
      if (p.fast.load() && !(p.tier == 0 && !p.ready)) return false;
      if (table_.find(p.va) != a.get() || table_.find(p.va + p.bytes - 1) != a.get()) return false;
    }
    if (backed != a->backed) return false;
  }
  if (committed != committed_) return false;
  if (!opts_.overcommit && committed_ > capacity_) return false;
  for (size_t t = 0; t < tiers_.size(); ++t) {
    if (!tiers_[t]->validate()) return false;
    if (tiers_[t]->used() < on[t]) return false;
  }
  return true;
}

}  // namespace vstack::pool
