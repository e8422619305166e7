/* vstack FP4: weight quantisation (NVFP4, MXFP4, NF4) and fused dequant-GEMM.
 * Included by vstack/kernels.h (which defines vstack_status_t, vstack_dtype_t
 * and VSTACK_API); quant/FORMAT.md documents every bit of the formats and layouts.
 *
 * A quantised tensor is described by vstack_fp4_tensor_t; its three device
 * buffers are sized by vstack_fp4_sizes() and owned by the caller. All device
 * functions are asynchronous on `stream` (a cudaStream_t; NULL = legacy default)
 * and return a status; vstack_last_error() has the details of a failure.
 */
#ifndef VSTACK_FP4_H
#define VSTACK_FP4_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vstack_fp4_format {
  VSTACK_FP4_NVFP4 = 0,  /* E2M1, E4M3 scale per 16, fp32 scale per tensor */
  VSTACK_FP4_MXFP4 = 1,  /* E2M1, E8M0 scale per 32 (OCP MX v1.0) */
  VSTACK_FP4_NF4 = 2,    /* NF4 table, fp32 absmax per 64 */
  VSTACK_FP4_NF4_DQ = 3, /* NF4 table, E4M3 absmax per 64, fp32 scale per 256 blocks */
} vstack_fp4_format_t;

typedef enum vstack_fp4_layout {
  VSTACK_FP4_LAYOUT_LINEAR = 0, /* row-major codes, one scale per block in order */
  VSTACK_FP4_LAYOUT_GEMM = 1,   /* [N x K] weight, K % 64 == 0, in 16-row tiles for the GEMM (quant/FORMAT.md) */
} vstack_fp4_layout_t;

typedef struct vstack_fp4_tensor {
  int32_t format;  /* vstack_fp4_format_t */
  int32_t layout;  /* vstack_fp4_layout_t */
  int64_t rows;    /* GEMM layout: N (output features) */
  int64_t cols;    /* GEMM layout: K (input features) */
  void* codes;     /* device, codes_bytes, 16-byte aligned */
  void* scales;    /* device, scales_bytes, 16-byte aligned */
  float* scale2;   /* device, scale2_count floats (NVFP4: 2, the tensor scale and the range flag; NF4_DQ:
                      ceil(blocks/256)); MXFP4: NULL or 1, the range flag (quant/FORMAT.md: quantize writes the
                      flags, matmul trusts them); NF4: NULL */
} vstack_fp4_tensor_t;

/* Buffer sizes for a rows x cols tensor. Fails with VSTACK_ERR_UNSUPPORTED_SHAPE
 * unless LINEAR: rows*cols % block == 0 (16/32/64/64), GEMM: cols % 64 == 0. */
VSTACK_API vstack_status_t vstack_fp4_sizes(vstack_fp4_format_t format, vstack_fp4_layout_t layout, int64_t rows,
                                            int64_t cols, size_t* codes_bytes, size_t* scales_bytes,
                                            size_t* scale2_count);

/* Quantise x (rows x cols, row-major, dtype f32/f16/bf16, 16-byte aligned) into q
 * with round-to-nearest; bit-identical to the CPU reference. The GPU path also
 * needs rows*cols % 64 == 0. A block holding NaN/Inf gets a NaN scale. */
VSTACK_API vstack_status_t vstack_fp4_quantize(const void* x, vstack_dtype_t dtype, const vstack_fp4_tensor_t* q,
                                               void* stream);

/* Decode q into y (rows x cols, row-major, dtype f32/f16/bf16, 16-byte aligned);
 * value = code_value * block_scale in fp32, then rounded to nearest even. */
VSTACK_API vstack_status_t vstack_fp4_dequantize(const vstack_fp4_tensor_t* q, void* y, vstack_dtype_t dtype,
                                                 void* stream);

/* y[m][n] = sum_k x[m][k] * W[n][k] (+ bias[n]) for x [m x K] (f16 or bf16,
 * row-major, contiguous, 16-byte aligned), W = w (GEMM layout, N x K), bias
 * NULL or [N] of x's dtype, y [m x N] of x's dtype. fp32 accumulation.
 * Where the output tiles are too few to fill the GPU (m <= 16 with a large K,
 * or mid m on a small N), K may be split over CTAs that meet in a workspace the
 * library allocates (a few MB, 64 MB at most): one per device and stream for
 * eager calls, kept until exit; one per captured graph (and capturing stream),
 * freed after the graph is destroyed. The sums stay deterministic.
 * On sm_90 the m <= 16 kernels launch as programmatic dependents of the kernel
 * before them in the stream and start reading w's codes and scales before that
 * kernel has finished (x, bias and y wait for it): w must not be written by a
 * kernel that triggers its dependents early (griddepcontrol.launch_dependents,
 * cudaTriggerProgrammaticLaunchCompletion) and directly precedes the matmul.
 * vstack's own kernels that write w (quantize) do not trigger early.
 * MXFP4: where w->scale2 holds the range flag that vstack_fp4_quantize wrote (FORMAT.md), the m <= 16
 * kernels fold the block scales into the weights without checking each chunk's bytes (bf16 x at flag
 * 1 or 2, f16 x at 2); a flag above what the scales allow gives wrong products. NVFP4: w->scale2[1]
 * likewise (1: no scale byte negative or NaN; some bf16 m = 9..16 kernels then shift the bytes into
 * bf16 without a check); write 0 after changing the scales by other means. */
VSTACK_API vstack_status_t vstack_fp4_matmul(const void* x, vstack_dtype_t dtype, int64_t m,
                                             const vstack_fp4_tensor_t* w, const void* bias, void* y, void* stream);

/* Which kernel configuration vstack_fp4_matmul uses for m x N x K on a compute
 * capability 9.0 GPU with `sms` multiprocessors and an sm_90a build (0..4: small16,
 * small32, mid, large, gemv; 5..8: wg256, wg128, wg128n, wg64n); elsewhere it runs
 * an mma.sync config instead of 5..8, and of gemv where x's slice does not fit the
 * device's shared memory. For tests/benches. */
VSTACK_API int vstack_fp4_matmul_config(int64_t m, int64_t n, int64_t k, int sms);

#ifdef __cplusplus
}
#endif

#endif /* VSTACK_FP4_H */
