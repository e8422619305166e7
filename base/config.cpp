// Parsing and validation of the vstack JSON config (schema: configs/SCHEMA.md).
//
// Every check reports "<source>: <json path>: expected <what>, found <what>".
// Errors are collected, not thrown: one run reports every independent mistake
// (one per line), and cross-field checks (tier order, min <= max) run only on
// fields that parsed. nlohmann::json exceptions are caught here and never leave
// this file.
#include "base/config.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/stats.hpp"

namespace vstack {

const char* tier_kind_name(TierKind k) {
  switch (k) {
    case TierKind::gpu: return "gpu";
    case TierKind::peer: return "peer";
    case TierKind::host: return "host";
    case TierKind::nvme: return "nvme";
  }
  return "unknown";
}

const char* rule_action_name(RuleAction a) {
  switch (a) {
    case RuleAction::passthrough: return "passthrough";
    case RuleAction::pin_gpu: return "pin_gpu";
    case RuleAction::opaque: return "opaque";
  }
  return "unknown";
}

namespace {

using json = nlohmann::json;

// Limits, with the reason behind each.
constexpr int64_t kMinPageMb = 2;       // the VMM granule on every GPU we target
constexpr int64_t kMaxPageMb = 1024;    // larger pages make a single fault move > 1 GiB
constexpr double kMaxCapacityGb = 1 << 20;  // 1 PiB: far beyond any tier, keeps bytes in uint64
constexpr double kMaxReserveGb = 1024;
constexpr double kMaxIntervalS = 86400;
constexpr const char* kLogLevels = "trace, debug, info, warn, error, critical, off";

bool is_log_level(std::string_view s) {
  for (const char* l : {"trace", "debug", "info", "warn", "error", "critical", "off"})
    if (s == l) return true;
  return false;
}

// A short rendering of a JSON value for "found ...".
std::string describe(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::discarded: return "nothing";
    default: break;
  }
  std::string s = v.dump();
  if (s.size() > 48) s = s.substr(0, 45) + "...";
  return s;
}

// "$.a" for identifier-like keys, "$[\"a b\"]" otherwise.
std::string child(const std::string& path, const std::string& key) {
  bool plain = !key.empty();
  for (char ch : key)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_')) plain = false;
  if (plain) return path + "." + key;
  return path + "[" + json(key).dump() + "]";
}
std::string child(const std::string& path, size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1] ? 1u : 0u)});
      diag = up;
    }
  }
  return row[b.size()];
}

// Duplicate keys: nlohmann keeps the last one silently; we want an error. The
// parser callback sees every key; a stack of frames rebuilds the JSON path
// (only when there is an error to report: each frame holds its own segment, so
// deep nesting stays linear).
class DuplicateKeyFinder {
 public:
  explicit DuplicateKeyFinder(std::vector<std::string>* errors) : errors_(errors) {}

  bool operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start: {
        std::string segment;
        if (!frames_.empty()) {
          const Frame& parent = frames_.back();
          segment = parent.is_object ? child("", parent.key) : child("", parent.count);
        }
        frames_.push_back({event == json::parse_event_t::object_start, std::move(segment), {}, {}, 0});
        break;
      }
      case json::parse_event_t::key: {
        Frame& f = frames_.back();
        f.key = parsed.get<std::string>();
        if (!f.keys.insert(f.key).second)
          errors_->push_back(child(path(), f.key) + ": duplicate key (each key may appear once)");
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        frames_.pop_back();
        if (!frames_.empty() && !frames_.back().is_object) ++frames_.back().count;
        break;
      case json::parse_event_t::value:
        if (!frames_.empty() && !frames_.back().is_object) ++frames_.back().count;
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool is_object;
    std::string segment;  // ".key" or "[i]": where this container sits in its parent
    std::set<std::string> keys;
    std::string key;  // objects: the key whose value comes next
    size_t count;     // arrays: elements completed so far
  };
  std::string path() const {
    std::string p = "$";
    for (const Frame& f : frames_) p += f.segment;
    return p;
  }
  std::vector<Frame> frames_;
  std::vector<std::string>* errors_;
};

class Validator {
 public:
  std::vector<std::string> errors;

  void fail(const std::string& path, std::string_view expected, const json& found) {
    errors.push_back(path + ": expected " + std::string(expected) + ", found " + describe(found));
  }
  void fail(const std::string& path, std::string_view message) {
    errors.push_back(path + ": " + std::string(message));
  }

