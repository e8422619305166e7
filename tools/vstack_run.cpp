// vstack-run: validate the config, then exec the program with libvstack.so
// preloaded.
//
//   vstack-run [--config FILE] [--log LEVEL] [--stats-path PATTERN] [--] PROGRAM [ARGS...]
//
// The config goes through the same validator as the shim (config_from_environment
// after setting the variables below), so a bad config is reported here, with
// its JSON path, before the job starts: exit 2, the program never runs.
// Environment given to the program:
//   LD_PRELOAD          libvstack.so prepended
//   VSTACK_CONFIG       absolute path of --config (else left as inherited)
//   VSTACK_LOG          --log
//   VSTACK_STATS_PATH   --stats-path
// libvstack.so is $VSTACK_LIB, else found next to this executable: ../shim/
// in the build tree, the install libdir (relative to bindir) when installed.
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/config.hpp"

#ifndef VSTACK_REL_LIBDIR
#define VSTACK_REL_LIBDIR "../lib"
#endif

namespace {

constexpr int kExitUsage = 2;  // bad arguments, bad config, no libvstack.so

const char* const kUsage =
    "usage: vstack-run [--config FILE] [--log LEVEL] [--stats-path PATTERN] [--] PROGRAM [ARGS...]\n"
    "  --config FILE        JSON tier config (schema: configs/SCHEMA.md); default: $VSTACK_CONFIG,\n"
    "                       else the embedded default (GPU tier + host tier, sized automatically)\n"
    "  --log LEVEL          trace, debug, info, warn, error, critical, off\n"
    "  --stats-path PATTERN where the stats dump goes (\"%p\" = pid); overrides stats.path\n"
    "  VSTACK_LIB           path of libvstack.so, if not found next to vstack-run\n";

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "vstack-run: %s\n%s", msg.c_str(), kUsage);
  std::exit(kExitUsage);
}

[[noreturn]] void fail(const std::string& msg) {
  std::fprintf(stderr, "vstack-run: %s\n", msg.c_str());
  std::exit(kExitUsage);
}

bool is_file(const std::string& p) { return ::access(p.c_str(), R_OK) == 0; }

std::string dir_of_self() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return {};
  buf[n] = '\0';
  std::string p(buf);
  return p.substr(0, p.find_last_of('/'));
}

std::string absolute(const std::string& p) {
  char buf[PATH_MAX];
  if (::realpath(p.c_str(), buf) == nullptr) return {};
  return buf;
}

std::string find_library() {
  if (const char* lib = std::getenv("VSTACK_LIB"); lib != nullptr && *lib != '\0') {
    std::string abs = absolute(lib);
    if (abs.empty() || !is_file(abs))
      fail(std::string("VSTACK_LIB=") + lib + ": " + std::strerror(errno));
    return abs;
  }
  const std::string self = dir_of_self();
  std::vector<std::string> tried;
  for (const std::string& rel : {std::string("../shim"), std::string(VSTACK_REL_LIBDIR), std::string("../lib")}) {
    std::string candidate = (rel.front() == '/' ? rel : self + "/" + rel) + "/libvstack.so";
    if (is_file(candidate)) return absolute(candidate);
    tried.push_back(candidate);
  }
  std::string msg = "cannot find libvstack.so; looked at:";
  for (const auto& t : tried) msg += "\n  " + t;
  msg += "\nset VSTACK_LIB to its path";
  fail(msg);
}

// Prepends `lib` to LD_PRELOAD unless it is already there.
std::string preload_with(const std::string& lib) {
  const char* old = std::getenv("LD_PRELOAD");
  if (old == nullptr || *old == '\0') return lib;
  std::string cur = old;
  size_t start = 0;
  while (start <= cur.size()) {
    size_t end = cur.find_first_of(": ", start);
    if (end == std::string::npos) end = cur.size();
    if (cur.compare(start, end - start, lib) == 0) return cur;
    start = end + 1;
  }
  return lib + ":" + cur;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_file, log_level, stats_path;
  int i = 1;
  bool have_log = false, have_stats_path = false;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> std::string {
      if (i + 1 >= argc) usage_error(std::string(name) + " needs a value");
      return argv[++i];
    };
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--config") config_file = value("--config");
    else if (a.rfind("--config=", 0) == 0) config_file = a.substr(9);
    else if (a == "--log") log_level = value("--log"), have_log = true;
    else if (a.rfind("--log=", 0) == 0) log_level = a.substr(6), have_log = true;
    else if (a == "--stats-path") stats_path = value("--stats-path"), have_stats_path = true;
    else if (a.rfind("--stats-path=", 0) == 0) stats_path = a.substr(13), have_stats_path = true;
    else if (a.size() > 1 && a[0] == '-') usage_error("unknown option " + a);
    else break;
  }
  if (i >= argc) usage_error("no program given");

  if (!config_file.empty()) {
    std::string abs = absolute(config_file);
    if (abs.empty()) fail(config_file + ": cannot open the config file: " + std::strerror(errno));
    ::setenv("VSTACK_CONFIG", abs.c_str(), 1);
  }
  if (have_log) ::setenv("VSTACK_LOG", log_level.c_str(), 1);
  if (have_stats_path) ::setenv("VSTACK_STATS_PATH", stats_path.c_str(), 1);

  // The same validation the shim does at init.
  auto cfg = vstack::config_from_environment();
  if (!cfg) fail(cfg.status().message());
  if (vstack::Status s = vstack::check_config_paths(cfg.value()); !s) fail(s.message());

  const std::string lib = find_library();
  ::setenv("LD_PRELOAD", preload_with(lib).c_str(), 1);

  ::execvp(argv[i], argv + i);
  int err = errno;
  std::fprintf(stderr, "vstack-run: cannot run %s: %s\n", argv[i], std::strerror(err));
  return err == ENOENT ? 127 : 126;
}
