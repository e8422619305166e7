// Config parsing and validation: the default, the presets, every error path
// (each message names the source, the JSON path, what was expected and what
// was found), the environment, the filesystem checks and rule matching.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "base/config.hpp"

using namespace vstack;

namespace {

std::string error_of(const std::string& text, const char* source = "t.json") {
  auto r = parse_config(text, source);
  if (r.is_ok()) return "<parsed without error>";
  CHECK(r.status().code() == Code::config_error);
  return r.status().message();
}

Config parsed(const std::string& text) {
  auto r = parse_config(text, "t.json");
  INFO(r.status().message());
  REQUIRE(r.is_ok());
  return r.value();
}

// A valid document with `tiers` replaced.
std::string with_tiers(const std::string& tiers) { return R"({"page_mb": 32, "tiers": )" + tiers + "}"; }

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/vstack-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { (void)std::system(("rm -rf '" + path + "'").c_str()); }
};

void expect_same(const Config& a, const Config& b) {
  CHECK(a.page_bytes == b.page_bytes);
  CHECK(a.eviction == b.eviction);
  CHECK(a.overcommit == b.overcommit);
  CHECK(a.gpu_reserve_bytes == b.gpu_reserve_bytes);
  CHECK(a.host_share == b.host_share);
  CHECK(a.rules.size() == b.rules.size());
  CHECK(a.stats.signal == b.stats.signal);
  CHECK(a.stats.path == b.stats.path);
  CHECK(a.stats.interval_s == b.stats.interval_s);
  CHECK(a.log_level == b.log_level);
  REQUIRE(a.tiers.size() == b.tiers.size());
  for (size_t i = 0; i < a.tiers.size(); ++i) {
    CHECK(a.tiers[i].kind == b.tiers[i].kind);
    CHECK(a.tiers[i].device == b.tiers[i].device);
    CHECK(a.tiers[i].numa_node == b.tiers[i].numa_node);
    CHECK(a.tiers[i].path == b.tiers[i].path);
    CHECK(a.tiers[i].capacity_bytes == b.tiers[i].capacity_bytes);
    CHECK(a.tiers[i].capacity_auto == b.tiers[i].capacity_auto);
  }
}

}  // namespace

TEST_CASE("embedded default: gpu tier auto + host tier auto", "[config]") {
  Config c = default_config();
  REQUIRE(c.tiers.size() == 2);
  CHECK(c.tiers[0].kind == TierKind::gpu);
  CHECK(c.tiers[0].capacity_auto);
  CHECK(c.tiers[1].kind == TierKind::host);
  CHECK(c.tiers[1].capacity_auto);
  CHECK(c.page_bytes == 32 * kMiB);
  CHECK(c.eviction == "lru");
  CHECK(c.rules.empty());
  CHECK(c.stats.signal == SIGUSR1);
  CHECK(c.stats.path == "/tmp/vstack-%p.json");
}

TEST_CASE("configs/default.json equals the embedded default", "[config]") {
  auto r = load_config("configs/default.json");
  INFO(r.status().message());
  REQUIRE(r.is_ok());
  expect_same(r.value(), default_config());
  CHECK(r.value().source == "configs/default.json");
  // An empty object is the default too.
  expect_same(parsed("{}"), default_config());
}

TEST_CASE("the presets load", "[config]") {
  for (const char* f : {"configs/half.json", "configs/demo.json", "configs/ci.json"}) {
    auto r = load_config(f);
    INFO(f << ": " << r.status().message());
    REQUIRE(r.is_ok());
    CHECK(r.value().tiers.front().kind == TierKind::gpu);
  }
  auto ci = load_config("configs/ci.json");
  REQUIRE(ci.is_ok());
  CHECK(ci.value().page_bytes == 2 * kMiB);
  CHECK(ci.value().tiers[0].capacity_bytes == 64 * kMiB);  // 0.0625 GB
  CHECK_FALSE(ci.value().tiers[0].capacity_auto);
  CHECK(ci.value().tiers[1].capacity_bytes == 256 * kMiB);
  auto demo = load_config("configs/demo.json");
  REQUIRE(demo.is_ok());
  CHECK(demo.value().tiers[0].capacity_bytes == kGiB);
  CHECK(demo.value().tiers[1].capacity_bytes == 8 * kGiB);
}

