// Kernels as registered host functions: modules, libraries, functions,
// parameter layouts and launches.
//
// Note [CUfunction vs CUkernel]
// cudart 13 launches through cuLaunchKernel with a CUkernel cast to
// CUfunction. Like the real driver (measured, see DESIGN.md), the launch
// accepts both, while cuFuncGetParamInfo / cuFuncGetName reject a CUkernel
// and cuKernelGetParamInfo / cuKernelGetName reject a CUfunction. The two
// handle kinds live in separate registries, so a pointer is never guessed.
#include <sys/stat.h>

#include <cstring>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "internal.hpp"

struct CUmod_st {
  std::map<std::string, CUfunc_st*> functions;  // looked up so far
};

struct CUfunc_st {
  std::shared_ptr<const fakecuda::KernelDesc> desc;
  CUmod_st* module = nullptr;
};

struct CUlib_st {
  std::map<std::string, CUkern_st*> kernels;
};

struct CUkern_st {
  std::shared_ptr<const fakecuda::KernelDesc> desc;
  CUlib_st* library = nullptr;
  CUfunc_st* function = nullptr;  // from cuKernelGetFunction
};

namespace fakecuda {
namespace {

struct Kernels {
  std::unordered_map<std::string, std::shared_ptr<const KernelDesc>> registered;
  std::unordered_set<const CUmod_st*> modules;
  std::unordered_set<const CUfunc_st*> functions;
  std::unordered_set<const CUlib_st*> libraries;
  std::unordered_set<const CUkern_st*> kernels;
};

Kernels& kernels() {  // LOCKING: driver lock
  static Kernels* k = new Kernels;
  return *k;
}

CUresult need_init() { return initialized() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED; }

// The layout of a launchable handle: a CUfunction, or a CUkernel cast to one.
const KernelDesc* launchable(CUfunction f) {  // LOCKING: driver lock
  if (kernels().functions.count(f) != 0) return f->desc.get();
  auto* k = reinterpret_cast<CUkern_st*>(f);
  if (kernels().kernels.count(k) != 0) return k->desc.get();
  return nullptr;
}

CUresult build_params(const KernelDesc& d, void** kernel_params, void** extra,
                      std::vector<unsigned char>* out) {
  if (kernel_params != nullptr && extra != nullptr) return CUDA_ERROR_INVALID_VALUE;
  const size_t need = d.buffer_size();
  if (extra != nullptr) {
    void* buffer = nullptr;
    size_t* size = nullptr;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
        buffer = extra[i + 1];
      else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
        size = static_cast<size_t*>(extra[i + 1]);
      else
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (buffer == nullptr && size == nullptr && need == 0) {  // a kernel without parameters
      out->clear();
      return CUDA_SUCCESS;
    }
    if (buffer == nullptr || size == nullptr || *size < need) return CUDA_ERROR_INVALID_VALUE;
    const auto* b = static_cast<const unsigned char*>(buffer);
    out->assign(b, b + *size);
    return CUDA_SUCCESS;
  }
  out->assign(need, 0);
  if (d.offsets.empty()) return CUDA_SUCCESS;
  if (kernel_params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < d.offsets.size(); ++i)
    std::memcpy(out->data() + d.offsets[i], kernel_params[i], d.sizes[i]);
  return CUDA_SUCCESS;
}

CUresult param_info(const KernelDesc& d, size_t index, size_t* offset, size_t* size) {
  if (index >= d.offsets.size()) return CUDA_ERROR_INVALID_VALUE;
  if (offset != nullptr) *offset = d.offsets[index];
  if (size != nullptr) *size = d.sizes[index];
  return CUDA_SUCCESS;
}

}  // namespace

CUresult make_kernel_work(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                          unsigned by, unsigned bz, unsigned shmem, void** kernel_params,
                          void** extra, KernelWork* out) {
  const KernelDesc* d = launchable(f);
  if (d == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0) return CUDA_ERROR_INVALID_VALUE;
  if (gy > 65535 || gz > 65535 || gx > 2147483647u) return CUDA_ERROR_INVALID_VALUE;
  if (bx > 1024 || by > 1024 || bz > 64 || uint64_t{bx} * by * bz > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  if (shmem > 232448) return CUDA_ERROR_INVALID_VALUE;
  KernelWork k;
  if (CUresult r = build_params(*d, kernel_params, extra, &k.params)) return r;
  k.desc = kernels().functions.count(f) != 0 ? f->desc
                                             : reinterpret_cast<CUkern_st*>(f)->desc;
  k.func = f;
  k.grid = {gx, gy, gz};
  k.block = {bx, by, bz};
  k.shared_mem = shmem;
  *out = std::move(k);
  return CUDA_SUCCESS;
}

}  // namespace fakecuda

using namespace fakecuda;

namespace {

CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                unsigned bz, unsigned shmem, CUstream h, void** kernel_params, void** extra,
                bool ptd) {
  if (CUresult r = need_init()) return r;
  Lock lock(driver_lock());
  KernelWork k;
  if (CUresult r = make_kernel_work(f, gx, gy, gz, bx, by, bz, shmem, kernel_params, extra, &k))
    return r;
  std::shared_ptr<CUstream_st> s;
  if (CUresult r = resolve_stream(h, ptd, &s)) return r;
  k.stream = h;
  return submit_work(s, std::move(k), nullptr);
}

CUresult launch_ex(const CUlaunchConfig* c, CUfunction f, void** kernel_params, void** extra,
                   bool ptd) {
  if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (c->numAttrs != 0 && c->attrs == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return launch(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
                c->blockDimZ, c->sharedMemBytes, c->hStream, kernel_params, extra, ptd);
}

CUresult load_module(CUmodule* m) {
  if (CUresult r = need_init()) return r;
  if (m == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx = nullptr;
  if (CUresult r = need_context(&ctx)) return r;
  auto* mod = new CUmod_st;
  Lock lock(driver_lock());
  kernels().modules.insert(mod);
  *m = mod;
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {
decltype(cuLaunchKernel) cuLaunchKernel_ptsz;
decltype(cuLaunchKernelEx) cuLaunchKernelEx_ptsz;
decltype(cuLaunchCooperativeKernel) cuLaunchCooperativeKernel_ptsz;
}

FAKECUDA_API int fakecuda_register_kernel(const char* name, fakecuda_kernel_fn fn, size_t n,
                                          const size_t* offsets, const size_t* sizes, void* user) {
  if (name == nullptr || *name == '\0' || fn == nullptr) return -1;
  if (n != 0 && (offsets == nullptr || sizes == nullptr)) return -1;
  auto d = std::make_shared<KernelDesc>();
  d->name = name;
  d->fn = fn;
  d->user = user;
  for (size_t i = 0; i < n; ++i) {
    if (sizes[i] == 0) return -1;
    if (i > 0 && offsets[i] < offsets[i - 1] + sizes[i - 1]) return -1;  // increasing, disjoint
    d->offsets.push_back(offsets[i]);
    d->sizes.push_back(sizes[i]);
  }
  Lock lock(driver_lock());
  kernels().registered[name] = std::move(d);
  return 0;
}

FAKECUDA_API CUresult cuModuleLoad(CUmodule* m, const char* fname) {
  if (fname == nullptr) return CUDA_ERROR_INVALID_VALUE;
  struct stat st{};
  if (stat(fname, &st) != 0) return CUDA_ERROR_FILE_NOT_FOUND;
  return load_module(m);
}

FAKECUDA_API CUresult cuModuleLoadData(CUmodule* m, const void* image) {
  if (image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return load_module(m);
}

FAKECUDA_API CUresult cuModuleUnload(CUmodule m) {
  if (CUresult r = need_init()) return r;
  Lock lock(driver_lock());
  if (kernels().modules.count(m) == 0) return CUDA_ERROR_INVALID_HANDLE;
  for (auto& [name, f] : m->functions) kernels().functions.erase(f);  // objects leak: see README
  kernels().modules.erase(m);
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  if (CUresult r = need_init()) return r;
  if (f == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  if (kernels().modules.count(m) == 0) return CUDA_ERROR_INVALID_HANDLE;
  auto it = m->functions.find(name);
  if (it == m->functions.end()) {
    auto reg = kernels().registered.find(name);
    if (reg == kernels().registered.end()) return CUDA_ERROR_NOT_FOUND;
    auto* fn = new CUfunc_st{reg->second, m};
    kernels().functions.insert(fn);
    it = m->functions.emplace(name, fn).first;
  }
  *f = it->second;
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuLibraryLoadData(CUlibrary* lib, const void* code, CUjit_option*, void**,
                                        unsigned int, CUlibraryOption*, void**, unsigned int) {
  if (CUresult r = need_init()) return r;
  if (lib == nullptr || code == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* l = new CUlib_st;
  Lock lock(driver_lock());
  kernels().libraries.insert(l);
  *lib = l;
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuLibraryUnload(CUlibrary lib) {
  if (CUresult r = need_init()) return r;
  Lock lock(driver_lock());
  if (kernels().libraries.count(lib) == 0) return CUDA_ERROR_INVALID_HANDLE;
  for (auto& [name, k] : lib->kernels) {
    kernels().kernels.erase(k);
    if (k->function != nullptr) kernels().functions.erase(k->function);
  }
  kernels().libraries.erase(lib);
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuLibraryGetKernel(CUkernel* k, CUlibrary lib, const char* name) {
  if (CUresult r = need_init()) return r;
  if (k == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  if (kernels().libraries.count(lib) == 0) return CUDA_ERROR_INVALID_HANDLE;
  auto it = lib->kernels.find(name);
  if (it == lib->kernels.end()) {
    auto reg = kernels().registered.find(name);
    if (reg == kernels().registered.end()) return CUDA_ERROR_NOT_FOUND;
    auto* kern = new CUkern_st{reg->second, lib, nullptr};
    kernels().kernels.insert(kern);
    it = lib->kernels.emplace(name, kern).first;
  }
  *k = it->second;
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuKernelGetFunction(CUfunction* f, CUkernel k) {
  if (f == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx = nullptr;
  if (CUresult r = need_context(&ctx)) return r;
  Lock lock(driver_lock());
  if (kernels().kernels.count(k) == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (k->function == nullptr) {
    k->function = new CUfunc_st{k->desc, nullptr};
    kernels().functions.insert(k->function);
  }
  *f = k->function;
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuKernelGetParamInfo(CUkernel k, size_t index, size_t* offset, size_t* size) {
  if (CUresult r = need_init()) return r;
  Lock lock(driver_lock());
  if (kernels().kernels.count(k) == 0) return CUDA_ERROR_INVALID_HANDLE;
  return param_info(*k->desc, index, offset, size);
}

FAKECUDA_API CUresult cuFuncGetParamInfo(CUfunction f, size_t index, size_t* offset, size_t* size) {
  if (CUresult r = need_init()) return r;
  Lock lock(driver_lock());
  if (kernels().functions.count(f) == 0) return CUDA_ERROR_INVALID_HANDLE;  // a CUkernel too
  return param_info(*f->desc, index, offset, size);
}

FAKECUDA_API CUresult cuKernelGetName(const char** name, CUkernel k) {
  if (CUresult r = need_init()) return r;
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  if (kernels().kernels.count(k) == 0) return CUDA_ERROR_INVALID_HANDLE;
  *name = k->desc->name.c_str();
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuFuncGetName(const char** name, CUfunction f) {
  if (CUresult r = need_init()) return r;
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  if (kernels().functions.count(f) == 0) return CUDA_ERROR_INVALID_HANDLE;
  *name = f->desc->name.c_str();
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuFuncGetAttribute(int* v, CUfunction_attribute a, CUfunction f) {
  if (CUresult r = need_init()) return r;
  if (v == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  if (launchable(f) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *v = 32; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *v = 90; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *v = 232448; break;
    default:
      if (a < 0 || a >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
      *v = 0;
  }
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int) {
  if (CUresult r = need_init()) return r;
  Lock lock(driver_lock());
  if (launchable(f) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (a < 0 || a >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;  // accepted and ignored
}

FAKECUDA_API CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                     unsigned int bx, unsigned int by, unsigned int bz,
                                     unsigned int shmem, CUstream h, void** params, void** extra) {
  return launch(f, gx, gy, gz, bx, by, bz, shmem, h, params, extra, false);
}

FAKECUDA_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                          unsigned int gz, unsigned int bx, unsigned int by,
                                          unsigned int bz, unsigned int shmem, CUstream h,
                                          void** params, void** extra) {
  return launch(f, gx, gy, gz, bx, by, bz, shmem, h, params, extra, true);
}

FAKECUDA_API CUresult cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** params,
                                       void** extra) {
  return launch_ex(c, f, params, extra, false);
}

FAKECUDA_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* c, CUfunction f, void** params,
                                            void** extra) {
  return launch_ex(c, f, params, extra, true);
}

FAKECUDA_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                                unsigned int gz, unsigned int bx, unsigned int by,
                                                unsigned int bz, unsigned int shmem, CUstream h,
                                                void** params) {
  return launch(f, gx, gy, gz, bx, by, bz, shmem, h, params, nullptr, false);
}

FAKECUDA_API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                                     unsigned int gz, unsigned int bx,
                                                     unsigned int by, unsigned int bz,
                                                     unsigned int shmem, CUstream h,
                                                     void** params) {
  return launch(f, gx, gy, gz, bx, by, bz, shmem, h, params, nullptr, true);
}