  // Checks that `v` is an object whose keys are all in `allowed` ("_comment"
  // is accepted everywhere and ignored).
  bool object(const json& v, const std::string& path, std::initializer_list<std::string_view> allowed) {
    if (!v.is_object()) {
      fail(path, "an object", v);
      return false;
    }
    for (const auto& [key, value] : v.items()) {
      if (key == "_comment") continue;
      bool known = false;
      for (auto a : allowed) known = known || key == a;
      if (known) continue;
      std::string list, guess;
      size_t best = 3;
      for (auto a : allowed) {
        list += (list.empty() ? "" : ", ") + std::string(a);
        size_t d = edit_distance(key, a);
        if (d < best) best = d, guess = a;
      }
      std::string msg = "unknown key; expected one of: " + list;
      if (!guess.empty()) msg += " (did you mean \"" + guess + "\"?)";
      fail(child(path, key), msg);
    }
    return true;
  }

  // Integer in [lo, hi]. Writes *out only when valid.
  bool integer(const json& v, const std::string& path, int64_t lo, int64_t hi, int64_t* out,
               std::string_view expected = {}) {
    std::string exp = expected.empty()
                          ? "an integer in " + std::to_string(lo) + ".." + std::to_string(hi)
                          : std::string(expected);
    bool ok = v.is_number_integer();
    int64_t x = 0;
    if (ok && v.is_number_unsigned())
      ok = v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX);
    if (ok) x = v.get<int64_t>();
    if (!ok || x < lo || x > hi) {
      fail(path, exp, v);
      return false;
    }
    *out = x;
    return true;
  }

  bool uint64(const json& v, const std::string& path, uint64_t* out) {
    if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0)) {
      fail(path, "a non-negative integer (bytes)", v);
      return false;
    }
    *out = v.get<uint64_t>();
    return true;
  }

  // Number in the interval; lo_open/hi_open make an end exclusive.
  bool number(const json& v, const std::string& path, double lo, bool lo_open, double hi, bool hi_open,
              double* out, std::string_view expected) {
    bool ok = v.is_number();
    double x = ok ? v.get<double>() : 0;
    ok = ok && std::isfinite(x) && (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
    if (!ok) {
      fail(path, expected, v);
      return false;
    }
    *out = x;
    return true;
  }

  bool boolean(const json& v, const std::string& path, bool* out) {
    if (!v.is_boolean()) {
      fail(path, "true or false", v);
      return false;
    }
    *out = v.get<bool>();
    return true;
  }
};

// Validates a stats path pattern: absolute, '%' only as "%p" or "%%".
std::string stats_path_problem(std::string_view p) {
  if (p.empty() || p[0] != '/') return "an absolute path (\"%p\" = pid)";
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] != '%') continue;
    if (i + 1 < p.size() && (p[i + 1] == 'p' || p[i + 1] == '%')) {
      ++i;
      continue;
    }
    return "a path whose only '%' sequences are \"%p\" (pid) and \"%%\"";
  }
  if (p.back() == '/') return "a file path, not a directory";
  return {};
}

int tier_rank(TierKind k) { return static_cast<int>(k); }  // gpu < peer < host < nvme

