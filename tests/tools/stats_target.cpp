// A stand-in for a job under vstack in the vstack-stat tests: fills the stats
// block with known values, runs the real StatsDumper with the config from the
// environment (VSTACK_CONFIG, VSTACK_STATS_PATH), keeps four threads updating
// counters, and on EOF on stdin sets global.evictions = 4242 and stops the
// dumper (the final dump). Prints "ready" on stdout once the handler is in.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "base/config.hpp"
#include "base/stats.hpp"
#include "base/stats_dump.hpp"

using namespace vstack;

int main() {
  auto cfg = config_from_environment();
  if (!cfg) {
    std::fprintf(stderr, "stats_target: %s\n", cfg.status().message().c_str());
    return 2;
  }
  Stats& s = stats();
  std::strcpy(s.tiers[0].name, "gpu0");
  std::strcpy(s.tiers[0].kind, "gpu");
  std::strcpy(s.tiers[1].name, "host0");
  std::strcpy(s.tiers[1].kind, "host");
  s.tiers[0].capacity_bytes.store(1ull << 30);
  s.tiers[0].used_bytes.store(512ull << 20);
  s.tiers[0].pages.store(16);
  s.tiers[0].faults.store(1234);
  s.tiers[0].promotions.store(77);
  s.tiers[0].bytes_in.store(3'000'000'000ull);
  s.tiers[0].copy_in_ns.store(1'000'000'000ull);  // 3.00 GB/s
  s.tiers[1].capacity_bytes.store(8ull << 30);
  s.tiers[1].demotions.store(55);
  s.global.stall_ns.store(2'500'000'000ull);  // 2.500 s
  s.global.scan_hits.store(999);
  s.tier_count.store(2, std::memory_order_release);

  StatsDumper dumper;
  if (Status st = dumper.start(cfg.value().stats); !st) {
    std::fprintf(stderr, "stats_target: %s\n", st.to_string().c_str());
    return 2;
  }
  std::printf("ready\n");
  std::fflush(stdout);

  std::atomic<bool> done{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t)
    workers.emplace_back([&] {
      while (!done.load()) {
        add(s.global.launches, 1);
        usleep(100);
      }
    });
  char buf[64];
  while (::read(0, buf, sizeof(buf)) > 0) {
  }
  done.store(true);
  for (auto& w : workers) w.join();
  s.global.evictions.store(4242);
  dumper.stop();
  return 0;
}
