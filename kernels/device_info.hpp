// What the launchers of quant/ and attn/ need of the current device, queried once per device and
// cached: the attribute queries cost microseconds, which show at decode sizes.
#pragma once

#include <cuda_runtime.h>

#include <atomic>

namespace vstack::kernels {

struct DeviceInfo {
  int cc = 0;          // compute capability, 10 * major + minor
  int sms = 0;         // SM count
  int smem_optin = 0;  // dynamic shared memory a CTA may have (cudaDevAttrMaxSharedMemoryPerBlockOptin)
};

// The current device's DeviceInfo; the error of cudaGetDevice or the first failed attribute query
// (what = the call that failed), d unchanged then. Devices 0..63 are cached.
inline cudaError_t current_device_info(DeviceInfo& d, const char** what = nullptr) {
  static std::atomic<int> cache_cc[64], cache_sms[64], cache_smem[64];  // cc 0: not asked yet
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) {
    if (what) *what = "cudaGetDevice";
    return e;
  }
  const bool cached = dev >= 0 && dev < 64;
  if (cached) {
    if (const int cc = cache_cc[dev].load(std::memory_order_acquire); cc != 0) {
      d = DeviceInfo{cc, cache_sms[dev].load(std::memory_order_relaxed), cache_smem[dev].load(std::memory_order_relaxed)};
      return cudaSuccess;
    }
  }
  int major = 0, minor = 0;
  DeviceInfo q;
  cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&q.sms, cudaDevAttrMultiProcessorCount, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&q.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  if (e != cudaSuccess) {
    if (what) *what = "cudaDeviceGetAttribute";
    return e;
  }
  q.cc = major * 10 + minor;
  if (cached) {
    cache_sms[dev].store(q.sms, std::memory_order_relaxed);
    cache_smem[dev].store(q.smem_optin, std::memory_order_relaxed);
    cache_cc[dev].store(q.cc, std::memory_order_release);
  }
  d = q;
  return cudaSuccess;
}

}  // namespace vstack::kernels
