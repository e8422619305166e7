// CPU reference encoder/decoder (see ref.hpp).
#include "quant/ref.hpp"

#include <algorithm>
#include <cstring>

namespace vstack::quant::ref {

namespace {

template <Format F>
void quantize_linear(const float* x, int64_t n, QTensor& q) {
  constexpr int B = block_size(F);
  const int64_t blocks = n / B;
  float scale2 = 1.0f;
  if constexpr (F == Format::nvfp4) {
    float amax = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      float a = abs_f(x[i]);
      if (is_finite(a)) amax = max_f(amax, a);
    }
    scale2 = nvfp4_global(amax);
    q.scale2[0] = scale2;
  }
  if constexpr (F == Format::mxfp4) q.scale2[0] = kMxfp4FoldF16;  // the range flag, lowered below by each block
  for (int64_t b = 0; b < blocks; ++b) {
    if constexpr (F == Format::nf4_dq) {
      if (b % kDqGroup == 0) {  // group scale from the group's largest finite absmax
        float gmax = 0.0f;
        const int64_t end = std::min(blocks, b + kDqGroup) * B;
        for (int64_t i = b * B; i < end; ++i) {
          float a = abs_f(x[i]);
          if (is_finite(a)) gmax = max_f(gmax, a);
        }
        scale2 = nf4dq_group_scale(gmax);
        q.scale2[b / kDqGroup] = scale2;
      }
    }
    float xb[B];
    uint8_t cb[B];
    std::memcpy(xb, x + b * B, sizeof xb);
    uint32_t sc = encode_block<F, B>(xb, scale2, cb);
    uint32_t any = 0;  // the block's codes ORed
    for (int i = 0; i < B; i += 2) {
      q.codes[(b * B + i) / 2] = static_cast<uint8_t>(cb[i] | (cb[i + 1] << 4));
      any |= cb[i] | cb[i + 1];
    }
    if constexpr (F == Format::mxfp4)
      q.scale2[0] = std::min(q.scale2[0], static_cast<float>(mxfp4_fold_level(sc, any)));
    if constexpr (F == Format::nf4) std::memcpy(&q.scales[b * 4], &sc, 4);
    else q.scales[b] = static_cast<uint8_t>(sc);
  }
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
  for (int64_t n = 0; n < R; ++n)
    for (int64_t k = 0; k < C; ++k) y[n * C + k] = element_value(q.format, code_at(v, n, k)) * scale_at(v, n, k);
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
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; k += 2) d.codes[code_byte(to, n, k, K)] = src.codes[code_byte(src.layout, n, k, K)];
  const int B = block_size(src.format), sb = scale_bytes(src.format);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; k += B)
      std::memcpy(&d.scales[scale_byte(src.format, to, n, k, K)],
                  &src.scales[scale_byte(src.format, src.layout, n, k, K)], sb);
  return d;
}

}  // namespace

bool to_gemm(const QTensor& lin, QTensor& out) {
  if (lin.layout != Layout::linear || !shape_ok(lin.format, Layout::gemm, lin.rows, lin.cols)) return false;
  out = relayout(lin, Layout::gemm);
  return true;
}

QTensor to_linear(const QTensor& g) { return relayout(g, Layout::linear); }

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
