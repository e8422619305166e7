// Launch of the backward: prep (dsum, zero dq_accum), main kernel, dq conversion.
// Included by the generated files only.
#pragma once

#include "attn/bwd_kernel.cuh"
#include "attn/bwd_wgmma_kernel.cuh"
#include "attn/launch.hpp"
#include "attn/tensor_map.hpp"
#include "kernels/status.hpp"

namespace vstack::attn {

// head_dim 128 runs the wgmma kernel (Note [wgmma backward]); -DVSTACK_ATTN_BWD_WGMMA=0 keeps
// the mma.sync one (to compare). hd64 and hd256 stay on mma.sync.
#ifndef VSTACK_ATTN_BWD_WGMMA
#define VSTACK_ATTN_BWD_WGMMA 1
#endif

template <typename T, int D, bool Causal, bool Wg>
vstack_status_t launch_bwd_impl(const BwdParams& p, cudaStream_t stream) {
  constexpr BwdTile t = bwd_tile(D);
  const dim3 rgrid(ceil_div(int64_t(p.s.seqlen_q) * p.s.heads_q, 8), p.s.batch);
  if constexpr (Wg) bwd_prep_kernel<T, D, true><<<rgrid, 256, 0, stream>>>(p);
  else bwd_prep_kernel<T, D><<<rgrid, 256, 0, stream>>>(p);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return kernels::fail(VSTACK_ERR_CUDA, "attn bwd prep: launch: %s", cudaGetErrorString(e));

  if constexpr (Wg) {
    auto kernel = bwd_wgmma_kernel<T, Causal>;
    static std::atomic<uint64_t> smem_set{0};  // one per instantiation of this function
    constexpr int smem = BwdWgTile::kSmem;
    if ((e = set_smem_once(kernel, smem, smem_set)) != cudaSuccess)
      return kernels::fail(VSTACK_ERR_CUDA, "attn bwd: cudaFuncSetAttribute(smem %d): %s", smem, cudaGetErrorString(e));
    const dim3 grid(ceil_div(p.s.seqlen_k, BwdWgTile::kBN), p.s.heads_kv, p.s.batch);
    kernel<<<grid, BwdWgTile::kThreads, smem, stream>>>(p);
  } else {
    auto kernel = bwd_kernel<T, D, Causal>;
    static std::atomic<uint64_t> smem_set{0};  // one per instantiation of this function
    if ((e = set_smem_once(kernel, t.smem_bytes, smem_set)) != cudaSuccess)
      return kernels::fail(VSTACK_ERR_CUDA, "attn bwd: cudaFuncSetAttribute(smem %d): %s", t.smem_bytes, cudaGetErrorString(e));
    const dim3 grid(ceil_div(p.s.seqlen_k, t.block_n), p.s.heads_kv, p.s.batch);
    kernel<<<grid, t.warps * 32, t.smem_bytes, stream>>>(p);
  }
  if ((e = cudaGetLastError()) != cudaSuccess) return kernels::fail(VSTACK_ERR_CUDA, "attn bwd: launch: %s", cudaGetErrorString(e));

  if constexpr (Wg) bwd_dq_kernel<T, D, true><<<rgrid, 256, 0, stream>>>(p);
  else bwd_dq_kernel<T, D><<<rgrid, 256, 0, stream>>>(p);
  if ((e = cudaGetLastError()) != cudaSuccess) return kernels::fail(VSTACK_ERR_CUDA, "attn bwd dq: launch: %s", cudaGetErrorString(e));
  return VSTACK_OK;
}

// The wgmma kernel runs only where it was built for and the device is sm_90 (like the forward).
template <typename T, int D, bool Causal>
vstack_status_t launch_bwd(const BwdParams& p, cudaStream_t stream) {
  if constexpr (D == 128 && VSTACK_ATTN_BWD_WGMMA) {
    if (device_is_sm90()) return launch_bwd_impl<T, D, Causal, true>(p, stream);
  }
  return launch_bwd_impl<T, D, Causal, false>(p, stream);
}

}  // namespace vstack::attn
