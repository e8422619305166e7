// vstack-stat: ask a running job for its stats and print them.
//
//   vstack-stat PID [--watch SECONDS] [--json] [--path PATTERN] [--signal SIG] [--timeout SECONDS]
//   vstack-stat --file PATH [--json]
//
// Sends the stats signal, waits until the stats file has been rewritten, and
// prints a table (tools/stats_table.cpp). The path and the signal come from
// --path/--signal, else from the job's own config (VSTACK_CONFIG and
// VSTACK_STATS_PATH in /proc/PID/environ), else the defaults. Before sending
// anything it checks /proc/PID/status that the process catches the signal:
// a process without the vstack shim would be killed by SIGUSR1.
// Exit status: 0 ok, 1 the process is gone / does not answer, 2 usage.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/config.hpp"
#include "base/stats_dump.hpp"
#include "tools/stats_table.hpp"

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

const char* const kUsage =
    "usage: vstack-stat PID [--watch SECONDS] [--json] [--path PATTERN] [--signal SIG] [--timeout SECONDS]\n"
    "       vstack-stat --file PATH [--json]\n"
    "  --watch SECONDS   refresh every SECONDS until the process exits, then show its final dump\n"
    "  --json            print the raw JSON dump instead of the table\n"
    "  --path PATTERN    the stats file (\"%p\" = pid); default: from the job's config, else /tmp/vstack-%p.json\n"
    "  --signal SIG      SIGUSR1, SIGUSR2 or a number; default: from the job's config, else SIGUSR1\n"
    "  --timeout SECONDS how long to wait for the dump (default 5)\n"
    "  --file PATH       print an existing dump (e.g. the final one after a job)\n";

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "vstack-stat: %s\n%s", msg.c_str(), kUsage);
  std::exit(kExitUsage);
}

[[noreturn]] void fail(const std::string& msg) {
  std::fprintf(stderr, "vstack-stat: %s\n", msg.c_str());
  std::exit(kExitFailed);
}

double parse_seconds(const std::string& opt, const std::string& v) {
  char* end = nullptr;
  double s = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || !std::isfinite(s) || s <= 0)
    usage_error(opt + " expects a number of seconds > 0, found \"" + v + "\"");
  return s;
}

int parse_signal(const std::string& v) {
  std::string s = v.rfind("SIG", 0) == 0 ? v.substr(3) : v;
  if (s == "USR1") return SIGUSR1;
  if (s == "USR2") return SIGUSR2;
  char* end = nullptr;
  long n = std::strtol(s.c_str(), &end, 10);
  if (end != s.c_str() && *end == '\0' && n > 0 && n <= SIGRTMAX) return static_cast<int>(n);
  usage_error("--signal expects SIGUSR1, SIGUSR2 or a signal number, found \"" + v + "\"");
}

std::string signal_name(int sig) {
  if (sig == SIGUSR1) return "SIGUSR1";
  if (sig == SIGUSR2) return "SIGUSR2";
  return "signal " + std::to_string(sig);
}

bool read_file(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream s;
  s << in.rdbuf();
  *out = s.str();
  return true;
}

bool process_exists(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

// Zombies count as gone: they answer nothing.
bool process_alive(pid_t pid) {
  if (!process_exists(pid)) return false;
  std::string status;
  if (!read_file("/proc/" + std::to_string(pid) + "/status", &status)) return false;
  size_t at = status.find("State:");
  if (at == std::string::npos) return true;
  size_t c = status.find_first_not_of(" \t", at + 6);
  return c == std::string::npos || (status[c] != 'Z' && status[c] != 'X');
}

// The signal mask the process catches, from /proc/PID/status ("SigCgt:").
std::optional<uint64_t> caught_signals(pid_t pid) {
  std::string status;
  if (!read_file("/proc/" + std::to_string(pid) + "/status", &status)) return std::nullopt;
  size_t at = status.find("SigCgt:");
  if (at == std::string::npos) return std::nullopt;
  return std::strtoull(status.c_str() + at + 7, nullptr, 16);
}

// The job's stats settings from the environment it was started with.
struct Target {
  std::string path_pattern = vstack::StatsConfig{}.path;
  int signal = vstack::StatsConfig{}.signal;
  std::string note;  // where they came from, for error messages
};

Target discover(pid_t pid) {
  Target t;
  std::string env;
  if (!read_file("/proc/" + std::to_string(pid) + "/environ", &env)) return t;
  std::string config_file, stats_path;
  for (size_t start = 0; start < env.size();) {
    size_t end = env.find('\0', start);
    if (end == std::string::npos) end = env.size();
    std::string kv = env.substr(start, end - start);
    if (kv.rfind("VSTACK_CONFIG=", 0) == 0) config_file = kv.substr(14);
    if (kv.rfind("VSTACK_STATS_PATH=", 0) == 0) stats_path = kv.substr(18);
    start = end + 1;
  }
  if (!config_file.empty()) {
    if (config_file[0] != '/') config_file = "/proc/" + std::to_string(pid) + "/cwd/" + config_file;
    auto cfg = vstack::load_config(config_file);
    if (cfg) {
      t.path_pattern = cfg.value().stats.path;
      t.signal = cfg.value().stats.signal;
      t.note = " (from its config " + config_file + ")";
    } else {
      std::fprintf(stderr, "vstack-stat: warning: cannot read the job's config: %s\n",
                   cfg.status().message().c_str());
    }
  }
  if (!stats_path.empty()) t.path_pattern = stats_path;
  return t;
}

struct FileId {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  timespec mtime{};
  bool operator==(const FileId& o) const {
    return exists == o.exists && dev == o.dev && ino == o.ino && size == o.size &&
           mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec;
  }
};

FileId file_id(const std::string& path) {
  FileId id;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return id;
  id.exists = true;
  id.dev = st.st_dev;
  id.ino = st.st_ino;
  id.size = st.st_size;
  id.mtime = st.st_mtim;
  return id;
}

// Prints the dump (table or JSON). Returns false with a message on a bad dump.
bool print_dump(const std::string& text, bool raw_json, const std::string& source) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    std::fprintf(stderr, "vstack-stat: %s: not valid JSON\n", source.c_str());
    return false;
  }
  if (raw_json) {
    std::printf("%s\n", j.dump(1).c_str());
    return true;
  }
  auto table = vstack::tools::format_stats_table(j);
  if (!table) {
    std::fprintf(stderr, "vstack-stat: %s: %s\n", source.c_str(), table.status().message().c_str());
    return false;
  }
  std::fputs(table.value().c_str(), stdout);
  return true;
}

