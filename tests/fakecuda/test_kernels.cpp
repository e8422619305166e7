// Kernels as host functions: lookup, parameter layouts, launch-time copying
// of kernelParams and `extra`, CUfunction vs CUkernel handles.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "test_util.hpp"

using namespace fakecuda_test;

namespace {

void saxpy(const fakecuda_launch* l) {
  int n = fakecuda::arg<int>(l, 0);
  float a = fakecuda::arg<float>(l, 1);
  auto* x = fakecuda::arg<const float*>(l, 2);
  auto* y = fakecuda::arg<float*>(l, 3);
  for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];
}

struct Triple {
  float v[3];
};

// sum(triple) -> *out; offsets {0, 16}: the pointer is 8-aligned after a 12-byte struct
void sum3(const fakecuda_launch* l) {
  auto t = fakecuda::arg<Triple>(l, 0);
  auto* out = fakecuda::arg<float*>(l, 1);
  *out = t.v[0] + t.v[1] + t.v[2];
}

struct Recorded {
  fakecuda_launch launch{};
  std::vector<unsigned char> buffer;
  int calls = 0;
};
Recorded g_recorded;

void record(const fakecuda_launch* l) {
  g_recorded.launch = *l;
  const auto* b = static_cast<const unsigned char*>(l->param_buffer);
  g_recorded.buffer.assign(b, b + l->param_buffer_size);
  ++g_recorded.calls;
}

void register_all() {
  REQUIRE((fakecuda::register_kernel<int, float, const float*, float*>("saxpy", saxpy) == 0));
  const size_t off[] = {0, 16}, size[] = {12, 8};
  REQUIRE(fakecuda_register_kernel("sum3", sum3, 2, off, size, nullptr) == 0);
  REQUIRE((fakecuda::register_kernel<uint64_t, uint32_t>("record", record) == 0));
  const size_t bad_off[] = {0, 4}, bad_size[] = {8, 4};  // overlapping
  REQUIRE(fakecuda_register_kernel("bad", record, 2, bad_off, bad_size, nullptr) == -1);
  REQUIRE(fakecuda_register_kernel("bad", nullptr, 0, nullptr, nullptr, nullptr) == -1);
}

CUfunction module_function(const char* name) {
  CUmodule m = nullptr;
  static const char image[] = "any image";
  CU_OK(cuModuleLoadData(&m, image));
  CUfunction f = nullptr;
  CU_OK(cuModuleGetFunction(&f, m, name));
  return f;
}

}  // namespace

