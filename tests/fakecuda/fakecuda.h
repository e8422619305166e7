/* fakecuda: a host emulation of the CUDA driver subset vstack uses, for CI.
 *
 * The library is named libcuda.so.1 and exports the real driver's symbol
 * names (see src/exports.def and README.md). This header is the only thing
 * it adds: a way for tests to provide "kernels" as host functions.
 *
 * A kernel is registered by name together with its parameter layout (the
 * offsets and sizes cuFuncGetParamInfo / cuKernelGetParamInfo report, exactly
 * as nvcc would lay the parameters out). cuModuleGetFunction /
 * cuLibraryGetKernel then find it by that name in any loaded image.
 * cuLaunchKernel copies the parameter bytes at launch time (from kernelParams
 * or from the `extra` buffer) and the stream's worker thread later calls the
 * function once per launch (not once per thread: the function sees the whole
 * grid and does the work of all blocks).
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <cuda.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fakecuda_dim3 {
  unsigned int x, y, z;
} fakecuda_dim3;

/* What a kernel function receives. Valid only during the call. */
typedef struct fakecuda_launch {
  fakecuda_dim3 grid;
  fakecuda_dim3 block;
  unsigned int shared_mem_bytes;
  CUstream stream;                /* the handle the launch was made on */
  size_t num_params;
  const void* const* params;      /* params[i] points at the bytes of parameter i */
  const void* param_buffer;       /* the whole parameter buffer (layout offsets) */
  size_t param_buffer_size;
  void* user;                     /* as given to fakecuda_register_kernel */
} fakecuda_launch;

typedef void (*fakecuda_kernel_fn)(const fakecuda_launch* launch);

/* Registers (or replaces) the kernel `name`. offsets[i] and sizes[i] describe
 * parameter i (num_params may be 0; then both may be NULL). Offsets must be
 * increasing and parameters must not overlap.
 * Returns 0 on success, -1 on invalid arguments. Thread-safe. Functions
 * already looked up keep the layout they were looked up with. */
int fakecuda_register_kernel(const char* name, fakecuda_kernel_fn fn, size_t num_params,
                             const size_t* offsets, const size_t* sizes, void* user);

#ifdef __cplusplus
} /* extern "C" */

#include <cstring>
#include <type_traits>

namespace fakecuda {

/* Registers `name` with the natural (nvcc) layout of the parameter types
 * Args...: each parameter at the next multiple of its alignment. */
template <class... Args>
int register_kernel(const char* name, fakecuda_kernel_fn fn, void* user = nullptr) {
  constexpr size_t n = sizeof...(Args);
  size_t offsets[n + 1] = {};
  size_t sizes[n + 1] = {};
  const size_t s[] = {sizeof(Args)..., 0};
  const size_t a[] = {alignof(Args)..., 1};
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    at = (at + a[i] - 1) / a[i] * a[i];
    offsets[i] = at;
    sizes[i] = s[i];
    at += s[i];
  }
  return fakecuda_register_kernel(name, fn, n, offsets, sizes, user);
}

/* Parameter i of a launch, as a T (trivially copyable). */
template <class T>
T arg(const fakecuda_launch* launch, size_t i) {
  static_assert(std::is_trivially_copyable_v<T>, "kernel parameters are bytes");
  T value;
  std::memcpy(&value, launch->params[i], sizeof(T));
  return value;
}

}  // namespace fakecuda
#endif /* __cplusplus */

#endif /* FAKECUDA_H */
