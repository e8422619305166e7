#include <map>
#include <mutex>
#include <vector>

#include "base/lock_order.hpp"
#include "base/log.hpp"
#include "tiers/backend.hpp"

namespace vstack::tiers {

bool Fence::passed() {
  if (passed_) return true;
  auto st = vmm_.event_query(ev_);
  passed_ = st.is_ok() && st.value() == prim::EventState::done;
  return passed_;
}

Status Fence::wait() {
  if (passed_) return Status::ok();
  VSTACK_TRY(vmm_.event_sync(ev_));
  passed_ = true;
  return Status::ok();
}

namespace {

class VmmBackend final : public Backend {
 public:
  VmmBackend(prim::Vmm& vmm, std::string name, TierKind kind, prim::Location loc, uint64_t cap, TierStats* st)
      : vmm_(vmm), name_(std::move(name)), kind_(kind), loc_(loc), cap_(cap), stats_(st) {
    if (stats_) stats_->capacity_bytes.store(cap_);
  }
  ~VmmBackend() override { trim(0); }

  const std::string& name() const override { return name_; }
  TierKind kind() const override { return kind_; }
  bool mapped() const override { return true; }
  uint64_t capacity() const override { return cap_; }
  uint64_t used() const override {
    std::lock_guard g(mu_);
    return chunk_bytes_ + charged_;
  }

  // LOCKING: takes Tier::mu_ (rank tier); callers may hold the pool lock.
  Result<Chunk> acquire(uint64_t bytes) override {
    std::lock_guard g(mu_);
    auto it = free_.find(bytes);
    if (it != free_.end() && !it->second.empty()) {
      Chunk c = std::move(it->second.back());
      it->second.pop_back();
      pooled_ -= bytes;
      chunk_bytes_ += bytes;
      publish();
      return c;
    }
    VSTACK_TRY(make_room_locked(bytes));
    Chunk c;
    c.bytes = bytes;
    Status s = vmm_.create(loc_, bytes, &c.handle);
    if (!s) return s.code() == Code::out_of_memory ? Status(Code::out_of_memory, name_ + ": " + s.message()) : s;
    s = vmm_.reserve(bytes, 0, &c.staging);
    if (s) {
      s = vmm_.map(c.staging, bytes, c.handle);
      if (!s) (void)vmm_.release(c.staging, bytes);
    }
    if (!s) {
      (void)vmm_.destroy(c.handle);
      return s;
    }
    chunk_bytes_ += bytes;
    if (stats_) add(stats_->chunks_created, 1);
    publish();
    return c;
  }

  void release(Chunk c) override {
    std::lock_guard g(mu_);
    chunk_bytes_ -= c.bytes;
    pooled_ += c.bytes;
    free_[c.bytes].push_back(std::move(c));
    publish();
  }

  Status charge(uint64_t bytes) override {
    std::lock_guard g(mu_);
    VSTACK_TRY(make_room_locked(bytes));
    charged_ += bytes;
    publish();
    return Status::ok();
  }
  void uncharge(uint64_t bytes) override {
    std::lock_guard g(mu_);
    charged_ -= std::min(charged_, bytes);
    publish();
  }

  void trim(uint64_t keep) override {
    std::lock_guard g(mu_);
    trim_locked(keep);
  }

  bool validate() const override {
    std::lock_guard g(mu_);
    uint64_t pooled = 0;
    for (auto& [b, v] : free_) pooled += b * v.size();
    return pooled == pooled_ && chunk_bytes_ + charged_ + pooled_ <= cap_;
  }

 private:
  // LOCKING: mu_ held. out_of_memory if `bytes` more would exceed the
  // capacity; else drops pooled chunks (of other sizes) until they fit physically.
  Status make_room_locked(uint64_t bytes) {
    if (chunk_bytes_ + charged_ + bytes > cap_) return Status(Code::out_of_memory, name_ + " tier full");
    trim_locked(cap_ - chunk_bytes_ - charged_ - bytes);
    return Status::ok();
  }

  // LOCKING: mu_ held. Chunks no copy is still using go first, so that making
  // room rarely waits for the copy that just emptied a chunk.
  void trim_locked(uint64_t keep) {
    for (bool wait : {false, true}) {
      for (auto it = free_.begin(); it != free_.end() && pooled_ > keep;) {
        auto& v = it->second;
        for (size_t i = v.size(); i-- > 0 && pooled_ > keep;) {
          if (!wait && v[i].busy && !v[i].busy->passed()) continue;
          Chunk c = std::move(v[i]);
          v.erase(v.begin() + static_cast<long>(i));
          destroy(c);
        }
        it = v.empty() ? free_.erase(it) : std::next(it);
      }
    }
  }

  // LOCKING: mu_ held.
  void destroy(Chunk& c) {
    if (c.busy) (void)c.busy->wait();
    Status s = vmm_.unmap(c.staging, c.bytes);
    if (s) s = vmm_.release(c.staging, c.bytes);
    if (s) s = vmm_.destroy(c.handle);
    if (!s) log::warn("{}: dropping a pooled chunk failed: {}", name_, s.to_string());
    pooled_ -= c.bytes;
  }

  void publish() {
    if (!stats_) return;
    stats_->used_bytes.store(chunk_bytes_ + charged_, std::memory_order_relaxed);
  }

  prim::Vmm& vmm_;
  std::string name_;
  TierKind kind_;
  prim::Location loc_;
  uint64_t cap_;
  TierStats* stats_;
  mutable RankedMutex<std::mutex, LockRank::tier> mu_;
  std::map<uint64_t, std::vector<Chunk>> free_;  // pooled chunks by size
  uint64_t chunk_bytes_ = 0;  // chunks handed out
  uint64_t pooled_ = 0;       // chunks kept for reuse
  uint64_t charged_ = 0;      // external use
};

}  // namespace

std::unique_ptr<Backend> make_vmm_backend(prim::Vmm& vmm, std::string name, TierKind kind, prim::Location loc,
                                          uint64_t capacity, TierStats* stats) {
  return std::make_unique<VmmBackend>(vmm, std::move(name), kind, loc, capacity, stats);
}

}  // namespace vstack::tiers
