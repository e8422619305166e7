// Contexts: primary contexts, created contexts, the per-thread current stack.
#include <unordered_set>

#include "internal.hpp"

namespace fakecuda {
namespace {

struct Primary {
  CUctx_st* ctx = nullptr;
  unsigned refs = 0;
  unsigned flags = 0;
};

struct Contexts {
  std::vector<Primary> primary;
  std::unordered_set<const CUctx_st*> live;
};

Contexts& contexts() {  // LOCKING: driver lock
  static Contexts* c = [] {
    auto* p = new Contexts;
    p->primary.resize(static_cast<size_t>(config().devices));
    return p;
  }();
  return *c;
}

thread_local std::vector<CUctx_st*> t_stack;  // back() is current

}  // namespace

CUctx_st* current_context() { return t_stack.empty() ? nullptr : t_stack.back(); }

CUresult need_context(CUctx_st** out) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  CUctx_st* c = current_context();
  if (c == nullptr || !c->alive) return CUDA_ERROR_INVALID_CONTEXT;
  *out = c;
  return CUDA_SUCCESS;
}

int context_device(const CUctx_st* ctx) { return ctx->device; }

bool valid_context(const CUctx_st* ctx) { return contexts().live.count(ctx) != 0; }

void sync_device(int dev) {
  std::vector<CUctx_st*> on_device;
  {
    Lock lock(driver_lock());
    for (const CUctx_st* c : contexts().live)
      if (c->device == dev) on_device.push_back(const_cast<CUctx_st*>(c));
  }
  for (CUctx_st* c : on_device) sync_context(c);  // contexts are never freed
}

CUresult primary_context(int dev, CUctx_st** out) {
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  Primary& p = contexts().primary[static_cast<size_t>(dev)];
  if (p.ctx == nullptr) {
    p.ctx = new CUctx_st;
    p.ctx->device = dev;
    p.ctx->primary = true;
    contexts().live.insert(p.ctx);
  }
  *out = p.ctx;
  return CUDA_SUCCESS;
}

}  // namespace fakecuda

using namespace fakecuda;

namespace {

CUresult create_context(CUcontext* pctx, unsigned flags, CUdevice dev) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  auto* c = new CUctx_st;
  c->device = dev;
  c->flags = flags;
  {
    Lock lock(driver_lock());
    contexts().live.insert(c);
  }
  t_stack.push_back(c);
  *pctx = c;
  return CUDA_SUCCESS;
}

}  // namespace

FAKECUDA_API CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  CUctx_st* c = nullptr;
  if (CUresult r = primary_context(dev, &c)) return r;
  ++contexts().primary[static_cast<size_t>(dev)].refs;
  *pctx = c;
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  Lock lock(driver_lock());
  Primary& p = contexts().primary[static_cast<size_t>(dev)];
  if (p.refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
  --p.refs;  // the context object itself stays usable (see README)
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  CUctx_st* c = nullptr;
  {
    Lock lock(driver_lock());
    Primary& p = contexts().primary[static_cast<size_t>(dev)];
    p.refs = 0;
    c = p.ctx;
  }
  if (c != nullptr) sync_context(c);
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  Lock lock(driver_lock());
  const Primary& p = contexts().primary[static_cast<size_t>(dev)];
  *flags = p.flags;
  *active = p.refs > 0 ? 1 : 0;
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return create_context(pctx, flags, dev);
}

FAKECUDA_API CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params, unsigned int flags,
                                     CUdevice dev) {
  if (params != nullptr && (params->numExecAffinityParams != 0 || params->cigParams != nullptr))
    return CUDA_ERROR_NOT_SUPPORTED;
  return create_context(pctx, flags, dev);
}

FAKECUDA_API CUresult cuCtxDestroy_v2(CUcontext ctx) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  {
    Lock lock(driver_lock());
    if (ctx == nullptr || !valid_context(ctx)) return CUDA_ERROR_INVALID_VALUE;
    if (ctx->primary) return CUDA_ERROR_INVALID_CONTEXT;
  }
  sync_context(ctx);
  {
    Lock lock(driver_lock());
    ctx->alive = false;
    contexts().live.erase(ctx);
  }
  for (auto& c : t_stack)
    if (c == ctx) c = nullptr;
  while (!t_stack.empty() && t_stack.back() == nullptr) t_stack.pop_back();
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx == nullptr) {
    if (!t_stack.empty()) t_stack.pop_back();
    return CUDA_SUCCESS;
  }
  {
    Lock lock(driver_lock());
    if (!valid_context(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (t_stack.empty())
    t_stack.push_back(ctx);
  else
    t_stack.back() = ctx;
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuCtxGetCurrent(CUcontext* pctx) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pctx = current_context();
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuCtxGetDevice(CUdevice* dev) {
  if (dev == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* c = nullptr;
  if (CUresult r = need_context(&c)) return r;
  *dev = c->device;
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  {
    Lock lock(driver_lock());
    if (ctx == nullptr || !valid_context(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  }
  t_stack.push_back(ctx);
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (t_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx != nullptr) *pctx = t_stack.back();
  t_stack.pop_back();
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuCtxSynchronize() {
  CUctx_st* c = nullptr;
  if (CUresult r = need_context(&c)) return r;
  {
    Lock lock(driver_lock());
    if (CUresult r = check_unsafe_call()) return r;
  }
  sync_context(c);
  return CUDA_SUCCESS;
}
