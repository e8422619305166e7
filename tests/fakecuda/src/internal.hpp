// fakecuda internals shared by the source files of the emulated driver.
//
// Glossary
//   device        an emulated GPU: an ordinal and a byte budget (FAKECUDA_MEM_MB)
//   context       CUctx_st: a device plus its legacy NULL stream and its streams
//   stream        CUstream_st: a worker thread running an in-order queue of ops
//   op            one queued unit: dependencies (stream, sequence number) + a callable
//   work          a capturable op described as data (kernel, copy, set, host fn);
//                 executed by a stream, or turned into a graph node while capturing
//   granule       2 MiB, the VMM granularity on every location type (as measured)
//
// Note [Locking]
// One mutex, the driver lock, guards every registry and every object field not
// said otherwise. A stream's queue and counters have their own mutex
// (CUstream_st::m). Order: driver lock -> CUstream_st::m. Nobody waits for
// stream progress while holding the driver lock, and a stream worker takes the
// driver lock only inside ops that say so (cuMemFreeAsync), so the two never
// deadlock.
//
// Note [Interposition]
// The shim (libvstack.so) interposes our exported names. Internal code never
// calls an exported entry point: every export is a thin wrapper over a function
// in namespace fakecuda, and the library links with -Bsymbolic-functions so
// that the addresses cuGetProcAddress hands out are ours, like the real driver.
#pragma once

#include <cuda.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "fakecuda.h"