void parse_tier(Validator& val, const json& t, const std::string& path, uint64_t page_bytes,
                TierConfig* out, bool* ok) {
  *ok = false;
  if (!t.is_object()) {
    val.fail(path, "an object", t);
    return;
  }
  auto kit = t.find("kind");
  if (kit == t.end()) {
    val.fail(child(path, "kind"), "missing; expected one of \"gpu\", \"peer\", \"host\", \"nvme\"");
    return;
  }
  TierKind kind;
  const json& k = *kit;
  if (k == "gpu") kind = TierKind::gpu;
  else if (k == "peer") kind = TierKind::peer;
  else if (k == "host") kind = TierKind::host;
  else if (k == "nvme") kind = TierKind::nvme;
  else {
    val.fail(child(path, "kind"), "one of \"gpu\", \"peer\", \"host\", \"nvme\"", k);
    return;
  }
  size_t before = val.errors.size();
  switch (kind) {
    case TierKind::gpu:
    case TierKind::peer: val.object(t, path, {"kind", "device", "capacity_gb"}); break;
    case TierKind::host: val.object(t, path, {"kind", "numa_node", "capacity_gb"}); break;
    case TierKind::nvme: val.object(t, path, {"kind", "path", "capacity_gb"}); break;
  }
  TierConfig tc;
  tc.kind = kind;
  int64_t i = 0;
  if (auto it = t.find("device"); it != t.end() && val.integer(*it, child(path, "device"), 0, 1023, &i))
    tc.device = static_cast<int>(i);
  if (auto it = t.find("numa_node"); it != t.end() && val.integer(*it, child(path, "numa_node"), 0, 1023, &i))
    tc.numa_node = static_cast<int>(i);
  if (kind == TierKind::nvme) {
    auto it = t.find("path");
    if (it == t.end()) val.fail(child(path, "path"), "missing; expected an absolute directory path");
    else if (!it->is_string() || it->get<std::string>().empty() || it->get<std::string>()[0] != '/')
      val.fail(child(path, "path"), "an absolute directory path", *it);
    else
      tc.path = it->get<std::string>();
  }
  // capacity_gb: a number > 0, or "auto" (the default) except on nvme, where
  // "all free disk space" is never what anyone wants.
  std::string cpath = child(path, "capacity_gb");
  auto cit = t.find("capacity_gb");
  bool auto_ok = kind != TierKind::nvme;
  std::string expected = auto_ok ? "a number > 0 or \"auto\"" : "a number > 0 (nvme tiers need an explicit size)";
  if (cit == t.end()) {
    if (auto_ok) tc.capacity_auto = true;
    else val.fail(cpath, "missing; expected " + expected);
  } else if (cit->is_string() && *cit == "auto" && auto_ok) {
    tc.capacity_auto = true;
  } else {
    double gb = 0;
    if (val.number(*cit, cpath, 0, true, kMaxCapacityGb, false, &gb, expected)) {
      tc.capacity_bytes = static_cast<uint64_t>(std::llround(gb * static_cast<double>(kGiB)));
      if (page_bytes != 0 && tc.capacity_bytes < page_bytes)
        val.fail(cpath, "at least one page (" + std::to_string(page_bytes / kMiB) + " MiB = " +
                            std::to_string(static_cast<double>(page_bytes) / kGiB) + " GB)", *cit);
    }
  }
  *out = std::move(tc);
  *ok = val.errors.size() == before;
}

void parse_tiers(Validator& val, const json& v, uint64_t page_bytes, Config* c) {
  const std::string path = "$.tiers";
  if (!v.is_array() || v.empty()) {
    val.fail(path, "a non-empty array of tiers (the first of kind \"gpu\")", v);
    return;
  }
  if (v.size() > static_cast<size_t>(kMaxTiers)) {
    val.fail(path, "at most " + std::to_string(kMaxTiers) + " tiers", json(std::to_string(v.size()) + " tiers"));
    return;
  }
  std::vector<TierConfig> tiers(v.size());
  bool all_ok = true;
  for (size_t i = 0; i < v.size(); ++i) {
    bool ok = false;
    parse_tier(val, v[i], child(path, i), page_bytes, &tiers[i], &ok);
    all_ok = all_ok && ok;
  }
  if (!all_ok) return;
  // Cross-tier checks, on tiers that parsed.
  if (tiers[0].kind != TierKind::gpu)
    val.fail(child(child(path, 0), "kind"), "\"gpu\" (the first tier is the GPU being paged)",
             json(tier_kind_name(tiers[0].kind)));
  for (size_t i = 1; i < tiers.size(); ++i) {
    const std::string p = child(path, i);
    const TierConfig& t = tiers[i];
    if (t.kind == TierKind::gpu) {
      val.fail(child(p, "kind"), "expected exactly one \"gpu\" tier, found a second one (the first is $.tiers[0])");
      continue;
    }
    if (tier_rank(t.kind) < tier_rank(tiers[i - 1].kind))
      val.fail(p, std::string("tiers must be ordered fastest first (gpu, peer, host, nvme); found \"") +
                      tier_kind_name(t.kind) + "\" after \"" + tier_kind_name(tiers[i - 1].kind) + "\" at " +
                      child(path, i - 1));
    for (size_t j = 0; j < i; ++j) {
      const TierConfig& o = tiers[j];
      bool dup = false;
      std::string what;
      if (t.kind == TierKind::peer && (o.kind == TierKind::peer || o.kind == TierKind::gpu) && o.device == t.device)
        dup = true, what = "device " + std::to_string(t.device);
      if (t.kind == TierKind::host && o.kind == TierKind::host && o.numa_node == t.numa_node)
        dup = true, what = "numa_node " + std::to_string(t.numa_node);
      if (t.kind == TierKind::nvme && o.kind == TierKind::nvme && o.path == t.path)
        dup = true, what = "path \"" + t.path + "\"";
      if (dup) {
        val.fail(p, what + " is already used by " + child(path, j) + " (" + tier_kind_name(o.kind) + ")");
        break;
      }
    }
  }
  c->tiers = std::move(tiers);
}

