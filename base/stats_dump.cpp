#include "base/stats_dump.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "base/log.hpp"
#include "base/stats.hpp"

namespace vstack {

namespace {

// The write end of the active dumper's pipe; the only thing the handler reads.
std::atomic<int> g_signal_fd{-1};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free fd");

// The active dumper, and the mutex that keeps it from changing across fork().
std::mutex g_registry_mu;
StatsDumper* g_active = nullptr;

void on_signal(int) {
  int saved = errno;
  int fd = g_signal_fd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    char b = 's';
    ssize_t r = ::write(fd, &b, 1);  // EAGAIN: the pipe is full, a dump is pending anyway
    (void)r;
  }
  errno = saved;
}

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void wake(int fd) {
  if (fd < 0) return;
  char b = 'q';
  ssize_t r = ::write(fd, &b, 1);  // EAGAIN: full, the thread wakes anyway
  (void)r;
}

}  // namespace

// pthread_atfork callbacks, registered once per process.
struct ForkHooks {
  static void prepare() {
    g_registry_mu.lock();
    if (g_active != nullptr) g_active->on_fork_prepare();
  }
  static void parent() {
    if (g_active != nullptr) g_active->on_fork_parent();
    g_registry_mu.unlock();
  }
  static void child() {
    if (g_active != nullptr) g_active->on_fork_child();
    g_registry_mu.unlock();
  }
};

std::string expand_stats_path(std::string_view pattern, pid_t pid) {
  std::string out;
  out.reserve(pattern.size() + 8);
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      if (pattern[i + 1] == 'p') {
        out += std::to_string(pid);
        ++i;
        continue;
      }
      if (pattern[i + 1] == '%') {
        out += '%';
        ++i;
        continue;
      }
    }
    out += pattern[i];
  }
  return out;
}

Status write_file_atomically(const std::string& path, std::string_view text) {
  size_t slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  std::string tmp = dir + "/." + base + ".XXXXXX";
  int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0)
    return Status{Code::io_error, "cannot create a temporary file in " + dir + ": " + std::strerror(errno)};
  ::fchmod(fd, 0644);
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t w = ::write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int err = w < 0 ? errno : EIO;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status{Code::io_error, "cannot write " + tmp + ": " + std::strerror(err)};
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return Status{Code::io_error, "cannot write " + tmp + ": " + std::strerror(err)};
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return Status{Code::io_error, "cannot rename " + tmp + " to " + path + ": " + std::strerror(err)};
  }
  return Status::ok();
}

StatsDumper::~StatsDumper() { stop(); }

Status StatsDumper::start(const StatsConfig& cfg) {
  static std::once_flag atfork_once;
  int atfork_rc = 0;
  std::call_once(atfork_once, [&atfork_rc] {
    atfork_rc = pthread_atfork(&ForkHooks::prepare, &ForkHooks::parent, &ForkHooks::child);
  });
  if (atfork_rc != 0) return Status{Code::invalid_value, "pthread_atfork failed"};

  std::lock_guard registry(g_registry_mu);
  std::lock_guard lock(mu_);
  if (running_) return Status{Code::invalid_value, "the stats dumper is already running"};
  if (g_active != nullptr) return Status{Code::invalid_value, "another stats dumper is already running"};
  cfg_ = cfg;
  {
    std::lock_guard dl(dump_mu_);
    path_pattern_ = cfg.path;
    failures_logged_ = 0;
  }
  quit_.store(false);
  VSTACK_TRY(start_thread_locked());

  installed_handler_ = false;
  had_foreign_handler_ = false;
  if (cfg.signal > 0) {
    struct sigaction old {};
    sigaction(cfg.signal, nullptr, &old);
    bool foreign = (old.sa_flags & SA_SIGINFO) != 0 ||
                   (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN && old.sa_handler != &on_signal);
    if (foreign) {
      had_foreign_handler_ = true;
      log::warn("signal {} is already handled by the application; stats by signal are off "
                "(set stats.signal to another signal); periodic and final dumps still go to {}",
                cfg.signal, cfg.path);
    } else {
      struct sigaction sa {};
      sa.sa_handler = &on_signal;
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = SA_RESTART;
      if (sigaction(cfg.signal, &sa, nullptr) != 0) {
        int err = errno;
        quit_.store(true);
        wake(pipe_wr_);
        pthread_join(thread_, nullptr);
        close_pipe_locked();
        return Status{Code::invalid_value,
                      "cannot install the stats handler for signal " + std::to_string(cfg.signal) + ": " +
                          std::strerror(err)};
      }
      installed_handler_ = true;
    }
  }
  running_ = true;
  g_active = this;
  return Status::ok();
}

// LOCKING: mu_ held (or the single thread of a fork child).
Status StatsDumper::start_thread_locked() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
    return Status{Code::io_error, std::string("stats pipe: ") + std::strerror(errno)};
  pipe_rd_ = fds[0];
  pipe_wr_ = fds[1];
  g_signal_fd.store(pipe_wr_, std::memory_order_release);
  // The thread blocks every signal: the application's signals go to its own threads.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&thread_, nullptr, &StatsDumper::thread_main, this);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) {
    close_pipe_locked();
    return Status{Code::io_error, std::string("cannot start the stats thread: ") + std::strerror(rc)};
  }
  return Status::ok();
}