TEST_CASE("a full config parses into every field", "[config]") {
  Config c = parsed(R"({
    "_comment": "ignored",
    "page_mb": 64, "gpu_reserve_gb": 1.5, "host_share": 0.25,
    "tiers": [
      {"kind": "gpu", "device": 1, "capacity_gb": 8},
      {"kind": "peer", "device": 0, "capacity_gb": "auto"},
      {"kind": "host", "numa_node": 1, "capacity_gb": 0.5},
      {"kind": "nvme", "path": "/var/tmp/vstack", "capacity_gb": 256}
    ],
    "policy": {"eviction": "lru", "overcommit": true},
    "rules": [{"match": {"min_bytes": 0, "max_bytes": 4096, "ipc": false}, "action": "pin_gpu"},
              {"action": "opaque"}],
    "stats": {"signal": "SIGUSR2", "path": "/tmp/s-%p-%%.json", "interval_s": 2.5},
    "log": {"level": "debug"}
  })");
  CHECK(c.page_bytes == 64 * kMiB);
  CHECK(c.gpu_reserve_bytes == 3 * kGiB / 2);
  CHECK(c.host_share == 0.25);
  REQUIRE(c.tiers.size() == 4);
  CHECK(c.tiers[0].device == 1);
  CHECK(c.tiers[0].capacity_bytes == 8 * kGiB);
  CHECK(c.tiers[1].kind == TierKind::peer);
  CHECK(c.tiers[1].capacity_auto);
  CHECK(c.tiers[2].numa_node == 1);
  CHECK(c.tiers[2].capacity_bytes == kGiB / 2);
  CHECK(c.tiers[3].path == "/var/tmp/vstack");
  CHECK(c.overcommit);
  REQUIRE(c.rules.size() == 2);
  CHECK(c.rules[0].action == RuleAction::pin_gpu);
  CHECK(*c.rules[0].max_bytes == 4096);
  CHECK(*c.rules[0].ipc == false);
  CHECK(c.rules[0].json_path == "$.rules[0]");
  CHECK(c.rules[1].action == RuleAction::opaque);
  CHECK_FALSE(c.rules[1].min_bytes);
  CHECK(c.stats.signal == SIGUSR2);
  CHECK(c.stats.path == "/tmp/s-%p-%%.json");
  CHECK(c.stats.interval_s == 2.5);
  CHECK(c.log_level == "debug");
}

TEST_CASE("signals by name and number", "[config]") {
  CHECK(parsed(R"({"stats": {"signal": "SIGUSR1"}})").stats.signal == SIGUSR1);
  CHECK(parsed(R"({"stats": {"signal": "USR2"}})").stats.signal == SIGUSR2);
  CHECK(parsed(R"({"stats": {"signal": "off"}})").stats.signal == 0);
  CHECK(parsed(R"({"stats": {"signal": 12}})").stats.signal == 12);
  std::string rt = R"({"stats": {"signal": )" + std::to_string(SIGRTMIN + 3) + "}}";
  CHECK(parsed(rt).stats.signal == SIGRTMIN + 3);
}

TEST_CASE("the example error message from the design", "[config][errors]") {
  std::string msg = error_of(with_tiers(R"([{"kind": "gpu"}, {"kind": "host", "capacity_gb": "lots"}])"), "tiers.json");
  CHECK(msg == R"(tiers.json: $.tiers[1].capacity_gb: expected a number > 0 or "auto", found "lots")");
}

