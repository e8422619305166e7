// FP4 formats: element codes, scale codes and the per-block encoder/decoder.
//
// Every function here is compiled twice, for the CPU reference (ref.cpp) and
// for the CUDA kernels, from this one source: the kernels are bit-identical to
// the reference because they run the same float operations (each a single
// IEEE-rounded multiply, divide or compare; no multiply-add that a compiler
// could contract into an FMA). quant/FORMAT.md describes every bit.
//
// Glossary: *code* = one 4-bit element (E2M1 or an NF4 index); *block* = the
// run of consecutive elements that share one scale (16 NVFP4, 32 MXFP4, 64
// NF4); *scale2* = the second-level fp32 scale (NVFP4: one per tensor; NF4 with
// double quantisation: one per group of 256 blocks); *chunk* = 64 consecutive
// elements of a row, the unit of the GEMM layout (quant/layout.hpp).
#pragma once

#include <cmath>
#if defined(__CUDACC__)
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define VSTACK_HD __host__ __device__ __forceinline__
#else
#define VSTACK_HD inline
#endif
#if defined(__CUDA_ARCH__)
#define VSTACK_UNROLL _Pragma("unroll")
#else
#define VSTACK_UNROLL
#endif

namespace vstack::quant {

enum class Format : int { nvfp4 = 0, mxfp4 = 1, nf4 = 2, nf4_dq = 3 };
inline constexpr int kNumFormats = 4;

// Elements per block.
constexpr int block_size(Format f) { return f == Format::nvfp4 ? 16 : f == Format::mxfp4 ? 32 : 64; }
// Bytes of one block's scale in the linear layout: a u8 code, or fp32 for plain NF4.
constexpr int scale_bytes(Format f) { return f == Format::nf4 ? 4 : 1; }
// Bytes of scales per 64-element chunk (GEMM layout): 4×E4M3, 2×E8M0, 1×fp32, 1×E4M3.
constexpr int chunk_scale_bytes(Format f) {
  return f == Format::nvfp4 ? 4 : f == Format::mxfp4 ? 2 : f == Format::nf4 ? 4 : 1;
}
// NF4 double quantisation: blocks per second-level scale.
inline constexpr int kDqGroup = 256;
constexpr bool uses_nf4_table(Format f) { return f == Format::nf4 || f == Format::nf4_dq; }
// The code that decodes to 0 (E2M1 +0; NF4 index 7).
constexpr uint32_t zero_code(Format f) { return uses_nf4_table(f) ? 7u : 0u; }

// Largest finite E4M3 (0x7E) and the largest E2M1 magnitude.
inline constexpr float kE4m3Max = 448.0f;
inline constexpr float kE2m1Max = 6.0f;
// NVFP4 per-tensor scale: g = amax / (6 * 448), so the largest block scale is 448.
inline constexpr float kNvfp4GlobalDiv = kE2m1Max * kE4m3Max;  // 2688

inline constexpr uint32_t kE4m3Nan = 0x7F;
inline constexpr uint32_t kE8m0Nan = 0xFF;
inline constexpr uint32_t kF32Nan = 0x7FC00000u;

VSTACK_HD uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

VSTACK_HD float bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

VSTACK_HD float round_even(float v) {  // round to nearest integer, ties to even
#if defined(__CUDA_ARCH__)
  return rintf(v);
#else
  return __builtin_rintf(v);  // default rounding mode: to nearest even
#endif
}

VSTACK_HD bool is_finite(float v) { return (f32_bits(v) & 0x7F800000u) != 0x7F800000u; }
VSTACK_HD float abs_f(float v) { return bits_f32(f32_bits(v) & 0x7FFFFFFFu); }
// max that ignores NaN in b (a is never NaN here)
VSTACK_HD float max_f(float a, float b) { return b > a ? b : a; }

// ---- E2M1: s e1 e0 m; values 0, .5, 1, 1.5, 2, 3, 4, 6 -----------------------
VSTACK_HD float e2m1_value(uint32_t c) {
  uint32_t e = (c >> 1) & 3u, m = c & 1u;
  uint32_t mag = e == 0 ? (m ? 0x3F000000u : 0u) : (((e + 126u) << 23) | (m << 22));
  return bits_f32(mag | ((c & 8u) << 28));
}

// Both codes of a byte (low nibble -> bits 0..15, high -> 16..31) as bf16 (f16 = false)
// or f16 bit patterns of value * 2^-126 (bf16) / value * 2^-14 (f16): E2M1's e1 e0 m go to
// the two lowest exponent bits + the top mantissa bit and s to the sign, so e = 0 (0, 0.5)
// lands on the dtype's subnormals with the same factor. One exact multiply by 2^126 / 2^14
// then gives the value (the integer decode of the wgmma GEMM, quant/gemm_wgmma.cuh).
// b * 0x1001 puts the low nibble at bits 0..3 and the high nibble at 16..19.
VSTACK_HD constexpr uint32_t e2m1_pair_bits(uint32_t byte, bool bf16) {
  const uint32_t t = byte * 0x1001u;
  const uint32_t mag = bf16 ? (t << 6) & 0x01C001C0u : (t << 9) & 0x0E000E00u;
  return mag | ((t << 12) & 0x80008000u);
}

// Round v to the nearest E2M1 value, ties to the even code, saturating at ±6.
// Negative values that round to 0 encode +0. v must not be NaN.
VSTACK_HD uint32_t e2m1_encode(float v) {
  float a = abs_f(v);
  uint32_t c = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
  return (c != 0 && v < 0.0f) ? (c | 8u) : c;
}

// ---- NF4: the bitsandbytes table (fp32 values) -------------------------------
VSTACK_HD float nf4_value(uint32_t c) {
  switch (c & 15u) {
    case 0: return -1.0f;
    case 1: return -0x1.647362p-1f;  // -0.6961928
    case 2: return -0x1.0cd66p-1f;   // -0.5250731
    case 3: return -0x1.94654p-2f;   // -0.3949175
    case 4: return -0x1.23449ap-2f;  // -0.2844414
    case 5: return -0x1.7a6a7ep-3f;  // -0.1847734
    case 6: return -0x1.74f0e2p-4f;  // -0.0910500
    case 7: return 0.0f;
    case 8: return 0x1.45f5fep-4f;   // 0.0795803
    case 9: return 0x1.4995c6p-3f;   // 0.1609302
    case 10: return 0x1.f809bap-3f;  // 0.2461123
    case 11: return 0x1.5a0674p-2f;  // 0.3379152
    case 12: return 0x1.c3497p-2f;   // 0.4407098
    case 13: return 0x1.200f56p-1f;  // 0.5626170
    case 14: return 0x1.722766p-1f;  // 0.7229568
    default: return 1.0f;
  }
}

// The 15 decision points of nf4_encode in index order, the fp32 midpoints
// (nf4_value(i) + nf4_value(i + 1)) * 0.5f; i = 15 is a sentinel above every input.
VSTACK_HD float nf4_mid(uint32_t i) {
  switch (i) {
    case 0: return -0x1.b239bp-1f;
    case 1: return -0x1.38a4ep-1f;
    case 2: return -0x1.d709p-2f;
    case 3: return -0x1.5bd4ecp-2f;
    case 4: return -0x1.e079d8p-3f;
    case 5: return -0x1.1a7178p-3f;
    case 6: return -0x1.74f0e2p-5f;
    case 7: return 0x1.45f5fep-5f;
    case 8: return 0x1.ec90c4p-4f;
    case 9: return 0x1.a0cfcp-3f;
    case 10: return 0x1.2b05a8p-2f;
    case 11: return 0x1.8ea7f2p-2f;
    case 12: return 0x1.00da08p-1f;
    case 13: return 0x1.491b5ep-1f;
    case 14: return 0x1.b913b4p-1f;
    default: return 4.0f;
  }
}

// Nearest NF4 index of v (normally in [-1, 1]); a value exactly on a midpoint
// (fp32 (t[i] + t[i+1]) * 0.5) takes the lower index. Saturates at both ends.
VSTACK_HD uint32_t nf4_encode(float v) {
  uint32_t c = 0;
VSTACK_UNROLL
  for (uint32_t i = 0; i < 15; ++i) c += v > nf4_mid(i);
  return c;
}

VSTACK_HD float element_value(Format f, uint32_t c) { return uses_nf4_table(f) ? nf4_value(c) : e2m1_value(c); }

// ---- E4M3 (OCP FP8, "fn": no infinities, 0x7F/0xFF NaN, max 448) ------------
VSTACK_HD float e4m3_value(uint32_t b) {
  uint32_t e = (b >> 3) & 15u, m = b & 7u;
  float v;
  if (e == 15u && m == 7u) v = bits_f32(kF32Nan);
  else if (e == 0u) v = static_cast<float>(m) * 0x1p-9f;  // subnormal: m * 2^-9 (exact)
  else v = bits_f32(((e + 120u) << 23) | (m << 20));
  return (b & 0x80u) ? -v : v;
}

// Round v >= 0 (finite or +inf, not NaN) to the nearest E4M3, ties to even,
// saturating at 448 (0x7E).
VSTACK_HD uint32_t e4m3_encode_pos(float v) {
  if (v >= kE4m3Max) return 0x7Eu;
  if (v < 0x1p-6f) return static_cast<uint32_t>(round_even(v * 512.0f));  // subnormals; 8 -> 0x08 = 2^-6
  uint32_t u = f32_bits(v);
  int e = static_cast<int>(u >> 23) - 127;                  // -6 .. 8
  float m = bits_f32((u & 0x7FFFFFu) | 0x3F800000u);      // [1, 2)
  uint32_t t = static_cast<uint32_t>(round_even((m - 1.0f) * 8.0f));  // 0 .. 8 (8 carries)
  uint32_t code = (static_cast<uint32_t>(e + 7) << 3) + t;
  return code > 0x7Eu ? 0x7Eu : code;
}

// ---- E8M0 (OCP MX scale): 2^(code - 127); 0xFF NaN ---------------------------
VSTACK_HD float e8m0_value(uint32_t b) {
  b &= 0xFFu;
  if (b == 0xFFu) return bits_f32(kF32Nan);
  if (b == 0u) return bits_f32(0x00400000u);  // 2^-127, an fp32 subnormal
  return bits_f32(b << 23);
}

// e8m0_value of a byte b < 256 with selects instead of branches (the decode kernel's form).
VSTACK_HD float e8m0_value_sel(uint32_t b) {
  return bits_f32(b == 0u ? 0x00400000u : b == kE8m0Nan ? kF32Nan : b << 23);
}

// Whether an MXFP4 block folds exactly into bf16 (the decode kernels' Note [MXFP4 range flag]): its
// E8M0 byte sc in 64..191 (bits 7 and 6 differ), or its codes (the block's 4-bit codes in any packing,
// `codes`) all +-0 (bf16 e << 7 times 0: 0, or NaN for the NaN byte, as the decode).
VSTACK_HD constexpr bool mxfp4_block_folds(uint32_t sc, uint32_t codes) {
  return ((sc ^ (sc << 1)) & 0x80u) != 0 || (codes & 0x77777777u) == 0;
}
// The same into f16: sc in 114..140 (E2M1 values times 2^-13..2^13 are normal f16), or a zero block (byte
// 0, codes +-0: the kernel's f16 scale of byte 0 is 2; not the NaN byte, whose f16 scale would be finite).
VSTACK_HD constexpr bool mxfp4_block_folds_f16(uint32_t sc, uint32_t codes) {
  return (sc >= 114u && sc <= 140u) || (sc == 0u && (codes & 0x77777777u) == 0);
}
// NVFP4's range flag (scale2[1], FORMAT.md): kNvfp4Plain where every block's E4M3 byte is plain, 0..0x7E (not
// negative, not NaN: all that the encoder writes for a finite block), else 0. The decode kernels' bf16 M > 8 wide
// instances then take their scale pairs by a shift (Note [NVFP4 shifted pairs] in quant/gemv_kernel.cuh).
inline constexpr float kNvfp4Plain = 1.0f;
VSTACK_HD constexpr bool nvfp4_plain_scale(uint32_t sc) { return sc < 0x7Fu; }
// The tensor's range flag (scale2[0], FORMAT.md) is the least of its blocks' levels: 2 folds into f16
// (and so into bf16), 1 into bf16 only, 0 neither.
inline constexpr float kMxfp4FoldF16 = 2.0f, kMxfp4FoldBf16 = 1.0f;
VSTACK_HD constexpr uint32_t mxfp4_fold_level(uint32_t sc, uint32_t codes) {
  return mxfp4_block_folds_f16(sc, codes) ? 2u : mxfp4_block_folds(sc, codes) ? 1u : 0u;
}
// The quantize kernel's form of it: a block's fold byte, sc where its codes are not all +-0, else 127 where
// such a block folds into f16 (byte 0, or 114..140) and 100 for any other (the NaN byte: bf16 only); the
// levels are ranges of it that nest and hold 127 (f16 114..140, bf16 64..191), so the least level of a set
// of blocks is the level of the range [min, max] of their fold bytes, and a lane keeps only (min, 255 - max)
// as one u16x2 (min by __vminu2).
VSTACK_HD constexpr uint32_t mxfp4_fold_byte(uint32_t sc, uint32_t codes) {
  return (codes & 0x77777777u) != 0 ? sc : mxfp4_block_folds_f16(sc, 0) ? 127u : 100u;
}
VSTACK_HD constexpr uint32_t mxfp4_fold_pair(uint32_t fold_byte) { return fold_byte * 0xFFFF0001u + 0x00FF0000u; }
// The level of such a range: the lesser of its ends' (each as a block of nonzero codes), the levels being
// nested intervals. pair = the min of mxfp4_fold_pair per half.
VSTACK_HD constexpr uint32_t mxfp4_range_level(uint32_t pair) {
  const uint32_t lo = mxfp4_fold_level(pair & 0xFFFFu, 1u), hi = mxfp4_fold_level(255u - (pair >> 16), 1u);
  return lo < hi ? lo : hi;
}

// Note [E8M0 pairs]. The decode kernel reads a chunk's four E8M0 bytes (rows g and g + 8, two blocks
// each: lo, hi = the rows' 16-bit pairs) as one word w. For b in 1..254 the fp32 bits of 2^(b - 127)
// are b << 23: a shift and a mask per byte. Whether any byte is 0x00 or 0xFF is one test on the word
// (a zero byte of w or of ~w: (v - 0x01010101) & ~v & 0x80808080 is nonzero exactly then); only
// such words take e8m0_value_sel per byte. Before: e8m0_value_sel per byte, 5 instructions each (two
// compares, two selects, a shift). MXFP4 M = 1 (bench, H100, 2026-11-22, builds alternated twice in
// one call): 8192^2 19.0-19.2 -> 18.7 us, 4096x14336 16.8-17.2 -> 16.6-16.7, the other cells within
// +-1 %. The kernel uses it where it has one mma column tile: at two, ptxas spilled 16 bytes and
// M = 16 ran 3 % slower. tests/quant/test_format.cpp checks it against e8m0_value.
VSTACK_HD bool e8m0x4_special(uint32_t w) {
  return ((((w - 0x01010101u) & ~w) | ((~w - 0x01010101u) & w)) & 0x80808080u) != 0;
}
// e8m0x4_value where no byte is 0 or 255 (else 0 or Inf for those): bits 23.. of each float.
VSTACK_HD void e8m0x4_value_normal(uint32_t lo, uint32_t hi, float (&s)[4]) {  // lo, hi < 2^16
  const uint32_t w = lo | (hi << 16);
  s[0] = bits_f32((w << 23) & 0x7F800000u);
  s[1] = bits_f32((w << 15) & 0x7F800000u);
  s[2] = bits_f32((w << 7) & 0x7F800000u);
  s[3] = bits_f32((w >> 1) & 0x7F800000u);
}
VSTACK_HD void e8m0x4_value(uint32_t lo, uint32_t hi, float (&s)[4]) {  // lo, hi < 2^16
  e8m0x4_value_normal(lo, hi, s);
  if (e8m0x4_special(lo | (hi << 16))) {
    s[0] = e8m0_value_sel(lo & 0xFFu);
    s[1] = e8m0_value_sel(lo >> 8);
    s[2] = e8m0_value_sel(hi & 0xFFu);
    s[3] = e8m0_value_sel(hi >> 8);
  }
}

VSTACK_HD int clz32(uint32_t v) {
#if defined(__CUDA_ARCH__)
  return __clz(static_cast<int>(v));
#else
  return v ? __builtin_clz(v) : 32;
#endif
}

// floor(log2(a)) for finite a > 0, subnormals included.
VSTACK_HD int floor_log2(float a) {
  uint32_t u = f32_bits(a);
  uint32_t ex = u >> 23;
  if (ex != 0u) return static_cast<int>(ex) - 127;
  return (31 - clz32(u & 0x7FFFFFu)) - 149;
}

// ---- per-block encoders ----------------------------------------------------
// x: the block's N inputs as float; codes: N outputs (0..15, one per byte).
// Non-finite input policy: a block holding a NaN or ±Inf gets the NaN scale
// code (decodes to NaN for every element) and all-zero-value codes.

struct BlockStat {
  float amax;  // max |x| over the block (finite values)
  bool bad;    // some element is NaN or ±Inf
};

template <int N>
VSTACK_HD BlockStat block_stat(const float (&x)[N]) {
  BlockStat s{0.0f, false};
VSTACK_UNROLL
  for (int i = 0; i < N; ++i) {
    float a = abs_f(x[i]);
    bool fin = is_finite(a);
    s.bad |= !fin;
    if (fin) s.amax = max_f(s.amax, a);
  }
  return s;
}

// NVFP4 per-tensor decode multiplier from the tensor's finite amax.
VSTACK_HD float nvfp4_global(float tensor_amax) {
  float g = tensor_amax / kNvfp4GlobalDiv;
  return g > 0.0f ? g : 1.0f;  // all-zero (or underflowing) tensor: any g works, use 1
}

// NF4 double quantisation: the group's fp32 scale from the largest finite absmax.
VSTACK_HD float nf4dq_group_scale(float group_amax) {
  float g = group_amax / kE4m3Max;
  return g > 0.0f ? g : 1.0f;
}

// The stored scale of a block from its statistics (first half of encode_block; the GPU
// quantize kernel reduces BlockStat across lanes and calls this). scale2: NVFP4 the
// per-tensor g, NF4_DQ the group's g2, else unused. Returns the stored scale (a u8
// code, or the fp32 bits of the absmax for NF4) and sets s, the block's decode scale.
template <Format F>
VSTACK_HD uint32_t block_scale_code(BlockStat st, float scale2, float& s) {
  uint32_t sc;
  if constexpr (F == Format::nvfp4) {
    sc = st.bad ? kE4m3Nan : e4m3_encode_pos(st.amax / (kE2m1Max * scale2));
    s = e4m3_value(sc) * scale2;
  } else if constexpr (F == Format::mxfp4) {
    if (st.bad) {
      sc = kE8m0Nan;
    } else if (st.amax == 0.0f) {
      sc = 0u;
    } else {
      int se = floor_log2(st.amax) - 2;  // 2 = emax of E2M1 (6 = 1.5 * 2^2)
      se = se < -127 ? -127 : se;        // never above 125: fp32 amax < 2^128
      sc = static_cast<uint32_t>(se + 127);
    }
    s = e8m0_value(sc);
  } else if constexpr (F == Format::nf4) {
    s = st.bad ? bits_f32(kF32Nan) : st.amax;
    sc = f32_bits(s);
  } else {  // nf4_dq: absmax rounded to E4M3 in units of the group scale
    sc = st.bad ? kE4m3Nan : e4m3_encode_pos(st.amax / scale2);
    s = e4m3_value(sc) * scale2;
  }
  return sc;
}

// Code of one element of a block with decode scale s (second half of encode_block);
// zero: the block has a NaN/Inf or a scale that is not positive.
template <Format F>
VSTACK_HD uint32_t encode_element(float x, float s, bool zero) {
  if (zero) return zero_code(F);
  if constexpr (uses_nf4_table(F)) return nf4_encode(x / s);
  else return e2m1_encode(x / s);
}
VSTACK_HD bool block_is_zero(BlockStat st, float s) { return st.bad || !(s > 0.0f); }

// ---- The quantize kernel's encoder (Note [Fast encode]) ---------------------
// encode_element's x / s and compare chains cost ~20 (E2M1) to ~45 (NF4) instructions
// per element on the GPU, which made the quantize kernel issue-bound. These functions
// give the same codes with a handful; tests/quant/test_fast_encode.cpp checks them against
// the functions above, over every float where that is feasible.
//
// Note [Fast encode].
// * Quotient. r = RN(1/s) once per block; q = RN(x*r); e = RN(x - q*s) (an FMA: exact,
//   since q is within an ulp of x/s); q' = RN(q + e*r) is RN(x/s) (Markstein's
//   theorem: r correctly rounded, q faithful). It needs no underflow in e: so s must be
//   in [2^-90, 2^90] (else the kernel divides), and it holds for |x| >= 2^-100; below
//   that |x/s| < 2^-10 and every format's code is the one of zero either way. MXFP4's
//   s is a power of two, so r is exact and x*r is x/s (the same real, rounded once).
// * E2M1. a = |q|. Below 2, code = round-half-even(2a) = the fp32 bits of a * 2^-148
//   (a subnormal: the hardware rounds it to a multiple of 2^-149); in [2, 4) the code is
//   round(a) + 2 = round(a + 2) = bits(a * 2^-149 + 2^-148), one FMA rounded once (adding
//   an even integer keeps ties-to-even); from 4 on, 6 (a clamped to 4), plus 1 above 5
//   (5 ties to 6).
// * NF4. v in [-2, 2] falls in bucket k = round(32 v) + 64 (one FMA with the 1.5 * 2^23
//   rounding constant); a bucket is 1/32 wide and NF4's decision points are >= 0.085
//   apart, so it holds at most one: code = base[k] + (v > mid[base[k]]), where base[k]
//   counts the decision points below the bucket (nf4_mid(15) is a sentinel). The kernel
//   needs no clamp: NF4's s is the block's amax, so |x/s| <= 1; NF4_DQ's s is amax/g2
//   rounded to E4M3 (down by at most a factor 1.5, at E4M3's smallest subnormal) times
//   g2, so |x/s| <= 1.5 (1 + 2^-22) in the fast path (g2 normal there).
VSTACK_HD float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return __builtin_fmaf(a, b, c);
#endif
}
VSTACK_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

