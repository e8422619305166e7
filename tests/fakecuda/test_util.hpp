// Helpers shared by the fakecuda self-tests.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "fakecuda.h"

// The per-thread-stream entry points cuda.h declares only under
// CUDA_API_PER_THREAD_DEFAULT_STREAM; the library exports them all.
extern "C" {
decltype(cuLaunchHostFunc) cuLaunchHostFunc_ptsz;
decltype(cuStreamQuery) cuStreamQuery_ptsz;
decltype(cuStreamSynchronize) cuStreamSynchronize_ptsz;
decltype(cuMemcpyHtoD_v2) cuMemcpyHtoD_v2_ptds;
decltype(cuLaunchKernel) cuLaunchKernel_ptsz;
decltype(cuLaunchKernelEx) cuLaunchKernelEx_ptsz;
decltype(cuGraphLaunch) cuGraphLaunch_ptsz;
decltype(cuStreamBeginCapture_v2) cuStreamBeginCapture_v2_ptsz;
decltype(cuStreamEndCapture) cuStreamEndCapture_ptsz;
}

#define CU_OK(expr) REQUIRE((expr) == CUDA_SUCCESS)

namespace fakecuda_test {

constexpr size_t kMiB = size_t{1} << 20;

// For threads other than the test's own: Catch2 assertions are not thread-safe.
inline bool try_use_device(int dev) {
  CUcontext c = nullptr;
  return cuInit(0) == CUDA_SUCCESS && cuDevicePrimaryCtxRetain(&c, dev) == CUDA_SUCCESS &&
         cuCtxSetCurrent(c) == CUDA_SUCCESS;
}

// Initializes the driver and makes device `dev`'s primary context current.
inline CUcontext use_device(int dev = 0) {
  CU_OK(cuInit(0));
  CUcontext c = nullptr;
  CU_OK(cuDevicePrimaryCtxRetain(&c, dev));
  CU_OK(cuCtxSetCurrent(c));
  return c;
}

// Runs `f` in a forked child; returns the signal that killed it (0 if it exited).
template <class F>
int child_death_signal(F f) {
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGSEGV, SIG_DFL);  // not Catch2's handler: we want the plain death
    signal(SIGBUS, SIG_DFL);
    alarm(20);                 // a hang becomes SIGALRM, i.e. a failure
    f();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

// A host function that blocks its stream until open() is called.
struct Gate {
  std::mutex m;
  std::condition_variable cv;
  bool is_open = false;
  std::atomic<bool> entered{false};

  static void wait_fn(void* p) {
    auto* g = static_cast<Gate*>(p);
    g->entered = true;
    std::unique_lock<std::mutex> l(g->m);
    g->cv.wait(l, [&] { return g->is_open; });
  }
  void open() {
    {
      std::lock_guard<std::mutex> l(m);
      is_open = true;
    }
    cv.notify_all();
  }
};

// Gates live forever (a stream may still hold one after a failed REQUIRE) and
// are all opened at the end of every section / test case (listener in
// test_streams.cpp), so a failing test fails instead of hanging.
inline std::mutex& gates_mutex() {
  static std::mutex m;
  return m;
}
inline std::vector<Gate*>& gates() {
  static std::vector<Gate*> v;
  return v;
}
inline Gate& new_gate() {
  auto* g = new Gate;
  std::lock_guard<std::mutex> l(gates_mutex());
  gates().push_back(g);
  return *g;
}
inline void open_all_gates() {
  std::lock_guard<std::mutex> l(gates_mutex());
  for (Gate* g : gates()) g->open();
}

inline void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace fakecuda_test