TEST_CASE("every validation error names the path, the expectation and what was found", "[config][errors]") {
  struct Case {
    std::string json;
    std::string expected;  // substring of the message
  };
  const std::string gpu = R"({"kind": "gpu"})";
  const std::vector<Case> cases = {
      // syntax
      {"{\n  \"page_mb\": 32,\n  \"tiers\": }\n", "t.json: invalid JSON: parse error at line 3, column 12"},
      {"", "t.json: invalid JSON: parse error at line 1, column 1"},
      {R"({"page_mb": 32} trailing)", "invalid JSON: parse error at line 1"},
      {R"({"tiers": [{"kind": "gpu", "capacity_gb": 1e400}]})", "t.json: invalid JSON: number overflow parsing '1e400'"},
      // top level
      {"[]", "t.json: $: expected an object, found an array"},
      {R"({"tier": []})", R"($.tier: unknown key; expected one of: page_mb, gpu_reserve_gb, host_share, tiers, policy, rules, stats, log (did you mean "tiers"?))"},
      {R"({"page_mb": 32, "page_mb": 64})", "$.page_mb: duplicate key"},
      {R"({"tiers": [{"kind": "gpu", "kind": "host"}]})", "$.tiers[0].kind: duplicate key"},
      {R"({"rules": [{}, {"action": "opaque", "match": {"ipc": true, "ipc": false}}]})", "$.rules[1].match.ipc: duplicate key"},
      // page_mb
      {R"({"page_mb": 3})", "$.page_mb: expected an even integer in 2..1024 (MiB; a multiple of the 2 MiB granule), found 3"},
      {R"({"page_mb": 0})", "$.page_mb: expected an even integer in 2..1024"},
      {R"({"page_mb": 2048})", "found 2048"},
      {R"({"page_mb": "32"})", R"($.page_mb: expected an even integer in 2..1024 (MiB; a multiple of the 2 MiB granule), found "32")"},
      {R"({"page_mb": 32.5})", "$.page_mb: expected an even integer in 2..1024 (MiB; a multiple of the 2 MiB granule), found 32.5"},
      {R"({"page_mb": -2})", "found -2"},
      // gpu_reserve_gb, host_share
      {R"({"gpu_reserve_gb": -1})", "$.gpu_reserve_gb: expected a number of GB in 0..1024, found -1"},
      {R"({"gpu_reserve_gb": "2"})", R"($.gpu_reserve_gb: expected a number of GB in 0..1024, found "2")"},
      {R"({"host_share": 0})", "$.host_share: expected a fraction of host RAM, 0 < host_share < 1, found 0"},
      {R"({"host_share": 1})", "$.host_share: expected a fraction of host RAM, 0 < host_share < 1, found 1"},
      {R"({"host_share": null})", "$.host_share: expected a fraction of host RAM, 0 < host_share < 1, found null"},
      // tiers: shape
      {R"({"tiers": {}})", R"($.tiers: expected a non-empty array of tiers (the first of kind "gpu"), found an object)"},
      {R"({"tiers": []})", "$.tiers: expected a non-empty array of tiers"},
      {with_tiers("[" + gpu + ", {\"kind\":\"peer\",\"device\":1}, {\"kind\":\"peer\",\"device\":2}, "
                  "{\"kind\":\"peer\",\"device\":3}, {\"kind\":\"peer\",\"device\":4}, {\"kind\":\"peer\",\"device\":5}, "
                  "{\"kind\":\"peer\",\"device\":6}, {\"kind\":\"peer\",\"device\":7}, {\"kind\":\"host\"}]"),
       R"($.tiers: expected at most 8 tiers, found "9 tiers")"},
      {with_tiers("[" + gpu + ", 3]"), "$.tiers[1]: expected an object, found 3"},
      {with_tiers(R"([{"device": 0}])"), R"($.tiers[0].kind: missing; expected one of "gpu", "peer", "host", "nvme")"},
      {with_tiers("[" + gpu + R"(, {"kind": "ssd"}])"), R"($.tiers[1].kind: expected one of "gpu", "peer", "host", "nvme", found "ssd")"},
      {with_tiers("[" + gpu + R"(, {"kind": "host", "device": 1}])"), "$.tiers[1].device: unknown key; expected one of: kind, numa_node, capacity_gb"},
      {with_tiers(R"([{"kind": "gpu", "path": "/x"}])"), "$.tiers[0].path: unknown key; expected one of: kind, device, capacity_gb"},
      {with_tiers(R"([{"kind": "gpu", "capacty_gb": 2}])"), R"($.tiers[0].capacty_gb: unknown key; expected one of: kind, device, capacity_gb (did you mean "capacity_gb"?))"},
      // tiers: fields
      {with_tiers(R"([{"kind": "gpu", "capacity_gb": 0}])"), R"($.tiers[0].capacity_gb: expected a number > 0 or "auto", found 0)"},
      {with_tiers(R"([{"kind": "gpu", "capacity_gb": -4}])"), R"($.tiers[0].capacity_gb: expected a number > 0 or "auto", found -4)"},
      {with_tiers(R"([{"kind": "gpu", "capacity_gb": "AUTO"}])"), R"(found "AUTO")"},
      {with_tiers(R"([{"kind": "gpu", "capacity_gb": 0.01}])"), "$.tiers[0].capacity_gb: expected at least one page (32 MiB"},
      {with_tiers(R"([{"kind": "gpu", "device": -1}])"), "$.tiers[0].device: expected an integer in 0..1023, found -1"},
      {with_tiers(R"([{"kind": "gpu", "device": "0"}])"), R"($.tiers[0].device: expected an integer in 0..1023, found "0")"},
      {with_tiers(R"([{"kind": "gpu", "device": 1.5}])"), "$.tiers[0].device: expected an integer in 0..1023, found 1.5"},
      {with_tiers("[" + gpu + R"(, {"kind": "host", "numa_node": true}])"), "$.tiers[1].numa_node: expected an integer in 0..1023, found true"},
      {with_tiers("[" + gpu + R"(, {"kind": "nvme", "capacity_gb": 10}])"), "$.tiers[1].path: missing; expected an absolute directory path"},
      {with_tiers("[" + gpu + R"(, {"kind": "nvme", "path": "scratch", "capacity_gb": 10}])"), R"($.tiers[1].path: expected an absolute directory path, found "scratch")"},
      {with_tiers("[" + gpu + R"(, {"kind": "nvme", "path": "/s", "capacity_gb": "auto"}])"), R"($.tiers[1].capacity_gb: expected a number > 0 (nvme tiers need an explicit size), found "auto")"},
      {with_tiers("[" + gpu + R"(, {"kind": "nvme", "path": "/s"}])"), "$.tiers[1].capacity_gb: missing; expected a number > 0 (nvme tiers need an explicit size)"},
      // tiers: order and uniqueness
      {with_tiers(R"([{"kind": "host"}])"), R"($.tiers[0].kind: expected "gpu" (the first tier is the GPU being paged), found "host")"},
      {with_tiers("[" + gpu + R"(, {"kind": "gpu", "device": 1}])"), "$.tiers[1].kind: expected exactly one \"gpu\" tier, found a second one (the first is $.tiers[0])"},
      {with_tiers("[" + gpu + R"(, {"kind": "nvme", "path": "/s", "capacity_gb": 1}, {"kind": "host"}])"),
       R"($.tiers[2]: tiers must be ordered fastest first (gpu, peer, host, nvme); found "host" after "nvme" at $.tiers[1])"},
      {with_tiers("[" + gpu + R"(, {"kind": "host"}, {"kind": "peer", "device": 1}])"), R"($.tiers[2]: tiers must be ordered fastest first (gpu, peer, host, nvme); found "peer" after "host")"},
      {with_tiers("[" + gpu + R"(, {"kind": "peer", "device": 0}])"), "$.tiers[1]: device 0 is already used by $.tiers[0] (gpu)"},
      {with_tiers("[" + gpu + R"(, {"kind": "peer", "device": 1}, {"kind": "peer", "device": 1}])"), "$.tiers[2]: device 1 is already used by $.tiers[1] (peer)"},
      {with_tiers("[" + gpu + R"(, {"kind": "host"}, {"kind": "host", "numa_node": 0}])"), "$.tiers[2]: numa_node 0 is already used by $.tiers[1] (host)"},
      {with_tiers("[" + gpu + R"(, {"kind": "nvme", "path": "/a", "capacity_gb": 1}, {"kind": "nvme", "path": "/a", "capacity_gb": 1}])"),
       R"($.tiers[2]: path "/a" is already used by $.tiers[1] (nvme))"},
      // policy
      {R"({"policy": "lru"})", R"($.policy: expected an object, found "lru")"},
      {R"({"policy": {"eviction": "belady"}})", R"($.policy.eviction: "belady" (learned-trace eviction) is not implemented yet; expected "lru")"},
      {R"({"policy": {"eviction": "fifo"}})", R"($.policy.eviction: expected "lru", found "fifo")"},
      {R"({"policy": {"overcommit": "yes"}})", R"($.policy.overcommit: expected true or false, found "yes")"},
      {R"({"policy": {"prefetch": true}})", "$.policy.prefetch: unknown key; expected one of: eviction, overcommit"},
      // rules
      {R"({"rules": {}})", "$.rules: expected an array of rules, found an object"},
      {R"({"rules": [7]})", "$.rules[0]: expected an object, found 7"},
      {R"({"rules": [{"match": {}}]})", R"($.rules[0].action: missing; expected one of "passthrough", "pin_gpu", "opaque")"},
      {R"({"rules": [{"action": "pin"}]})", R"($.rules[0].action: expected one of "passthrough", "pin_gpu", "opaque", found "pin")"},
      {R"({"rules": [{"action": "opaque", "when": {}}]})", R"($.rules[0].when: unknown key; expected one of: match, action)"},
      {R"({"rules": [{"action": "opaque", "match": []}]})", "$.rules[0].match: expected an object, found an array"},
      {R"({"rules": [{"action": "opaque", "match": {"size": 1}}]})", "$.rules[0].match.size: unknown key; expected one of: min_bytes, max_bytes, ipc"},
      {R"({"rules": [{"action": "opaque", "match": {"min_bytes": -1}}]})", "$.rules[0].match.min_bytes: expected a non-negative integer (bytes), found -1"},
      {R"({"rules": [{"action": "opaque", "match": {"max_bytes": "1MiB"}}]})", R"($.rules[0].match.max_bytes: expected a non-negative integer (bytes), found "1MiB")"},
      {R"({"rules": [{"action": "opaque", "match": {"ipc": 1}}]})", "$.rules[0].match.ipc: expected true or false, found 1"},
      {R"({"rules": [{"action": "opaque", "match": {"min_bytes": 10, "max_bytes": 5}}]})", "$.rules[0].match.max_bytes: expected a value >= min_bytes (10), found 5"},
      // stats
      {R"({"stats": {"signal": "SIGKILL"}})", R"($.stats.signal: expected "SIGUSR1", "SIGUSR2", "off", or a signal number (SIGUSR1 = 10, SIGUSR2 = 12, or real-time)"},
      {R"({"stats": {"signal": 9}})", "$.stats.signal: expected \"SIGUSR1\""},
      {R"({"stats": {"signal": -10}})", "found -10"},
      {R"({"stats": {"signal": 10.0}})", "found 10.0"},
      {R"({"stats": {"path": "vstack.json"}})", R"($.stats.path: expected an absolute path ("%p" = pid), found "vstack.json")"},
      {R"({"stats": {"path": "/tmp/v-%d.json"}})", R"($.stats.path: expected a path whose only '%' sequences are "%p" (pid) and "%%", found "/tmp/v-%d.json")"},
      {R"({"stats": {"path": "/tmp/"}})", R"($.stats.path: expected a file path, not a directory, found "/tmp/")"},
      {R"({"stats": {"path": 5}})", "$.stats.path: expected an absolute path"},
      {R"({"stats": {"interval_s": -1}})", "$.stats.interval_s: expected a number of seconds in 0..86400 (0 = no periodic dump), found -1"},
      {R"({"stats": {"interval": 1}})", R"($.stats.interval: unknown key; expected one of: signal, path, interval_s (did you mean "interval_s"?))"},
      // log
      {R"({"log": {"level": "verbose"}})", R"($.log.level: expected one of trace, debug, info, warn, error, critical, off, found "verbose")"},
      {R"({"log": {"file": "x"}})", "$.log.file: unknown key; expected one of: level"},
      {R"({"log": "info"})", R"($.log: expected an object, found "info")"},
  };
  for (const Case& c : cases) {
    INFO("config: " << c.json);
    std::string msg = error_of(c.json);
    INFO("message: " << msg);
    CHECK(msg.find(c.expected) != std::string::npos);
    CHECK(msg.rfind("t.json: ", 0) == 0);  // names the source
  }
}

