// CPU reference encoder/decoder: the oracle for every FP4 test.
//
// Quantisation always runs in linear (row-major block) order; the GEMM layout
// is a permutation of those bytes (to_gemm / to_linear). The kernels use the
// same per-block functions (format.hpp), so their bytes must match exactly.
#pragma once

#include <cstdint>
#include <vector>

#include "quant/format.hpp"
#include "quant/layout.hpp"

namespace vstack::quant::ref {

struct QTensor {
  Format format = Format::nvfp4;
  Layout layout = Layout::linear;
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> codes;   // sizes(...).codes_bytes
  std::vector<uint8_t> scales;  // sizes(...).scales_bytes
  std::vector<float> scale2;    // sizes(...).scale2_count
};

// Quantise rows x cols fp32 values (row-major). Returns false (out untouched)
// if the shape breaks shape_ok().
[[nodiscard]] bool quantize(const float* x, int64_t rows, int64_t cols, Format f, Layout l, QTensor& out);

// Decode every element to fp32 (row-major rows x cols).
void dequantize(const QTensor& q, float* y);

// The same tensor in the other layout (pure byte permutation). to_gemm needs cols % 64 == 0.
[[nodiscard]] bool to_gemm(const QTensor& linear, QTensor& out);
QTensor to_linear(const QTensor& gemm);

// Code (0..15) and decode scale of element (n, k), for either layout.
uint32_t code_at(const QTensor& q, int64_t n, int64_t k);
float scale_at(const QTensor& q, int64_t n, int64_t k);

// Threads that quantize, dequantize and the layout permutations may use on large tensors (below ~4K blocks
// or rows a call stays on the calling thread): n = 1 serial, 0 (the default) the host's cores, at most 16. The
// results do not depend on it. Process-wide; not for concurrent use with those calls.
void set_threads(int n);

// Round-to-nearest-even conversions matching the GPU's __float2bfloat16_rn /
// __float2half_rn (NaN maps to a quiet NaN; compare NaNs as NaN, not by bits).
uint16_t f32_to_bf16(float v);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_f16(float v);
float f16_to_f32(uint16_t h);

}  // namespace vstack::quant::ref
