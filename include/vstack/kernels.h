/* vstack kernels: the C API of libvstack_kernels.so.
 *
 * Every function returns a vstack_status_t, takes an explicit cudaStream_t
 * (passed as void* so that this header needs no CUDA headers) and never
 * throws. vstack_status_string() describes a code; vstack_last_error()
 * returns a thread-local message with details of the last failure.
 */
#ifndef VSTACK_KERNELS_H
#define VSTACK_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define VSTACK_API __attribute__((visibility("default")))
#else
#define VSTACK_API
#endif

typedef enum vstack_status {
  VSTACK_OK = 0,
  VSTACK_ERR_INVALID_ARGUMENT = 1, /* null pointer, bad enum, negative size */
  VSTACK_ERR_UNSUPPORTED_SHAPE = 2, /* shape the kernels do not handle (e.g. K not a multiple of the block) */
  VSTACK_ERR_UNSUPPORTED_DTYPE = 3,
  VSTACK_ERR_MISALIGNED = 4,        /* pointer alignment below what the kernel needs */
  VSTACK_ERR_UNSUPPORTED_DEVICE = 5, /* compute capability too old */
  VSTACK_ERR_CUDA = 6,              /* a CUDA call failed; see vstack_last_error() */
  VSTACK_ERR_OUT_OF_MEMORY = 7,
} vstack_status_t;

typedef enum vstack_dtype {
  VSTACK_DTYPE_F32 = 0,
  VSTACK_DTYPE_F16 = 1,
  VSTACK_DTYPE_BF16 = 2,
} vstack_dtype_t;

VSTACK_API const char* vstack_status_string(vstack_status_t s);
VSTACK_API const char* vstack_last_error(void);

#ifdef __cplusplus
}
#endif

#include "vstack/fp4.h"  /* FP4 quantisation and dequant-GEMM (quant/) */
#include "vstack/attn.h" /* flash attention (attn/) */

#endif /* VSTACK_KERNELS_H */
