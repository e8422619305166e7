// Launch of the forward kernel (+ the split combine). Included by the generated files only.
#pragma once

#include "attn/fwd_kernel.cuh"
#include "attn/launch.hpp"
#include "kernels/status.hpp"

namespace vstack::attn {

template <typename T, int D, bool Causal>
vstack_status_t launch_fwd(const FwdParams& p, cudaStream_t stream) {
  constexpr FwdTile t = fwd_tile(D);
  auto kernel = fwd_kernel<T, D, Causal>;
  static std::atomic<uint64_t> smem_set{0};  // one per instantiation of this function
  cudaError_t e = set_smem_once(kernel, t.smem_bytes, smem_set);
  if (e != cudaSuccess)
    return kernels::fail(VSTACK_ERR_CUDA, "attn fwd: cudaFuncSetAttribute(smem %d): %s", t.smem_bytes, cudaGetErrorString(e));
  const dim3 grid(ceil_div(int64_t(p.s.seqlen_q) * p.s.group, t.block_m), p.s.heads_kv, p.s.batch * p.num_splits);
  kernel<<<grid, t.warps * 32, t.smem_bytes, stream>>>(p);
  if ((e = cudaGetLastError()) != cudaSuccess)
    return kernels::fail(VSTACK_ERR_CUDA, "attn fwd: launch: %s", cudaGetErrorString(e));
  if (p.num_splits > 1) {
    const dim3 cgrid(ceil_div(int64_t(p.s.seqlen_q) * p.s.heads_q, 8), p.s.batch);
    fwd_combine_kernel<T, D><<<cgrid, 256, 0, stream>>>(p);
    if ((e = cudaGetLastError()) != cudaSuccess)
      return kernels::fail(VSTACK_ERR_CUDA, "attn fwd combine: launch: %s", cudaGetErrorString(e));
  }
  return VSTACK_OK;
}

}  // namespace vstack::attn
