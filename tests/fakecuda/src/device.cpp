// Init, configuration, devices and their attributes, error names.
#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "internal.hpp"

namespace fakecuda {
namespace {

struct Device {
  size_t used = 0;  // bytes charged: cuMemAlloc*, cuMemCreate(DEVICE)
};

// Leaked on purpose: stream workers may still run during static destruction.
struct Devices {
  std::vector<Device> list;
};

Devices& devices() {
  static Devices* d = [] {
    auto* p = new Devices;
    p->list.resize(static_cast<size_t>(config().devices));
    return p;
  }();
  return *d;
}

std::atomic<bool> g_initialized{false};

long env_long(const char* name, long fallback, long lo, long hi) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < lo || x > hi) {
    std::fprintf(stderr, "fakecuda: ignoring %s=%s (expected an integer in [%ld, %ld])\n", name,
                 v, lo, hi);
    return fallback;
  }
  return x;
}

}  // namespace

const Config& config() {
  static const Config c = [] {
    Config k;
    k.devices = static_cast<int>(env_long("FAKECUDA_DEVICES", 1, 0, 64));
    k.mem_bytes = static_cast<size_t>(env_long("FAKECUDA_MEM_MB", 1024, 1, 1 << 22)) << 20;
    k.delay_us = static_cast<unsigned>(env_long("FAKECUDA_DELAY_US", 0, 0, 10'000'000));
    return k;
  }();
  return c;
}

// Held across fork() so that a child never inherits it locked by a thread
// that does not exist there. (A child has no stream workers either: it must
// create a new context before queueing work; see README.)
std::mutex& driver_lock() {
  static std::mutex* m = [] {
    auto* mu = new std::mutex;
    pthread_atfork([] { driver_lock().lock(); }, [] { driver_lock().unlock(); },
                   [] { driver_lock().unlock(); });
    return mu;
  }();
  return *m;
}

bool initialized() { return g_initialized.load(std::memory_order_acquire); }

bool valid_device(CUdevice dev) { return dev >= 0 && dev < config().devices; }

CUresult charge_device(int dev, size_t bytes) {
  Device& d = devices().list.at(static_cast<size_t>(dev));
  if (bytes > config().mem_bytes - d.used) return CUDA_ERROR_OUT_OF_MEMORY;
  d.used += bytes;
  return CUDA_SUCCESS;
}

void uncharge_device(int dev, size_t bytes) {
  Device& d = devices().list.at(static_cast<size_t>(dev));
  d.used -= bytes;
}

size_t device_used(int dev) { return devices().list.at(static_cast<size_t>(dev)).used; }

namespace {

CUresult need_init() { return initialized() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED; }

CUresult attribute(CUdevice_attribute a, CUdevice dev, int* v) {
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *v = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: *v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *v = 49152; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *v = 233472; break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: *v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: *v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *v = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *v = 2619000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *v = 5120; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 50 << 20; break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: *v = 512; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *v = 2048; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *v = 2; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *v = 0x18 + dev; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: *v = CU_COMPUTEMODE_DEFAULT; break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_MULTINODE_IPC_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      *v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: *v = 0; break;  // an id, not a flag: node 0
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES:
      *v = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
      break;
    default:
      if (static_cast<int>(a) <= 0 || a >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
      *v = 0;  // a capability we do not emulate
  }
  return CUDA_SUCCESS;
}

struct ErrorEntry {
  CUresult code;
  const char* name;
  const char* text;
};

constexpr ErrorEntry kErrors[] = {
#define FAKECUDA_ERROR(code, text) {code, #code, text},
#include "errors.def"
#undef FAKECUDA_ERROR
};

const ErrorEntry* find_error(CUresult e) {
  for (const ErrorEntry& x : kErrors)
    if (x.code == e) return &x;
  return nullptr;
}

}  // namespace
}  // namespace fakecuda

using namespace fakecuda;

FAKECUDA_API CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  (void)config();
  g_initialized.store(true, std::memory_order_release);
  return config().devices > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

FAKECUDA_API CUresult cuDriverGetVersion(int* v) {
  if (v == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *v = kDriverVersion;
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuDeviceGet(CUdevice* dev, int ordinal) {
  if (CUresult r = need_init()) return r;
  if (dev == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuDeviceGetCount(int* count) {
  if (CUresult r = need_init()) return r;
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = config().devices;
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (CUresult r = need_init()) return r;
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<size_t>(len), "fakecuda device %d", dev);
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  if (CUresult r = need_init()) return r;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = config().mem_bytes;
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice dev) {
  if (CUresult r = need_init()) return r;
  if (v == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  return attribute(a, dev, v);
}

FAKECUDA_API CUresult cuDeviceCanAccessPeer(int* can, CUdevice dev, CUdevice peer) {
  if (CUresult r = need_init()) return r;
  if (can == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev) || !valid_device(peer)) return CUDA_ERROR_INVALID_DEVICE;
  *can = dev != peer ? 1 : 0;
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuGetErrorName(CUresult e, const char** s) {
  if (s == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorEntry* x = find_error(e);
  *s = x != nullptr ? x->name : nullptr;
  return x != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKECUDA_API CUresult cuGetErrorString(CUresult e, const char** s) {
  if (s == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorEntry* x = find_error(e);
  *s = x != nullptr ? x->text : nullptr;
  return x != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKECUDA_API CUresult cuGetExportTable(const void** table, const CUuuid* id) {
  if (table == nullptr || id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *table = nullptr;
  return CUDA_ERROR_NOT_SUPPORTED;
}
