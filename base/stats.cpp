#include "base/stats.hpp"

#include <time.h>
#include <unistd.h>

#include <cstring>
#include <new>

#include <nlohmann/json.hpp>

namespace vstack {

namespace {
uint64_t clock_ns(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// bytes / ns = GB/s (10^9 bytes per second).
double gbps(uint64_t bytes, uint64_t ns) { return ns == 0 ? 0.0 : static_cast<double>(bytes) / static_cast<double>(ns); }
}  // namespace

Stats& stats() {
  // Constructed in static storage on first use and never destroyed: the dump
  // thread and atexit handlers read it after static destructors may have run.
  alignas(Stats) static unsigned char storage[sizeof(Stats)];
  static Stats* s = [] {
    auto* p = new (storage) Stats();
    p->start_ns = clock_ns(CLOCK_MONOTONIC);
    return p;
  }();
  return *s;
}

std::string to_json(const Stats& s) {
  using json = nlohmann::ordered_json;
  json out;
  out["version"] = STATS_VERSION;
  out["pid"] = static_cast<int64_t>(::getpid());
  out["time_s"] = static_cast<double>(clock_ns(CLOCK_REALTIME)) * 1e-9;
  uint64_t now = clock_ns(CLOCK_MONOTONIC);
  out["uptime_s"] = s.start_ns != 0 && now > s.start_ns ? static_cast<double>(now - s.start_ns) * 1e-9 : 0.0;

  json global = json::object();
#define VSTACK_GLOBAL_STAT(name, kind, help) global[#name] = s.global.name.load(std::memory_order_relaxed);
#include "base/stats.def"
  out["global"] = std::move(global);

  json tiers = json::array();
  int n = s.tier_count.load(std::memory_order_acquire);
  if (n > kMaxTiers) n = kMaxTiers;
  for (int i = 0; i < n; ++i) {
    const TierStats& t = s.tiers[i];
    json row;
    row["name"] = std::string(t.name, strnlen(t.name, sizeof(t.name)));
    row["kind"] = std::string(t.kind, strnlen(t.kind, sizeof(t.kind)));
#define VSTACK_TIER_STAT(name, kind, help) row[#name] = t.name.load(std::memory_order_relaxed);
#include "base/stats.def"
    row["gbps_in"] = gbps(row["bytes_in"].get<uint64_t>(), row["copy_in_ns"].get<uint64_t>());
    row["gbps_out"] = gbps(row["bytes_out"].get<uint64_t>(), row["copy_out_ns"].get<uint64_t>());
    tiers.push_back(std::move(row));
  }
  out["tiers"] = std::move(tiers);
  return out.dump(1);
}

}  // namespace vstack
