#include "pool/policy.hpp"

#include <algorithm>

namespace vstack::pool {

namespace {

// Least recently used first; among equals, idle pages first (no stall).
class Lru final : public EvictionPolicy {
 public:
  const char* name() const override { return "lru"; }
  void order(std::vector<Candidate>& c) override {
    std::sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) {
      if (a.idle != b.idle) return a.idle;  // an idle victim moves without waiting
      return a.last_use < b.last_use;
    });
  }
};

}  // namespace

std::unique_ptr<EvictionPolicy> make_policy(std::string_view name) {
  if (name == "lru") return std::make_unique<Lru>();
  return nullptr;
}

}  // namespace vstack::pool