TEST_CASE("independent errors are all reported, one per line", "[config][errors]") {
  std::string msg = error_of(R"({"page_mb": 5, "log": {"level": "loud"}, "stats": {"signal": "SIGHUP"}})");
  CHECK(msg.find("t.json: $.page_mb: expected") != std::string::npos);
  CHECK(msg.find("\nt.json: $.log.level: expected") != std::string::npos);
  CHECK(msg.find("\nt.json: $.stats.signal: expected") != std::string::npos);
  // A tier that does not parse is not also reported as out of order.
  msg = error_of(with_tiers(R"([{"kind": "gpu"}, {"kind": "nvme"}, {"kind": "host"}])"));
  CHECK(msg.find("ordered") == std::string::npos);
  CHECK(msg.find("$.tiers[1].path: missing") != std::string::npos);
}

TEST_CASE("load_config names the file it cannot read", "[config][errors]") {
  auto r = load_config("/nonexistent/vstack.json");
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == Code::config_error);
  CHECK(r.status().message() == "/nonexistent/vstack.json: cannot open the config file: No such file or directory");
}

TEST_CASE("config_from_environment reads VSTACK_CONFIG, VSTACK_LOG, VSTACK_STATS_PATH", "[config][env]") {
  TempDir dir;
  const std::string file = dir.path + "/c.json";
  std::ofstream(file) << R"({"page_mb": 8, "log": {"level": "info"}})";
  ::unsetenv("VSTACK_LOG");
  ::unsetenv("VSTACK_STATS_PATH");

  ::unsetenv("VSTACK_CONFIG");
  auto d = config_from_environment();
  REQUIRE(d.is_ok());
  expect_same(d.value(), default_config());

  ::setenv("VSTACK_CONFIG", file.c_str(), 1);
  auto c = config_from_environment();
  REQUIRE(c.is_ok());
  CHECK(c.value().page_bytes == 8 * kMiB);
  CHECK(c.value().log_level == "info");
  CHECK(c.value().source == file);

  ::setenv("VSTACK_LOG", "trace", 1);
  ::setenv("VSTACK_STATS_PATH", "/tmp/other-%p.json", 1);
  c = config_from_environment();
  REQUIRE(c.is_ok());
  CHECK(c.value().log_level == "trace");
  CHECK(c.value().stats.path == "/tmp/other-%p.json");

  ::setenv("VSTACK_LOG", "chatty", 1);
  c = config_from_environment();
  REQUIRE_FALSE(c.is_ok());
  CHECK(c.status().message() == "VSTACK_LOG: expected one of trace, debug, info, warn, error, critical, off, found \"chatty\"");
  ::unsetenv("VSTACK_LOG");

  ::setenv("VSTACK_STATS_PATH", "relative.json", 1);
  c = config_from_environment();
  REQUIRE_FALSE(c.is_ok());
  CHECK(c.status().message().rfind("VSTACK_STATS_PATH: expected an absolute path", 0) == 0);
  ::unsetenv("VSTACK_STATS_PATH");

  std::ofstream(file) << R"({"page_mb": 7})";
  c = config_from_environment();
  REQUIRE_FALSE(c.is_ok());
  CHECK(c.status().message().find(file + ": $.page_mb: expected") == 0);
  ::unsetenv("VSTACK_CONFIG");
}

