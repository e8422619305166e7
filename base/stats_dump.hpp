// The stats dumper: writes to_json(stats()) to a file on a signal, every
// interval_s seconds, and once more at stop().
//
// Note [Stats by signal]
// A signal handler may only call async-signal-safe functions, and may
// interrupt a thread holding any lock (the pool's, malloc's). So the handler
// only write()s one byte into a non-blocking pipe (a full pipe drops the byte:
// dumps coalesce). A dump thread (all signals blocked) polls the pipe, builds
// the JSON from relaxed atomics (no pool lock) and writes it to a temporary
// file in the same directory, then rename()s it over the target, so a reader
// never sees a partial file. After fork() the child gets its own pipe and
// thread (pthread_atfork) and writes its own pid's file. If the application
// already handles the signal, vstack leaves it alone and only the periodic and
// final dumps happen (choose another stats.signal).
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <mutex>
#include <string>
#include <string_view>

#include "base/config.hpp"
#include "base/status.hpp"

namespace vstack {

// "%p" -> pid, "%%" -> "%".
std::string expand_stats_path(std::string_view pattern, pid_t pid);

// Writes `text` to `path` atomically (temp file in the same directory + rename).
Status write_file_atomically(const std::string& path, std::string_view text);

class StatsDumper {
 public:
  StatsDumper() = default;
  StatsDumper(const StatsDumper&) = delete;
  StatsDumper& operator=(const StatsDumper&) = delete;
  ~StatsDumper();  // stop() if running (no final dump is lost)

  // Installs the signal handler (unless cfg.signal == 0 or the application
  // already handles it) and starts the dump thread. One dumper may run per
  // process at a time.
  Status start(const StatsConfig& cfg);
  // Stops the thread, writes the final dump, and sets the signal to be
  // ignored (a late vstack-stat signal must not kill an exiting process)
  // unless another handler was there before start(). Idempotent.
  void stop();
  // Writes a dump now, from the calling thread.
  Status dump_now();

  bool running() const;
  // The file this process writes (path with %p expanded for the current pid).
  std::string current_path() const;
  // True when start() installed the signal handler.
  bool handles_signal() const;
  // Number of dumps written by this dumper (successful ones).
  uint64_t dumps_written() const;

 private:
  friend struct ForkHooks;
  Status start_thread_locked();  // pipe + thread
  void close_pipe_locked();
  static void* thread_main(void* self);
  void loop();
  void on_fork_prepare();
  void on_fork_parent();
  void on_fork_child();

  mutable std::mutex mu_;  // guards the fields below (not taken by the signal handler)
  StatsConfig cfg_;
  bool running_ = false;
  bool installed_handler_ = false;
  bool had_foreign_handler_ = false;
  pthread_t thread_{};
  int pipe_rd_ = -1;
  int pipe_wr_ = -1;
  std::atomic<bool> quit_{false};
  std::mutex dump_mu_;        // serialises dumps; guards the two fields below
  std::string path_pattern_;  // cfg_.path, for dump_now()
  unsigned failures_logged_ = 0;
  std::atomic<uint64_t> dumps_{0};
};

}  // namespace vstack