namespace fakecuda {

constexpr size_t kGranule = size_t{2} << 20;

// Device arenas and VMM reservations are placed at fixed hints so pointers are
// recognisable; ThreadSanitizer only allows its own application ranges.
#if defined(__SANITIZE_THREAD__)
constexpr bool kPlaceAtHints = false;
#else
constexpr bool kPlaceAtHints = true;
#endif
constexpr int kDriverVersion = 13000;

using Lock = std::unique_lock<std::mutex>;

struct Config {
  int devices = 1;
  size_t mem_bytes = size_t{1024} << 20;
  unsigned delay_us = 0;
};
// Read once from the environment (FAKECUDA_DEVICES, FAKECUDA_MEM_MB, FAKECUDA_DELAY_US).
const Config& config();

std::mutex& driver_lock();

// ---- init, devices, contexts (device.cpp, context.cpp) -----------------------
bool initialized();
bool valid_device(CUdevice dev);
// Device memory accounting. LOCKING: driver lock held.
CUresult charge_device(int dev, size_t bytes);
void uncharge_device(int dev, size_t bytes);
size_t device_used(int dev);

CUctx_st* current_context();                    // may be null
// NOT_INITIALIZED / INVALID_CONTEXT / SUCCESS. LOCKING: any.
CUresult need_context(CUctx_st** out);
int context_device(const CUctx_st* ctx);
bool valid_context(const CUctx_st* ctx);        // LOCKING: driver lock held
CUresult primary_context(int dev, CUctx_st** out);  // creates it on first use; LOCKING: driver lock

// ---- work: what streams run and graphs hold (work.cpp) -----------------------
struct KernelDesc {
  std::string name;
  fakecuda_kernel_fn fn = nullptr;
  std::vector<size_t> offsets, sizes;
  void* user = nullptr;
  size_t buffer_size() const;                   // end of the last parameter
};

struct KernelWork {
  std::shared_ptr<const KernelDesc> desc;
  CUfunction func = nullptr;                    // as launched (may be a CUkernel cast)
  fakecuda_dim3 grid{1, 1, 1}, block{1, 1, 1};
  unsigned shared_mem = 0;
  CUstream stream = nullptr;                    // handle, filled at submission
  std::vector<unsigned char> params;            // copied at launch time
};

// A 3D copy between two host-addressable byte ranges.
struct CopyWork {
  const unsigned char* src = nullptr;
  unsigned char* dst = nullptr;
  size_t src_pitch = 0, src_height = 0, dst_pitch = 0, dst_height = 0;
  size_t width = 0, height = 1, depth = 1;      // width in bytes
  CUmemorytype src_type = CU_MEMORYTYPE_UNIFIED;  // as the API call said (graph node queries)
  CUmemorytype dst_type = CU_MEMORYTYPE_UNIFIED;
};

struct SetWork {
  unsigned char* dst = nullptr;
  size_t pitch = 0;                             // bytes
  unsigned value = 0;
  unsigned element = 1;                         // 1, 2 or 4 bytes
  size_t width = 0, height = 1;                 // width in elements
};

struct HostWork {
  CUhostFn fn = nullptr;
  void* data = nullptr;
};

struct EmptyWork {};

using Work = std::variant<EmptyWork, KernelWork, CopyWork, SetWork, HostWork>;

void execute(const Work& w);
CUgraphNodeType node_type(const Work& w);

// Copy and set descriptions shared by the copy entry points and graph nodes
// (copy.cpp). INVALID_VALUE / NOT_SUPPORTED for what the driver would reject.
CUresult copy_from_3d(const CUDA_MEMCPY3D& p, CopyWork* out);
CUresult set_from_params(const CUDA_MEMSET_NODE_PARAMS& p, SetWork* out);
// The inverse, for cuGraphMemcpyNodeGetParams (offsets folded into the addresses).
CUDA_MEMCPY3D copy_to_3d(const CopyWork& c);

// ---- streams (stream.cpp) ---------------------------------------------------
struct Capture;

struct Dep {
  std::shared_ptr<CUstream_st> stream;
  uint64_t seq;
};

struct Op {
  std::vector<Dep> deps;
  std::function<void()> run;
};

enum class StreamKind { kUser, kLegacy, kPerThread };

// Waits for the op with sequence number `seq` of `s` (1-based) to complete.
void wait_stream(CUstream_st* s, uint64_t seq);
uint64_t stream_enqueued(const CUstream_st* s);
uint64_t stream_completed(const CUstream_st* s);

// Resolves a stream handle (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD or a
// created stream). `per_thread_default`: the entry point is a _ptsz/_ptds one,
// so 0 means the per-thread stream. LOCKING: driver lock held.
CUresult resolve_stream(CUstream h, bool per_thread_default, std::shared_ptr<CUstream_st>* out);

// Submits capturable work: a graph node if the stream captures, else queued.
// *seq (may be null) gets the op's sequence number, 0 if captured.
// LOCKING: driver lock held.
CUresult submit_work(const std::shared_ptr<CUstream_st>& s, Work w, uint64_t* seq);
// Submits an internal op (event marker, callback, free); errors while capturing
// unless `capture_ok` (then it is dropped). LOCKING: driver lock held.
CUresult submit_op(const std::shared_ptr<CUstream_st>& s, Op op, uint64_t* seq);
// Submits work and waits for it (synchronous copies and sets).
CUresult run_sync(CUstream h, bool per_thread_default, Work w);
// Submits work without waiting (async copies and sets, launches).
CUresult run_async(CUstream h, bool per_thread_default, Work w);

// ---- stream capture (graph.cpp) ---------------------------------------------
// One capture sequence: the streams taking part append nodes to one graph, in
// the order the calls were made (a linear graph: each node depends on the one
// before). LOCKING: driver lock for every field and function below.
struct Capture {
  CUgraph graph = nullptr;
  uint64_t id = 0;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  bool invalidated = false;
  CUstream_st* origin = nullptr;
  std::thread::id thread;                             // that began it
  std::vector<std::shared_ptr<CUstream_st>> members;  // origin included
  CUgraphNode last = nullptr;
  std::vector<CUgraphNode> first_deps;                // cuStreamBeginCaptureToGraph
  bool into_existing = false;                         // the graph belongs to the caller
  std::vector<CUgraphNode> deps_out;                  // what GetCaptureInfo hands out
};
CUresult capture_append(Capture& c, Work w);
// The capture-mode rule for "potentially unsafe" calls (allocation, freeing,
// device-wide synchronization) made by this thread: CUDA_SUCCESS, or
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED after invalidating the captures that
// forbid the call. LOCKING: driver lock held.
CUresult check_unsafe_call();
void capture_invalidate(Capture& c);
std::shared_ptr<Capture>& stream_capture(CUstream_st* s);
bool stream_is_legacy(const CUstream_st* s);
// Whether a blocking stream of `legacy`'s context is capturing (the legacy
// stream is then unusable). LOCKING: driver lock held.
bool legacy_blocked_by_capture(const CUstream_st* legacy);

// ---- kernels (kernel.cpp) ---------------------------------------------------
// Builds the work of a launch of `f` (a CUfunction or a CUkernel cast to one).
// LOCKING: driver lock held.
CUresult make_kernel_work(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                          unsigned by, unsigned bz, unsigned shmem, void** kernel_params,
                          void** extra, KernelWork* out);

// ---- memory (memory.cpp, vmm.cpp) -------------------------------------------
struct PointerInfo {
  bool found = false;
  CUmemorytype type = CU_MEMORYTYPE_HOST;
  int device = 0;
  uintptr_t base = 0;
  size_t size = 0;
  CUctx_st* ctx = nullptr;
  bool vmm = false;
};
// LOCKING: driver lock held.
PointerInfo find_allocation(uintptr_t p);
PointerInfo find_vmm_mapping(uintptr_t p);
// Frees a device allocation made by cuMemAlloc*. LOCKING: driver lock held.
CUresult free_device(uintptr_t p);
CUresult alloc_device(int dev, CUctx_st* ctx, size_t bytes, uintptr_t* out);

// Waits for everything queued so far on every context of device `dev`
// (what freeing memory implies). LOCKING: driver lock NOT held.
void sync_device(int dev);
// Waits for everything queued so far on every stream of `ctx`.
// LOCKING: driver lock NOT held.
void sync_context(CUctx_st* ctx);
// The context's legacy NULL stream (created on first use). LOCKING: driver lock held.
std::shared_ptr<CUstream_st> legacy_stream(CUctx_st* ctx);

}  // namespace fakecuda

// Contexts are never freed (a destroyed one is only marked dead): streams,
// events and other threads may still point at them.
struct CUctx_st {
  int device = 0;
  bool primary = false;
  std::atomic<bool> alive{true};  // read without the driver lock
  unsigned flags = 0;
  std::shared_ptr<CUstream_st> legacy;  // the NULL stream, created on first use
  std::vector<CUstream_st*> streams;    // live user and per-thread streams
};

#define FAKECUDA_API extern "C" __attribute__((visibility("default")))
