// The C API of attn/ (include/vstack/attn.h): validate, choose the split, dispatch to the
// generated instantiations. Compiled through the generated api.cu (see generate_kernels.py).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>

#include "attn/launch.hpp"
#include "attn/traits.hpp"
#include "attn/validate.hpp"
#include "kernels/status.hpp"
#include "vstack/attn.h"

namespace vstack::attn {
namespace {

using kernels::fail;

// sm_80 and later (bf16 mma.sync): the forward picks its kernel by compute capability at run time
// (attn/fwd_launch.cuh: the wgmma kernel on 9.0, mma.sync elsewhere); the default build (meson
// option sm = 90a) holds sm_90a code only. The answer is cached per device: the queries cost
// microseconds that show at decode sizes.
constexpr int kMaxDevices = 64;
std::atomic<int> g_sms[kMaxDevices];

vstack_status_t device_sms(int* sms) {
  int dev = 0, major = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return fail(VSTACK_ERR_CUDA, "attn: cudaGetDevice: %s", cudaGetErrorString(e));
  if (dev >= 0 && dev < kMaxDevices && (*sms = g_sms[dev].load(std::memory_order_relaxed)) > 0) return VSTACK_OK;
  e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev);
  if (e != cudaSuccess) return fail(VSTACK_ERR_CUDA, "attn: device query: %s", cudaGetErrorString(e));
  if (major < 8) return fail(VSTACK_ERR_UNSUPPORTED_DEVICE, "attn: compute capability %d.x; needs 8.0 or later", major);
  if (dev >= 0 && dev < kMaxDevices) g_sms[dev].store(*sms, std::memory_order_relaxed);
  return VSTACK_OK;
}

int splits_for(const vstack_attn_fwd_args_t& a, const Shape& s, int sms) {
  if (a.num_splits > 0) return a.num_splits;
  return choose_num_splits(s.batch, s.heads_kv, s.seqlen_q * s.group, s.seqlen_k, s.head_dim, sms);
}


template <typename T, int D>
vstack_status_t fwd_d(const FwdParams& p, cudaStream_t st) {
  return p.s.causal ? launch_fwd<T, D, true>(p, st) : launch_fwd<T, D, false>(p, st);
}
template <typename T>
vstack_status_t fwd_t(const FwdParams& p, cudaStream_t st) {
  switch (p.s.head_dim) {
    case 64: return fwd_d<T, 64>(p, st);
    case 128: return fwd_d<T, 128>(p, st);
    default: return fwd_d<T, 256>(p, st);
  }
}
template <typename T, int D>
vstack_status_t bwd_d(const BwdParams& p, cudaStream_t st) {
  return p.s.causal ? launch_bwd<T, D, true>(p, st) : launch_bwd<T, D, false>(p, st);
}
template <typename T>
vstack_status_t bwd_t(const BwdParams& p, cudaStream_t st) {
  switch (p.s.head_dim) {
    case 64: return bwd_d<T, 64>(p, st);
    case 128: return bwd_d<T, 128>(p, st);
    default: return bwd_d<T, 256>(p, st);
  }
}

}  // namespace
}  // namespace vstack::attn

using namespace vstack::attn;
using vstack::kernels::fail;

extern "C" VSTACK_API vstack_status_t vstack_attn_fwd_workspace_size(const vstack_attn_fwd_args_t* args, size_t* bytes) {
  if (args == nullptr || bytes == nullptr) return fail(VSTACK_ERR_INVALID_ARGUMENT, "attn: NULL args or bytes");
  Shape s{};
  vstack_status_t st = validate_shape(args->shape, &s);
  if (st != VSTACK_OK) return st;
  int sms = 0;
  if ((st = device_sms(&sms)) != VSTACK_OK) return st;
  *bytes = fwd_workspace_bytes(s, splits_for(*args, s, sms));
  return VSTACK_OK;
}

extern "C" VSTACK_API vstack_status_t vstack_attn_fwd(const vstack_attn_fwd_args_t* args, void* stream) {
  if (args == nullptr) return fail(VSTACK_ERR_INVALID_ARGUMENT, "attn: NULL args");
  FwdParams p{};
  vstack_status_t st = validate_fwd(*args, &p);
  if (st != VSTACK_OK) return st;
  int sms = 0;
  if ((st = device_sms(&sms)) != VSTACK_OK) return st;
  p.num_splits = splits_for(*args, p.s, sms);
  const size_t need = fwd_workspace_bytes(p.s, p.num_splits);
  if (need > 0) {
    if (args->workspace == nullptr || args->workspace_bytes < need)
      return fail(VSTACK_ERR_INVALID_ARGUMENT, "attn fwd: workspace of %zu bytes given, %zu needed (%d splits)",
                  args->workspace == nullptr ? size_t(0) : args->workspace_bytes, need, p.num_splits);
    fwd_workspace_carve(p.s, p.num_splits, args->workspace, &p);
  }
  auto* s = static_cast<cudaStream_t>(stream);
  vstack::kernels::clear_error();
  return args->shape.dtype == VSTACK_DTYPE_BF16 ? fwd_t<__nv_bfloat16>(p, s) : fwd_t<__half>(p, s);
}

extern "C" VSTACK_API vstack_status_t vstack_attn_bwd_workspace_size(const vstack_attn_bwd_args_t* args, size_t* bytes) {
  if (args == nullptr || bytes == nullptr) return fail(VSTACK_ERR_INVALID_ARGUMENT, "attn: NULL args or bytes");
  Shape s{};
  vstack_status_t st = validate_shape(args->shape, &s);
  if (st != VSTACK_OK) return st;
  *bytes = bwd_workspace_bytes(s);
  return VSTACK_OK;
}

extern "C" VSTACK_API vstack_status_t vstack_attn_bwd(const vstack_attn_bwd_args_t* args, void* stream) {
  if (args == nullptr) return fail(VSTACK_ERR_INVALID_ARGUMENT, "attn: NULL args");
  BwdParams p{};
  vstack_status_t st = validate_bwd(*args, &p);
  if (st != VSTACK_OK) return st;
  int sms = 0;
  if ((st = device_sms(&sms)) != VSTACK_OK) return st;
  const size_t need = bwd_workspace_bytes(p.s);
  if (args->workspace == nullptr || args->workspace_bytes < need)
    return fail(VSTACK_ERR_INVALID_ARGUMENT, "attn bwd: workspace of %zu bytes given, %zu needed",
                args->workspace == nullptr ? size_t(0) : args->workspace_bytes, need);
  bwd_workspace_carve(p.s, args->workspace, &p);
  auto* s = static_cast<cudaStream_t>(stream);
  vstack::kernels::clear_error();
  return args->shape.dtype == VSTACK_DTYPE_BF16 ? bwd_t<__nv_bfloat16>(p, s) : bwd_t<__half>(p, s);
}
