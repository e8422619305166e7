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

}  // namespace vstack::kernels