void parse_rules(Validator& val, const json& v, Config* c) {
  const std::string path = "$.rules";
  if (!v.is_array()) {
    val.fail(path, "an array of rules", v);
    return;
  }
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = child(path, i);
    const json& r = v[i];
    if (!val.object(r, p, {"match", "action"})) continue;
    Rule rule;
    rule.json_path = p;
    bool ok = true;
    auto ait = r.find("action");
    if (ait == r.end()) {
      val.fail(child(p, "action"), "missing; expected one of \"passthrough\", \"pin_gpu\", \"opaque\"");
      ok = false;
    } else if (*ait == "passthrough") rule.action = RuleAction::passthrough;
    else if (*ait == "pin_gpu") rule.action = RuleAction::pin_gpu;
    else if (*ait == "opaque") rule.action = RuleAction::opaque;
    else {
      val.fail(child(p, "action"), "one of \"passthrough\", \"pin_gpu\", \"opaque\"", *ait);
      ok = false;
    }
    if (auto mit = r.find("match"); mit != r.end()) {
      const std::string mp = child(p, "match");
      if (val.object(*mit, mp, {"min_bytes", "max_bytes", "ipc"})) {
        uint64_t b = 0;
        bool flag = false;
        if (auto it = mit->find("min_bytes"); it != mit->end()) {
          if (val.uint64(*it, child(mp, "min_bytes"), &b)) rule.min_bytes = b;
          else ok = false;
        }
        if (auto it = mit->find("max_bytes"); it != mit->end()) {
          if (val.uint64(*it, child(mp, "max_bytes"), &b)) rule.max_bytes = b;
          else ok = false;
        }
        if (auto it = mit->find("ipc"); it != mit->end()) {
          if (val.boolean(*it, child(mp, "ipc"), &flag)) rule.ipc = flag;
          else ok = false;
        }
        if (rule.min_bytes && rule.max_bytes && *rule.min_bytes > *rule.max_bytes) {
          val.fail(child(mp, "max_bytes"), "a value >= min_bytes (" + std::to_string(*rule.min_bytes) + ")",
                   json(*rule.max_bytes));
          ok = false;
        }
      } else {
        ok = false;
      }
    }
    if (ok) c->rules.push_back(std::move(rule));
  }
}

void parse_stats(Validator& val, const json& v, Config* c) {
  const std::string path = "$.stats";
  if (!val.object(v, path, {"signal", "path", "interval_s"})) return;
  if (auto it = v.find("signal"); it != v.end()) {
    const std::string p = child(path, "signal");
    const std::string expected =
        "\"SIGUSR1\", \"SIGUSR2\", \"off\", or a signal number (SIGUSR1 = " + std::to_string(SIGUSR1) +
        ", SIGUSR2 = " + std::to_string(SIGUSR2) + ", or real-time " + std::to_string(SIGRTMIN) + ".." +
        std::to_string(SIGRTMAX) + ")";
    if (*it == "SIGUSR1" || *it == "USR1") c->stats.signal = SIGUSR1;
    else if (*it == "SIGUSR2" || *it == "USR2") c->stats.signal = SIGUSR2;
    else if (*it == "off") c->stats.signal = 0;
    else if (it->is_number_unsigned()) {  // non-negative integers parse as unsigned
      uint64_t n = it->get<uint64_t>();
      bool ok = n == static_cast<uint64_t>(SIGUSR1) || n == static_cast<uint64_t>(SIGUSR2) ||
                (n >= static_cast<uint64_t>(SIGRTMIN) && n <= static_cast<uint64_t>(SIGRTMAX));
      if (ok) c->stats.signal = static_cast<int>(n);
      else val.fail(p, expected, *it);
    } else {
      val.fail(p, expected, *it);
    }
  }
  if (auto it = v.find("path"); it != v.end()) {
    const std::string p = child(path, "path");
    if (!it->is_string()) val.fail(p, "an absolute path (\"%p\" = pid)", *it);
    else if (auto problem = stats_path_problem(it->get<std::string>()); !problem.empty()) val.fail(p, problem, *it);
    else c->stats.path = it->get<std::string>();
  }
  if (auto it = v.find("interval_s"); it != v.end()) {
    double s = 0;
    if (val.number(*it, child(path, "interval_s"), 0, false, kMaxIntervalS, false, &s,
                   "a number of seconds in 0..86400 (0 = no periodic dump)"))
      c->stats.interval_s = s;
  }
}

