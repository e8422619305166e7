// The C API of quant/ (include/vstack/fp4.h): argument checks, then dispatch
// to the kernel instantiation for (format, dtype, layout / tile config).
// This TU quantizes on the GPU: the NF4 lookup's bias in constant memory (Note [Biased lookup]).
#define VSTACK_NF4_LOOKUP_TU 1

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/device_info.hpp"
#include "kernels/status.hpp"
#include "kernels/target.hpp"
#include "quant/convert_kernels.cuh"
#include "quant/env.hpp"
#include "quant/gemm_kernel.cuh"
#include "quant/gemm_traits.hpp"
#include "quant/gemv_plan.hpp"
#include "quant/layout.hpp"
#include "vstack/kernels.h"

namespace vstack::quant {
namespace {

using kernels::fail;

constexpr const char* format_name(int f) {
  return f == 0 ? "nvfp4" : f == 1 ? "mxfp4" : f == 2 ? "nf4" : f == 3 ? "nf4_dq" : "?";
}

bool aligned(const void* p, uintptr_t a) { return (reinterpret_cast<uintptr_t>(p) % a) == 0; }

vstack_status_t cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return VSTACK_OK;
  if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction)
    return fail(VSTACK_ERR_UNSUPPORTED_DEVICE, "%s: %s (libvstack_kernels.so was built for another GPU architecture)",
                what, cudaGetErrorString(e));
  if (e == cudaErrorMemoryAllocation) return fail(VSTACK_ERR_OUT_OF_MEMORY, "%s: %s", what, cudaGetErrorString(e));
  return fail(VSTACK_ERR_CUDA, "%s: %s", what, cudaGetErrorString(e));
}

using vstack::kernels::DeviceInfo;

// VSTACK_FP4_SMEM_LIMIT=<bytes> lowers smem_optin (never raises it), so that a GPU test on an H100 plans
// as on a part with less shared memory (A100: 166912, sm_86 / sm_89: 101376); unset in normal use.
int smem_limit() {
  static const int v = env_int_in("VSTACK_FP4_SMEM_LIMIT", 1, INT32_MAX, INT32_MAX);
  return v;
}

// The current device (kernels/device_info.hpp), its shared memory lowered by VSTACK_FP4_SMEM_LIMIT.
vstack_status_t device_info(DeviceInfo& d) {
  const char* what = "";
  if (cudaError_t e = vstack::kernels::current_device_info(d, &what); e != cudaSuccess) return cuda_status(e, what);
  d.smem_optin = std::min(d.smem_optin, smem_limit());
  return VSTACK_OK;
}

vstack_status_t check_tensor(const vstack_fp4_tensor_t* q, const char* what) {
  if (!q) return fail(VSTACK_ERR_INVALID_ARGUMENT, "%s: tensor descriptor is NULL", what);
  if (q->format < 0 || q->format >= kNumFormats)
    return fail(VSTACK_ERR_INVALID_ARGUMENT, "%s: unknown format %d", what, q->format);
  if (q->layout != VSTACK_FP4_LAYOUT_LINEAR && q->layout != VSTACK_FP4_LAYOUT_GEMM)
    return fail(VSTACK_ERR_INVALID_ARGUMENT, "%s: unknown layout %d", what, q->layout);
  const Format f = static_cast<Format>(q->format);
  const Layout l = static_cast<Layout>(q->layout);
  if (!shape_ok(f, l, q->rows, q->cols))
    return fail(VSTACK_ERR_UNSUPPORTED_SHAPE, "%s: %s %s layout cannot hold %lld x %lld (%s)", what,
                format_name(q->format), l == Layout::gemm ? "GEMM" : "linear", static_cast<long long>(q->rows),
                static_cast<long long>(q->cols),
                l == Layout::gemm ? "cols must be a positive multiple of 64" : "rows*cols must be a multiple of the block");
  if (!q->codes || !q->scales) return fail(VSTACK_ERR_INVALID_ARGUMENT, "%s: codes or scales is NULL", what);
  if (!aligned(q->codes, 16) || !aligned(q->scales, 16))
    return fail(VSTACK_ERR_MISALIGNED, "%s: codes and scales must be 16-byte aligned", what);
  if ((f == Format::nvfp4 || f == Format::nf4_dq) && !q->scale2)
    return fail(VSTACK_ERR_INVALID_ARGUMENT, "%s: %s needs scale2", what, format_name(q->format));
  if (q->scale2 && !aligned(q->scale2, 4)) return fail(VSTACK_ERR_MISALIGNED, "%s: scale2 must be 4-byte aligned", what);
  return VSTACK_OK;
}