void StatsDumper::close_pipe_locked() {
  if (g_signal_fd.load() == pipe_wr_) g_signal_fd.store(-1);
  if (pipe_rd_ >= 0) ::close(pipe_rd_);
  if (pipe_wr_ >= 0) ::close(pipe_wr_);
  pipe_rd_ = pipe_wr_ = -1;
}

void StatsDumper::stop() {
  {
    std::lock_guard registry(g_registry_mu);
    std::lock_guard lock(mu_);
    if (!running_) return;
    quit_.store(true);
    wake(pipe_wr_);
    pthread_join(thread_, nullptr);
    if (installed_handler_) {
      // Ignore from now on: SIG_DFL would let a late vstack-stat kill an exiting
      // job. Unless the application has put its own handler there since.
      struct sigaction cur {};
      sigaction(cfg_.signal, nullptr, &cur);
      if ((cur.sa_flags & SA_SIGINFO) == 0 && cur.sa_handler == &on_signal) {
        struct sigaction sa {};
        sa.sa_handler = SIG_IGN;
        sigemptyset(&sa.sa_mask);
        sigaction(cfg_.signal, &sa, nullptr);
      }
      installed_handler_ = false;
    }
    // No handler writes to the pipe any more; closing cannot hit a reused fd.
    close_pipe_locked();
    running_ = false;
    g_active = nullptr;
  }
  Status s = dump_now();
  if (!s) log::warn("final stats dump failed: {}", s.to_string());
}

Status StatsDumper::dump_now() {
  std::lock_guard dl(dump_mu_);
  if (path_pattern_.empty()) return Status{Code::invalid_value, "the stats dumper was never started"};
  std::string path = expand_stats_path(path_pattern_, ::getpid());
  Status s = write_file_atomically(path, to_json(stats()));
  if (s) {
    dumps_.fetch_add(1, std::memory_order_relaxed);
  } else if (failures_logged_ < 3) {
    ++failures_logged_;
    log::warn("stats dump failed: {}{}", s.to_string(), failures_logged_ == 3 ? " (not reported again)" : "");
  }
  return s;
}

void* StatsDumper::thread_main(void* self) {
  static_cast<StatsDumper*>(self)->loop();
  return nullptr;
}

void StatsDumper::loop() {
  // cfg_ and pipe_rd_ do not change while the thread runs.
  const int rd = pipe_rd_;
  const uint64_t period_ns =
      cfg_.interval_s > 0 ? static_cast<uint64_t>(std::llround(cfg_.interval_s * 1e9)) : 0;
  uint64_t deadline = period_ns != 0 ? monotonic_ns() + period_ns : 0;
  while (!quit_.load()) {
    int timeout_ms = -1;
    if (period_ns != 0) {
      uint64_t now = monotonic_ns();
      timeout_ms = now >= deadline ? 0 : static_cast<int>((deadline - now + 999999) / 1000000);
    }
    pollfd p{rd, POLLIN, 0};
    int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno != EINTR) break;
    bool dump = false;
    if (r > 0) {
      char buf[256];
      for (;;) {
        ssize_t n = ::read(rd, buf, sizeof(buf));
        if (n > 0) {
          for (ssize_t i = 0; i < n; ++i) dump = dump || buf[i] == 's';
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        break;  // EAGAIN: drained
      }
    }
    if (quit_.load()) break;  // stop() writes the final dump itself
    if (period_ns != 0) {
      uint64_t now = monotonic_ns();
      if (now >= deadline) {
        dump = true;
        deadline += period_ns;
        if (deadline <= now) deadline = now + period_ns;
      }
    }
    if (dump) (void)dump_now();
  }
}

void StatsDumper::on_fork_prepare() {
  mu_.lock();
  dump_mu_.lock();
}

void StatsDumper::on_fork_parent() {
  dump_mu_.unlock();
  mu_.unlock();
}

void StatsDumper::on_fork_child() {
  dump_mu_.unlock();
  // The parent's thread does not exist here and its pipe is shared with the
  // parent: make our own, so that signals to the child dump the child.
  if (running_) {
    g_signal_fd.store(-1);
    if (pipe_rd_ >= 0) ::close(pipe_rd_);
    if (pipe_wr_ >= 0) ::close(pipe_wr_);
    pipe_rd_ = pipe_wr_ = -1;
    quit_.store(false);
    if (!start_thread_locked()) {
      running_ = false;
      g_active = nullptr;
      if (installed_handler_) {
        struct sigaction sa {};
        sa.sa_handler = SIG_IGN;
        sigemptyset(&sa.sa_mask);
        sigaction(cfg_.signal, &sa, nullptr);
        installed_handler_ = false;
      }
    }
  }
  mu_.unlock();
}

bool StatsDumper::running() const {
  std::lock_guard lock(mu_);
  return running_;
}

std::string StatsDumper::current_path() const {
  std::lock_guard lock(mu_);
  return expand_stats_path(cfg_.path, ::getpid());
}

bool StatsDumper::handles_signal() const {
  std::lock_guard lock(mu_);
  return installed_handler_;
}

uint64_t StatsDumper::dumps_written() const { return dumps_.load(std::memory_order_relaxed); }

}  // namespace vstack
