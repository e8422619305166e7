// CPU reference encoder/decoder (see ref.hpp).
#include "quant/ref.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

namespace vstack::quant::ref {

namespace {

// Threads for large tensors (set_threads); 0: the host's cores, at most kMaxThreads.
std::atomic<int> g_threads{0};
constexpr int kMaxThreads = 16;
// fn(t, begin, end) over [0, n) in T contiguous ranges whose bounds are multiples of `align`, range t on
// thread t (range 0 on the caller), T = threads for n but at least `least` items a thread (a thread costs tens
// of microseconds to start: the CPU tests' small tensors stay on the caller). Each range writes its own
// outputs, so the result does not depend on T: every caller below is checked equal at 1 and 4 threads
// (tests/quant/test_format.cpp).
template <typename Fn>
void parallel_ranges(int64_t n, int64_t align, int64_t least, Fn&& fn) {
  if (n <= 0) return;
  const int set = g_threads.load();
  const int want = set > 0 ? set : std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, kMaxThreads);
  const int64_t units = (n + align - 1) / align;
  const int T = static_cast<int>(std::clamp<int64_t>(std::min<int64_t>(want, n / least), 1, units));
  const int64_t per = (units + T - 1) / T * align;
  std::vector<std::thread> pool;
  for (int t = 1; t < T; ++t)
    pool.emplace_back([&, t] { fn(t, std::min(n, t * per), std::min(n, (t + 1) * per)); });
  fn(0, 0, std::min(n, per));
  for (std::thread& th : pool) th.join();
}

// The largest finite |x[i]| over [i0, i1) (0 if none).
float finite_amax(const float* x, int64_t i0, int64_t i1) {
  float amax = 0.0f;
  for (int64_t i = i0; i < i1; ++i) {
    float a = abs_f(x[i]);
    if (is_finite(a)) amax = max_f(amax, a);
  }
  return amax;
}

template <Format F>
void quantize_linear(const float* x, int64_t n, QTensor& q) {
  constexpr int B = block_size(F);
  const int64_t blocks = n / B;
  float scale2 = 1.0f;
  if constexpr (F == Format::nvfp4) {  // the largest finite |x|: a max, so any split gives the same value
    float part[kMaxThreads] = {};
    parallel_ranges(n, 1, 1 << 18, [&](int t, int64_t i0, int64_t i1) { part[t] = finite_amax(x, i0, i1); });
    float amax = 0.0f;
    for (float a : part) amax = max_f(amax, a);
    scale2 = nvfp4_global(amax);
    q.scale2[0] = scale2;
  }
  // MXFP4's range flag: the least of its blocks' fold levels (a min, so any split gives the same value)
  float level[kMaxThreads];
  std::fill(std::begin(level), std::end(level), kMxfp4FoldF16);
  // NF4_DQ's ranges hold whole scale2 groups (each group's scale is made at its first block)
  parallel_ranges(blocks, F == Format::nf4_dq ? kDqGroup : 1, 1 << 12, [&](int t, int64_t b0, int64_t b1) {
    float s2 = scale2;
    for (int64_t b = b0; b < b1; ++b) {
      if constexpr (F == Format::nf4_dq) {
        if (b % kDqGroup == 0) {  // group scale from the group's largest finite absmax
          s2 = nf4dq_group_scale(finite_amax(x, b * B, std::min(blocks, b + kDqGroup) * B));
          q.scale2[b / kDqGroup] = s2;
        }
      }
      float xb[B];
      uint8_t cb[B];
      std::memcpy(xb, x + b * B, sizeof xb);
      uint32_t sc = encode_block<F, B>(xb, s2, cb);
      uint32_t any = 0;  // the block's codes ORed
      for (int i = 0; i < B; i += 2) {
        q.codes[(b * B + i) / 2] = static_cast<uint8_t>(cb[i] | (cb[i + 1] << 4));
        any |= cb[i] | cb[i + 1];
      }
      if constexpr (F == Format::mxfp4) level[t] = std::min(level[t], static_cast<float>(mxfp4_fold_level(sc, any)));
      if constexpr (F == Format::nf4) std::memcpy(&q.scales[b * 4], &sc, 4);
      else q.scales[b] = static_cast<uint8_t>(sc);
    }
  });
  if constexpr (F == Format::mxfp4) q.scale2[0] = *std::min_element(std::begin(level), std::end(level));
  if constexpr (F == Format::nvfp4)  // the range flag (FORMAT.md)
    q.scale2[1] = std::all_of(q.scales.begin(), q.scales.end(), [](uint8_t b) { return nvfp4_plain_scale(b); })
                      ? kNvfp4Plain
                      : 0.0f;
}

void alloc(QTensor& q) {
  Sizes s = sizes(q.format, q.layout, q.rows, q.cols);
  q.codes.assign(s.codes_bytes, 0);
  q.scales.assign(s.scales_bytes, 0);
  q.scale2.assign(s.scale2_count, 0.0f);
}

}  // namespace

