// CK(): the check every GPU test program puts around its CUDA runtime calls. A failure
// prints the call, file, line and error name, and exits with status 2 (1 is reserved for
// "wrong data"). Header only, C++17: the pager's programs are built by nvcc on the GPU
// machine (tests/gpu/pager/run.sh), the others by meson.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CK(call)                                                                      \
  do {                                                                                \
    cudaError_t ck_err_ = (call);                                                     \
    if (ck_err_ != cudaSuccess) {                                                     \
      std::fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call, \
                   cudaGetErrorName(ck_err_), cudaGetErrorString(ck_err_));           \
      std::exit(2);                                                                   \
    }                                                                                 \
  } while (0)
