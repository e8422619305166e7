// Stats: the JSON snapshot (parsed back), atomic file writes, and the dumper:
// signal -> dump, periodic dumps, the final dump, a multi-threaded signal
// storm with a concurrent reader, a foreign handler left alone, and fork.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "base/stats.hpp"
#include "base/stats_dump.hpp"

using namespace vstack;
using json = nlohmann::json;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/vstack-stats-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { (void)std::system(("rm -rf '" + path + "'").c_str()); }
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    DIR* d = ::opendir(path.c_str());
    if (d == nullptr) return out;
    while (dirent* e = ::readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) out.push_back(e->d_name);
    ::closedir(d);
    return out;
  }
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool wait_for(const std::function<bool()>& pred, double seconds = 10) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return pred();
}

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

// Tier 0 and 1 set to known values; restored by the caller's expectations only.
void fill_two_tiers(Stats& s) {
  std::strncpy(s.tiers[0].name, "gpu0", sizeof(s.tiers[0].name) - 1);
  std::strncpy(s.tiers[0].kind, "gpu", sizeof(s.tiers[0].kind) - 1);
  std::strncpy(s.tiers[1].name, "host0", sizeof(s.tiers[1].name) - 1);
  std::strncpy(s.tiers[1].kind, "host", sizeof(s.tiers[1].kind) - 1);
  s.tier_count.store(2, std::memory_order_release);
}

StatsConfig config_in(const TempDir& d, int sig) {
  StatsConfig c;
  c.signal = sig;
  c.path = d.path + "/s-%p.json";
  c.interval_s = 0;
  return c;
}

}  // namespace

TEST_CASE("stats() is one process-wide block with a start time", "[stats]") {
  CHECK(&stats() == &stats());
  CHECK(stats().start_ns != 0);
}