bool quantize(const float* x, int64_t rows, int64_t cols, Format f, Layout l, QTensor& out) {
  if (!shape_ok(f, l, rows, cols)) return false;
  QTensor q;
  q.format = f;
  q.layout = Layout::linear;
  q.rows = rows;
  q.cols = cols;
  alloc(q);
  const int64_t n = rows * cols;
  switch (f) {
    case Format::nvfp4: quantize_linear<Format::nvfp4>(x, n, q); break;
    case Format::mxfp4: quantize_linear<Format::mxfp4>(x, n, q); break;
    case Format::nf4: quantize_linear<Format::nf4>(x, n, q); break;
    case Format::nf4_dq: quantize_linear<Format::nf4_dq>(x, n, q); break;
  }
  if (l == Layout::gemm) return to_gemm(q, out);
  out = std::move(q);
  return true;
}

uint32_t code_at(const QTensor& q, int64_t n, int64_t k) {
  uint8_t b = q.codes[code_byte(q.layout, n, k, q.cols)];
  return (k & 1) ? (b >> 4) : (b & 15u);
}

float scale_at(const QTensor& q, int64_t n, int64_t k) {
  const int64_t off = scale_byte(q.format, q.layout, n, k, q.cols);
  const float s2 = q.scale2.empty() ? 1.0f : q.scale2[scale2_index(q.format, n, k, q.cols)];
  switch (q.format) {
    case Format::nvfp4: return block_scale<Format::nvfp4>(q.scales[off], s2);
    case Format::mxfp4: return block_scale<Format::mxfp4>(q.scales[off], s2);
    case Format::nf4: {
      uint32_t u;
      std::memcpy(&u, &q.scales[off], 4);
      return block_scale<Format::nf4>(u, s2);
    }
    case Format::nf4_dq: return block_scale<Format::nf4_dq>(q.scales[off], s2);
  }
  return 0.0f;
}

void dequantize(const QTensor& q, float* y) {
  // Linear tensors are decoded as one row so that any rows x cols split works.
  const int64_t R = q.layout == Layout::linear ? 1 : q.rows;
  const int64_t C = q.layout == Layout::linear ? q.rows * q.cols : q.cols;
  QTensor v = q;
  v.rows = R;
  v.cols = C;
  // elements in ranges of the flat index (every element on its own: any split gives the same y)
  parallel_ranges(R * C, 1, 1 << 16, [&](int, int64_t i0, int64_t i1) {
    for (int64_t i = i0, n = i0 / C, k = i0 % C; i < i1; ++i) {
      y[i] = element_value(q.format, code_at(v, n, k)) * scale_at(v, n, k);
      if (++k == C) {
        k = 0;
        ++n;
      }
    }
  });
}

namespace {

// The same tensor in layout `to` (every code and scale moved to its place there).
QTensor relayout(const QTensor& src, Layout to) {
  QTensor d;
  d.format = src.format;
  d.layout = to;
  d.rows = src.rows;
  d.cols = src.cols;
  alloc(d);
  d.scale2 = src.scale2;
  const int64_t N = src.rows, K = src.cols;
  const int B = block_size(src.format), sb = scale_bytes(src.format);
  // rows in ranges (a permutation: every byte has one place in either layout, so any split moves the same)
  parallel_ranges(N, 1, std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(K, 1)), [&](int, int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      for (int64_t k = 0; k < K; k += 2) d.codes[code_byte(to, n, k, K)] = src.codes[code_byte(src.layout, n, k, K)];
      for (int64_t k = 0; k < K; k += B)
        std::memcpy(&d.scales[scale_byte(src.format, to, n, k, K)],
                    &src.scales[scale_byte(src.format, src.layout, n, k, K)], sb);
    }
  });
  return d;
}

}  // namespace

bool to_gemm(const QTensor& lin, QTensor& out) {
  if (lin.layout != Layout::linear || !shape_ok(lin.format, Layout::gemm, lin.rows, lin.cols)) return false;
  out = relayout(lin, Layout::gemm);
  return true;
}

QTensor to_linear(const QTensor& g) { return relayout(g, Layout::linear); }

void set_threads(int n) { g_threads.store(std::max(0, std::min(n, kMaxThreads))); }

uint16_t f32_to_bf16(float v) {
  uint32_t u = f32_bits(v);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float bf16_to_f32(uint16_t h) { return bits_f32(static_cast<uint32_t>(h) << 16); }

uint16_t f32_to_f16(float v) {
  _Float16 h = static_cast<_Float16>(v);  // IEEE round to nearest even
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}

float f16_to_f32(uint16_t u) {
  _Float16 h;
  std::memcpy(&h, &u, 2);
  return static_cast<float>(h);
}

}  // namespace vstack::quant::ref