inline constexpr float kQuotientMin = 0x1p-90f, kQuotientMax = 0x1p90f;

struct BlockDivisor {
  float s, r;  // r = RN(1 / s) where fast (else unspecified)
  bool fast;   // quotient() is RN(x / s); else the caller divides
};
// RN(1 / s) for s in [kQuotientMin, kQuotientMax], without the division's range check and slow
// path (a branch): on the GPU MUFU.RCP and one Newton step, the sequence nvcc emits for 1.0f / s
// in that range (checked against 1.0f / s over every float of it by tests/gpu/quant).
VSTACK_HD float rcp_rn_normal(float s) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(s));
  return __fmaf_rn(r, __fmaf_rn(-s, r, 1.0f), r);
#else
  return 1.0f / s;
#endif
}
template <Format F>
VSTACK_HD BlockDivisor block_divisor(float s) {
  // MXFP4: s = 2^(sc - 127) with sc = exponent field in 0..252 (0: the subnormal 2^-127), so
  // 1/s = 2^(127 - sc) has exponent field 254 - sc
  if constexpr (F == Format::mxfp4) return {s, bits_f32((254u - (f32_bits(s) >> 23)) << 23), true};
  else return {s, rcp_rn_normal(s), s >= kQuotientMin && s <= kQuotientMax};  // r: used only where fast
}
template <Format F>
VSTACK_HD float quotient(float x, BlockDivisor d) {
  const float q = mul_rn(x, d.r);
  if constexpr (F == Format::mxfp4) return q;
  else return fma_rn(fma_rn(-q, d.s, x), d.r, q);
}