TEST_CASE("to_json: every field of stats.def, per tier and global, parses back", "[stats]") {
  Stats s;  // a private block: exact values
  s.start_ns = 1;
  fill_two_tiers(s);
  uint64_t v = 1000;
#define VSTACK_TIER_STAT(name, kind, help) s.tiers[0].name.store(v++); s.tiers[1].name.store(v++);
#include "base/stats.def"
#define VSTACK_GLOBAL_STAT(name, kind, help) s.global.name.store(v++);
#include "base/stats.def"
  s.tiers[0].bytes_in.store(6'000'000'000ull);
  s.tiers[0].copy_in_ns.store(2'000'000'000ull);  // 6 GB in 2 s = 3 GB/s
  s.tiers[0].copy_out_ns.store(0);                // no copy time: 0 GB/s, not inf
  json j = json::parse(to_json(s));
  CHECK(j["version"] == STATS_VERSION);
  CHECK(j["pid"] == ::getpid());
  CHECK(j["time_s"].get<double>() > 1.7e9);
  CHECK(j["uptime_s"].get<double>() > 0);
  REQUIRE(j["tiers"].size() == 2);
  CHECK(j["tiers"][0]["name"] == "gpu0");
  CHECK(j["tiers"][0]["kind"] == "gpu");
  CHECK(j["tiers"][1]["name"] == "host0");
  CHECK(j["tiers"][1]["kind"] == "host");
  v = 1000;
#define VSTACK_TIER_STAT(name, kind, help)                                       \
  if (std::string(#name) != "bytes_in" && std::string(#name) != "copy_in_ns" &&  \
      std::string(#name) != "copy_out_ns")                                       \
    CHECK(j["tiers"][0][#name].get<uint64_t>() == v);                            \
  CHECK(j["tiers"][1][#name].get<uint64_t>() == v + 1);                          \
  v += 2;
#include "base/stats.def"
#define VSTACK_GLOBAL_STAT(name, kind, help) CHECK(j["global"][#name].get<uint64_t>() == v++);
#include "base/stats.def"
  CHECK(j["tiers"][0]["gbps_in"].get<double>() == Approx(3.0));
  CHECK(j["tiers"][0]["gbps_out"].get<double>() == 0.0);
  double expect = static_cast<double>(s.tiers[1].bytes_out.load()) / static_cast<double>(s.tiers[1].copy_out_ns.load());
  CHECK(j["tiers"][1]["gbps_out"].get<double>() == Approx(expect));
  // Nothing beyond what stats.def and the header comment promise.
  size_t tier_fields = 0, global_fields = 0;
#define VSTACK_TIER_STAT(name, kind, help) ++tier_fields;
#include "base/stats.def"
#define VSTACK_GLOBAL_STAT(name, kind, help) ++global_fields;
#include "base/stats.def"
  CHECK(j["tiers"][0].size() == tier_fields + 4);  // + name, kind, gbps_in, gbps_out
  CHECK(j["global"].size() == global_fields);
  CHECK(j.size() == 6);
}

TEST_CASE("to_json: no tiers yet, and a tier_count beyond kMaxTiers is clamped", "[stats]") {
  Stats s;
  json j = json::parse(to_json(s));
  CHECK(j["tiers"].empty());
  CHECK(j["uptime_s"].get<double>() == 0.0);  // start_ns not set
  s.tier_count.store(kMaxTiers + 5);
  j = json::parse(to_json(s));
  CHECK(j["tiers"].size() == static_cast<size_t>(kMaxTiers));
}

TEST_CASE("expand_stats_path", "[stats]") {
  CHECK(expand_stats_path("/tmp/vstack-%p.json", 42) == "/tmp/vstack-42.json");
  CHECK(expand_stats_path("/tmp/%p/%p", 7) == "/tmp/7/7");
  CHECK(expand_stats_path("/tmp/100%%-%p", 7) == "/tmp/100%-7");
  CHECK(expand_stats_path("/tmp/plain", 7) == "/tmp/plain");
}

TEST_CASE("write_file_atomically: content, overwrite, no temp files left, errors", "[stats]") {
  TempDir d;
  const std::string f = d.path + "/out.json";
  REQUIRE(write_file_atomically(f, "first").is_ok());
  CHECK(slurp(f) == "first");
  REQUIRE(write_file_atomically(f, "second, longer").is_ok());
  CHECK(slurp(f) == "second, longer");
  CHECK(d.entries() == std::vector<std::string>{"out.json"});
  struct stat st {};
  REQUIRE(::stat(f.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);
  Status s = write_file_atomically(d.path + "/missing/out.json", "x");
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.code() == Code::io_error);
  CHECK(s.message().find(d.path + "/missing") != std::string::npos);
}

TEST_CASE("dumper: a signal writes the dump; stop() writes a final one and ignores the signal", "[stats][dumper]") {
  TempDir d;
  StatsDumper dumper;
  REQUIRE(dumper.start(config_in(d, SIGUSR2)).is_ok());
  CHECK(dumper.running());
  CHECK(dumper.handles_signal());
  const std::string f = d.path + "/s-" + std::to_string(::getpid()) + ".json";
  CHECK(dumper.current_path() == f);
  CHECK_FALSE(exists(f));  // nothing before the signal
  add(stats().global.launches, 5);
  uint64_t launches = stats().global.launches.load();
  REQUIRE(::kill(::getpid(), SIGUSR2) == 0);
  REQUIRE(wait_for([&] { return exists(f); }));
  json j = json::parse(slurp(f));
  CHECK(j["pid"] == ::getpid());
  CHECK(j["global"]["launches"].get<uint64_t>() >= launches);

  add(stats().global.oom_returns, 1234567);
  uint64_t oom = stats().global.oom_returns.load();
  uint64_t before = dumper.dumps_written();
  dumper.stop();
  CHECK_FALSE(dumper.running());
  CHECK(dumper.dumps_written() == before + 1);
  j = json::parse(slurp(f));
  CHECK(j["global"]["oom_returns"].get<uint64_t>() == oom);
  struct sigaction sa {};
  REQUIRE(sigaction(SIGUSR2, nullptr, &sa) == 0);
  CHECK(sa.sa_handler == SIG_IGN);
  REQUIRE(::kill(::getpid(), SIGUSR2) == 0);  // late signal: harmless
  dumper.stop();                              // idempotent
  CHECK(dumper.dumps_written() == before + 1);
  CHECK(d.entries().size() == 1);
}

TEST_CASE("dumper: one at a time; restart after stop", "[stats][dumper]") {
  TempDir d;
  StatsDumper a, b;
  REQUIRE(a.start(config_in(d, SIGUSR2)).is_ok());
  CHECK_FALSE(a.start(config_in(d, SIGUSR2)).is_ok());
  Status s = b.start(config_in(d, SIGUSR2));
  CHECK_FALSE(s.is_ok());
  CHECK(s.message().find("already running") != std::string::npos);
  a.stop();
  REQUIRE(b.start(config_in(d, SIGUSR2)).is_ok());
  CHECK(b.handles_signal());
  b.stop();
}

TEST_CASE("dumper: periodic dumps without signals", "[stats][dumper]") {
  TempDir d;
  StatsConfig c = config_in(d, 0);  // "off": no handler at all
  c.interval_s = 0.02;
  StatsDumper dumper;
  REQUIRE(dumper.start(c).is_ok());
  CHECK_FALSE(dumper.handles_signal());
  CHECK(wait_for([&] { return dumper.dumps_written() >= 5; }));
  dumper.stop();
  CHECK(exists(dumper.current_path()));
}

TEST_CASE("dumper: a multi-threaded signal storm; a reader never sees a partial file", "[stats][dumper]") {
  TempDir d;
  StatsDumper dumper;
  REQUIRE(dumper.start(config_in(d, SIGUSR2)).is_ok());
  const std::string f = dumper.current_path();
  REQUIRE(::kill(::getpid(), SIGUSR2) == 0);
  REQUIRE(wait_for([&] { return exists(f); }));

  std::atomic<bool> done{false};
  std::atomic<int> bad_reads{0}, reads{0};
  std::thread reader([&] {
    while (!done.load()) {
      std::string text = slurp(f);
      if (!json::accept(text)) bad_reads.fetch_add(1);
      reads.fetch_add(1);
    }
  });
  std::vector<std::thread> senders;
  std::atomic<uint64_t> work{0};
  for (int t = 0; t < 8; ++t) {
    senders.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        add(stats().global.launches, 1);  // the pool's side, concurrently
        if (i % 4 == 0) ::kill(::getpid(), SIGUSR2);
        work.fetch_add(1);
      }
    });
  }
  for (auto& t : senders) t.join();
  CHECK(work.load() == 16000);
  uint64_t after_storm = dumper.dumps_written();
  REQUIRE(::kill(::getpid(), SIGUSR2) == 0);
  CHECK(wait_for([&] { return dumper.dumps_written() > after_storm; }));
  done.store(true);
  reader.join();
  CHECK(reads.load() > 0);
  CHECK(bad_reads.load() == 0);
  CHECK(dumper.dumps_written() >= 2);
  dumper.stop();
  CHECK(d.entries().size() == 1);  // no temp files left behind
}

namespace {
std::atomic<int> g_app_handler_calls{0};
void app_handler(int) { g_app_handler_calls.fetch_add(1); }
}  // namespace

TEST_CASE("dumper: an application's own handler is left alone", "[stats][dumper]") {
  TempDir d;
  struct sigaction app {}, old {};
  app.sa_handler = &app_handler;
  sigemptyset(&app.sa_mask);
  REQUIRE(sigaction(SIGUSR2, &app, &old) == 0);
  StatsDumper dumper;
  REQUIRE(dumper.start(config_in(d, SIGUSR2)).is_ok());
  CHECK_FALSE(dumper.handles_signal());
  int before = g_app_handler_calls.load();
  REQUIRE(::kill(::getpid(), SIGUSR2) == 0);
  CHECK(wait_for([&] { return g_app_handler_calls.load() == before + 1; }));
  dumper.stop();  // the final dump still happens
  CHECK(exists(dumper.current_path()));
  struct sigaction now {};
  REQUIRE(sigaction(SIGUSR2, nullptr, &now) == 0);
  CHECK(now.sa_handler == &app_handler);  // not replaced by SIG_IGN
  REQUIRE(sigaction(SIGUSR2, &old, nullptr) == 0);
}

TEST_CASE("dumper: after fork the child dumps its own pid's file on a signal and at stop", "[stats][dumper][fork]") {
  TempDir d;
  StatsDumper dumper;
  REQUIRE(dumper.start(config_in(d, SIGUSR2)).is_ok());
  const std::string parent_file = dumper.current_path();
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // No Catch2 in the child: exit codes say what failed.
    const std::string mine = d.path + "/s-" + std::to_string(::getpid()) + ".json";
    if (dumper.current_path() != mine) ::_exit(10);
    if (!dumper.running() || !dumper.handles_signal()) ::_exit(11);
    ::kill(::getpid(), SIGUSR2);
    if (!wait_for([&] { return exists(mine); })) ::_exit(12);
    json j = json::parse(slurp(mine), nullptr, false);
    if (j.is_discarded() || j["pid"] != ::getpid()) ::_exit(13);
    add(stats().global.evictions, 777);
    uint64_t ev = stats().global.evictions.load();
    dumper.stop();
    j = json::parse(slurp(mine), nullptr, false);
    if (j.is_discarded() || j["global"]["evictions"].get<uint64_t>() != ev) ::_exit(14);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  const std::string child_file = d.path + "/s-" + std::to_string(child) + ".json";
  REQUIRE(exists(child_file));
  CHECK(json::parse(slurp(child_file))["pid"] == child);
  CHECK_FALSE(exists(parent_file));  // the child's signal did not make the parent dump
  // The parent's dumper still works after the fork.
  REQUIRE(::kill(::getpid(), SIGUSR2) == 0);
  CHECK(wait_for([&] { return exists(parent_file); }));
  dumper.stop();
}
