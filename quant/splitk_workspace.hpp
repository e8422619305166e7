// The split-K workspace of the FP4 GEMM kernels: fp32 partial sums and arrival counters that the
// CTAs sharing one output tile meet in, owned by the library (per stream, and per captured graph).
// Used by the decode kernel (Note [Workspace split] in quant/gemv_kernel.cuh) and the wgmma GEMM
// (Note [K split] in quant/gemm_wgmma.cuh). Host code.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

namespace vstack::quant {

// A split-K workspace: partials and arrival counters, and their room.
struct SplitKWorkspace {
  float* part = nullptr;
  unsigned* count = nullptr;
  int64_t floats = 0, counters = 0;
};

namespace skws {

// Runs f with this thread's stream-capture mode relaxed: the workspace's cudaMalloc and cudaFree are not
// stream operations, and may be made while a stream is being captured (as frameworks' caching
// allocators do) without invalidating the capture.
template <class Fn>
bool capture_relaxed(Fn f) {
  cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
  if (cudaThreadExchangeStreamCaptureMode(&m) != cudaSuccess) return false;
  const bool ok = f();
  (void)cudaThreadExchangeStreamCaptureMode(&m);
  return ok;
}

// A zeroed workspace of at least the given size (1 MB of partials and 4096 counters at least), or
// false. The counters are zeroed on a private stream, so that nothing joins a capture on another.
inline bool ws_alloc(SplitKWorkspace& e, int64_t floats, int64_t counters) {
  e = SplitKWorkspace{};
  const int64_t nf = std::max<int64_t>(floats, 1 << 18), nc = std::max<int64_t>(counters, 1 << 12);
  return capture_relaxed([&] {
    cudaStream_t z = nullptr;
    bool ok = cudaMalloc(&e.part, static_cast<size_t>(nf) * 4) == cudaSuccess &&
              cudaMalloc(&e.count, static_cast<size_t>(nc) * 4) == cudaSuccess &&
              cudaStreamCreateWithFlags(&z, cudaStreamNonBlocking) == cudaSuccess &&
              cudaMemsetAsync(e.count, 0, static_cast<size_t>(nc) * 4, z) == cudaSuccess &&
              cudaStreamSynchronize(z) == cudaSuccess;
    if (z) (void)cudaStreamDestroy(z);
    if (!ok) {
      (void)cudaGetLastError();
      (void)cudaFree(e.part);
      (void)cudaFree(e.count);
      e = SplitKWorkspace{};
      return false;
    }
    e.floats = nf;
    e.counters = nc;
    return true;
  });
}

// Workspaces of destroyed graphs, freed by the next launch (a user object's destructor may not call CUDA).
struct WsGraveyard {
  std::mutex mu;
  std::vector<SplitKWorkspace> bufs;
};
inline WsGraveyard& ws_graveyard() {
  static WsGraveyard g;
  return g;
}
inline void ws_bury(void* p) {
  SplitKWorkspace* b = static_cast<SplitKWorkspace*>(p);
  {
    std::lock_guard<std::mutex> lock(ws_graveyard().mu);
    ws_graveyard().bufs.push_back(*b);
  }
  delete b;
}

}  // namespace skws

// The split-K workspace for a launch on `stream` with room for `floats` partials and `counters` counters,
// all of them 0 when the stream reaches the kernel; none (nullptr) where it cannot be had (an allocation
// failed), and the launcher then plans without it. Note [Workspace split].
// - Eager launches: one workspace per device and stream (the per-thread default stream is a different
//   stream in each host thread, so it is keyed by thread as well), grown after the stream's work so far,
//   kept until the process ends. Launches on one stream are ordered, and each leaves the counters at 0.
// - Launches captured into a graph: a workspace of the capture's own (per capture sequence and stream),
//   owned by the graph through a user object and freed after the graph is destroyed; each replay leaves
//   its counters at 0 for the next. So graphs replayed on other streams never share one with eager work.
// The callers plan at most kSplitKWsMaxBytes (quant/gemv_plan.hpp) (a few MB for most shapes).
inline SplitKWorkspace splitk_workspace(cudaStream_t stream, int64_t floats, int64_t counters) {
  using Key = std::tuple<int, cudaStream_t, std::thread::id>;
  struct Captured {
    unsigned long long id = 0;
    SplitKWorkspace buf;
  };
  static std::mutex mu;
  static std::map<Key, SplitKWorkspace> eager;
  static std::map<Key, Captured> captured;
  int dev = 0;
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  cudaGraph_t graph = nullptr;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaStreamGetCaptureInfo(stream, &cs, &id, &graph) != cudaSuccess ||
      cs == cudaStreamCaptureStatusInvalidated) {
    (void)cudaGetLastError();
    return {};
  }
  {  // workspaces of destroyed graphs: no kernel uses them any more
    std::vector<SplitKWorkspace> dead;
    {
      std::lock_guard<std::mutex> lock(skws::ws_graveyard().mu);
      dead.swap(skws::ws_graveyard().bufs);
    }
    if (!dead.empty())
      skws::capture_relaxed([&] {
        for (const SplitKWorkspace& b : dead) {
          (void)cudaFree(b.part);
          (void)cudaFree(b.count);
        }
        return true;
      });
  }
  const Key key{dev, stream, stream == cudaStreamPerThread ? std::this_thread::get_id() : std::thread::id{}};
  std::lock_guard<std::mutex> lock(mu);
  if (cs == cudaStreamCaptureStatusActive) {
    Captured& c = captured[key];
    if (c.id == id && c.buf.floats >= floats && c.buf.counters >= counters) return c.buf;
    // a new capture, or more room: a new workspace, owned by the graph (earlier nodes keep the old one)
    SplitKWorkspace b;
    if (!skws::ws_alloc(b, floats, counters)) return {};
    auto* owned = new SplitKWorkspace(b);
    cudaUserObject_t obj = nullptr;
    if (cudaUserObjectCreate(&obj, owned, skws::ws_bury, 1, cudaUserObjectNoDestructorSync) != cudaSuccess) {
      (void)cudaGetLastError();
      skws::ws_bury(owned);  // freed by the next launch
      return {};
    }
    if (cudaGraphRetainUserObject(graph, obj, 1, cudaGraphUserObjectMove) != cudaSuccess) {
      (void)cudaGetLastError();
      (void)cudaUserObjectRelease(obj, 1);  // its destructor buries the workspace
      return {};
    }
    c.id = id;
    c.buf = b;
    return b;
  }
  SplitKWorkspace& e = eager[key];
  if (e.floats >= floats && e.counters >= counters) return e;
  const bool freed = skws::capture_relaxed([&] {
    if (e.part && cudaStreamSynchronize(stream) != cudaSuccess) return false;  // the old one may be in use until then
    (void)cudaFree(e.part);
    (void)cudaFree(e.count);
    return true;
  });
  if (!freed) {
    (void)cudaGetLastError();
    return {};
  }
  skws::ws_alloc(e, floats, counters);  // e stays empty if it fails
  return e;
}

}  // namespace vstack::quant
