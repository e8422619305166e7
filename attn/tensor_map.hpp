// Host side of the Hopper forward: is the current device an sm_90 part, and the TMA tensor
// maps of K and V (encoded by kernels/tensor_map.hpp's driver entry point).
#pragma once

#include <cuda.h>  // CUtensorMap and its enums (types only)
#include <cuda_runtime.h>

#include <cstdint>

#include "attn/params.hpp"
#include "kernels/device_info.hpp"
#include "kernels/target.hpp"
#include "kernels/tensor_map.hpp"

namespace vstack::attn {

// Whether the sm_90a kernels run here: this build has them (kernels/target.hpp: an sm_80 build on an
// H100 has empty sm_90a bodies) and the current device is compute capability 9.0 (cached per device:
// kernels/device_info.hpp).
inline bool device_is_sm90() {
  if constexpr (!kernels::kBuiltSm90a) return false;
  kernels::DeviceInfo d;
  return kernels::current_device_info(d) == cudaSuccess && d.cc == 90;
}

// K or V of a fixed-length batch as the 4-d tensor (head_dim, seqlen_k, heads_kv, batch) with
// boxes of (64, box_rows, 1, 1) and the 128-byte swizzle; rows past seqlen_k read as zeros.
// False when TMA cannot describe the tensor (address or a stride not a multiple of 16 bytes):
// the caller then uses the mma.sync kernel.
inline bool make_kv_map(CUtensorMap* map, const Tensor& t, const Shape& s, bool bf16, int box_rows) {
  const auto enc = kernels::tensor_map_encoder();
  if (enc == nullptr || (reinterpret_cast<uintptr_t>(t.ptr) & 15) != 0) return false;
  // A stride of a dimension of extent 1 is never used: give it any legal value.
  auto stride = [](int64_t elems, int extent, int64_t fallback) -> int64_t {
    return extent == 1 ? fallback : elems * 2;
  };
  const int64_t rs = stride(t.row_stride, s.seqlen_k, int64_t(s.head_dim) * 2);
  const int64_t hs = stride(t.head_stride, s.heads_kv, rs * s.seqlen_k);
  const int64_t bs = stride(t.batch_stride, s.batch, hs * s.heads_kv);
  for (int64_t x : {rs, hs, bs})
    if (x <= 0 || x % 16 != 0 || x >= (int64_t(1) << 40)) return false;
  const cuuint64_t dims[4] = {cuuint64_t(s.head_dim), cuuint64_t(s.seqlen_k), cuuint64_t(s.heads_kv),
                              cuuint64_t(s.batch)};
  const cuuint64_t strides[3] = {cuuint64_t(rs), cuuint64_t(hs), cuuint64_t(bs)};
  const cuuint32_t box[4] = {64, cuuint32_t(box_rows), 1, 1};
  const cuuint32_t estr[4] = {1, 1, 1, 1};
  return enc(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, t.ptr, dims, strides,
             box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace vstack::attn