TEST_CASE("check_config_paths: nvme directories and the stats directory", "[config][fs]") {
  TempDir dir;
  const std::string file = dir.path + "/plain";
  std::ofstream(file) << "x";
  auto make = [&](const std::string& nvme, const std::string& stats) {
    return parsed(with_tiers(R"([{"kind": "gpu"}, {"kind": "nvme", "path": ")" + nvme + R"(", "capacity_gb": 1}])")
                      .insert(1, R"("stats": {"path": ")" + stats + R"("}, )"));
  };
  CHECK(check_config_paths(make(dir.path, dir.path + "/s-%p.json")).is_ok());
  CHECK(check_config_paths(default_config()).is_ok());

  Status s = check_config_paths(make(dir.path + "/missing", dir.path + "/s.json"));
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.message() == "t.json: $.tiers[1].path: expected an existing writable directory, found \"" + dir.path +
                           "/missing\" (No such file or directory)");
  s = check_config_paths(make(file, dir.path + "/s.json"));
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.message().find("$.tiers[1].path: expected an existing writable directory") != std::string::npos);
  CHECK(s.message().find("(not a directory)") != std::string::npos);
  s = check_config_paths(make(dir.path, dir.path + "/nodir/s.json"));
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.message().find("t.json: $.stats.path: expected an existing writable directory") == 0);
}