TEST_CASE("registered kernels are found by name and report their layout", "[kernels]") {
  use_device();
  register_all();
  CUmodule m = nullptr;
  CU_OK(cuModuleLoadData(&m, "x"));
  CUfunction f = nullptr;
  REQUIRE(cuModuleGetFunction(&f, m, "no_such_kernel") == CUDA_ERROR_NOT_FOUND);
  CU_OK(cuModuleGetFunction(&f, m, "saxpy"));
  const size_t want_off[] = {0, 4, 8, 16}, want_size[] = {4, 4, 8, 8};
  for (size_t i = 0; i < 4; ++i) {
    size_t off = 99, size = 99;
    CU_OK(cuFuncGetParamInfo(f, i, &off, &size));
    REQUIRE(off == want_off[i]);
    REQUIRE(size == want_size[i]);
  }
  size_t off = 0, size = 0;
  REQUIRE(cuFuncGetParamInfo(f, 4, &off, &size) == CUDA_ERROR_INVALID_VALUE);
  const char* name = nullptr;
  CU_OK(cuFuncGetName(&name, f));
  REQUIRE(std::string(name) == "saxpy");
  int v = 0;
  CU_OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
  REQUIRE(v == 1024);
  CU_OK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100000));
  REQUIRE(cuModuleLoad(&m, "/nonexistent/fakecuda.cubin") == CUDA_ERROR_FILE_NOT_FOUND);
  CU_OK(cuModuleUnload(m));
  REQUIRE(cuModuleGetFunction(&f, m, "saxpy") == CUDA_ERROR_INVALID_HANDLE);

  // Libraries and CUkernel handles (Note [CUfunction vs CUkernel]).
  CUlibrary lib = nullptr;
  CU_OK(cuLibraryLoadData(&lib, "x", nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUkernel k = nullptr;
  CU_OK(cuLibraryGetKernel(&k, lib, "sum3"));
  CU_OK(cuKernelGetParamInfo(k, 1, &off, &size));
  REQUIRE(off == 16);
  REQUIRE(size == 8);
  REQUIRE(cuKernelGetParamInfo(k, 2, &off, &size) == CUDA_ERROR_INVALID_VALUE);
  CU_OK(cuKernelGetName(&name, k));
  REQUIRE(std::string(name) == "sum3");
  auto as_function = reinterpret_cast<CUfunction>(k);
  REQUIRE(cuFuncGetParamInfo(as_function, 0, &off, &size) == CUDA_ERROR_INVALID_HANDLE);
  REQUIRE(cuFuncGetName(&name, as_function) == CUDA_ERROR_INVALID_HANDLE);
  CUfunction kf = nullptr;
  CU_OK(cuKernelGetFunction(&kf, k));
  CU_OK(cuFuncGetParamInfo(kf, 1, &off, &size));
  REQUIRE(off == 16);
  REQUIRE(cuKernelGetParamInfo(reinterpret_cast<CUkernel>(kf), 0, &off, &size) ==
          CUDA_ERROR_INVALID_HANDLE);
  CU_OK(cuLibraryUnload(lib));
}

TEST_CASE("kernelParams are copied at launch time", "[kernels]") {
  use_device();
  register_all();
  CUfunction f = module_function("saxpy");
  constexpr int n = 1000;
  CUdeviceptr x = 0, y = 0;
  CU_OK(cuMemAlloc(&x, n * 4));
  CU_OK(cuMemAlloc(&y, n * 4));
  std::mt19937 rng(11);
  std::normal_distribution<float> dist;
  std::vector<float> hx(n), hy(n), out(n, std::nanf(""));
  for (int i = 0; i < n; ++i) {
    hx[i] = dist(rng);
    hy[i] = dist(rng);
  }
  CU_OK(cuMemcpyHtoD(x, hx.data(), n * 4));
  CU_OK(cuMemcpyHtoD(y, hy.data(), n * 4));

  CUstream s = nullptr;
  CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  Gate& gate = new_gate();
  CU_OK(cuLaunchHostFunc(s, Gate::wait_fn, &gate));
  int pn = n;
  float pa = 2.5f;
  CUdeviceptr px = x, py = y;
  void* params[] = {&pn, &pa, &px, &py};
  CU_OK(cuLaunchKernel(f, 4, 1, 1, 256, 1, 1, 0, s, params, nullptr));
  pn = 1;  // must not affect the queued launch
  pa = -100.f;
  px = 0;
  gate.open();
  CU_OK(cuMemcpyDtoHAsync(out.data(), y, n * 4, s));
  CU_OK(cuStreamSynchronize(s));
  for (int i = 0; i < n; ++i) {
    double ref = 2.5 * static_cast<double>(hx[i]) + static_cast<double>(hy[i]);
    REQUIRE(std::fabs(out[i] - ref) <= 1e-6 * (1 + std::fabs(ref)));
  }

  // Launch validation.
  REQUIRE(cuLaunchKernel(f, 1, 1, 1, 0, 1, 1, 0, s, params, nullptr) == CUDA_ERROR_INVALID_VALUE);
  REQUIRE(cuLaunchKernel(f, 1, 1, 1, 1024, 2, 1, 0, s, params, nullptr) ==
          CUDA_ERROR_INVALID_VALUE);
  REQUIRE(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr) == CUDA_ERROR_INVALID_VALUE);
  REQUIRE(cuLaunchKernel(reinterpret_cast<CUfunction>(&pn), 1, 1, 1, 1, 1, 1, 0, s, params,
                         nullptr) == CUDA_ERROR_INVALID_HANDLE);
  CU_OK(cuMemFree(x));
  CU_OK(cuMemFree(y));
  CU_OK(cuStreamDestroy(s));
}