VSTACK_HD float fabs_hd(float v) {  // |v|: on the GPU an operand modifier, not an instruction
#if defined(__CUDA_ARCH__)
  return fabsf(v);
#else
  return abs_f(v);
#endif
}

VSTACK_HD uint32_t e2m1_encode_fast(float v) {  // branch-free: selects only
  const float a = fabs_hd(v);
  const bool ge2 = a >= 2.0f;
  const uint32_t c = f32_bits(fma_rn(fminf(a, 4.0f), ge2 ? 0x1p-149f : 0x1p-148f, ge2 ? 0x1p-148f : 0.0f)) +
                     (a > 5.0f ? 1u : 0u);
  return v < -0.25f ? (c | 8u) : c;  // v < -0.25 exactly when v < 0 and c != 0
}

inline constexpr int kNf4Buckets = 129;  // k = round(32 v) + 64, v in [-2, 2]
// base[k] of Note [Fast encode]: decision points below bucket k's lower edge (k - 64.5) / 32.
VSTACK_HD uint32_t nf4_bucket_base(int k) {
  const float lo = (static_cast<float>(k) - 64.5f) * 0.03125f;  // exact
  uint32_t n = 0;
  for (uint32_t i = 0; i < 15; ++i) n += nf4_mid(i) < lo;
  return n;
}
// The bucket of v (|v| <= 2): j4 = 4 * base[k] (the byte offset of mid[base[k]]) and v > mid.
// base4: kNf4Buckets entries of 4 * nf4_bucket_base; mids: 16 entries of nf4_mid.
// Note [Biased lookup]. The FMA's bits are kNf4BucketBits + k. The host masks k out of them;
// the GPU reads base4 at the bits themselves, from base4's shared-memory address minus
// kNf4BucketBits: 32-bit shared addresses wrap, so the sum is base4 + k and the mask is gone.
// The bias comes from constant memory (kNf4BucketBias below): as a literal, ptxas splits it
// into an add and the load's offset and the instruction comes back; as a uniform operand the
// load is one LDS [R + UR]. With the predicated add of encode8_quotients, NF4 / NF4_DQ encode
// an element in 10 instructions instead of 12: the NF4_DQ GEMM-layout bf16 quantize's
// straight-line steps went from 542 to 481 SASS instructions a tile (H200, 8192² NF4_DQ
// quantize 0.95-0.98x, NF4 0.91-0.96x; bench/RESULTS.md session 30). The device tables must
// therefore be in shared memory. tests/gpu/quant checks every float on the GPU against
// nf4_encode. (Reading one bucket low would be harmless: the bucket below holds the decision
// point, if any, that v is above, and the compare adds it back; one bucket high is not.)
// The constant exists only in the translation units that quantize on the GPU, which define
// VSTACK_NF4_LOOKUP_TU before their includes (quant/api.cu, tests/gpu/quant/device_fns.cu); elsewhere
// nf4_lookup's device code is the host's masked form (correct, never called there). A module-level
// __constant__ in every decode TU cost each of their launches 0.15-0.3 us (docs/NOTES.md session 31).
inline constexpr uint32_t kNf4BucketBits = 0x4B400000u;  // f32_bits(0x1.8p23f + 64) - 64
#if defined(__CUDACC__) && defined(VSTACK_NF4_LOOKUP_TU)
static __constant__ uint32_t kNf4BucketBias = kNf4BucketBits;
#endif
struct Nf4Lookup {
  uint32_t j4;
  bool up;
};
VSTACK_HD Nf4Lookup nf4_lookup(float v, const uint8_t* base4, const float* mids) {
  const uint32_t kb = f32_bits(fma_rn(v, 32.0f, 0x1.8p23f + 64.0f));  // kNf4BucketBits + k
#if defined(__CUDA_ARCH__) && defined(VSTACK_NF4_LOOKUP_TU)
  const uint32_t at = static_cast<uint32_t>(__cvta_generic_to_shared(base4)) - kNf4BucketBias + kb;
  uint32_t j4;
  float mid;
  asm volatile("ld.shared.u8 %0, [%1];" : "=r"(j4) : "r"(at));
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(mid) : "r"(static_cast<uint32_t>(__cvta_generic_to_shared(mids)) + j4));
  return {j4, v > mid};
