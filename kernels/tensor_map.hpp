// cuTensorMapEncodeTiled for the TMA kernels of libvstack_kernels.so. It is a driver function:
// fetched once through cudart's cudaGetDriverEntryPointByVersion, so that the library never
// links libcuda. nullptr where the driver does not provide it (callers then take a kernel
// without TMA).
#pragma once

#include <cuda.h>  // CUtensorMap and its enums (types only)
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

namespace vstack::kernels {

inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// A tiled tensor map of rank R over `base`: dims (innermost first) of dt elements, the byte strides of
// dims 1 .. R - 1, a box; no interleave, unit element strides, 256-byte L2 promotion, elements out of
// bounds read as zeros. False where the driver has no encoder or refuses the description.
template <int R>
inline bool encode_tiled(CUtensorMap* m, CUtensorMapDataType dt, const void* base, const cuuint64_t (&dims)[R],
                         const cuuint64_t (&strides)[R - 1], const cuuint32_t (&box)[R], CUtensorMapSwizzle sw) {
  const auto enc = tensor_map_encoder();
  cuuint32_t es[R];
  for (auto& e : es) e = 1;
  return enc && enc(m, dt, R, const_cast<void*>(base), dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, sw,
                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace vstack::kernels