enum class Ask { ok, gone };

// Sends the signal and waits for a new dump. Exits on errors that a retry
// cannot fix; returns gone when the process exited meanwhile.
Ask ask(pid_t pid, const Target& t, const std::string& path, double timeout_s, std::string* text) {
  if (!process_alive(pid)) return Ask::gone;
  auto caught = caught_signals(pid);
  if (caught && (*caught & (1ull << (t.signal - 1))) == 0)
    fail("process " + std::to_string(pid) + " does not catch " + signal_name(t.signal) + t.note +
         ", so it is not running under vstack (start it with vstack-run) or uses another stats.signal (--signal); "
         "nothing sent");
  FileId before = file_id(path);
  if (::kill(pid, t.signal) != 0) {
    if (errno == ESRCH) return Ask::gone;
    fail("cannot signal process " + std::to_string(pid) + ": " + std::strerror(errno));
  }
  auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (Clock::now() < deadline) {
    FileId now = file_id(path);
    if (now.exists && !(now == before) && read_file(path, text) && json::accept(*text)) return Ask::ok;
    if (!process_alive(pid)) return Ask::gone;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  fail("process " + std::to_string(pid) + " catches " + signal_name(t.signal) + " but did not write " + path +
       " within " + std::to_string(timeout_s).substr(0, 4) +
       " s: is it running under vstack, and is this its stats path" + t.note + "? (--path, --timeout)");
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<pid_t> pid;
  std::optional<double> watch;
  std::optional<std::string> path_opt, file_opt;
  std::optional<int> signal_opt;
  bool raw_json = false;
  double timeout_s = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> std::string {
      if (i + 1 >= argc) usage_error(std::string(name) + " needs a value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--watch") watch = parse_seconds(a, value("--watch"));
    else if (a == "--json") raw_json = true;
    else if (a == "--path") path_opt = value("--path");
    else if (a == "--signal") signal_opt = parse_signal(value("--signal"));
    else if (a == "--timeout") timeout_s = parse_seconds(a, value("--timeout"));
    else if (a == "--file") file_opt = value("--file");
    else if (!a.empty() && a[0] != '-' && !pid) {
      char* end = nullptr;
      long p = std::strtol(a.c_str(), &end, 10);
      if (*end != '\0' || p <= 0) usage_error("expected a process id, found \"" + a + "\"");
      pid = static_cast<pid_t>(p);
    } else {
      usage_error("unexpected argument " + a);
    }
  }

  if (file_opt) {
    if (pid || watch || path_opt || signal_opt) usage_error("--file takes no PID, --watch, --path or --signal");
    std::string text;
    if (!read_file(*file_opt, &text)) fail(*file_opt + ": " + std::strerror(errno));
    return print_dump(text, raw_json, *file_opt) ? 0 : kExitFailed;
  }
  if (!pid) usage_error("no process id given");
  if (!process_exists(*pid)) fail("no process " + std::to_string(*pid));

  Target t = discover(*pid);
  if (path_opt) t.path_pattern = *path_opt, t.note.clear();
  if (signal_opt) t.signal = *signal_opt, t.note.clear();
  const std::string path = vstack::expand_stats_path(t.path_pattern, *pid);
  if (t.signal == 0)
    fail("the job's config turns the stats signal off" + t.note + "; read its periodic or final dump with --file " +
         path);

  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  for (bool first = true;; first = false) {
    std::string text;
    Ask r = ask(*pid, t, path, timeout_s, &text);
    if (r == Ask::gone) {
      if (first && !watch) fail("process " + std::to_string(*pid) + " exited");
      // The shim writes a final dump at exit: show it if there is one.
      std::printf("process %d exited", static_cast<int>(*pid));
      if (read_file(path, &text)) {
        std::printf("; its last stats dump (%s):\n", path.c_str());
        return print_dump(text, raw_json, path) ? 0 : kExitFailed;
      }
      std::printf("; no final dump at %s\n", path.c_str());
      return 0;
    }
    if (watch && tty) std::fputs("\033[H\033[2J", stdout);
    if (!print_dump(text, raw_json, path)) return kExitFailed;
    if (!watch) return 0;
    std::printf("\n");
    std::fflush(stdout);
    // Sleep in slices so that an exit is noticed promptly.
    auto until = Clock::now() + std::chrono::duration<double>(*watch);
    while (Clock::now() < until && process_alive(*pid)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}