#else
  const uint32_t j4 = base4[kb & 0xFFu];
  return {j4, v > *reinterpret_cast<const float*>(reinterpret_cast<const uint8_t*>(mids) + j4)};
#endif
}
// nf4_encode for any v that is not NaN.
VSTACK_HD uint32_t nf4_encode_fast(float v, const uint8_t* base4, const float* mids) {
  const Nf4Lookup l = nf4_lookup(fminf(fmaxf(v, -2.0f), 2.0f), base4, mids);
  return (l.j4 >> 2) + l.up;
}

template <Format F>
VSTACK_HD uint32_t encode_quotient_fast(float q, const uint8_t* nf4_base, const float* nf4_mids) {
  if constexpr (uses_nf4_table(F)) return nf4_encode_fast(q, nf4_base, nf4_mids);
  else return e2m1_encode_fast(q);
}

// Codes of 8 consecutive elements of one block (element j at bits 4j..4j+3) by quotient, for
// a divisor d with d.fast: straight-line, and |x / s| < 2 (Note [Fast encode]), so no clamp.
template <Format F>
VSTACK_HD uint32_t encode8_quotients(const float (&x)[8], BlockDivisor d, const uint8_t* nf4_base,
                                     const float* nf4_mids) {
  uint32_t w = 0;
  if constexpr (uses_nf4_table(F)) {
VSTACK_UNROLL
    for (int j = 0; j < 8; ++j) {
      const Nf4Lookup l = nf4_lookup(quotient<F>(x[j], d), nf4_base, nf4_mids);
      w += j == 0 ? l.j4 >> 2 : l.j4 << (4 * j - 2);
#if defined(__CUDA_ARCH__)  // a predicated add: nvcc makes the select below an add and a move
      asm("{ .reg .pred p; setp.ne.u32 p, %1, 0; @p add.u32 %0, %0, %2; }"
          : "+r"(w) : "r"(static_cast<uint32_t>(l.up)), "r"(1u << (4 * j)));
#else
      w += l.up ? 1u << (4 * j) : 0u;
#endif
    }
  } else {
VSTACK_UNROLL
    for (int j = 0; j < 8; ++j) w += e2m1_encode_fast(quotient<F>(x[j], d)) << (4 * j);  // + = |: no overlap
  }
  return w;
}
// Codes of 8 consecutive elements of one block, as encode_element gives them: the quantize
// kernel's inner loop.
template <Format F>
VSTACK_HD uint32_t encode8_fast(const float (&x)[8], float s, bool zero, const uint8_t* nf4_base,
                                const float* nf4_mids) {
  constexpr uint32_t z = zero_code(F) * 0x11111111u;
  if (zero) return z;
  const BlockDivisor d = block_divisor<F>(s);
  uint32_t w = 0;
  if (d.fast) {
    w = encode8_quotients<F>(x, d, nf4_base, nf4_mids);
  } else {
VSTACK_UNROLL
    for (int j = 0; j < 8; ++j) w |= encode_quotient_fast<F>(x[j] / s, nf4_base, nf4_mids) << (4 * j);
  }
  return w;
}

