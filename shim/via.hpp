// How a handler reaches the real driver function of the entry point that was
// called (cuMemcpyHtoD_v2 or cuMemcpyHtoD_v2_ptds...), and whether that entry
// point's default stream is the per-thread one.
#pragma once

#include "pool/pool.hpp"
#include "shim/cuda_api.hpp"
#include "shim/runtime.hpp"

namespace vstack::shim {

enum class StreamKind : bool { legacy = false, per_thread = true };

template <class Fn>
struct Via {
  Fn fn;
  StreamKind stream;
  template <class... A>
  CUresult operator()(A... a) const {
    return fn ? fn(a...) : CUDA_ERROR_NOT_SUPPORTED;
  }
  bool per_thread() const { return stream == StreamKind::per_thread; }
};

// The pool's view of a stream argument: the per-thread default stream is
// named CU_STREAM_PER_THREAD so that events recorded on it by the pool land
// on the calling thread's stream; CU_STREAM_LEGACY is the null stream.
pool::Pool::Target target(CUstream s, bool per_thread_entry);

// Relaxes this thread's capture mode while a capture is active elsewhere, so
// the pool's own driver calls (event queries, syncs, remaps) cannot
// invalidate the application's capture.
class RelaxedCapture {
 public:
  RelaxedCapture();
  ~RelaxedCapture();

 private:
  bool on_ = false;
  CUstreamCaptureMode mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;
};

// Runs a pool access for a copy/set/launch and maps the result to a CUresult.
template <class Collect, class Enqueue>
CUresult run_access(pool::Pool& p, const pool::Pool::Target& t, Collect&& collect, Enqueue&& enqueue,
                    const char* what) {
  RelaxedCapture relaxed;
  auto r = p.access(t, collect, [&]() -> int { return static_cast<int>(enqueue()); });
  if (!r) return to_cu(r.status(), what);
  return static_cast<CUresult>(r.value());
}

}  // namespace vstack::shim
