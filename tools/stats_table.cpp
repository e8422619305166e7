#include "tools/stats_table.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "base/stats.hpp"

namespace vstack::tools {

namespace {

using json = nlohmann::json;

std::string printf_string(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

// Columns in `left` are left-aligned (labels), the rest right-aligned (numbers).
std::string render(const std::vector<std::vector<std::string>>& rows, const std::vector<size_t>& left) {
  std::vector<size_t> width;
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      std::string pad(width[i] - r[i].size(), ' ');
      if (i > 0) line += "  ";
      bool is_left = std::find(left.begin(), left.end(), i) != left.end();
      line += is_left ? r[i] + pad : pad + r[i];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

// Field access that reports what is wrong instead of throwing.
class Reader {
 public:
  std::string error;
  double number(const json& obj, const char* key, const std::string& where) {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_number()) {
      if (error.empty()) error = "not a vstack stats dump: " + where + "." + key + " is missing or not a number";
      return 0;
    }
    return it->get<double>();
  }
  std::string text(const json& obj, const char* key, const std::string& where) {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_string()) {
      if (error.empty()) error = "not a vstack stats dump: " + where + "." + key + " is missing or not a string";
      return {};
    }
    return it->get<std::string>();
  }
};

std::string count(double v) { return printf_string("%.0f", v); }

}  // namespace

std::string format_bytes(double bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (bytes >= 1024 && u < 5) bytes /= 1024, ++u;
  if (u == 0) return printf_string("%.0f B", bytes);
  return printf_string("%.2f ", bytes) + units[u];
}

std::string format_ns(double ns) {
  if (ns <= 0) return "0 s";
  if (ns >= 1e9) return printf_string("%.3f s", ns / 1e9);
  if (ns >= 1e6) return printf_string("%.1f ms", ns / 1e6);
  return printf_string("%.1f us", ns / 1e3);
}

Result<std::string> format_stats_table(const json& dump) {
  if (!dump.is_object()) return Status{Code::invalid_value, "not a vstack stats dump: not a JSON object"};
  Reader rd;
  double version = rd.number(dump, "version", "$");
  double pid = rd.number(dump, "pid", "$");
  double uptime = rd.number(dump, "uptime_s", "$");
  if (!rd.error.empty()) return Status{Code::invalid_value, rd.error};
  auto git = dump.find("global");
  auto tit = dump.find("tiers");
  if (git == dump.end() || !git->is_object())
    return Status{Code::invalid_value, "not a vstack stats dump: $.global is missing"};
  if (tit == dump.end() || !tit->is_array())
    return Status{Code::invalid_value, "not a vstack stats dump: $.tiers is missing"};

  std::string out = "vstack stats: pid " + count(pid) + ", uptime " + printf_string("%.1f s", uptime);
  if (static_cast<int>(version) != STATS_VERSION)
    out += " (dump version " + count(version) + ", this tool reads version " + std::to_string(STATS_VERSION) + ")";
  out += "\n\n";

  std::vector<std::vector<std::string>> rows = {{"tier", "kind", "capacity", "used", "pages", "faults", "promoted",
                                                 "demoted", "in", "out", "GB/s in", "GB/s out"}};
  for (size_t i = 0; i < tit->size(); ++i) {
    const json& t = (*tit)[i];
    const std::string where = "$.tiers[" + std::to_string(i) + "]";
    if (!t.is_object()) return Status{Code::invalid_value, "not a vstack stats dump: " + where + " is not an object"};
    rows.push_back({rd.text(t, "name", where), rd.text(t, "kind", where),
                    format_bytes(rd.number(t, "capacity_bytes", where)), format_bytes(rd.number(t, "used_bytes", where)),
                    count(rd.number(t, "pages", where)), count(rd.number(t, "faults", where)),
                    count(rd.number(t, "promotions", where)), count(rd.number(t, "demotions", where)),
                    format_bytes(rd.number(t, "bytes_in", where)), format_bytes(rd.number(t, "bytes_out", where)),
                    printf_string("%.2f", rd.number(t, "gbps_in", where)),
                    printf_string("%.2f", rd.number(t, "gbps_out", where))});
  }
  const json& g = *git;
  const std::string gw = "$.global";
  double launches = rd.number(g, "launches", gw);
  double faulted = rd.number(g, "launches_faulted", gw);
  double stall = rd.number(g, "stall_ns", gw);
  double hits = rd.number(g, "scan_hits", gw);
  double words = rd.number(g, "scan_words", gw);
  double copies = rd.number(g, "copies", gw);
  double evictions = rd.number(g, "evictions", gw);
  double backed = rd.number(g, "backed_pages", gw);
  double oom = rd.number(g, "oom_returns", gw);
  double allocs = rd.number(g, "allocations", gw);
  double alloc_bytes = rd.number(g, "allocated_bytes", gw);
  double pt = rd.number(g, "passthrough_allocations", gw);
  double pt_bytes = rd.number(g, "passthrough_bytes", gw);
  double app_vmm = rd.number(g, "app_vmm_bytes", gw);
  // Since STATS_VERSION 2; absent from older dumps.
  const bool split = g.contains("stall_wait_ns") && g.contains("stall_remap_ns");
  double stall_wait = split ? rd.number(g, "stall_wait_ns", gw) : 0;
  double stall_remap = split ? rd.number(g, "stall_remap_ns", gw) : 0;
  if (!rd.error.empty()) return Status{Code::invalid_value, rd.error};

  if (tit->empty()) out += "(no tiers yet: the pool has not started)\n";
  else out += render(rows, {0, 1});
  out += "\n";
  out += render({
      {"stalled", format_ns(stall), "", "launches", count(launches), "", "faulted", count(faulted)},
      {"  waiting", split ? format_ns(stall_wait) : "-", "", "  remapping", split ? format_ns(stall_remap) : "-", "",
       "", ""},
      {"scan hits", count(hits), "", "scan words", count(words), "", "copies", count(copies)},
      {"evictions", count(evictions), "", "backed pages", count(backed), "", "OOM returns", count(oom)},
      {"allocations", count(allocs) + " (" + format_bytes(alloc_bytes) + ")", "", "pass-through",
       count(pt) + " (" + format_bytes(pt_bytes) + ")", "", "app VMM", format_bytes(app_vmm)},
  }, {0, 3, 6});
  return out;
}

}  // namespace vstack::tools