void parse_policy(Validator& val, const json& v, Config* c) {
  const std::string path = "$.policy";
  if (!val.object(v, path, {"eviction", "overcommit"})) return;
  if (auto it = v.find("eviction"); it != v.end()) {
    const std::string p = child(path, "eviction");
    if (*it == "lru") c->eviction = "lru";
    else if (*it == "belady")
      val.fail(p, "\"belady\" (learned-trace eviction) is not implemented yet; expected \"lru\"");
    else val.fail(p, "\"lru\"", *it);
  }
  if (auto it = v.find("overcommit"); it != v.end()) {
    bool b = false;
    if (val.boolean(*it, child(path, "overcommit"), &b)) c->overcommit = b;
  }
}

void parse_log(Validator& val, const json& v, Config* c) {
  const std::string path = "$.log";
  if (!val.object(v, path, {"level"})) return;
  if (auto it = v.find("level"); it != v.end()) {
    if (it->is_string() && is_log_level(it->get<std::string>())) c->log_level = it->get<std::string>();
    else val.fail(child(path, "level"), std::string("one of ") + kLogLevels, *it);
  }
}

Status config_error(std::string_view source, const std::vector<std::string>& errors) {
  std::string msg;
  for (const auto& e : errors) {
    if (!msg.empty()) msg += '\n';
    msg += std::string(source) + ": " + e;
  }
  return Status{Code::config_error, std::move(msg)};
}

Result<Config> parse_document(const json& doc, std::string_view source) {
  Validator val;
  Config c = default_config();
  c.source = std::string(source);
  if (!val.object(doc, "$", {"page_mb", "gpu_reserve_gb", "host_share", "tiers", "policy", "rules", "stats", "log"}))
    return config_error(source, val.errors);
  int64_t page_mb = 0;
  bool page_ok = true;
  if (auto it = doc.find("page_mb"); it != doc.end()) {
    page_ok = val.integer(*it, "$.page_mb", kMinPageMb, kMaxPageMb, &page_mb,
                          "an even integer in 2..1024 (MiB; a multiple of the 2 MiB granule)");
    if (page_ok && page_mb % 2 != 0) {
      val.fail("$.page_mb", "an even integer in 2..1024 (MiB; a multiple of the 2 MiB granule)", *it);
      page_ok = false;
    }
    if (page_ok) c.page_bytes = static_cast<uint64_t>(page_mb) * kMiB;
  }
  if (auto it = doc.find("gpu_reserve_gb"); it != doc.end()) {
    double gb = 0;
    if (val.number(*it, "$.gpu_reserve_gb", 0, false, kMaxReserveGb, false, &gb, "a number of GB in 0..1024"))
      c.gpu_reserve_bytes = static_cast<uint64_t>(std::llround(gb * static_cast<double>(kGiB)));
  }
  if (auto it = doc.find("host_share"); it != doc.end()) {
    double share = 0;
    if (val.number(*it, "$.host_share", 0, true, 1, true, &share,
                   "a fraction of host RAM, 0 < host_share < 1"))
      c.host_share = share;
  }
  if (auto it = doc.find("tiers"); it != doc.end()) parse_tiers(val, *it, page_ok ? c.page_bytes : 0, &c);
  if (auto it = doc.find("policy"); it != doc.end()) parse_policy(val, *it, &c);
  if (auto it = doc.find("rules"); it != doc.end()) parse_rules(val, *it, &c);
  if (auto it = doc.find("stats"); it != doc.end()) parse_stats(val, *it, &c);
  if (auto it = doc.find("log"); it != doc.end()) parse_log(val, *it, &c);
  if (!val.errors.empty()) return config_error(source, val.errors);
  return c;
}

}  // namespace

