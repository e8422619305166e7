// FP4 kernels against the CPU reference, on fresh random inputs (seed printed),
// every format, ragged and edge shapes, outputs poisoned before each launch.
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "quant/env.hpp"
#include "quant/gemv_plan.hpp"
#include "quant/ref.hpp"
#include "tests/quant/formats.hpp"
#include "vstack/kernels.h"

using namespace vstack::quant;

namespace {

#define CUDA_OK(call)                                                              \
  do {                                                                             \
    cudaError_t e_ = (call);                                                       \
    INFO(#call << ": " << cudaGetErrorString(e_));                                 \
    REQUIRE(e_ == cudaSuccess);                                                    \
  } while (0)

#define VS_OK(call)                                                                \
  do {                                                                             \
    vstack_status_t s_ = (call);                                                   \
    INFO(#call << ": " << vstack_status_string(s_) << ": " << vstack_last_error()); \
    REQUIRE(s_ == VSTACK_OK);                                                      \
  } while (0)

struct DevBuf {
  void* p = nullptr;
  size_t n = 0;
  explicit DevBuf(size_t bytes) : n(bytes) {
    if (bytes) REQUIRE(cudaMalloc(&p, bytes) == cudaSuccess);
  }
  ~DevBuf() {
    if (p) cudaFree(p);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  void poison(int byte = 0xCD) { REQUIRE(cudaMemset(p, byte, n) == cudaSuccess); }
  template <typename T>
  void upload(const std::vector<T>& v) {
    REQUIRE(v.size() * sizeof(T) <= n);
    REQUIRE(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  template <typename T>
  std::vector<T> download() const {
    std::vector<T> v(n / sizeof(T));
    REQUIRE(cudaMemcpy(v.data(), p, v.size() * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return v;
  }
};

// VSTACK_TEST_SEED=<base> replays a run (the base seed it printed).
uint64_t fresh_seed() {
  static const uint64_t base = [] {
    const char* e = std::getenv("VSTACK_TEST_SEED");
    return e && *e ? std::strtoull(e, nullptr, 10)
                   : std::random_device{}() ^ (uint64_t{std::random_device{}()} << 32);
  }();
  static uint64_t n = 0;
  static bool printed = false;
  if (!printed) {
    std::printf("fp4_gpu_tests: base seed %llu\n", static_cast<unsigned long long>(base));
    printed = true;
  }
  return base + 0x9E3779B97F4A7C15ull * ++n;
}

// fn(t) for t = 0 .. nt - 1, each on its own thread (t = 0 on the caller's).
template <typename Fn>
void on_threads(int nt, Fn&& fn) {
  std::vector<std::thread> pool;
  for (int t = 1; t < nt; ++t) pool.emplace_back(fn, t);
  fn(0);
  for (std::thread& th : pool) th.join();
}

// Random weights: N(0,1) times a per-row magnitude spread over 2^-8..2^8, plus outliers.
std::vector<float> random_matrix(int64_t rows, int64_t cols, std::mt19937_64& rng) {
  // Slabs of kSlab rows, each drawn by its own engine seeded from rng, on up to 16 threads: the values depend
  // on rng alone (the base seed reproduces them), not on the threads. One engine for the whole matrix took
  // ~1.3 s a wide-kernel case (12.7K x 4096) on one core, most of the case's time (docs/NOTES.md, session 39).
  constexpr int64_t kSlab = 64;
  const int64_t slabs = (rows + kSlab - 1) / kSlab;
  std::vector<uint64_t> seeds(slabs);
  for (auto& sd : seeds) sd = rng();
  std::vector<float> x(rows * cols);
  const int nt = static_cast<int>(std::clamp<int64_t>(
      std::min<int64_t>(static_cast<int64_t>(std::thread::hardware_concurrency()), rows * cols >> 18), 1,
      std::min<int64_t>(16, slabs)));
  auto fill = [&](int t) {
    for (int64_t sl = t; sl < slabs; sl += nt) {
      std::mt19937_64 e(seeds[sl]);
      std::normal_distribution<float> nd;
      std::uniform_int_distribution<int> ex(-8, 8);
      for (int64_t r = sl * kSlab; r < std::min(rows, (sl + 1) * kSlab); ++r) {
        const float s = std::ldexp(1.0f, ex(e));
        for (int64_t c = 0; c < cols; ++c) x[r * cols + c] = nd(e) * s;
      }
    }
  };
  on_threads(nt, fill);
  std::uniform_int_distribution<int64_t> pos(0, rows * cols - 1);
  for (int i = 0; i < 3; ++i) x[pos(rng)] *= 40.0f;
  return x;
}

const vstack_dtype_t kDtypes[] = {VSTACK_DTYPE_F32, VSTACK_DTYPE_F16, VSTACK_DTYPE_BF16};
const char* dtype_name(vstack_dtype_t t) { return t == VSTACK_DTYPE_F32 ? "f32" : t == VSTACK_DTYPE_F16 ? "f16" : "bf16"; }

// Round x to the dtype (the kernel sees that value); returns the bytes to upload.
std::vector<uint8_t> as_dtype(std::vector<float>& x, vstack_dtype_t t) {
  std::vector<uint8_t> out(x.size() * (t == VSTACK_DTYPE_F32 ? 4 : 2));
  for (size_t i = 0; i < x.size(); ++i) {
    if (t == VSTACK_DTYPE_F32) {
      std::memcpy(&out[4 * i], &x[i], 4);
    } else {
      uint16_t h = t == VSTACK_DTYPE_F16 ? ref::f32_to_f16(x[i]) : ref::f32_to_bf16(x[i]);
      x[i] = t == VSTACK_DTYPE_F16 ? ref::f16_to_f32(h) : ref::bf16_to_f32(h);
      std::memcpy(&out[2 * i], &h, 2);
    }
  }
  return out;
}

struct DevQ {
  vstack_fp4_tensor_t t{};
  std::unique_ptr<DevBuf> codes, scales, scale2;
  DevQ(Format f, Layout l, int64_t rows, int64_t cols) {
    size_t cb = 0, sb = 0, s2 = 0;
    VS_OK(vstack_fp4_sizes(static_cast<vstack_fp4_format_t>(f), static_cast<vstack_fp4_layout_t>(l), rows, cols, &cb,
                           &sb, &s2));
    codes = std::make_unique<DevBuf>(cb);
    scales = std::make_unique<DevBuf>(sb);
    scale2 = std::make_unique<DevBuf>(s2 * 4);
    t.format = static_cast<int32_t>(f);
    t.layout = static_cast<int32_t>(l);
    t.rows = rows;
    t.cols = cols;
    t.codes = codes->p;
    t.scales = scales->p;
    t.scale2 = static_cast<float*>(scale2->p);
  }
  void upload(const ref::QTensor& q) {
    codes->upload(q.codes);
    scales->upload(q.scales);
    if (!q.scale2.empty()) scale2->upload(q.scale2);
  }
};

}  // namespace

TEST_CASE("quantize is bit-identical to the reference", "[gpu][quant]") {
  std::mt19937_64 rng(fresh_seed());
  struct Shape { int64_t rows, cols; };
  const Shape shapes[] = {{1, 64}, {3, 128}, {17, 192}, {1, 64 * 300}, {100, 512}, {257, 1024}, {64, 64 * 257}, {10, 512},
                         {5, 8192}, {9, 4096}, {2, 16384}, {16 * 133 + 5, 2048}, {16 * 265 + 3, 4096}};
  // {5, 8192}, {9, 4096}, {2, 16384}: NF4_DQ groups of 2, 4 and 1 whole rows, the last group partial;
  // {16 * 133 + 5, 2048}: more tiles than CTAs in every format, and a partial last 16-row tile.
  // {16 * 265 + 3, 4096}: 5-8 tiles a CTA on a 132-SM part (the persistent kernel's loop well past the
  // tile it loads ahead), the last NF4_DQ group and 16-row tile partial.
  // {10, 512}: rows at the ends of the fp32 range, where the kernel divides instead of using the
  // reciprocal (block scale outside [2^-90, 2^90]) or the quotient underflows; and a row of exact ties.
  const int extreme_exp[9] = {-140, -126, -110, -95, -88, 0, 88, 95, 120};
  const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f};
  int mx_flags[3] = {0, 0, 0};  // MXFP4 tensors by range flag (scale2[0], compared below): every level occurs
  int nv_flags[2] = {0, 0};     // NVFP4 tensors by range flag (scale2[1]): both occur
  for (Format f : kAllFormats)
    for (Layout l : {Layout::linear, Layout::gemm})
      for (vstack_dtype_t dt : kDtypes)
        for (const Shape& s : shapes) {
          INFO("format " << static_cast<int>(f) << " layout " << static_cast<int>(l) << " dtype " << dtype_name(dt)
                         << " " << s.rows << "x" << s.cols);
          std::vector<float> x = random_matrix(s.rows, s.cols, rng);
          if (s.rows == 100) {  // non-finite inputs in a few blocks
            x[70] = NAN;
            x[1000] = INFINITY;
            x[20000] = -INFINITY;
          }
          if (s.rows == 257) {  // an all-zero block and one 2^-20 below its group (a zero NF4_DQ scale),
            // in tiles without NaN/Inf: the kernel's straight-line path (Note [Clean blocks]) covers them
            for (int64_t c = 0; c < 64; ++c) x[5 * s.cols + 128 + c] = 0.0f;
            for (int64_t c = 0; c < 64; ++c) x[9 * s.cols + 256 + c] = std::ldexp(x[9 * s.cols + 256 + c], -20);
          }
          if (s.rows == 10) {
            for (int r = 0; r < 9; ++r)
              for (int64_t c = 0; c < s.cols; ++c) x[r * s.cols + c] = std::ldexp(x[r * s.cols + c], extreme_exp[r]);
            for (int64_t c = 0; c < s.cols; ++c) x[9 * s.cols + c] = (c % 2 ? -1 : 1) * ties[c % 8];
          }
          const std::vector<uint8_t> bytes = as_dtype(x, dt);
          ref::QTensor want;
          REQUIRE(ref::quantize(x.data(), s.rows, s.cols, f, l, want));
          DevBuf dx(bytes.size());
          dx.upload(bytes);
          DevQ q(f, l, s.rows, s.cols);
          q.codes->poison();
          q.scales->poison();
          q.scale2->poison();
          VS_OK(vstack_fp4_quantize(dx.p, dt, &q.t, nullptr));
          CUDA_OK(cudaDeviceSynchronize());
          CHECK(q.codes->download<uint8_t>() == want.codes);
          CHECK(q.scales->download<uint8_t>() == want.scales);
          if (!want.scale2.empty()) {
            const auto got = q.scale2->download<float>();
            REQUIRE(got.size() == want.scale2.size());
            CHECK(std::memcmp(got.data(), want.scale2.data(), got.size() * 4) == 0);
            if (f == Format::mxfp4) ++mx_flags[std::clamp(static_cast<int>(want.scale2[0]), 0, 2)];
            if (f == Format::nvfp4) ++nv_flags[want.scale2.at(1) == kNvfp4Plain];
          }
        }
  CHECK(mx_flags[0] > 0);  // the rows of extreme exponents
  CHECK(mx_flags[1] > 0);  // the NaN / Inf blocks ({100, 512})
  CHECK(mx_flags[2] > 0);  // the others (with a zero block: {257, 1024})
  CHECK(nv_flags[0] > 0);  // the NaN / Inf blocks
  CHECK(nv_flags[1] > 0);  // the others, the extreme exponents too (subnormal scale bytes, never the NaN byte)
}

long long fp4_test_rcp_mismatches();  // device_fns.cu
long long fp4_test_nf4_mismatches();

TEST_CASE("rcp_rn_normal is 1 / s over the whole quotient range", "[gpu][quant]") {
  CHECK(fp4_test_rcp_mismatches() == 0);  // -1: a CUDA error
}

TEST_CASE("nf4_encode_fast on the GPU is nf4_encode for every float", "[gpu][quant]") {
  CHECK(fp4_test_nf4_mismatches() == 0);  // -1: a CUDA error
}

TEST_CASE("dequantize is bit-identical to the reference", "[gpu][quant]") {
  std::mt19937_64 rng(fresh_seed());
  for (Format f : kAllFormats)
    for (Layout l : {Layout::linear, Layout::gemm})
      for (vstack_dtype_t dt : kDtypes)
        for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 64}, {19, 320}, {300, 1024}}) {
          INFO("format " << static_cast<int>(f) << " layout " << static_cast<int>(l) << " dtype " << dtype_name(dt)
                         << " " << rows << "x" << cols);
          std::vector<float> x = random_matrix(rows, cols, rng);
          x[rows * cols / 2] = NAN;
          ref::QTensor q;
          REQUIRE(ref::quantize(x.data(), rows, cols, f, l, q));
          std::vector<float> want(rows * cols);
          ref::dequantize(q, want.data());
          DevQ dq(f, l, rows, cols);
          dq.upload(q);
          DevBuf dy(rows * cols * (dt == VSTACK_DTYPE_F32 ? 4 : 2));
          dy.poison();
          VS_OK(vstack_fp4_dequantize(&dq.t, dy.p, dt, nullptr));
          CUDA_OK(cudaDeviceSynchronize());
          int64_t bad = 0, nans = 0;
          if (dt == VSTACK_DTYPE_F32) {
            const auto got = dy.download<float>();
            for (int64_t i = 0; i < rows * cols; ++i) {
              if (std::isnan(want[i])) { nans++; bad += !std::isnan(got[i]); }
              else bad += std::memcmp(&got[i], &want[i], 4) != 0;
            }
          } else {
            const auto got = dy.download<uint16_t>();
            for (int64_t i = 0; i < rows * cols; ++i) {
              const uint16_t w = dt == VSTACK_DTYPE_F16 ? ref::f32_to_f16(want[i]) : ref::f32_to_bf16(want[i]);
              const float gf = dt == VSTACK_DTYPE_F16 ? ref::f16_to_f32(got[i]) : ref::bf16_to_f32(got[i]);
              if (std::isnan(want[i])) { nans++; bad += !std::isnan(gf); }
              else bad += got[i] != w;
            }
          }
          CHECK(nans >= 1);
          CHECK(bad == 0);
        }
}

struct MatmulShape {
  int64_t m, n, k;
};

// How check_matmul launches: on the legacy default stream, or captured into a CUDA graph on `stream`
// (then both launches replay the one graph).
// range_flag: MXFP4 is given its range flag (scale2, Note [MXFP4 range flag] in quant/gemv_kernel.cuh),
// or scale2 NULL, so that the decode kernels vote per chunk (bf16) or do not fold (f16); NVFP4 its range flag
// (scale2[1], Note [NVFP4 shifted pairs]) as quantized, or 0.
struct Launch {
  cudaStream_t stream = nullptr;
  bool graph = false;
  bool range_flag = true;
};

// One matmul against the fp64 product of x and the CPU-decoded weights, with the bound below;
// outputs poisoned, determinism checked by a second launch. Returns ||y - ref|| / ||ref||.
// w_exp, x_exp: weights scaled by 2^w_exp, x by 2^x_exp; edit, if given, changes the weights [N][K] after that
// (an output whose reference is NaN must be NaN), and qedit the quantized tensor.
double check_matmul(const MatmulShape& s, Format f, vstack_dtype_t dt, bool with_bias, std::mt19937_64& rng,
                    int w_exp = 0, int x_exp = 0, Launch how = {},
                    const std::function<void(std::vector<float>&)>& edit = {},
                    const std::function<void(ref::QTensor&)>& qedit = {}) {
  INFO("format " << static_cast<int>(f) << " dtype " << dtype_name(dt) << " m " << s.m << " n " << s.n << " k "
                 << s.k << " bias " << with_bias << " w_exp " << w_exp << " x_exp " << x_exp);
  // Weights kept in f16 range for the f16 path (decoded weights are rounded to x's dtype).
  std::vector<float> w = random_matrix(s.n, s.k, rng);
  for (auto& v : w) v = std::ldexp(v, w_exp);
  if (edit) edit(w);
  ref::QTensor q;
  REQUIRE(ref::quantize(w.data(), s.n, s.k, f, Layout::gemm, q));
  // MXFP4's range flag: 2 for the usual spread (every byte in 114..140), so the decode kernels fold
  // without a check in both dtypes unless how.range_flag is false
  if (f == Format::mxfp4 && w_exp == 0 && !edit) CHECK(q.scale2.at(0) == kMxfp4FoldF16);
  if (f == Format::nvfp4 && !edit) CHECK(q.scale2.at(1) == kNvfp4Plain);  // finite weights: every byte plain
  if (f == Format::nvfp4 && !how.range_flag) q.scale2.at(1) = 0.0f;
  if (qedit) qedit(q);
  std::vector<float> wd(s.n * s.k);
  ref::dequantize(q, wd.data());
  std::normal_distribution<float> nd;
  std::vector<float> x(s.m * s.k), b(s.n);
  for (auto& v : x) v = std::ldexp(nd(rng), x_exp);
  for (auto& v : b) v = nd(rng);
  const auto xb = as_dtype(x, dt);
  const auto bb = as_dtype(b, dt);
  DevBuf dx(xb.size()), db(bb.size()), dy(s.m * s.n * 2);
  dx.upload(xb);
  db.upload(bb);
  DevQ dq(f, Layout::gemm, s.n, s.k);
  dq.upload(q);
  if (f == Format::mxfp4 && !how.range_flag) dq.t.scale2 = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (how.graph) {
    cudaGraph_t g = nullptr;
    CUDA_OK(cudaStreamBeginCapture(how.stream, cudaStreamCaptureModeGlobal));
    const vstack_status_t st = vstack_fp4_matmul(dx.p, dt, s.m, &dq.t, with_bias ? db.p : nullptr, dy.p, how.stream);
    CUDA_OK(cudaStreamEndCapture(how.stream, &g));
    VS_OK(st);
    CUDA_OK(cudaGraphInstantiate(&exec, g, 0));
    CUDA_OK(cudaGraphDestroy(g));
  }
  auto run = [&] {
    dy.poison(0xFF);  // NaN in both dtypes
    if (how.graph) CUDA_OK(cudaGraphLaunch(exec, how.stream));
    else VS_OK(vstack_fp4_matmul(dx.p, dt, s.m, &dq.t, with_bias ? db.p : nullptr, dy.p, how.stream));
    CUDA_OK(cudaDeviceSynchronize());
    return dy.download<uint16_t>();
  };
  const auto got = run();
  // Deterministic: a second launch gives the same bits (split-K sums in a fixed order; a split-K
  // workspace's counters are back at 0 after each launch).
  CHECK(run() == got);
  if (exec) CUDA_OK(cudaGraphExecDestroy(exec));
  // Bound: output rounding u*|ref| + (weight rounding u_w + fp32 accumulation K*2^-24) * sum|x*w|,
  // u = 2^-8 (bf16) / 2^-11 (f16); u_w = u for NF4 (decoded values are rounded to x's dtype),
  // 0 for NVFP4/MXFP4 whose decoded values are exact in both dtypes here.
  const double u = dt == VSTACK_DTYPE_BF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  const double uw = (f == Format::nf4 || f == Format::nf4_dq) ? u : 0.0;
  const double acc = static_cast<double>(s.k + 2) * std::ldexp(1.0, -24);
  // The fp64 reference, in column slices over the host's cores (it dominated run.sh's time); each
  // slice keeps its counts, sums and first failures, added and reported here in slice order.
  struct Slice {
    int64_t bad = 0;
    double num = 0, den = 0;
    std::vector<std::string> first;
  };
  const int nt = static_cast<int>(
      std::clamp<int64_t>(static_cast<int64_t>(std::thread::hardware_concurrency()), 1, std::min<int64_t>(16, s.n)));
  std::vector<Slice> slices(nt);
  auto check_columns = [&](int t) {
    Slice& sl = slices[t];
    for (int64_t j = t; j < s.n; j += nt)
      for (int64_t i = 0; i < s.m; ++i) {
        double r = with_bias ? b[j] : 0.0, mag = with_bias ? std::abs(b[j]) : 0.0;
        for (int64_t k = 0; k < s.k; ++k) {
          const double t2 = static_cast<double>(x[i * s.k + k]) * wd[j * s.k + k];
          r += t2;
          mag += std::abs(t2);
        }
        const uint16_t h = got[i * s.n + j];
        const double g = dt == VSTACK_DTYPE_BF16 ? ref::bf16_to_f32(h) : ref::f16_to_f32(h);
        const double tol = u * std::abs(r) + (uw + acc) * (1 + u) * mag + 1e-30;
        // f16 overflows at 65520 (rounds to inf): then inf of the right sign is the right answer
        const bool overflow_ok = dt == VSTACK_DTYPE_F16 && std::isinf(g) && (g > 0) == (r > 0) &&
                                 std::abs(r) + tol >= 65520.0;
        if (!overflow_ok && !(std::abs(g - r) <= tol) && !(std::isnan(r) && std::isnan(g))) {
          if (sl.first.size() < 5) {
            std::ostringstream os;
            os << "y[" << i << "][" << j << "] = " << g << " want " << r << " tol " << tol;
            sl.first.push_back(os.str());
          }
          ++sl.bad;
        }
        if (std::isfinite(g)) {
          sl.num += (g - r) * (g - r);
          sl.den += r * r;
        }
      }
  };
  on_threads(nt, check_columns);
  int64_t bad = 0;
  double num = 0, den = 0;
  for (const Slice& sl : slices) {  // in slice order: the sums do not depend on the threads' timing
    bad += sl.bad;
    num += sl.num;
    den += sl.den;
    for (const std::string& m : sl.first) UNSCOPED_INFO(m);  // at most 5 per slice
  }
  CHECK(bad == 0);
  return std::sqrt(num / den);
}

TEST_CASE("matmul matches the fp64 product within bf16/f16 rounding", "[gpu][quant]") {
  std::mt19937_64 rng(fresh_seed());
  const MatmulShape shapes[] = {{1, 64, 64},     {1, 4096, 4096},  {2, 100, 128},    {4, 1000, 512},  {8, 333, 1088},
                          {16, 512, 2048}, {17, 129, 320},   {33, 264, 640},   {64, 1024, 256}, {65, 200, 384},
                          {130, 96, 64},   {256, 520, 448},  {300, 330, 960},  {1024, 136, 1024}, {513, 1030, 128},
                          // decode kernel: split K over clusters (ragged last slice), 8/16-column tiles, rows % 128
                          {5, 520, 4096},  {11, 300, 8192},  {1, 2048, 14336}, {16, 256, 16384}, {3, 1000, 2752},
                          // ring kernel (NF4_DQ: the register-load kernel, rows over three scale2 groups)
                          {1, 136, 20480},
                          // wgmma tiles: several trips around the stage ring, ragged M and N edges
                          {100, 72, 2048}, {257, 200, 1536}, {600, 136, 2560}, {40, 4232, 192},
                          // wgmma persistent schedule (132 SMs): 165 tiles of 256 x 128 = one round of whole
                          // tiles + 33 split in halves (Note [Split tail]); the shapes above are all split
                          {1101, 4100, 128}};
  double worst_rel = 0;
  std::string worst;
  for (Format f : kAllFormats)
    for (vstack_dtype_t dt : {VSTACK_DTYPE_BF16, VSTACK_DTYPE_F16})
      for (const MatmulShape& s : shapes)
        for (bool with_bias : {false, true}) {
          if (with_bias && s.m % 2 == 0) continue;  // bias on about half of the shapes
          double rel = check_matmul(s, f, dt, with_bias, rng);
          if (f == Format::mxfp4 && s.m > 8 && s.m <= 16)  // the decode kernels without the flag
            rel = std::max(rel, check_matmul(s, f, dt, with_bias, rng, 0, 0, Launch{nullptr, false, false}));
          if (rel > worst_rel) {
            worst_rel = rel;
            worst = "format " + std::to_string(static_cast<int>(f)) + " " + dtype_name(dt) + " m " +
                    std::to_string(s.m) + " n " + std::to_string(s.n) + " k " + std::to_string(s.k) +
                    (with_bias ? " bias" : "");
          }
        }
  std::printf("fp4_gpu_tests: worst ||y - ref|| / ||ref|| over all matmul cases: %.3g (%s)\n", worst_rel,
              worst.c_str());
}

// MXFP4 blocks at the bottom of the E8M0 range: weights 2^-122 times the usual 2^-8..2^8 spread, so
// many blocks take the subnormal scale byte 0 (2^-127), which the decode kernel handles off its fast
// path (Note [E8M0 pairs]); x 2^100 (bf16 only: f16 cannot hold it), outputs near 2^-20, no bias
// (it would hide them). Not x 2^122: the decode kernel sums a block's x * E2M1 value in fp32 before
// the scale, which overflows once |x| * 6 * 32 nears 2^128 (NOTES.md); the wgmma kernel does not.
TEST_CASE("matmul: MXFP4 at the smallest block scales", "[gpu][quant]") {
  std::mt19937_64 rng(fresh_seed());
  const MatmulShape shapes[] = {{1, 512, 4096}, {4, 1024, 8192}, {16, 256, 2048}, {300, 128, 512}};
  for (const MatmulShape& s : shapes) check_matmul(s, Format::mxfp4, VSTACK_DTYPE_BF16, false, rng, -122, 100);
  // the case is exercised: such weights give byte 0 to many blocks (amax < 2^-124)
  std::vector<float> w = random_matrix(256, 2048, rng);
  for (auto& v : w) v = std::ldexp(v, -122);
  ref::QTensor q;
  REQUIRE(ref::quantize(w.data(), 256, 2048, Format::mxfp4, Layout::gemm, q));
  CHECK(std::count(q.scales.begin(), q.scales.end(), uint8_t{0}) > 0);
}

// Every decode plan the kernel can take, whatever the device's heuristic picks: run.sh runs this
// case again under each forced VSTACK_GEMV_SPLIT x VSTACK_GEMV_TILES (applied where x's slice fits),
// with VSTACK_GEMV_RING=0, and with the ring's G forced to each of 1, 2, 4, 8 (VSTACK_GEMV_RING_G).
// Unforced on an H100, the ring kernel (Note [Ring kernel], Note [Streamed x]) takes every shape, G = 1
// or 2 (ragged stages: 50, 39, 65, 19 and 101 chunks in stages of 16 or 8; row blocks with a missing
// tile, a ragged last tile; 1, 3, 8, 9 and 16 mma columns).
TEST_CASE("decode kernel: the forced plan matches the fp64 product", "[gpu][quant][gemv-plans]") {
  std::mt19937_64 rng(fresh_seed());
  // ragged N (not a multiple of 16 x T), K slices of unequal length, one and two mma column tiles
  const MatmulShape shapes[] = {{1, 1104, 3200}, {9, 520, 2496}, {16, 312, 4160}, {3, 2072, 1216}, {8, 1000, 6464}};
  for (Format f : kAllFormats)
    for (const MatmulShape& s : shapes) {
      check_matmul(s, f, s.m == 9 ? VSTACK_DTYPE_F16 : VSTACK_DTYPE_BF16, s.m % 2 == 1, rng);
      if (f == Format::mxfp4 && s.m > 8)  // M = 9 (f16), 16 (bf16): the MXFP4 decode without the flag, too
        check_matmul(s, f, s.m == 9 ? VSTACK_DTYPE_F16 : VSTACK_DTYPE_BF16, false, rng, 0, 0,
                     Launch{nullptr, false, false});
    }
}

// The device's SM count and whether VSTACK_GEMV_RING_WIDE forces the wide row blocks (the launcher's
// env_flag: 1 on, 0 off, -1 unset).
struct WideSetting {
  int sms = 0, forced = env_flag("VSTACK_GEMV_RING_WIDE");
  WideSetting() {
    int dev = 0;
    CUDA_OK(cudaGetDevice(&dev));
    CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  }
  // N of ceil(tiles / SMs) = gx tiles a row block, a ragged last tile and a last row block with tiles past N
  int64_t n(int gx) const {
    int64_t tiles = static_cast<int64_t>(sms) * (gx - 1) + 2;
    if (tiles % gx == 0) ++tiles;
    return 16 * tiles - 7;
  }
  // body(s) for the instance of each GX = 2..7 at each (M, K) of mk, s = {M, n(GX), K}, after checking that
  // format f's launcher takes that instance there (unforced or forced on; none forced off)
  template <class Body>
  void each_instance(Format f, std::initializer_list<std::pair<int64_t, int64_t>> mk, Body&& body) const {
    REQUIRE(sms >= 16);
    for (int gx = 2; gx <= 7; ++gx)
      for (const auto& [m, k] : mk) {
        const MatmulShape s{m, n(gx), k};
        CHECK(ring_wide_tiles(s.m, s.n, s.k, f, sms, forced) == (forced != 0 ? gx : 0));
        body(s);
      }
  }
};

// The wide row blocks (Note [Wide row blocks] in quant/gemv_plan.hpp) of each instance GX = 2..7 on this
// device: N of ceil(tiles / SMs) = GX with a ragged last tile and a last row block with tiles past N; K
// of one slice (1024), three with a last one of one chunk (2112: not NF4_DQ's, whose rows there span two
// scale2 groups), four (4096, at GX = 3, 6, 7); 1, 8, 9 and 16 mma columns (M = 16 at GX >= 6: the most
// sums, 119 KB, over the x buffers, the code table and region B). M = 1, 2 (f16) and 4 (bf16) pack their
// columns (Note [Packed columns]) where wide_pack says: NVFP4 at M <= 2, MXFP4 at M <= 4.
// Unforced the launcher takes them wherever an instance applies; run.sh runs the case again with them
// forced on (an error where an instance applies and this device cannot run it) and off.
TEST_CASE("decode kernel: wide row blocks match the fp64 product", "[gpu][quant][gemv-wide]") {
  std::mt19937_64 rng(fresh_seed());
  const WideSetting ws;
  const int sms = ws.sms, forced = ws.forced;
  REQUIRE(sms >= 16);
  int wide_cases = 0;
  for (int gx = 2; gx <= 7; ++gx) {
    const int64_t n = ws.n(gx);
    // K = 2112 and 4160 (33, 65 chunks): NF4_DQ rows span two scale2 groups, which the instances up to
    // kWideDq2Max take
    const MatmulShape shapes[] = {{1, n, 2112},  {8, n, 4096}, {16, n, 1024}, {9, n, 4096},
                                  {12, n, 4160}, {2, n, 2112}, {4, n, 1024}};
    for (const MatmulShape& s : shapes) {
      if ((s.m == 9 && gx != 7) || (s.m == 8 && gx != 3 && gx != 6) || (s.m == 12 && gx > kWideDq2Max)) continue;
      for (Format f : kAllFormats) {
        const int want = ring_wide_tiles(s.m, s.n, s.k, f, sms, forced);
        const bool two_groups = f == Format::nf4_dq && (s.k == 2112 || s.k == 4160);
        const bool applies = !(two_groups && gx > kWideDq2Max) && forced != 0;
        CHECK(want == (applies ? gx : 0));
        wide_cases += want > 0;
        check_matmul(s, f, s.m == 8 || s.m == 2 ? VSTACK_DTYPE_F16 : VSTACK_DTYPE_BF16, s.m % 2 == 1, rng);
        // M = 9..16: MXFP4 without the flag (bf16's vote, or in the wide instances the fp32 path with the
        // special bytes), and f16's fold (in the wide instances the fp32 path without them)
        if (f == Format::mxfp4 && s.m > 8) {
          check_matmul(s, f, VSTACK_DTYPE_BF16, s.m % 2 == 1, rng, 0, 0, Launch{nullptr, false, false});
          check_matmul(s, f, VSTACK_DTYPE_F16, s.m % 2 == 1, rng);
        }
      }
    }
  }
  // 29 shapes x 4 formats, but NF4_DQ at K = 2112 with GX > kWideDq2Max (8); none when forced off
  CHECK(wide_cases == (forced == 0 ? 0 : 4 * 29 - 8));
}

// MXFP4's wide instances take the fp32 path at every M, where the other kernels fold at M = 9..16 (Note [No MXFP4
// fold at M <= 8], Note [MXFP4 fp32 path at M > 8] in quant/gemv_kernel.cuh): without the special bytes where the
// tensor's range flag holds, with them where not (E8M0 pairs, but byte by byte at MT = 2 above GX 2). The cases
// above have only bytes in 64..191; here each wide instance gets blocks at the smallest scales (flag 0: the copy
// with the special bytes), and one NaN block (NaN in exactly its column) and one all-zero block (scale byte 0) in
// different row blocks. Both of those have zero codes, so the flag is 1: bf16 runs with it (the copy without the
// special bytes, whose plain 2^(e - 127) gives the NaN block Inf x 0 = NaN and the zero block 0 x x = 0) and
// without (the copy with them); f16 with the flag 1 and, with the zero block alone, 2. N ragged as in the case
// above. M = 16, 12 (MT = 2) and 5 (MT = 1) unpacked; M = 3 packs its columns in every instance (Note [Packed
// columns]), with the flag or not.
TEST_CASE("decode kernel: the wide MXFP4 instances' fp32 path", "[gpu][quant][gemv-wide]") {
  std::mt19937_64 rng(fresh_seed());
  WideSetting().each_instance(Format::mxfp4, {{16, 1024}, {12, 2112}, {5, 2112}, {3, 2112}}, [&](const MatmulShape& s) {
    check_matmul(s, Format::mxfp4, VSTACK_DTYPE_BF16, false, rng, -122, 100);
    const int64_t nan_row = s.n / 3, zero_row = s.n / 2 + 5;  // different row blocks
    auto zero_block = [&](std::vector<float>& w) {
      for (int64_t c = 64; c < 96; ++c) w[zero_row * s.k + c] = 0.0f;
    };
    auto edit = [&](std::vector<float>& w) {
      w[nan_row * s.k + s.k / 2 + 3] = NAN;
      zero_block(w);
    };
    {
      std::vector<float> w(s.n * s.k, 1.0f);
      edit(w);
      ref::QTensor q;
      REQUIRE(ref::quantize(w.data(), s.n, s.k, Format::mxfp4, Layout::gemm, q));
      CHECK(q.scale2.at(0) == kMxfp4FoldBf16);
      CHECK(q.scales[scale_byte(Format::mxfp4, Layout::gemm, nan_row, s.k / 2, s.k)] == 0xFF);
      CHECK(q.scales[scale_byte(Format::mxfp4, Layout::gemm, zero_row, 64, s.k)] == 0);
      w[nan_row * s.k + s.k / 2 + 3] = 1.0f;
      REQUIRE(ref::quantize(w.data(), s.n, s.k, Format::mxfp4, Layout::gemm, q));
      CHECK(q.scale2.at(0) == kMxfp4FoldF16);
    }
    for (bool flag : {true, false})
      check_matmul(s, Format::mxfp4, VSTACK_DTYPE_BF16, true, rng, 0, 0, Launch{nullptr, false, flag}, edit);
    check_matmul(s, Format::mxfp4, VSTACK_DTYPE_F16, true, rng, 0, 0, {}, edit);
    check_matmul(s, Format::mxfp4, VSTACK_DTYPE_F16, true, rng, 0, 0, {}, zero_block);
  });
}

// NVFP4's bf16 wide instances at M = 9..16 take the scale pairs by a shift where the range flag holds, with a table
// of the E2M1 values times 2^120, and else rebuild the table and take the fp32 path (Note [NVFP4 shifted pairs] in
// quant/gemv_kernel.cuh). The wide case above runs the shifted pairs on the usual spread; here each instance gets
// (flag 1) a band of rows of N(0,1) x 2^-18 times the tensor's largest |w|, whose block scales are then about
// 2^-8 of the tensor scale's range: subnormal E4M3 bytes (bf16 subnormal pairs), and (flag 0)
// the same weights with the flag cleared, a NaN block (NaN in exactly its column), and a scale byte made negative
// by hand (its block's products negated, as the reference decodes it). N ragged as in the wide case.
TEST_CASE("decode kernel: the wide NVFP4 instances' shifted pairs and their fp32 path", "[gpu][quant][gemv-wide]") {
  std::mt19937_64 rng(fresh_seed());
  WideSetting().each_instance(Format::nvfp4, {{16, 1024}, {12, 2112}}, [&](const MatmulShape& s) {
    const int64_t band = s.n / 3, nan_row = s.n / 2 + 5, neg_row = s.n - 3;  // the last, ragged tile
    auto tiny = [&](std::vector<float>& w) {
      float amax = 0.0f;  // of the other rows: the tensor's
      for (int64_t i = 0; i < s.n * s.k; ++i)
        if (i < band * s.k || i >= (band + 24) * s.k) amax = std::max(amax, std::abs(w[i]));
      std::normal_distribution<float> nd;
      for (int64_t i = band * s.k; i < (band + 24) * s.k; ++i) w[i] = std::ldexp(nd(rng), -18) * amax;
    };
    {
      std::vector<float> w = random_matrix(s.n, s.k, rng);
      tiny(w);
      ref::QTensor q;
      REQUIRE(ref::quantize(w.data(), s.n, s.k, Format::nvfp4, Layout::gemm, q));
      CHECK(q.scale2.at(1) == kNvfp4Plain);
      int64_t subnormal = 0;  // the band's bytes with exponent 0 and a nonzero mantissa: most of them
      for (int64_t k = 0; k < s.k; k += 16) {
        const uint8_t b = q.scales[scale_byte(Format::nvfp4, Layout::gemm, band + 5, k, s.k)];
        subnormal += b > 0 && b < 8;
      }
      CHECK(subnormal * 2 > s.k / 16);
    }
    for (bool flag : {true, false})
      check_matmul(s, Format::nvfp4, VSTACK_DTYPE_BF16, s.m % 2 == 0, rng, 0, 0, Launch{nullptr, false, flag}, tiny);
    check_matmul(s, Format::nvfp4, VSTACK_DTYPE_BF16, true, rng, 0, 0, {},
                 [&](std::vector<float>& w) { w[nan_row * s.k + s.k / 2 + 3] = NAN; },
                 [&](ref::QTensor& q) { CHECK(q.scale2.at(1) == 0.0f); });  // the NaN byte: flag 0
    // the negated block's row at half the tensor's largest |w|: random_matrix's row scales (2^-8..2^8) and its
    // three x40 elements can put a row's block bytes at 0 (no sign to flip), as a fresh seed did in session 44
    auto loud_row = [&](std::vector<float>& w) {
      float amax = 0.0f, rmax = 0.0f;
      for (int64_t i = 0; i < s.n * s.k; ++i) amax = std::max(amax, std::abs(w[i]));
      for (int64_t c = 0; c < s.k; ++c) rmax = std::max(rmax, std::abs(w[neg_row * s.k + c]));
      for (int64_t c = 0; c < s.k; ++c) w[neg_row * s.k + c] *= 0.5f * amax / rmax;
    };
    check_matmul(s, Format::nvfp4, VSTACK_DTYPE_BF16, false, rng, 0, 0, {}, loud_row, [&](ref::QTensor& q) {
      CHECK(q.scale2.at(1) == kNvfp4Plain);  // finite weights (check_matmul skips this check for an edit)
      uint8_t& b = q.scales[scale_byte(Format::nvfp4, Layout::gemm, neg_row, 64, s.k)];
      REQUIRE(b != 0);
      b |= 0x80;
      q.scale2.at(1) = 0.0f;  // as a caller who edits the bytes must (FORMAT.md)
    });
  });
}

// The wgmma GEMM with its K chunks split over work items (Note [K split] in quant/gemm_traits.hpp):
// run.sh runs this case again under each forced wgmma config x VSTACK_FP4_GEMM_KSPLIT; without them
// it checks what the heuristic picks (on an H100: a K split for the last three shapes).
TEST_CASE("wgmma GEMM: the K split matches the fp64 product", "[gpu][quant][gemm-ksplit]") {
  std::mt19937_64 rng(fresh_seed());
  // ragged K slices (65 chunks), ragged M and N edges, several items per CTA (1040 rows of 64); M <= 16
  // where the decode kernel has no plan (K > 32768: wg64n with 8 slices on an H100)
  const MatmulShape shapes[] = {{33, 520, 4160}, {7, 200, 640}, {100, 1040, 2048}, {40, 4352, 1600},
                                {12, 264, 33280}};
  for (Format f : kAllFormats)
    for (const MatmulShape& s : shapes) check_matmul(s, f, s.m == 7 ? VSTACK_DTYPE_F16 : VSTACK_DTYPE_BF16, s.m % 2 == 1, rng);
}

// The split-K workspace of the decode kernel (Note [Workspace split]) and of the wgmma GEMM (Note [K
// split]): eager launches use one per stream, captured ones one of the capture's own, owned by the graph
// (freed once it is destroyed: the next launch frees it). Each launch and replay must leave its counters
// at 0 for the next (check_matmul launches twice). The shapes are those whose plan takes the workspace on
// an H100 (quant/gemv_plan.hpp, quant/gemm_traits.hpp); elsewhere they check the same paths with whatever
// plan applies.
TEST_CASE("split-K workspace under stream capture", "[gpu][quant]") {
  std::mt19937_64 rng(fresh_seed());
  // and the wgmma GEMM's K split (Note [K split]: 100 x 1040 x 2048 on an H100)
  const MatmulShape shapes[] = {{16, 4096, 14336}, {13, 1040, 14336}, {100, 1040, 2048}};
  for (const MatmulShape& s : shapes) {
    cudaStream_t st = nullptr;
    CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    check_matmul(s, Format::nvfp4, VSTACK_DTYPE_BF16, false, rng);                    // the launcher's setup, eagerly
    check_matmul(s, Format::nvfp4, VSTACK_DTYPE_BF16, true, rng, 0, 0, {st, true});   // captured: the graph's own
    check_matmul(s, Format::nvfp4, VSTACK_DTYPE_BF16, false, rng, 0, 0, {st, false}); // eager on st: st's own
    check_matmul(s, Format::nf4, VSTACK_DTYPE_BF16, true, rng, 0, 0, {st, true});     // captured again
    CUDA_OK(cudaStreamDestroy(st));
  }
}

TEST_CASE("matmul: a NaN weight block poisons exactly its column", "[gpu][quant]") {
  std::mt19937_64 rng(fresh_seed());
  const int64_t n = 48, k = 256;
  for (int64_t m : {5, 16, 300})  // the mma.sync GEMV (16: the scale folded into A) and the wgmma tiles
    for (Format f : kAllFormats) {
      std::vector<float> w = random_matrix(n, k, rng);
      w[7 * k + 100] = NAN;  // row 7 = output column 7
      ref::QTensor q;
      REQUIRE(ref::quantize(w.data(), n, k, f, Layout::gemm, q));
      std::normal_distribution<float> nd;
      std::vector<float> x(m * k);
      for (auto& v : x) v = nd(rng);
      const auto xb = as_dtype(x, VSTACK_DTYPE_BF16);
      DevBuf dx(xb.size()), dy(m * n * 2);
      dx.upload(xb);
      DevQ dq(f, Layout::gemm, n, k);
      dq.upload(q);
      for (int poison : {0x00, 0xFF}) {  // zero poison: column 7 was written NaN; NaN poison: the rest were written
        dy.poison(poison);
        VS_OK(vstack_fp4_matmul(dx.p, VSTACK_DTYPE_BF16, m, &dq.t, nullptr, dy.p, nullptr));
        const auto got = dy.download<uint16_t>();
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) CHECK(std::isnan(ref::bf16_to_f32(got[i * n + j])) == (j == 7));
      }
    }
}

TEST_CASE("unsupported shapes, dtypes and misaligned pointers return a status", "[gpu][quant]") {
  DevQ w(Format::nvfp4, Layout::gemm, 64, 128);
  DevBuf x(16 * 128 * 2 + 64), y(16 * 64 * 2 + 64);
  CHECK(vstack_fp4_matmul(x.p, VSTACK_DTYPE_F32, 4, &w.t, nullptr, y.p, nullptr) == VSTACK_ERR_UNSUPPORTED_DTYPE);
  CHECK(vstack_fp4_matmul(static_cast<char*>(x.p) + 2, VSTACK_DTYPE_BF16, 4, &w.t, nullptr, y.p, nullptr) ==
        VSTACK_ERR_MISALIGNED);
  CHECK(vstack_fp4_matmul(x.p, VSTACK_DTYPE_BF16, 4, &w.t, nullptr, static_cast<char*>(y.p) + 1, nullptr) ==
        VSTACK_ERR_MISALIGNED);
  CHECK(vstack_fp4_matmul(x.p, VSTACK_DTYPE_BF16, 4, nullptr, nullptr, y.p, nullptr) == VSTACK_ERR_INVALID_ARGUMENT);
  CHECK(vstack_fp4_matmul(nullptr, VSTACK_DTYPE_BF16, 4, &w.t, nullptr, y.p, nullptr) == VSTACK_ERR_INVALID_ARGUMENT);
  vstack_fp4_tensor_t bad = w.t;
  bad.cols = 96;
  CHECK(vstack_fp4_matmul(x.p, VSTACK_DTYPE_BF16, 4, &bad, nullptr, y.p, nullptr) == VSTACK_ERR_UNSUPPORTED_SHAPE);
  bad = w.t;
  bad.layout = VSTACK_FP4_LAYOUT_LINEAR;
  CHECK(vstack_fp4_matmul(x.p, VSTACK_DTYPE_BF16, 4, &bad, nullptr, y.p, nullptr) == VSTACK_ERR_INVALID_ARGUMENT);
  bad = w.t;
  bad.format = 9;
  CHECK(vstack_fp4_matmul(x.p, VSTACK_DTYPE_BF16, 4, &bad, nullptr, y.p, nullptr) == VSTACK_ERR_INVALID_ARGUMENT);
  bad = w.t;
  bad.codes = static_cast<char*>(bad.codes) + 8;
  CHECK(vstack_fp4_matmul(x.p, VSTACK_DTYPE_BF16, 4, &bad, nullptr, y.p, nullptr) == VSTACK_ERR_MISALIGNED);
  bad = w.t;
  bad.scale2 = nullptr;
  CHECK(vstack_fp4_matmul(x.p, VSTACK_DTYPE_BF16, 4, &bad, nullptr, y.p, nullptr) == VSTACK_ERR_INVALID_ARGUMENT);
  CHECK(std::strlen(vstack_last_error()) > 0);
  CHECK(vstack_fp4_matmul(x.p, VSTACK_DTYPE_BF16, -1, &w.t, nullptr, y.p, nullptr) == VSTACK_ERR_INVALID_ARGUMENT);
  // quantize: rows*cols not a multiple of 64 on the GPU, and a bad dtype
  DevQ l(Format::nvfp4, Layout::linear, 1, 48);
  CHECK(vstack_fp4_quantize(x.p, VSTACK_DTYPE_F32, &l.t, nullptr) == VSTACK_ERR_UNSUPPORTED_SHAPE);
  CHECK(vstack_fp4_quantize(x.p, static_cast<vstack_dtype_t>(7), &w.t, nullptr) == VSTACK_ERR_UNSUPPORTED_DTYPE);
  CHECK(vstack_fp4_dequantize(&w.t, static_cast<char*>(y.p) + 4, VSTACK_DTYPE_F32, nullptr) == VSTACK_ERR_MISALIGNED);
  size_t cb = 0;
  CHECK(vstack_fp4_sizes(VSTACK_FP4_MXFP4, VSTACK_FP4_LAYOUT_GEMM, 4, 100, &cb, nullptr, nullptr) ==
        VSTACK_ERR_UNSUPPORTED_SHAPE);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}