// E4M3 encode (v >= 0, not NaN) and decode: on sm_89+ the hardware conversions (round to
// nearest even, saturating at 448, subnormals kept: the same as e4m3_encode_pos/e4m3_value).
VSTACK_HD uint32_t e4m3_encode_pos_fast(float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
#else
  return e4m3_encode_pos(v);
#endif
}
VSTACK_HD float e4m3_value_fast(uint32_t b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(b), __NV_E4M3)));
#else
  return e4m3_value(b);
#endif
}

// block_scale_code without a divide or a branch per block: NVFP4 and NF4_DQ divide amax by
// a per-tensor / per-group constant, d2 = block_divisor of 6 * scale2 (NVFP4) or scale2
// (NF4_DQ); MXFP4 takes floor(log2(amax)) from the bits. Same codes and s as block_scale_code.
// kD2Fast: the caller knows d2.fast (no branch to the division).
template <Format F, bool kD2Fast = false>
VSTACK_HD uint32_t block_scale_code_fast(BlockStat st, float scale2, BlockDivisor d2, float& s) {
  if constexpr (F == Format::nvfp4 || F == Format::nf4_dq) {
    const float q = kD2Fast || d2.fast ? quotient<F>(st.amax, d2) : st.amax / d2.s;
    const uint32_t sc = st.bad ? kE4m3Nan : e4m3_encode_pos_fast(q);
    s = e4m3_value_fast(sc) * scale2;
    return sc;
  } else if constexpr (F == Format::mxfp4) {
    // floor_log2 and e8m0_value, inlined without their branches (calling them adds 12 SASS
    // instructions, branches, to each MXFP4 quantize kernel): amax >= 0; 0 and subnormals by clz
    const uint32_t b = f32_bits(st.amax), e = b >> 23;
    const int fl = e != 0 ? static_cast<int>(e) - 127 : (31 - clz32(b & 0x7FFFFFu)) - 149;
    const uint32_t sc = st.bad ? kE8m0Nan : static_cast<uint32_t>(fl + 125 < 0 ? 0 : fl + 125);  // max(fl - 2, -127) + 127
    s = st.bad ? bits_f32(kF32Nan) : sc == 0 ? bits_f32(0x00400000u) : bits_f32(sc << 23);
    return sc;
  } else {
    return block_scale_code<F>(st, scale2, s);
  }
}
// d2 of block_scale_code_fast.
template <Format F>
VSTACK_HD BlockDivisor scale_divisor(float scale2) {
  return block_divisor<F>(F == Format::nvfp4 ? kE2m1Max * scale2 : scale2);
}