TEST_CASE("match_rule: first match wins, bounds inclusive, ipc", "[config][rules]") {
  Config c = parsed(R"({"rules": [
      {"match": {"ipc": true}, "action": "passthrough"},
      {"match": {"max_bytes": 1023}, "action": "passthrough"},
      {"match": {"min_bytes": 1024, "max_bytes": 4096}, "action": "pin_gpu"},
      {"match": {"min_bytes": 1048576}, "action": "opaque"}]})");
  CHECK(match_rule(default_config(), 100, false) == nullptr);
  const Rule* r = match_rule(c, 1u << 30, true);
  REQUIRE(r != nullptr);
  CHECK(r->json_path == "$.rules[0]");
  r = match_rule(c, 1023, false);
  REQUIRE(r != nullptr);
  CHECK(r->json_path == "$.rules[1]");
  r = match_rule(c, 1024, false);
  REQUIRE(r != nullptr);
  CHECK(r->action == RuleAction::pin_gpu);
  r = match_rule(c, 4096, false);
  REQUIRE(r != nullptr);
  CHECK(r->json_path == "$.rules[2]");
  CHECK(match_rule(c, 4097, false) == nullptr);
  CHECK(match_rule(c, 1048575, false) == nullptr);
  r = match_rule(c, 1048576, false);
  REQUIRE(r != nullptr);
  CHECK(r->action == RuleAction::opaque);
  // A rule without a match matches everything.
  Config all = parsed(R"({"rules": [{"action": "passthrough"}]})");
  CHECK(match_rule(all, 0, false) != nullptr);
  CHECK(match_rule(all, 1ull << 40, true) != nullptr);
}

