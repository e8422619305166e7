// Launchers of the attention kernels, one per (dtype, head_dim, causal); each is instantiated
// in one generated file under gen/ (see generate_kernels.py) and called by api.cu.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "attn/params.hpp"
#include "vstack/kernels.h"

namespace vstack::attn {

// Raises a kernel's dynamic shared-memory limit once per device (the call costs microseconds).
// `done` must be a static of the caller that belongs to this kernel alone: every forward
// kernel has the same function type, so a static in here would be shared by all of them
// (it was: the first kernel launched set its limit and the others then failed to launch).
template <typename Kernel>
cudaError_t set_smem_once(Kernel kernel, int bytes, std::atomic<uint64_t>& done) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  const uint64_t bit = dev < 64 ? uint64_t(1) << dev : 0;
  if (bit != 0 && (done.load(std::memory_order_relaxed) & bit)) return cudaSuccess;
  e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess) done.fetch_or(bit, std::memory_order_relaxed);
  return e;
}

template <typename T, int D, bool Causal>
vstack_status_t launch_fwd(const FwdParams& p, cudaStream_t stream);

template <typename T, int D, bool Causal>
vstack_status_t launch_bwd(const BwdParams& p, cudaStream_t stream);

}  // namespace vstack::attn
