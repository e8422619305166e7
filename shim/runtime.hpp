// The shim's process-wide state: environment, config, mode, the pool (created
// lazily at the first allocation, in the application's context) and the side
// tables the hooks keep (pass-through allocations, graph references...).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/config.hpp"
#include "base/stats_dump.hpp"
#include "pool/pool.hpp"
#include "shim/cuda_api.hpp"

namespace vstack::shim {

// What the environment says, read once (the only getenv calls of the shim,
// besides config_from_environment(), which reads VSTACK_CONFIG and VSTACK_LOG).
struct Env {
  bool disable = false;            // VSTACK_DISABLE=1: pure pass-through
  std::string real_libcuda = "libcuda.so.1";  // VSTACK_REAL_LIBCUDA (tests)
};
const Env& runtime_env();

enum class Mode : int { active, passthrough };

// True when hooks should do their work on this thread (not disabled, not in
// a forked child, not re-entered from inside the shim).
bool hooks_on();

// Marks the current thread as inside the shim for its lifetime.
class Reentry {
 public:
  Reentry();
  ~Reentry();
  Reentry(const Reentry&) = delete;
  Reentry& operator=(const Reentry&) = delete;
};

const Config& config();

// The pool if it exists (no creation).
pool::Pool* pool_ready();
// The pool, created on first call in the current context. nullptr if there is
// no current context yet. A pool that cannot be created is fatal (logged, abort):
// vstack never runs a job silently without paging when asked to page.
pool::Pool* ensure_pool();
// ensure_pool(), but nullptr when the calling thread's current context is not
// the pool's: vstack pages one device (the first one the job allocates on);
// allocations in other contexts go to the driver untouched.
pool::Pool* pool_for_current_context();

// Pass-through allocations (rule passthrough): pointer -> bytes charged.
struct SideTables {
  std::mutex mu;  // leaf lock: never held while calling the pool
  std::unordered_map<CUdeviceptr, uint64_t> passthrough;
  std::unordered_map<CUmemGenericAllocationHandle, uint64_t> app_vmm;  // application cuMemCreate on our device
  std::unordered_set<CUmemoryPool> ipc_pools;
  // Graph executables -> the words and ranges their nodes reference.
  struct GraphRefs {
    std::vector<uint64_t> words;                              // scanned like kernel parameters
    std::vector<std::pair<uint64_t, uint64_t>> ranges;        // (ptr, bytes) of memcpy/memset nodes
  };
  std::unordered_map<CUgraphExec, GraphRefs> graphs;
};
SideTables& side();

// Stream captures in progress (begin - end), so launches query capture state
// only while one may be active.
std::atomic<int>& captures_active();

CUdevice pool_device();
CUcontext pool_context();

// Converts a pool status to a CUresult (logging non-OOM failures).
CUresult to_cu(const Status& s, const char* what);

}  // namespace vstack::shim