TEST_CASE("names of enums", "[config]") {
  CHECK(std::string(tier_kind_name(TierKind::gpu)) == "gpu");
  CHECK(std::string(tier_kind_name(TierKind::peer)) == "peer");
  CHECK(std::string(tier_kind_name(TierKind::host)) == "host");
  CHECK(std::string(tier_kind_name(TierKind::nvme)) == "nvme");
  CHECK(std::string(rule_action_name(RuleAction::passthrough)) == "passthrough");
  CHECK(std::string(rule_action_name(RuleAction::pin_gpu)) == "pin_gpu");
  CHECK(std::string(rule_action_name(RuleAction::opaque)) == "opaque");
}

TEST_CASE("mutated configs never throw or crash; every failure names the source", "[config][fuzz]") {
  auto base = load_config("configs/half.json");
  REQUIRE(base.is_ok());
  std::ifstream in("configs/half.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(!text.empty());
  const std::string alphabet = "{}[]:,\"0123456789.-eE truefalsnul\\/%_abcxyz\n";
  uint64_t state = 0x9E3779B97F4A7C15ull;  // fixed seed: a failure reproduces
  auto next = [&state] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  int ok = 0, errors = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string t = text;
    int edits = 1 + static_cast<int>(next() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = next() % t.size();
      switch (next() % 3) {
        case 0: t[pos] = alphabet[next() % alphabet.size()]; break;
        case 1: t.erase(pos, 1 + next() % 8); break;
        default: t.insert(pos, 1, alphabet[next() % alphabet.size()]); break;
      }
      if (t.empty()) t = "{";
    }
    auto r = parse_config(t, "fuzz.json");
    if (r.is_ok()) {
      ++ok;
      REQUIRE(!r.value().tiers.empty());
      CHECK(r.value().tiers[0].kind == TierKind::gpu);
    } else {
      ++errors;
      INFO(t);
      CHECK(r.status().code() == Code::config_error);
      CHECK(r.status().message().rfind("fuzz.json: ", 0) == 0);
    }
  }
  CHECK(errors > 0);
  // Deep nesting: an error, not a stack overflow.
  std::string deep(100000, '[');
  CHECK_FALSE(parse_config(deep, "deep.json").is_ok());
  std::string deep_ok = "{\"_comment\": " + std::string(20000, '[') + std::string(20000, ']') + "}";
  CHECK(parse_config(deep_ok, "deep.json").is_ok());
}