// The quantize kernel is persistent (Note [Quantize kernel]): as many CTAs as fit at once.
template <Format F, typename T, Layout L>
int64_t quantize_grid(const ConvertParams& p, int sms) {
  static const int per_sm = [] {
    int b = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, quantize_kernel<F, T, L>, kQuantThreads<F>, 0) != cudaSuccess) {
      (void)cudaGetLastError();
      b = 1;
    }
    return b > 0 ? b : 1;
  }();
  const int64_t tiles = quant_tiles<F, L>(p.chunks, p.kc_per_row);
  return tiles < int64_t{per_sm} * sms ? tiles : int64_t{per_sm} * sms;
}

template <Format F, typename T, Layout L>
cudaError_t run_convert(bool quant, const ConvertParams& p, int sms, cudaStream_t st) {
  if (quant) {
    quantize_kernel<F, T, L><<<static_cast<unsigned>(quantize_grid<F, T, L>(p, sms)), kQuantThreads<F>, 0, st>>>(p);
  } else {
    const int64_t per_cta = kConvertThreads * kDequantElems / 64;
    dequantize_kernel<F, T, L><<<static_cast<unsigned>((p.chunks + per_cta - 1) / per_cta), kConvertThreads, 0, st>>>(p);
  }
  return cudaGetLastError();
}

template <Format F, typename T>
cudaError_t run_convert(bool quant, Layout l, const ConvertParams& p, int sms, cudaStream_t st) {
  return l == Layout::gemm ? run_convert<F, T, Layout::gemm>(quant, p, sms, st)
                           : run_convert<F, T, Layout::linear>(quant, p, sms, st);
}

template <Format F>
cudaError_t run_convert(bool quant, vstack_dtype_t dt, Layout l, const ConvertParams& p, int sms, cudaStream_t st) {
  switch (dt) {
    case VSTACK_DTYPE_F32: return run_convert<F, float>(quant, l, p, sms, st);
    case VSTACK_DTYPE_F16: return run_convert<F, __half>(quant, l, p, sms, st);
    default: return run_convert<F, __nv_bfloat16>(quant, l, p, sms, st);
  }
}

cudaError_t run_convert(bool quant, Format f, vstack_dtype_t dt, Layout l, const ConvertParams& p, int sms,
                        cudaStream_t st) {
  switch (f) {
    case Format::nvfp4: return run_convert<Format::nvfp4>(quant, dt, l, p, sms, st);
    case Format::mxfp4: return run_convert<Format::mxfp4>(quant, dt, l, p, sms, st);
    case Format::nf4: return run_convert<Format::nf4>(quant, dt, l, p, sms, st);
    default: return run_convert<Format::nf4_dq>(quant, dt, l, p, sms, st);
  }
}

template <typename T>
cudaError_t run_amax(const void* x, int64_t chunks, float* out, int sms, cudaStream_t st) {
  const int64_t n8 = chunks * 8, want = (n8 + 255) / 256;  // groups of 8 elements, one per thread
  const unsigned grid = static_cast<unsigned>(want < 8LL * sms ? want : 8LL * sms);
  amax_kernel<T><<<grid, 256, 0, st>>>(static_cast<const T*>(x), n8, reinterpret_cast<unsigned*>(out));
  return cudaGetLastError();
}

