// Adaptors wrap a backend (RMM's resource-adaptor idea).
//   FaultInjection: fails chosen acquire() calls, to test that the pool
//   rolls back cleanly and reports out_of_memory instead of crashing.
//   Limit: caps a backend below its own capacity.
#pragma once

#include <atomic>

#include "tiers/backend.hpp"

namespace vstack::tiers {

class Forwarding : public Backend {
 public:
  explicit Forwarding(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  const std::string& name() const override { return inner_->name(); }
  TierKind kind() const override { return inner_->kind(); }
  bool mapped() const override { return inner_->mapped(); }
  uint64_t capacity() const override { return inner_->capacity(); }
  uint64_t used() const override { return inner_->used(); }
  Result<Chunk> acquire(uint64_t bytes) override { return inner_->acquire(bytes); }
  void release(Chunk c) override { inner_->release(std::move(c)); }
  Status charge(uint64_t bytes) override { return inner_->charge(bytes); }
  void uncharge(uint64_t bytes) override { inner_->uncharge(bytes); }
  void trim(uint64_t keep) override { inner_->trim(keep); }
  bool validate() const override { return inner_->validate(); }

 protected:
  std::unique_ptr<Backend> inner_;
};

class FaultInjection final : public Forwarding {
 public:
  using Forwarding::Forwarding;
  // Fail every acquire whose 1-based ordinal is a multiple of `every` (0 = never).
  void fail_every(uint64_t every) { every_ = every; }
  uint64_t injected() const { return injected_; }
  Result<Chunk> acquire(uint64_t bytes) override {
    uint64_t n = ++count_;
    if (every_ != 0 && n % every_ == 0) {
      ++injected_;
      return Status(Code::out_of_memory, name() + ": injected acquire failure");
    }
    return Forwarding::acquire(bytes);
  }

 private:
  std::atomic<uint64_t> every_{0}, count_{0}, injected_{0};
};

class Limit final : public Forwarding {
 public:
  Limit(std::unique_ptr<Backend> inner, uint64_t limit) : Forwarding(std::move(inner)), limit_(limit) {}
  uint64_t capacity() const override { return std::min(limit_, inner_->capacity()); }
  Result<Chunk> acquire(uint64_t bytes) override {
    if (inner_->used() + bytes > limit_) return Status(Code::out_of_memory, name() + ": over limit");
    return Forwarding::acquire(bytes);
  }
  Status charge(uint64_t bytes) override {
    if (inner_->used() + bytes > limit_) return Status(Code::out_of_memory, name() + ": over limit");
    return Forwarding::charge(bytes);
  }

 private:
  uint64_t limit_;
};

}  // namespace vstack::tiers