// Note [Clean blocks]. The quantize kernel's straight-line path: a block is clean when it has
// no NaN/Inf and its decode scale s is 0 or in the quotient range (for NVFP4 / NF4_DQ: when
// scale2 passes scale2_fast, which puts every s there, and d2.fast), i.e. when encode8_fast
// would take its quotient loop or return the zero code. Then
// its scale and codes need no branch: r = RN(1/s) by block_divisor, and a zero block (s = 0) gets
// r = 0, so that its quotients are +-0 and encode8_quotients gives the zero code itself (NF4 7,
// E2M1 0; the table indices stay in range). The kernel takes that path for a tile only when every
// block of it is clean, so encode8_fast is still what runs for every other block.
struct ScaledBlock {
  uint32_t sc;     // stored scale
  BlockDivisor d;  // decode scale s and r (0 for a zero block), for encode8_quotients
  bool clean;
};
// NVFP4 / NF4_DQ: s = e4m3_value(sc) * scale2, and E4M3's values are 0 and 2^-9..448, so with scale2 in
// [2^-81, 2^81] every block's s is 0 or in [2^-90, 448 * 2^81], inside the quotient range: the blocks'
// range tests become one test of scale2 (scale2_fast, once a tensor or group), and a block is clean
// when it has no NaN / Inf. Outside that range of scale2 no block is clean (the general path).
inline constexpr float kScale2FastMin = 0x1p-81f, kScale2FastMax = 0x1p81f;
static_assert(kScale2FastMin * 0x1p-9f >= kQuotientMin && kScale2FastMax * 448.0f <= kQuotientMax, "s in range");
VSTACK_HD bool scale2_fast(float scale2, BlockDivisor d2) {
  return d2.fast && scale2 >= kScale2FastMin && scale2 <= kScale2FastMax;
}
// s2_fast: scale2_fast(scale2, d2) (NVFP4 / NF4_DQ; unused for the others).
template <Format F>
VSTACK_HD ScaledBlock scaled_block(BlockStat st, float scale2, BlockDivisor d2, bool s2_fast) {
  ScaledBlock b;
  float s;
  b.sc = block_scale_code_fast<F, true>(st, scale2, d2, s);
  // MXFP4's s is a power of two, zero only with NaN/Inf, which is never clean: no test (measured
  // 1.02-1.05x slower with it)
  const bool zero = F != Format::mxfp4 && block_is_zero(st, s);
  if constexpr (F == Format::nvfp4 || F == Format::nf4_dq) {
    b.d = {s, rcp_rn_normal(s), true};  // where clean, s is 0 (r = 0 below) or in the quotient range
    b.clean = !st.bad && s2_fast;
  } else {
    b.d = block_divisor<F>(s);
    b.clean = !st.bad && (zero || b.d.fast);
  }
  if (zero) b.d.r = 0.0f;
  return b;
}

// Encode a block: its stored scale (see block_scale_code) and its codes.
template <Format F, int N>
VSTACK_HD uint32_t encode_block(const float (&x)[N], float scale2, uint8_t (&codes)[N]) {
  static_assert(N == block_size(F), "block size");
  const BlockStat st = block_stat(x);
  float s;
  const uint32_t sc = block_scale_code<F>(st, scale2, s);
  const bool zero = block_is_zero(st, s);
VSTACK_UNROLL
  for (int i = 0; i < N; ++i) codes[i] = static_cast<uint8_t>(encode_element<F>(x[i], s, zero));
  return sc;
}

// The block's decode scale from its stored scale (and scale2, as in encode_block).
template <Format F>
VSTACK_HD float block_scale(uint32_t sc, float scale2) {
  if constexpr (F == Format::nvfp4 || F == Format::nf4_dq) return e4m3_value(sc) * scale2;
  else if constexpr (F == Format::mxfp4) return e8m0_value(sc);
  else return bits_f32(sc);
}

// Decoded element: value(code) * scale, one fp32 rounding.
template <Format F>
VSTACK_HD float decode(uint32_t code, float scale) {
  return element_value(F, code) * scale;
}

}  // namespace vstack::quant