vstack_status_t convert(bool quant, const void* data, vstack_dtype_t dtype, const vstack_fp4_tensor_t* q,
                        void* stream) {
  const char* what = quant ? "vstack_fp4_quantize" : "vstack_fp4_dequantize";
  kernels::clear_error();
  if (vstack_status_t s = check_tensor(q, what); s != VSTACK_OK) return s;
  if (!data) return fail(VSTACK_ERR_INVALID_ARGUMENT, "%s: %s is NULL", what, quant ? "x" : "y");
  if (dtype != VSTACK_DTYPE_F32 && dtype != VSTACK_DTYPE_F16 && dtype != VSTACK_DTYPE_BF16)
    return fail(VSTACK_ERR_UNSUPPORTED_DTYPE, "%s: dtype %d", what, static_cast<int>(dtype));
  if (!aligned(data, 16)) return fail(VSTACK_ERR_MISALIGNED, "%s: %s must be 16-byte aligned", what, quant ? "x" : "y");
  const int64_t n = q->rows * q->cols;
  if (n % 64 != 0)
    return fail(VSTACK_ERR_UNSUPPORTED_SHAPE, "%s: the GPU kernels need rows*cols (%lld) to be a multiple of 64", what,
                static_cast<long long>(n));
  DeviceInfo dev;
  if (vstack_status_t s = device_info(dev); s != VSTACK_OK) return s;
  const int sms = dev.sms;
  const Format f = static_cast<Format>(q->format);
  const Layout l = static_cast<Layout>(q->layout);
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  ConvertParams p{};
  p.in = data;
  p.out = const_cast<void*>(data);
  p.codes = static_cast<uint8_t*>(q->codes);
  p.scales = static_cast<uint8_t*>(q->scales);
  p.scale2 = q->scale2;
  p.chunks = n / 64;
  p.kc_per_row = q->cols / 64;
  p.npad = gemm_npad(q->rows);
  if (quant) {
    if (l == Layout::gemm && p.npad != q->rows) {  // padding rows of the scale table and codes are zero
      const Sizes sz = sizes(f, l, q->rows, q->cols);
      if (cudaError_t e = cudaMemsetAsync(q->scales, 0, sz.scales_bytes, st); e != cudaSuccess)
        return cuda_status(e, "cudaMemsetAsync(scales)");
      const int64_t tail = (q->rows / 16) * 16;  // the last, partial tile's blocks
      if (cudaError_t e = cudaMemsetAsync(static_cast<uint8_t*>(q->codes) + gemm_chunk(tail, 0, q->cols), 0,
                                          static_cast<size_t>((p.npad - tail) * q->cols / 2), st);
          e != cudaSuccess)
        return cuda_status(e, "cudaMemsetAsync(codes)");
    }
    if (f == Format::nvfp4) {
      nvfp4_init_kernel<<<1, 1, 0, st>>>(q->scale2);
      if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return cuda_status(e, "nvfp4 init kernel");
      cudaError_t e = dtype == VSTACK_DTYPE_F32   ? run_amax<float>(data, p.chunks, q->scale2, sms, st)
                      : dtype == VSTACK_DTYPE_F16 ? run_amax<__half>(data, p.chunks, q->scale2, sms, st)
                                                  : run_amax<__nv_bfloat16>(data, p.chunks, q->scale2, sms, st);
      if (e != cudaSuccess) return cuda_status(e, "amax kernel");
    }
    if (f == Format::mxfp4 && q->scale2) {  // the range flag, lowered by the quantize kernel (FORMAT.md)
      mxfp4_flag_init_kernel<<<1, 1, 0, st>>>(q->scale2);
      if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return cuda_status(e, "mxfp4 flag kernel");
    }
  }
  if (cudaError_t e = run_convert(quant, f, dtype, l, p, sms, st); e != cudaSuccess)
    return cuda_status(e, quant ? "quantize kernel" : "dequantize kernel");
  if (quant && f == Format::nvfp4) {
    nvfp4_finalize_kernel<<<1, 1, 0, st>>>(q->scale2);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return cuda_status(e, "nvfp4 finalize kernel");
  }
  return VSTACK_OK;
}

