// Where each code and scale of a quantised tensor lives, for the two layouts.
//
// LINEAR: the tensor is a flat sequence of rows*cols elements. Element i is
//   nibble (i & 1) (low nibble first) of code byte i / 2; block b = i / B owns
//   scale bytes [b * scale_bytes, (b+1) * scale_bytes).
// GEMM: a [rows = N] x [cols = K] weight, K % 64 == 0, laid out for the
//   mma fragments (see Note [GEMM layout] in FORMAT.md):
//   - codes: 16-row tiles t = n / 16 (rows padded to Npad), each tile's 64-element
//     chunks kc in order, 512 bytes per (tile, chunk) = the 16 rows' 32-byte pieces in
//     row order: a warp's loads of a tile's chunk are contiguous. Inside a row's 32 bytes
//     the byte that the linear layout has at 4j + r sits at 8r + j, so that lane r of an
//     MMA quad reads its 8 bytes with one 64-bit load;
//   - scales: chunk kc = k / 64 of row n owns chunk_scale_bytes(F) bytes at
//     gemm_scale_chunk(n, kc): per (tile, chunk) one run of the 16 rows' bytes
//     (rows g and g + 8 adjacent), in the order of the code blocks; padding bytes are zero;
//   - scale2 as in LINEAR (NF4_DQ groups follow the row-major block order).
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/format.hpp"

namespace vstack::quant {

enum class Layout : int { linear = 0, gemm = 1 };

struct Sizes {
  int64_t codes_bytes;
  int64_t scales_bytes;
  int64_t scale2_count;  // fp32 values
};

constexpr int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
constexpr int64_t gemm_npad(int64_t n) { return round_up(n, 16); }

// Shape rules: LINEAR needs rows*cols % block_size == 0; GEMM needs cols % 64 == 0.
constexpr bool shape_ok(Format f, Layout l, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return false;
  if (l == Layout::gemm) return cols % 64 == 0;
  return (rows * cols) % block_size(f) == 0;
}

constexpr Sizes sizes(Format f, Layout l, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  const int64_t blocks = n / block_size(f);
  Sizes s{l == Layout::gemm ? gemm_npad(rows) * cols / 2 : n / 2, 0, 0};
  s.scales_bytes = l == Layout::linear ? blocks * scale_bytes(f)
                                       : (cols / 64) * gemm_npad(rows) * chunk_scale_bytes(f);
  // NVFP4: the tensor scale and the range flag; MXFP4: the range flag (optional in a tensor; FORMAT.md)
  s.scale2_count = f == Format::nvfp4   ? 2
                   : f == Format::mxfp4 ? 1
                   : f == Format::nf4_dq ? (blocks + kDqGroup - 1) / kDqGroup
                                         : 0;
  return s;
}

// Byte position, inside a 32-byte chunk, of linear chunk byte b (= 4j + r -> 8r + j).
VSTACK_HD constexpr int gemm_byte_perm(int b) { return ((b & 3) << 3) | (b >> 2); }
VSTACK_HD constexpr int gemm_byte_unperm(int p) { return ((p & 7) << 2) | (p >> 3); }

// GEMM layout: first byte of row n's 32 code bytes of chunk kc; K columns.
VSTACK_HD constexpr int64_t gemm_chunk(int64_t n, int64_t kc, int64_t K) {
  return ((n / 16) * (K / 64) + kc) * 512 + (n % 16) * 32;
}

// Code byte holding element (n, k) of an [N x K] tensor; the nibble is k & 1.
VSTACK_HD constexpr int64_t code_byte(Layout l, int64_t n, int64_t k, int64_t K) {
  return l == Layout::linear ? (n * K + k) / 2
                             : gemm_chunk(n, k / 64, K) + gemm_byte_perm(static_cast<int>(k % 64) / 2);
}

// GEMM layout: the 16 rows of a tile keep the cs = chunk_scale_bytes bytes of one chunk in one run
// of 16 cs bytes, runs in the order of the code blocks, rows ordered g0 h0, g0 h1, g1 h0, ...
// (row 16 t + 8 h + g at slot 2 g + h): lane g of a warp reads rows g and g + 8 with one load.
// Slot (in units of cs, from the tile group's start) of row nl of a group of whole tiles.
VSTACK_HD constexpr int gemm_scale_slot(int nl) { return (nl & ~15) + ((nl & 7) << 1) + ((nl >> 3) & 1); }
// First scale byte of row n's chunk kc; K columns.
VSTACK_HD constexpr int64_t gemm_scale_chunk(int64_t n, int64_t kc, int64_t K, int cs) {
  return (((n / 16) * (K / 64) + kc) * 16 + gemm_scale_slot(static_cast<int>(n % 16))) * cs;
}

// First scale byte of the block holding element (n, k).
VSTACK_HD constexpr int64_t scale_byte(Format f, Layout l, int64_t n, int64_t k, int64_t K) {
  if (l == Layout::linear) return ((n * K + k) / block_size(f)) * scale_bytes(f);
  const int64_t base = gemm_scale_chunk(n, k / 64, K, chunk_scale_bytes(f));
  // inside a chunk: NVFP4 4 u8 (one per 16), MXFP4 2 u8 (one per 32), NF4 one fp32, NF4_DQ one u8
  return f == Format::nvfp4 ? base + (k % 64) / 16 : f == Format::mxfp4 ? base + (k % 64) / 32 : base;
}

// Index into scale2 for element (n, k): NVFP4 0; NF4_DQ the group of its block.
VSTACK_HD constexpr int64_t scale2_index(Format f, int64_t n, int64_t k, int64_t K) {
  return f == Format::nf4_dq ? ((n * K + k) / 64) / kDqGroup : 0;
}

}  // namespace vstack::quant