Config default_config() {
  Config c;
  TierConfig gpu;
  gpu.kind = TierKind::gpu;
  gpu.device = 0;
  gpu.capacity_auto = true;
  TierConfig host;
  host.kind = TierKind::host;
  host.numa_node = 0;
  host.capacity_auto = true;
  c.tiers = {gpu, host};
  return c;
}

Result<Config> parse_config(std::string_view json_text, std::string_view source) {
  try {
    std::vector<std::string> dup_errors;
    DuplicateKeyFinder finder(&dup_errors);
    json doc = json::parse(json_text.begin(), json_text.end(),
                           [&finder](int depth, json::parse_event_t e, json& parsed) {
                             return finder(depth, e, parsed);
                           });
    if (!dup_errors.empty()) return config_error(source, dup_errors);
    return parse_document(doc, source);
  } catch (const json::exception& e) {
    // e.what() = "[json.exception.parse_error.101] parse error at line 3, column 7: ...",
    // or "[json.exception.out_of_range.406] number overflow parsing '1e400'".
    std::string what = e.what();
    if (auto pos = what.find("] "); pos != std::string::npos && what.rfind("[json.exception", 0) == 0)
      what = what.substr(pos + 2);
    return Status{Code::config_error, std::string(source) + ": invalid JSON: " + what};
  } catch (const std::exception& e) {
    return Status{Code::config_error, std::string(source) + ": " + e.what()};
  }
}

Result<Config> load_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    return Status{Code::config_error, path + ": cannot open the config file: " + std::strerror(err)};
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status{Code::config_error, path + ": cannot read the config file"};
  return parse_config(text.str(), path);
}

Result<Config> config_from_environment() {
  Config c;
  const char* file = std::getenv("VSTACK_CONFIG");
  if (file != nullptr && *file != '\0') {
    auto r = load_config(file);
    if (!r) return r.status();
    c = std::move(r).value();
  } else {
    c = default_config();
  }
  if (const char* level = std::getenv("VSTACK_LOG"); level != nullptr && *level != '\0') {
    if (!is_log_level(level))
      return Status{Code::config_error, std::string("VSTACK_LOG: expected one of ") + kLogLevels + ", found " +
                                            json(std::string(level)).dump()};
    c.log_level = level;
  }
  if (const char* sp = std::getenv("VSTACK_STATS_PATH"); sp != nullptr && *sp != '\0') {
    if (auto problem = stats_path_problem(sp); !problem.empty())
      return Status{Code::config_error,
                    "VSTACK_STATS_PATH: expected " + problem + ", found " + json(std::string(sp)).dump()};
    c.stats.path = sp;
  }
  return c;
}

Status check_config_paths(const Config& c) {
  std::vector<std::string> errors;
  auto check_dir = [&errors](const std::string& dir, const std::string& json_path, const std::string& shown) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) {
      errors.push_back(json_path + ": expected an existing writable directory, found " + shown + " (" +
                       std::strerror(errno) + ")");
    } else if (!S_ISDIR(st.st_mode)) {
      errors.push_back(json_path + ": expected an existing writable directory, found " + shown +
                       " (not a directory)");
    } else if (::access(dir.c_str(), W_OK | X_OK) != 0) {
      errors.push_back(json_path + ": expected an existing writable directory, found " + shown + " (" +
                       std::strerror(errno) + ")");
    }
  };
  for (size_t i = 0; i < c.tiers.size(); ++i)
    if (c.tiers[i].kind == TierKind::nvme)
      check_dir(c.tiers[i].path, "$.tiers[" + std::to_string(i) + "].path", json(c.tiers[i].path).dump());
  const std::string& sp = c.stats.path;
  std::string dir = sp.substr(0, sp.find_last_of('/'));
  if (dir.empty()) dir = "/";
  if (dir.find('%') == std::string::npos)  // a "%p" in the directory is made per process; not checkable
    check_dir(dir, "$.stats.path", json(sp).dump() + " whose directory " + json(dir).dump());
  if (!errors.empty()) return config_error(c.source, errors);
  return Status::ok();
}

const Rule* match_rule(const Config& c, uint64_t bytes, bool ipc) {
  for (const Rule& r : c.rules) {
    if (r.min_bytes && bytes < *r.min_bytes) continue;
    if (r.max_bytes && bytes > *r.max_bytes) continue;
    if (r.ipc && *r.ipc != ipc) continue;
    return &r;
  }
  return nullptr;
}

}  // namespace vstack