// VSTACK_FP4_GEMM_CONFIG=<id> forces a tile config (GemmConfigId) for every matmul: for
// benchmarks and tests of the configs the heuristic does not pick; unset in normal use.
int forced_config() {
  static const int v = env_int_in("VSTACK_FP4_GEMM_CONFIG", 0, kNumGemmConfigs - 1, -1);
  return v;
}

template <typename T>
GemmLaunchFn pick_launcher(Format f, GemmConfigId id) {
  switch (f) {
    case Format::nvfp4: return gemm_launcher<Format::nvfp4, T>(id);
    case Format::mxfp4: return gemm_launcher<Format::mxfp4, T>(id);
    case Format::nf4: return gemm_launcher<Format::nf4, T>(id);
    default: return gemm_launcher<Format::nf4_dq, T>(id);
  }
}

}  // namespace
}  // namespace vstack::quant

using namespace vstack::quant;

extern "C" VSTACK_API vstack_status_t vstack_fp4_sizes(vstack_fp4_format_t format, vstack_fp4_layout_t layout,
                                                       int64_t rows, int64_t cols, size_t* codes_bytes,
                                                       size_t* scales_bytes, size_t* scale2_count) {
  vstack::kernels::clear_error();
  if (format < 0 || format >= kNumFormats)
    return vstack::kernels::fail(VSTACK_ERR_INVALID_ARGUMENT, "vstack_fp4_sizes: unknown format %d", format);
  if (layout != VSTACK_FP4_LAYOUT_LINEAR && layout != VSTACK_FP4_LAYOUT_GEMM)
    return vstack::kernels::fail(VSTACK_ERR_INVALID_ARGUMENT, "vstack_fp4_sizes: unknown layout %d", layout);
  const Format f = static_cast<Format>(format);
  const Layout l = static_cast<Layout>(layout);
  if (!shape_ok(f, l, rows, cols))
    return vstack::kernels::fail(VSTACK_ERR_UNSUPPORTED_SHAPE, "vstack_fp4_sizes: %s cannot hold %lld x %lld",
                                 format_name(format), static_cast<long long>(rows), static_cast<long long>(cols));
  const Sizes s = sizes(f, l, rows, cols);
  if (codes_bytes) *codes_bytes = static_cast<size_t>(s.codes_bytes);
  if (scales_bytes) *scales_bytes = static_cast<size_t>(s.scales_bytes);
  if (scale2_count) *scale2_count = static_cast<size_t>(s.scale2_count);
  return VSTACK_OK;
}

extern "C" VSTACK_API vstack_status_t vstack_fp4_quantize(const void* x, vstack_dtype_t dtype,
                                                          const vstack_fp4_tensor_t* q, void* stream) {
  return convert(true, x, dtype, q, stream);
}

extern "C" VSTACK_API vstack_status_t vstack_fp4_dequantize(const vstack_fp4_tensor_t* q, void* y,
                                                            vstack_dtype_t dtype, void* stream) {
  return convert(false, y, dtype, q, stream);
}

extern "C" VSTACK_API int vstack_fp4_matmul_config(int64_t m, int64_t n, int64_t k, int sms) {
  return static_cast<int>(pick_gemm_config(m, n, k, sms));
}

