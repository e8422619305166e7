#include "shim/runtime.hpp"

#include <pthread.h>
#include <unistd.h>

#include <cstdlib>

#include "base/log.hpp"
#include "pool/prim/cuda_vmm.hpp"
#include "shim/real.hpp"
#include "tiers/tiers.hpp"

namespace vstack::shim {

namespace {

thread_local int t_depth = 0;
std::atomic<Mode> g_mode{Mode::active};
std::atomic<int> g_captures{0};

struct State {
  Env env;
  Config cfg;
  std::atomic<pool::Pool*> pool{nullptr};
  std::unique_ptr<prim::Vmm> vmm;
  std::unique_ptr<pool::Pool> owned_pool;
  StatsDumper dumper;
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  SideTables side;
};

State& state() {
  static State* s = new State;  // leaked: hooks run until the process is gone
  return *s;
}

[[noreturn]] void fatal(const std::string& msg) {
  log::error("{}", msg);
  log::get().flush();
  std::abort();
}

void on_fork_child() {
  // CUDA cannot be used in a forked child of a process that initialised it;
  // whatever the child does, vstack stays out of the way.
  g_mode.store(Mode::passthrough);
}

void stop_dumper() { state().dumper.stop(); }

// Read once at load: environment and config. A bad config aborts here, with
// the error naming the JSON path, rather than running the job unpaged.
__attribute__((constructor)) void shim_init() {
  State& s = state();
  const char* v = std::getenv("VSTACK_DISABLE");
  s.env.disable = v && v[0] == '1';
  if (const char* r = std::getenv("VSTACK_REAL_LIBCUDA")) s.env.real_libcuda = r;
  if (s.env.disable) {
    g_mode.store(Mode::passthrough);
    return;
  }
  auto cfg = config_from_environment();
  if (!cfg) fatal("vstack: invalid configuration: " + cfg.status().message());
  s.cfg = std::move(cfg).value();
  // cfg.log_level already holds $VSTACK_LOG when set (config_from_environment).
  if (!log::set_level(s.cfg.log_level.c_str())) log::warn("unknown log level '{}'", s.cfg.log_level);
  pthread_atfork(nullptr, nullptr, on_fork_child);
}

uint64_t host_ram_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

void create_pool() {
  State& s = state();
  const Real& r = real();
  if (!r.cuCtxGetCurrent || !r.cuCtxGetDevice || !r.cuMemGetInfo_v2 || !r.cuDeviceGetAttribute)
    fatal("vstack: the CUDA driver lacks the functions vstack needs");
  CUcontext ctx = nullptr;
  if (r.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) return;  // no context yet: try again later
  CUdevice dev = 0;
  if (r.cuCtxGetDevice(&dev) != CUDA_SUCCESS) fatal("vstack: cuCtxGetDevice failed");
  int vmm_ok = 0;
  r.cuDeviceGetAttribute(&vmm_ok, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
  if (!vmm_ok) fatal("vstack: device " + std::to_string(dev) + " does not support the CUDA virtual memory API");
  size_t free_b = 0, total_b = 0;
  if (r.cuMemGetInfo_v2(&free_b, &total_b) != CUDA_SUCCESS) fatal("vstack: cuMemGetInfo failed");

  auto vmm = prim::make_cuda_vmm(resolve_real, {static_cast<int>(dev)});
  if (!vmm) fatal("vstack: " + vmm.status().message());
  s.vmm = std::move(vmm).value();
  std::vector<std::unique_ptr<tiers::Backend>> tiers;
  Stats& st = stats();
  for (size_t i = 0; i < s.cfg.tiers.size(); ++i) {
    TierConfig tc = s.cfg.tiers[i];
    if (tc.kind == TierKind::gpu) tc.device = static_cast<int>(dev);
    if (tc.capacity_auto) {
      if (tc.kind == TierKind::gpu) {
        tc.capacity_bytes = free_b > s.cfg.gpu_reserve_bytes ? free_b - s.cfg.gpu_reserve_bytes : 0;
      } else if (tc.kind == TierKind::host) {
        tc.capacity_bytes = static_cast<uint64_t>(static_cast<double>(host_ram_bytes()) * s.cfg.host_share);
      } else {
        fatal("vstack: " + s.cfg.source + ": $.tiers[" + std::to_string(i) + "].capacity_gb: \"auto\" is only for gpu and host tiers");
      }
    }
    if (tc.kind == TierKind::host) {
      int host_ok = 0;
      r.cuDeviceGetAttribute(&host_ok, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
      if (!host_ok) fatal("vstack: device does not support HOST_NUMA VMM chunks (attribute 141): no host tier possible");
    }
    // Round down to whole granules.
    tc.capacity_bytes -= tc.capacity_bytes % (2 * kMiB);
    auto t = tiers::make_tier(*s.vmm, tc, &st.tiers[i]);
    if (!t) fatal("vstack: " + s.cfg.source + ": $.tiers[" + std::to_string(i) + "]: " + t.status().message());
    log::info("tier {} ({}): {:.2f} GiB", i, tier_kind_name(tc.kind), static_cast<double>(tc.capacity_bytes) / kGiB);
    tiers.push_back(std::move(t).value());
  }
  pool::PoolOptions o;
  o.page_bytes = s.cfg.page_bytes;
  o.overcommit = s.cfg.overcommit;
  o.eviction = s.cfg.eviction;
  auto p = pool::Pool::create(*s.vmm, std::move(tiers), o, st);
  if (!p) fatal("vstack: cannot create the pool: " + p.status().message());
  s.owned_pool = std::move(p).value();
  s.device = dev;
  s.ctx = ctx;
  if (Status ds = s.dumper.start(s.cfg.stats); !ds) log::warn("stats dumper not started: {}", ds.to_string());
  std::atexit(stop_dumper);
  s.pool.store(s.owned_pool.get(), std::memory_order_release);
  log::info("pool ready on device {}: {} tiers, {:.2f} GiB in all, pages of {} MiB", dev, s.cfg.tiers.size(),
            static_cast<double>(s.owned_pool->total_capacity()) / kGiB, s.cfg.page_bytes / kMiB);
}

}  // namespace

const Env& runtime_env() { return state().env; }

bool hooks_on() { return t_depth == 0 && g_mode.load(std::memory_order_relaxed) == Mode::active; }

Reentry::Reentry() { ++t_depth; }
Reentry::~Reentry() { --t_depth; }

const Config& config() { return state().cfg; }

pool::Pool* pool_ready() { return state().pool.load(std::memory_order_acquire); }

pool::Pool* ensure_pool() {
  State& s = state();
  if (pool::Pool* p = s.pool.load(std::memory_order_acquire)) return p;
  // call_once would latch a "no context yet" attempt; a mutex lets a later call retry.
  static std::mutex mu;
  std::lock_guard g(mu);
  if (!s.pool.load(std::memory_order_acquire)) create_pool();
  return s.pool.load(std::memory_order_acquire);
}

pool::Pool* pool_for_current_context() {
  pool::Pool* p = ensure_pool();
  if (!p) return nullptr;
  CUcontext cur = nullptr;
  if (real().cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != state().ctx) return nullptr;
  return p;
}

SideTables& side() { return state().side; }
std::atomic<int>& captures_active() { return g_captures; }
CUdevice pool_device() { return state().device; }
CUcontext pool_context() { return state().ctx; }

CUresult to_cu(const Status& s, const char* what) {
  switch (s.code()) {
    case Code::ok: return CUDA_SUCCESS;
    case Code::out_of_memory: return CUDA_ERROR_OUT_OF_MEMORY;
    case Code::invalid_value: return CUDA_ERROR_INVALID_VALUE;
    case Code::not_found: return CUDA_ERROR_INVALID_VALUE;
    case Code::not_supported: return CUDA_ERROR_NOT_SUPPORTED;
    case Code::driver_error:
      log::error("{}: {}", what, s.to_string());
      return static_cast<CUresult>(s.driver_code());
    default:
      log::error("{}: {}", what, s.to_string());
      return CUDA_ERROR_UNKNOWN;
  }
}

}  // namespace vstack::shim
