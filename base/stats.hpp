// Live statistics: plain relaxed atomics, written by the pool, read by the
// stats thread. The dump is a JSON object (see to_json()):
//   {"version": STATS_VERSION, "pid": ..., "time_s": ..., "uptime_s": ...,
//    "global": {<VSTACK_GLOBAL_STAT fields>},
//    "tiers": [{"name": "gpu", "kind": "gpu", <VSTACK_TIER_STAT fields>,
//               "gbps_in": ..., "gbps_out": ...}, ...]}
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace vstack {

inline constexpr int STATS_VERSION = 2;  // 2: stall_wait_ns, stall_remap_ns
inline constexpr int kMaxTiers = 8;

struct TierStats {
#define VSTACK_TIER_STAT(name, kind, help) std::atomic<uint64_t> name{0};
#include "base/stats.def"
  char name[16] = {};
  char kind[8] = {};
};

struct GlobalStats {
#define VSTACK_GLOBAL_STAT(name, kind, help) std::atomic<uint64_t> name{0};
#include "base/stats.def"
};

struct Stats {
  GlobalStats global;
  TierStats tiers[kMaxTiers];
  std::atomic<int> tier_count{0};
  uint64_t start_ns = 0;  // CLOCK_MONOTONIC at init
};

// The process-wide statistics block (the pool writes, the dumper reads).
Stats& stats();

inline void add(std::atomic<uint64_t>& c, uint64_t v) { c.fetch_add(v, std::memory_order_relaxed); }
inline void sub(std::atomic<uint64_t>& c, uint64_t v) { c.fetch_sub(v, std::memory_order_relaxed); }

// Snapshot as JSON text (one object, see above).
std::string to_json(const Stats& s);

}  // namespace vstack
