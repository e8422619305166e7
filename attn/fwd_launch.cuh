// Launch of the forward kernels (+ the split combine). Included by the generated files only.
// On an sm_90 device, fixed-length batches without a split over keys go to the warp-specialised
// wgmma kernel (fwd_sm90_kernel.cuh) when TMA can describe K and V; everything else (other
// devices, variable lengths, decode splits, strides TMA cannot take) to the mma.sync kernel.
#pragma once

#include <type_traits>

#include "attn/fwd_kernel.cuh"
#include "attn/fwd_sm90_kernel.cuh"
#include "attn/launch.hpp"
#include "attn/tensor_map.hpp"
#include "kernels/status.hpp"

namespace vstack::attn {

// Head dims that take the sm90 kernel (the others stay on mma.sync where it is as fast).
VSTACK_ATTN_HD constexpr bool fwd_sm90_head_dim(int d) { return d == 64 || d == 128 || d == 256; }

template <typename T, int D, bool Causal>
bool launch_fwd_sm90(const FwdParams& p, cudaStream_t stream, vstack_status_t* status) {
  if (!fwd_sm90_head_dim(D) || p.num_splits != 1 || p.s.cu_seqlens_q != nullptr || !device_is_sm90()) return false;
  constexpr FwdSm90Tile t = fwd_sm90_tile(D);
  FwdSm90Params hp{};
  hp.p = p;
  constexpr bool bf16 = std::is_same_v<T, __nv_bfloat16>;
  if (!make_kv_map(&hp.tk, p.k, p.s, bf16, t.block_n) || !make_kv_map(&hp.tv, p.v, p.s, bf16, t.block_n)) return false;
  auto kernel = fwd_sm90_kernel<T, D, Causal>;
  static std::atomic<uint64_t> smem_set{0};  // one per instantiation of this function
  cudaError_t e = set_smem_once(kernel, t.smem_bytes, smem_set);
  if (e != cudaSuccess) {
    *status = kernels::fail(VSTACK_ERR_CUDA, "attn fwd sm90: cudaFuncSetAttribute(smem %d): %s", t.smem_bytes,
                            cudaGetErrorString(e));
    return true;
  }
  const dim3 grid(ceil_div(int64_t(p.s.seqlen_q) * p.s.group, t.block_m), p.s.heads_kv, p.s.batch);
  kernel<<<grid, (t.consumer_wgs + 1) * 128, t.smem_bytes, stream>>>(hp);
  e = cudaGetLastError();
  *status = e == cudaSuccess ? VSTACK_OK : kernels::fail(VSTACK_ERR_CUDA, "attn fwd sm90: launch: %s", cudaGetErrorString(e));
  return true;
}

template <typename T, int D, bool Causal>
vstack_status_t launch_fwd(const FwdParams& p, cudaStream_t stream) {
  vstack_status_t status = VSTACK_OK;
  if (launch_fwd_sm90<T, D, Causal>(p, stream, &status)) return status;
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
