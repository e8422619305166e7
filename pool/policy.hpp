// Eviction policy: a plug-in that orders candidate pages, best victim first.
// It may be wrong but never unsafe: the pool re-checks every pick (pinned,
// referenced by the current launch, idle) and a policy that returns nothing
// useful only costs performance. `lru` orders by last use; a trace-driven
// policy (belady) and prefetching plug in here next.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace vstack::pool {

struct Page;

struct Candidate {
  Page* page;
  uint64_t last_use;  // launch sequence number of its last use (0 = never)
  bool idle;          // every launch that used it has completed
};

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  virtual const char* name() const = 0;
  // Reorder in place, best victim first.
  virtual void order(std::vector<Candidate>& c) = 0;
};

// nullptr for an unknown name.
std::unique_ptr<EvictionPolicy> make_policy(std::string_view name);

}  // namespace vstack::pool