extern "C" VSTACK_API vstack_status_t vstack_fp4_matmul(const void* x, vstack_dtype_t dtype, int64_t m,
                                                        const vstack_fp4_tensor_t* w, const void* bias, void* y,
                                                        void* stream) {
  using vstack::kernels::fail;
  constexpr const char* what = "vstack_fp4_matmul";
  vstack::kernels::clear_error();
  if (vstack_status_t s = check_tensor(w, what); s != VSTACK_OK) return s;
  if (w->layout != VSTACK_FP4_LAYOUT_GEMM)
    return fail(VSTACK_ERR_INVALID_ARGUMENT, "%s: the weight must be in the GEMM layout", what);
  if (dtype != VSTACK_DTYPE_F16 && dtype != VSTACK_DTYPE_BF16)
    return fail(VSTACK_ERR_UNSUPPORTED_DTYPE, "%s: x must be f16 or bf16 (dtype %d)", what, static_cast<int>(dtype));
  if (m < 0) return fail(VSTACK_ERR_INVALID_ARGUMENT, "%s: m = %lld", what, static_cast<long long>(m));
  if (m == 0) return VSTACK_OK;
  if (!x || !y) return fail(VSTACK_ERR_INVALID_ARGUMENT, "%s: x or y is NULL", what);
  const int64_t N = w->rows, K = w->cols;
  if (m > int64_t{65535} * 128 || N > INT32_MAX / 2 || K > INT32_MAX / 2 || m * K > (int64_t{1} << 40))
    return fail(VSTACK_ERR_UNSUPPORTED_SHAPE, "%s: %lld x %lld x %lld is too large", what, static_cast<long long>(m),
                static_cast<long long>(N), static_cast<long long>(K));
  if (!aligned(x, 16)) return fail(VSTACK_ERR_MISALIGNED, "%s: x must be 16-byte aligned", what);
  if (!aligned(y, 2) || (bias && !aligned(bias, 2)))
    return fail(VSTACK_ERR_MISALIGNED, "%s: y and bias must be 2-byte aligned", what);
  DeviceInfo dev;
  if (vstack_status_t s = device_info(dev); s != VSTACK_OK) return s;
  const int cc = dev.cc, sms = dev.sms;
  if (cc < 80) return fail(VSTACK_ERR_UNSUPPORTED_DEVICE, "%s: needs compute capability 8.0+ (have %d.%d)", what, cc / 10, cc % 10);
  const Format f = static_cast<Format>(w->format);
  GemmConfigId id = pick_gemm_config(m, N, K, sms);
  if (forced_config() >= 0 && (static_cast<GemmConfigId>(forced_config()) != GemmConfigId::gemv || id == GemmConfigId::gemv))
    id = static_cast<GemmConfigId>(forced_config());  // (the decode kernel only where its plan applies)
  // pick_gemm_config assumes an H100 built for sm_90a; elsewhere the mma.sync configs, and the decode
  // kernel only where x's slice fits this device's shared memory without clusters if it has none
  const int64_t x_max = gemv_x_max(dev.smem_optin);
  const bool sm90 = vstack::kernels::has_sm90_features(cc);
  if (is_wgmma_config(id) && !vstack::kernels::has_wgmma(cc)) id = mma_sync_config(m, N, K, sms, x_max, sm90);
  if (id == GemmConfigId::gemv && !plan_gemv(m, N, K, sms, sm90, nullptr, 0, x_max).ok)
    id = mma_sync_config(m, N, K, sms, x_max, sm90);
  GemmLaunchFn fn = dtype == VSTACK_DTYPE_BF16 ? pick_launcher<__nv_bfloat16>(f, id) : pick_launcher<__half>(f, id);
  GemmParams p{};
  p.x = x;
  p.codes = static_cast<const uint8_t*>(w->codes);
  p.scales = static_cast<const uint8_t*>(w->scales);
  p.scale2 = w->scale2;
  p.bias = bias;
  p.y = y;
  p.m = static_cast<int>(m);
  p.n = static_cast<int>(N);
  p.k = static_cast<int>(K);
  p.npad = static_cast<int>(gemm_npad(N));
  p.sms = sms;
  p.cc = cc;
  p.smem_optin = dev.smem_optin;
  return cuda_status(fn(p, static_cast<cudaStream_t>(stream)), "fp4 gemm kernel");
}
