// Launch of the backward: prep (dsum, zero dq_accum), main kernel, dq conversion.
// Included by the generated files only.
#pragma once

#include "attn/bwd_kernel.cuh"
#include "attn/launch.hpp"
#include "kernels/status.hpp"

namespace vstack::attn {

template <typename T, int D, bool Causal>
vstack_status_t launch_bwd(const BwdParams& p, cudaStream_t stream) {
  constexpr BwdTile t = bwd_tile(D);
  const dim3 rgrid(ceil_div(int64_t(p.s.seqlen_q) * p.s.heads_q, 8), p.s.batch);
  bwd_prep_kernel<T, D><<<rgrid, 256, 0, stream>>>(p);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return kernels::fail(VSTACK_ERR_CUDA, "attn bwd prep: launch: %s", cudaGetErrorString(e));

  auto kernel = bwd_kernel<T, D, Causal>;
  static std::atomic<uint64_t> smem_set{0};  // one per instantiation of this function
  if ((e = set_smem_once(kernel, t.smem_bytes, smem_set)) != cudaSuccess)
    return kernels::fail(VSTACK_ERR_CUDA, "attn bwd: cudaFuncSetAttribute(smem %d): %s", t.smem_bytes, cudaGetErrorString(e));
  const dim3 grid(ceil_div(p.s.seqlen_k, t.block_n), p.s.heads_kv, p.s.batch);
  kernel<<<grid, t.warps * 32, t.smem_bytes, stream>>>(p);
  if ((e = cudaGetLastError()) != cudaSuccess) return kernels::fail(VSTACK_ERR_CUDA, "attn bwd: launch: %s", cudaGetErrorString(e));

  bwd_dq_kernel<T, D><<<rgrid, 256, 0, stream>>>(p);
  if ((e = cudaGetLastError()) != cudaSuccess) return kernels::fail(VSTACK_ERR_CUDA, "attn bwd dq: launch: %s", cudaGetErrorString(e));
  return VSTACK_OK;
}

}  // namespace vstack::attn