TEST_CASE("the extra buffer is copied whole at launch time", "[kernels]") {
  use_device();
  register_all();
  CUfunction f = module_function("sum3");
  CUdeviceptr out = 0;
  CU_OK(cuMemAlloc(&out, 4));
  CU_OK(cuMemsetD32(out, 0x7fc00000u, 1));  // poison: NaN
  alignas(8) unsigned char buf[24] = {};
  Triple t{{1.5f, 2.25f, -0.5f}};
  std::memcpy(buf, &t, sizeof t);
  std::memcpy(buf + 16, &out, 8);
  size_t size = sizeof buf;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  CUstream s = nullptr;
  CU_OK(cuStreamCreate(&s, 0));
  Gate& gate = new_gate();
  CU_OK(cuLaunchHostFunc(s, Gate::wait_fn, &gate));
  CU_OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, nullptr, extra));
  std::memset(buf, 0, sizeof buf);  // after the launch call: must not matter
  gate.open();
  float r = 0;
  CU_OK(cuStreamSynchronize(s));
  CU_OK(cuMemcpyDtoH(&r, out, 4));
  REQUIRE(r == 1.5f + 2.25f - 0.5f);

  size_t small = 20;  // shorter than the layout
  void* short_extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &small,
                         CU_LAUNCH_PARAM_END};
  REQUIRE(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, nullptr, short_extra) ==
          CUDA_ERROR_INVALID_VALUE);
  void* params[] = {&t, &out};
  REQUIRE(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, extra) == CUDA_ERROR_INVALID_VALUE);
  CU_OK(cuMemFree(out));
  CU_OK(cuStreamDestroy(s));
}

TEST_CASE("launch forms: CUkernel handles, Ex, cooperative, _ptsz", "[kernels]") {
  use_device();
  register_all();
  CUlibrary lib = nullptr;
  CU_OK(cuLibraryLoadData(&lib, "x", nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUkernel k = nullptr;
  CU_OK(cuLibraryGetKernel(&k, lib, "record"));
  auto f = reinterpret_cast<CUfunction>(k);  // as cudart 13 does
  uint64_t a = 0x1122334455667788ull;
  uint32_t b = 0xabcdef01u;
  void* params[] = {&a, &b};

  g_recorded = Recorded{};
  CU_OK(cuLaunchKernel(f, 3, 2, 1, 32, 4, 2, 128, nullptr, params, nullptr));
  CU_OK(cuCtxSynchronize());
  REQUIRE(g_recorded.calls == 1);
  REQUIRE(g_recorded.launch.grid.x == 3);
  REQUIRE(g_recorded.launch.grid.y == 2);
  REQUIRE(g_recorded.launch.block.z == 2);
  REQUIRE(g_recorded.launch.shared_mem_bytes == 128);
  REQUIRE(g_recorded.launch.num_params == 2);
  REQUIRE(g_recorded.buffer.size() == 12);
  uint64_t got_a = 0;
  uint32_t got_b = 0;
  std::memcpy(&got_a, g_recorded.buffer.data(), 8);
  std::memcpy(&got_b, g_recorded.buffer.data() + 8, 4);
  REQUIRE(got_a == a);
  REQUIRE(got_b == b);

  CUlaunchConfig cfg{};
  cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = 64;
  cfg.blockDimY = cfg.blockDimZ = 1;
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  attr.value.cooperative = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  b = 1;
  CU_OK(cuLaunchKernelEx(&cfg, f, params, nullptr));
  b = 2;
  CU_OK(cuLaunchKernelEx_ptsz(&cfg, f, params, nullptr));
  CU_OK(cuCtxSynchronize());
  CU_OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
  REQUIRE(g_recorded.calls == 3);
  b = 3;
  CU_OK(cuLaunchCooperativeKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, params));
  CU_OK(cuCtxSynchronize());
  REQUIRE(g_recorded.calls == 4);
  std::memcpy(&got_b, g_recorded.buffer.data() + 8, 4);
  REQUIRE(got_b == 3);
  b = 4;
  CU_OK(cuLaunchKernel_ptsz(f, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  CU_OK(cuStreamSynchronize_ptsz(nullptr));
  REQUIRE(g_recorded.calls == 5);
  REQUIRE(g_recorded.launch.stream == nullptr);  // the handle as passed
  CU_OK(cuLibraryUnload(lib));
  REQUIRE(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr) ==
          CUDA_ERROR_INVALID_HANDLE);
}
