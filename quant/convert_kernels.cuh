// Quantise / dequantise kernels, running the per-block functions of format.hpp (the
// same code as the CPU reference) with coalesced accesses (Note [Quantize kernel]).
#pragma once

#include <type_traits>

#include "quant/device.cuh"
#include "quant/format.hpp"
#include "quant/layout.hpp"

namespace vstack::quant {

struct ConvertParams {
  const void* in;     // quantize: x; dequantize: unused
  void* out;          // dequantize: y; quantize: unused
  uint8_t* codes;
  uint8_t* scales;
  float* scale2;
  int64_t chunks;     // rows * cols / 64
  int64_t kc_per_row; // GEMM layout: cols / 64
  int64_t npad;       // GEMM layout: round_up(rows, 16)
};

inline constexpr int kConvertThreads = 256;  // the dequantize kernel's CTA (quantize: kQuantThreads)

// 8 consecutive elements as loaded: 16 bytes of bf16/f16, 32 of f32.
template <typename T>
struct Raw8 {
  uint4 w[sizeof(T) == 4 ? 2 : 1];
};

// Read once, not kept in L1; zeros past the end (valid = false).
template <typename T>
__device__ __forceinline__ void load_raw8(const T* src, bool valid, Raw8<T>& r) {
  const uint4* q = reinterpret_cast<const uint4*>(src);
#pragma unroll
  for (int i = 0; i < (sizeof(T) == 4 ? 2 : 1); ++i) r.w[i] = valid ? dev::ld_stream16(q + i) : make_uint4(0, 0, 0, 0);
}

template <typename T>
__device__ __forceinline__ void to_float8(const Raw8<T>& r, float (&v)[8]) {
  if constexpr (sizeof(T) == 4) {
    const uint32_t w[8] = {r.w[0].x, r.w[0].y, r.w[0].z, r.w[0].w, r.w[1].x, r.w[1].y, r.w[1].z, r.w[1].w};
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = __uint_as_float(w[i]);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {  // bf16 -> f32: the top 16 bits, one op each
    const uint32_t w[4] = {r.w[0].x, r.w[0].y, r.w[0].z, r.w[0].w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[2 * i] = __uint_as_float(w[i] << 16);
      v[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
    }
  } else {
    const T* h = reinterpret_cast<const T*>(&r.w[0]);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = dev::Dt<T>::to_f(h[i]);
  }
}

template <typename T>
__device__ __forceinline__ void load8(const T* src, float (&v)[8]) {
  Raw8<T> r;
  load_raw8(src, true, r);
  to_float8(r, v);
}

// Max |x| over finite values of n8 groups of 8 elements into out[0] (float bits, non-negative,
// so unsigned order = float order), and 0 into out[1] if any value is not finite: NVFP4's range flag
// (kNvfp4Plain before this kernel), since exactly the blocks that hold one get the NaN scale byte.
// Lane-contiguous 16-byte loads, 4 groups in flight.
template <typename T>
__global__ void __launch_bounds__(256) amax_kernel(const T* x, int64_t n8, unsigned* out) {
  constexpr int U = 4;
  float m = 0.0f;
  bool nonfinite = false;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * 256;
  for (int64_t g = blockIdx.x * 256LL + threadIdx.x; g < n8; g += U * stride) {
    float v[U][8];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (g + u * stride < n8) load8(x + (g + u * stride) * 8, v[u]);
      else
#pragma unroll
        for (int i = 0; i < 8; ++i) v[u][i] = 0.0f;
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float a = abs_f(v[u][i]);
        if (is_finite(a)) m = max_f(m, a);
        else nonfinite = true;
      }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
  const bool any_nonfinite = __any_sync(0xFFFFFFFFu, nonfinite);
  if ((threadIdx.x & 31) == 0) {
    atomicMax(out, __float_as_uint(m));
    if (any_nonfinite) out[1] = 0u;  // 0.0f
  }
}

// NVFP4: the amax at 0 and the range flag at its top before amax_kernel.
__global__ void nvfp4_init_kernel(float* scale2) {
  scale2[0] = 0.0f;
  scale2[1] = kNvfp4Plain;
}

// MXFP4: the range flag at its top level before the quantize kernel lowers it (Note [MXFP4 range flag] in
// gemv_kernel.cuh).
__global__ void mxfp4_flag_init_kernel(float* scale2) { scale2[0] = kMxfp4FoldF16; }

// scale2[0] held the amax; replace it by the NVFP4 per-tensor scale.
__global__ void nvfp4_finalize_kernel(float* scale2) { scale2[0] = nvfp4_global(scale2[0]); }

// Quantise. Note [Quantize kernel]: each lane owns 8 consecutive elements, so a warp
// reads 256 contiguous elements per step (coalesced 16-byte loads) and writes the 128
// code bytes of those 4 chunks with one 4-byte store per lane. A block's statistics are
// reduced over its B/8 lanes with shuffles, then every lane of the block derives the same
// scale with block_scale_code_fast and encodes its elements with encode8_fast (Note [Fast
// encode] in format.hpp: the CPU reference's codes and scales, without a divide or a compare
// chain per element). GEMM layout: linear byte 4u + t of a chunk sits at 8t + u, so the
// word lane u stores (positions 4u..4u+3) is byte u/2 of lanes 4(u%2)..4(u%2)+3 of its
// chunk: four shuffles and three byte permutes. The chunk's scales are gathered to its
// first lane and stored as one 1-, 2- or 4-byte word. A tile is kQuantIters such steps of
// every warp; CTAs are persistent and load their next tile while encoding the current
// one. NF4_DQ runs 512 threads, so that a tile's 256 chunks are exactly one group of
// kDqGroup blocks.
// Measured (H100, 2026-11-22, 8192² bf16): one thread per 64-element chunk (128-byte strided
// loads per lane) ran at 41-49 % of the copy bandwidth; coalesced loads with the reference's
// per-element division and compare chains at 28-58 %, issue-bound; this kernel at 81-87 %
// (NOTES.md); with the straight-line steps of Note [Clean blocks] (2026-11-24) the GEMM-layout
// kernels at 84-103 %. H200 (2026-11-28, 2-byte inputs, GEMM layout): 78-93 % of its copy; 81-99 %
// (NF4_DQ 89 %, MXFP4 81-83 %) with Note [Biased lookup], block_stats' single vote, scale2_fast and
// the whole-tile fetch (bench/RESULTS.md session 30).
inline constexpr int kQuantIters = 4;
template <Format F>
constexpr int kQuantThreads = F == Format::nf4_dq ? 512 : 256;
template <Format F>
constexpr int64_t quant_chunks_per_cta() { return static_cast<int64_t>(kQuantThreads<F>) / 8 * kQuantIters; }
static_assert(quant_chunks_per_cta<Format::nf4_dq>() == kDqGroup, "NF4_DQ: one tile per group");

// Statistics of one block whose 8-element parts are held by LPB consecutive lanes.
template <int LPB>
__device__ __forceinline__ BlockStat block_stat_lanes(const float (&v)[8]) {
  float m = 0.0f, nz = 0.0f;  // nz: sum of v * 0, NaN iff some element is NaN or +-Inf
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    m = fmaxf(m, fabsf(v[j]));
    nz = fma_rn(v[j], 0.0f, nz);
  }
  bool bad = nz != nz;
#pragma unroll
  for (int o = 1; o < LPB; o <<= 1) bad |= __shfl_xor_sync(0xFFFFFFFFu, static_cast<int>(bad), o) != 0;
  if (bad) m = block_stat(v).amax;  // rare: the largest finite |x| (fmaxf kept the Inf)
#pragma unroll
  for (int o = 1; o < LPB; o <<= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
  return {m, bad};
}

// The same from the raw 16-bit inputs (NF4_DQ's first pass, which needs no floats): |x| of
// bf16/f16 orders like its bits with the sign cleared, and NaN/Inf are the patterns from
// 0x7F80 (bf16) / 0x7C00 (f16) up, so the largest bits (two per register, sm_90 16x2 integer
// max) give amax and the non-finite test without converting; a block with a NaN/Inf takes
// the float path for its finite amax (block_stat_fix, under a vote of the whole warp).
template <int LPB, typename T>
__device__ __forceinline__ BlockStat block_stat_bits(const Raw8<T>& r) {
  static_assert(sizeof(T) == 2, "2-byte inputs");
  constexpr uint32_t kInf = std::is_same_v<T, __nv_bfloat16> ? 0x7F80u : 0x7C00u;
  const uint32_t a0 = r.w[0].x & 0x7FFF7FFFu, a1 = r.w[0].y & 0x7FFF7FFFu, a2 = r.w[0].z & 0x7FFF7FFFu,
                 a3 = r.w[0].w & 0x7FFF7FFFu;
  uint32_t m2 = __vmaxu2(__vimax3_u16x2(a0, a1, a2), a3);
  uint32_t m = max(m2 >> 16, m2 & 0xFFFFu);
#pragma unroll
  for (int o = 1; o < LPB; o <<= 1) m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
  const uint16_t h = static_cast<uint16_t>(m);
  return {dev::Dt<T>::to_f(*reinterpret_cast<const T*>(&h)), m >= kInf};
}
// The finite amax of a block with a NaN / Inf (st.bad); every lane of the warp calls it (shuffles).
template <int LPB, typename T>
__device__ __forceinline__ void block_stat_fix(const Raw8<T>& r, BlockStat& st) {
  float v[8];
  to_float8(r, v);
  float f = block_stat(v).amax;
#pragma unroll
  for (int o = 1; o < LPB; o <<= 1) f = fmaxf(f, __shfl_xor_sync(0xFFFFFFFFu, f, o));
  if (st.bad) st.amax = f;
}
// The statistics of a tile's IT steps, with one vote for NaN / Inf over them all where the inputs are
// 2-byte: a vote and branch a step kept the steps' shuffle chains apart. With scale2_fast (one range
// test a tile or tensor instead of one a block) it took NF4_DQ's GEMM-layout quantize to 0.92x and
// NVFP4's to 0.96-0.97x (H200, 8192², bench/RESULTS.md session 30), for ~11 fewer SASS a tile.
template <int LPB, typename T, int IT>
__device__ __forceinline__ void block_stats(const Raw8<T> (&r)[IT], BlockStat (&st)[IT]) {
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int i = 0; i < IT; ++i) {
      float v[8];
      to_float8(r[i], v);
      st[i] = block_stat_lanes<LPB>(v);
    }
  } else {
    bool bad = false;
#pragma unroll
    for (int i = 0; i < IT; ++i) {
      st[i] = block_stat_bits<LPB>(r[i]);
      bad = bad || st[i].bad;
    }
    if (__any_sync(0xFFFFFFFFu, bad)) {
#pragma unroll
      for (int i = 0; i < IT; ++i) block_stat_fix<LPB>(r[i], st[i]);
    }
  }
}

// Where a lane's chunk is, in rows and 64-wide column chunks (GEMM layout scale offsets),
// advanced by adding chunks instead of dividing each time.
struct ChunkPos {
  int64_t row;
  int32_t kc, kcpr;  // kcpr: chunks per row (cols / 64 < 2^31)
  __device__ __forceinline__ ChunkPos(int64_t c, int32_t kcpr_)
      : row(c / kcpr_), kc(static_cast<int32_t>(c % kcpr_)), kcpr(kcpr_) {}
  __device__ __forceinline__ void advance(int64_t q, int32_t r) {  // by q * kcpr + r chunks, r < kcpr
    row += q;
    kc += r;
    if (kc >= kcpr) {
      kc -= kcpr;
      ++row;
    }
  }
  __device__ __forceinline__ void advance(int32_t d) {  // by d chunks, d small
    kc += d;
    while (kc >= kcpr) {
      kc -= kcpr;
      ++row;
    }
  }
};

// The same in 32 bits, for the GEMM layout's straight-line steps (Note [Clean blocks]) of a tensor
// of < 2^31 chunks: a step's code and scale offsets in ~12 instructions instead of the ~30 of
// gemm_chunk / gemm_scale_chunk on 64-bit signed rows (division and modulo by 16).
struct ChunkPos32 {
  uint32_t row, kc, kcpr;
  __device__ __forceinline__ void advance_once(uint32_t d) {  // d <= kcpr
    kc += d;
    const bool wrap = kc >= kcpr;
    kc -= wrap ? kcpr : 0u;
    row += wrap ? 1u : 0u;
  }
  // gemm_chunk(row, kc, 64 kcpr) and gemm_scale_chunk(row, kc, 64 kcpr, cs)
  __device__ __forceinline__ int64_t code() const { return static_cast<int64_t>(index()) * 512 + (row & 15u) * 32; }
  __device__ __forceinline__ int64_t scale(int cs) const {
    return (static_cast<int64_t>(index()) * 16 + gemm_scale_slot(static_cast<int>(row & 15u))) * cs;
  }
  __device__ __forceinline__ uint32_t index() const { return (row >> 4) * kcpr + kc; }  // (tile, chunk) run
};

// One step (256 elements of a warp, 8 per lane) of a tile: scale, codes, stores.
// Where a lane's chunk of one step is: its first input element (row * cols + column), its 32 code
// bytes and its scale bytes; ok = false past the tensor (nothing is stored).
struct ChunkAt {
  int64_t elem, code, scale;
  bool ok;
};

// The stores of one step: w, the lane's 8 codes (linear order), and sc, its block's stored scale.
// kStraight: the scale store is one predicated instruction (a straight-line step, Note [Clean
// blocks]); else a branch, as before (the predicated store in the general path took the NVFP4
// row-tile kernel from 72 to 80 registers and measured ~1.5 % slower).
// Returns (MXFP4) the lane's fold pair (mxfp4_fold_pair of mxfp4_fold_byte: the range flag, Note [MXFP4
// range flag] in gemv_kernel.cuh; a block's lanes all see its byte, each its own codes, so the least over
// its lanes is the block's), else, and past the tensor, that of byte 127 (level 2).
inline constexpr uint32_t kFoldPairTop = mxfp4_fold_pair(127);
template <Format F, Layout L, bool kStraight = false>
__device__ __forceinline__ uint32_t store_step(const ConvertParams& p, const ChunkAt& at, uint32_t w, uint32_t sc) {
  constexpr int LPB = block_size(F) / 8;
  const int lane = threadIdx.x & 31, u = lane & 7;
  const uint32_t fold = F == Format::mxfp4 && at.ok ? mxfp4_fold_pair(mxfp4_fold_byte(sc, w)) : kFoldPairTop;
  if constexpr (L == Layout::gemm) {  // byte t = u/2 of lanes src..src+3, by byte permutes
    const int src = (lane & ~7) + 4 * (u & 1), t = u >> 1;
    const uint32_t sel = static_cast<uint32_t>(t | ((t + 4) << 4));
    const uint32_t lo = __byte_perm(__shfl_sync(0xFFFFFFFFu, w, src), __shfl_sync(0xFFFFFFFFu, w, src + 1), sel);
    const uint32_t hi = __byte_perm(__shfl_sync(0xFFFFFFFFu, w, src + 2), __shfl_sync(0xFFFFFFFFu, w, src + 3), sel);
    w = __byte_perm(lo, hi, 0x5410);
  }
  // The chunk's scales, gathered to lane u == 0 (block b of the chunk is lanes b*LPB..).
  uint32_t scw = sc;
  if constexpr (F == Format::nvfp4 || F == Format::mxfp4) {
#pragma unroll
    for (int b = 1; b < 8 / LPB; ++b) scw |= __shfl_down_sync(0xFFFFFFFFu, sc, b * LPB) << (8 * b);
  }
  if (!at.ok) return fold;  // whole chunks are valid or not
  *reinterpret_cast<uint32_t*>(p.codes + at.code + 4 * u) = w;  // bytes 4u..4u+3 of the chunk
  using S = std::conditional_t<chunk_scale_bytes(F) == 4, uint32_t, std::conditional_t<chunk_scale_bytes(F) == 2, uint16_t, uint8_t>>;
  if constexpr (kStraight) dev::st_global_if(u == 0, reinterpret_cast<S*>(p.scales + at.scale), static_cast<S>(scw));
  else if (u == 0) *reinterpret_cast<S*>(p.scales + at.scale) = static_cast<S>(scw);  // lane u == 0 stores them
  return fold;
}

// One step (256 elements of a warp, 8 per lane) of a tile: scale, codes, stores; any block.
template <Format F, Layout L>
__device__ __forceinline__ uint32_t quantize_step(const ConvertParams& p, const ChunkAt& at, const float (&v)[8],
                                                  BlockStat st, float s2, BlockDivisor d2, const uint8_t* nf4_base,
                                                  const float* nf4_mids) {
  float s;
  const uint32_t sc = block_scale_code_fast<F>(st, s2, d2, s);
  return store_step<F, L>(p, at, encode8_fast<F>(v, s, block_is_zero(st, s), nf4_base, nf4_mids), sc);
}

// A step whose blocks are all clean (Note [Clean blocks]) and in the tensor (voted by the caller):
// codes by quotient and stores, without a branch.
template <Format F, Layout L, typename T>
__device__ __forceinline__ uint32_t clean_step(const ConvertParams& p, ChunkAt at, const Raw8<T>& raw,
                                               const ScaledBlock& b, const uint8_t* nf4_base, const float* nf4_mids) {
  float v[8];
  to_float8(raw, v);
  at.ok = true;
  return store_step<F, L, true>(p, at, encode8_quotients<F>(v, b.d, nf4_base, nf4_mids), b.sc);
}

// Persistent: CTA b does tiles b, b + grid, ... (a tile = kQuantIters steps of every warp =
// quant_chunks_per_cta chunks) and loads the next tile while it encodes this one, so every
// warp keeps 16-byte loads in flight (Note [Quantize kernel]).
// 2-byte inputs: at most 64 registers, so 1024 threads fit on an SM, each with its next 64
// bytes in flight (64 KB per SM); f32 inputs hold twice the bytes per step and get more. The
// GEMM layout's address arithmetic needs more: 768 threads (Note [Quantize tiles]).
template <Format F, typename T, Layout L>
constexpr int kQuantMinCtas = sizeof(T) == 4 ? 1 : (L == Layout::gemm ? 768 : 1024) / kQuantThreads<F>;

// Note [Quantize tiles]. Which chunks a tile holds and which a warp step encodes. Row-major
// (the linear layout, and NF4_DQ, whose tile must stay its group of 256 row-major blocks): a
// tile is quant_chunks_per_cta consecutive chunks, a step 4 consecutive chunks of a row. In the
// GEMM layout those 4 chunks land in 4 code blocks 512 bytes apart (4 x 32 bytes per store);
// for the other formats a GEMM tile is therefore 16 rows x 8 chunks (one 16-row tile of the
// layout): warp w takes chunk w of it, step i rows 4i..4i+3, so a step's codes are 128
// contiguous bytes. The GEMM-layout kernels get up to 85 registers (3 CTAs of 256 threads per
// SM): at 64 they spilled 8-40 bytes. Measured (H100, 8192² bf16, % of the copy, two rounds
// each): row tiles nvfp4 / mxfp4 / nf4 84 / 83 / 89-90, row-major steps into the same layout
// 84-85 / 84-85 / 85, the row-contiguous layout before 85 / 87 / 88: within the run-to-run
// spread. NF4_DQ 77 % in every variant (82 % before the tile layout). Understood later (ncu,
// 2026-11-24): at 4 warps per scheduler (one CTA of 512 threads, 85 registers) the branches of
// each step (the reciprocal's slow path, the zero and divisor tests, the scale store, the 64-bit
// address walk) kept the compiler from interleaving steps, and the address arithmetic cost ~30
// instructions a step; Note [Clean blocks] removes both: 90-92 -> 82-83 us, 84-85 %. The statistics'
// vote a step was the same kind of branch (block_stats: one a tile; H200 79 -> 89 % with the rest of
// session 30's changes).
template <Format F, Layout L>
constexpr bool quant_row_tiles() { return L == Layout::gemm && F != Format::nf4_dq; }
// Which kernels take Note [Clean blocks]'s straight-line steps: every GEMM-layout one, and the
// linear-layout MXFP4 and NF4 ones (0.93x / 0.95x). The other linear ones run at the 64-register
// cap (4 CTAs of 256 threads, NF4_DQ 2 of 512), where the path spilled (NVFP4 56-72 bytes, NF4_DQ
// 24-48) and measured slower (NVFP4 1.06x, NF4_DQ 1.02x; H100, 8192² bf16).
template <Format F, Layout L>
constexpr bool quant_straight_steps() { return L == Layout::gemm || F == Format::mxfp4 || F == Format::nf4; }
// A row tile's step i is rows q + 4 i (q = lane / 8 < 4): their scale slots are q's slot plus
// 8 (i % 2) + i / 2 (the step the kernel adds instead of calling gemm_scale_slot per step).
constexpr bool row_tile_slot_steps_ok() {
  for (int q = 0; q < 4; ++q)
    for (int i = 0; i < kQuantIters; ++i)
      if (gemm_scale_slot(q + 4 * i) != gemm_scale_slot(q) + 8 * (i & 1) + (i >> 1)) return false;
  return true;
}
static_assert(kQuantIters == 4 && row_tile_slot_steps_ok(), "row tiles: 16 rows in 4 steps of 4, slot steps");
template <Format F, Layout L>
constexpr int64_t quant_tiles(int64_t chunks, int64_t kc_per_row) {
  if constexpr (quant_row_tiles<F, L>()) {
    static_assert(quant_chunks_per_cta<F>() == 128, "16 rows x 8 chunks per tile");
    return (chunks / kc_per_row + 15) / 16 * ((kc_per_row + 7) / 8);
  }
  return (chunks + quant_chunks_per_cta<F>() - 1) / quant_chunks_per_cta<F>();
}

template <Format F, typename T, Layout L>
__global__ void __launch_bounds__(kQuantThreads<F>, kQuantMinCtas<F, T, L>) quantize_kernel(const ConvertParams p) {
  constexpr int LPB = block_size(F) / 8, IT = kQuantIters, NT = kQuantThreads<F>, CS = chunk_scale_bytes(F);
  constexpr bool kRowTiles = quant_row_tiles<F, L>();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, u = lane & 7;
  const int64_t n = p.chunks * 64, tiles = quant_tiles<F, L>(p.chunks, p.kc_per_row);
  const int64_t lane_off = warp * (256 * IT) + lane * 8;
  const T* x = static_cast<const T*>(p.in);
  // Row tiles: tile t = (16-row tile t / nkt, 8-chunk block t % nkt); this lane's chunk kc is
  // block * 8 + warp, its rows 16 * tile + 4 i + q at step i.
  const int64_t K = p.kc_per_row * 64, rows = p.chunks / (p.kc_per_row > 0 ? p.kc_per_row : 1);
  const int32_t nkt = static_cast<int32_t>((p.kc_per_row + 7) / 8);
  struct RowTile {
    int64_t elem, code, scale;  // of step 0
    int64_t row;                // of step 0
    bool kc_ok;
  };
  auto row_tile = [&](int64_t t) {
    RowTile r;
    const int64_t rt = t / nkt;
    const int64_t kc = (t - rt * nkt) * 8 + warp;
    r.row = rt * 16 + (lane >> 3);
    r.kc_ok = kc < p.kc_per_row;
    r.elem = r.row * K + kc * 64 + 8 * u;
    r.code = gemm_chunk(r.row, kc, K);
    r.scale = gemm_scale_chunk(r.row, kc, K, CS);
    return r;
  };
  auto row_tile_at = [&](const RowTile& r, int i) {  // rows + 4 i: 128 code bytes on; scale slots
    ChunkAt c;
    c.ok = r.kc_ok && r.row + 4 * i < rows;
    c.elem = r.elem + 4 * i * K;
    c.code = r.code + 128 * i;
    c.scale = r.scale + (8 * (i & 1) + (i >> 1)) * CS;  // slot steps: row_tile_slot_steps_ok
    return c;
  };
  const int64_t whole_tiles = n / (NT * 8 * IT);  // row-major tiles below this index lie wholly in the tensor
  Raw8<T> next[IT];
  auto fetch = [&](int64_t tile) {
    if constexpr (kRowTiles) {
      const RowTile r = row_tile(tile);
#pragma unroll
      for (int i = 0; i < IT; ++i) {
        const ChunkAt c = row_tile_at(r, i);
        load_raw8(x + (c.ok ? c.elem : 0), c.ok, next[i]);
      }
    } else if (tile < whole_tiles) {  // every step in the tensor: no bounds tests, no zero fill
      const T* src = x + tile * (NT * 8 * IT) + lane_off;
#pragma unroll
      for (int i = 0; i < IT; ++i) load_raw8(src + i * 256, true, next[i]);
    } else {
      const int64_t base = tile * (NT * 8 * IT) + lane_off;
#pragma unroll
      for (int i = 0; i < IT; ++i) load_raw8(x + base + i * 256, base + i * 256 < n, next[i]);
    }
  };
  int64_t tile = blockIdx.x;
  if (tile < tiles) fetch(tile);
  __shared__ uint8_t nf4_base[kNf4Buckets];
  __shared__ __align__(16) float nf4_mids[16];
  __shared__ float red[2][NT / 32];  // NF4_DQ: the group's amax, double-buffered across tiles
  if constexpr (uses_nf4_table(F)) {
    if (threadIdx.x < kNf4Buckets) nf4_base[threadIdx.x] = static_cast<uint8_t>(4 * nf4_bucket_base(threadIdx.x));
    if (threadIdx.x < 16) nf4_mids[threadIdx.x] = nf4_mid(threadIdx.x);
    __syncthreads();
  }
  float s2 = 1.0f;
  if constexpr (F == Format::nvfp4) s2 = nvfp4_global(__ldg(p.scale2));  // scale2[0] holds the tensor's amax here
  BlockDivisor d2 = scale_divisor<F>(s2);  // NF4_DQ: set per tile
  bool s2_fast = scale2_fast(s2, d2);  // the tensor's (NVFP4) or group's (NF4_DQ) range test (Note [Clean blocks])
  // Row-major tiles in the GEMM layout: this lane's chunk position at step 0 of its tile, moved by
  // the grid stride per tile
  constexpr int64_t kCpt = quant_chunks_per_cta<F>();
  const int32_t kcpr = L == Layout::gemm ? static_cast<int32_t>(p.kc_per_row) : 1;
  ChunkPos pos(kRowTiles ? 0 : tile * kCpt + lane_off / 64, kcpr);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kCpt, stride_q = stride / kcpr;
  const int32_t stride_r = static_cast<int32_t>(stride % kcpr);
  // Step i of the current tile (row-major: ps is the chunk position of step i).
  auto row_major_at = [&](int64_t e, const ChunkPos& ps) {
    ChunkAt c;
    c.ok = e < n;
    c.elem = e;
    if constexpr (L == Layout::linear) {
      c.code = e / 2 - 4 * u;
      c.scale = e / 64 * CS;
    } else {
      c.code = gemm_chunk(ps.row, ps.kc, K);
      c.scale = gemm_scale_chunk(ps.row, ps.kc, K, CS);
    }
    return c;
  };
  uint32_t fold = kFoldPairTop;  // MXFP4: the range of this lane's blocks' fold bytes (the range flag)
  for (int parity = 0; tile < tiles; tile += gridDim.x, parity ^= 1) {
    Raw8<T> cur[IT];
#pragma unroll
    for (int i = 0; i < IT; ++i) cur[i] = next[i];
    if (tile + gridDim.x < tiles) fetch(tile + gridDim.x);
    const int64_t base = tile * (NT * 8 * IT) + lane_off;
    const bool whole_tile = tile < whole_tiles;
    if constexpr (F == Format::nf4_dq) {  // the group (= this tile) scale first: all blocks' statistics
      BlockStat st[IT];
      block_stats<LPB>(cur, st);
      float m = 0.0f;  // finite amax of the group = max of its blocks' finite amax
#pragma unroll
      for (int i = 0; i < IT; ++i) m = fmaxf(m, st[i].amax);
#pragma unroll
      for (int o = 8; o < 32; o <<= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
      if (lane == 0) red[parity][warp] = m;
      __syncthreads();
      m = red[parity][0];
#pragma unroll
      for (int w = 1; w < NT / 32; ++w) m = fmaxf(m, red[parity][w]);
      s2 = nf4dq_group_scale(m);
      d2 = scale_divisor<F>(s2);
      s2_fast = scale2_fast(s2, d2);
      if (threadIdx.x == 0) p.scale2[tile] = s2;
      // Note [Clean blocks]: when every block of the warp's steps is clean and the tile lies wholly in
      // the tensor, the steps are one straight-line block that the compiler interleaves (no branch per
      // block).
      ScaledBlock sb[IT];
      bool straight = false;
      if constexpr (quant_straight_steps<F, L>()) {
        bool clean = whole_tile && kcpr >= 4 && p.chunks <= INT32_MAX;  // ChunkPos32's range
#pragma unroll
        for (int i = 0; i < IT; ++i) {
          sb[i] = scaled_block<F>(st[i], s2, d2, s2_fast);
          clean = clean && sb[i].clean;
        }
        straight = __all_sync(0xFFFFFFFFu, clean);
      }
      if (straight) {
        ChunkPos32 p32{static_cast<uint32_t>(pos.row), static_cast<uint32_t>(pos.kc), static_cast<uint32_t>(kcpr)};
#pragma unroll
        for (int i = 0; i < IT; ++i, p32.advance_once(4))
          fold = __vminu2(fold, clean_step<F, L>(p, ChunkAt{0, p32.code(), p32.scale(CS), true}, cur[i], sb[i],
                                                 nf4_base, nf4_mids));
      } else {
        ChunkPos ps = pos;
#pragma unroll
        for (int i = 0; i < IT; ++i, ps.advance(4)) {
          float v[8];
          to_float8(cur[i], v);
          fold = __vminu2(fold, quantize_step<F, L>(p, row_major_at(base + i * 256, ps), v, st[i], s2, d2,
                                                    nf4_base, nf4_mids));
        }
      }
    } else if constexpr (kRowTiles) {
      const RowTile r = row_tile(tile);
      // Note [Clean blocks], as for NF4_DQ above: every step's statistics and scales first
      ScaledBlock sb[IT];
      BlockStat st[IT];
      block_stats<LPB>(cur, st);
      bool clean = true;
#pragma unroll
      for (int i = 0; i < IT; ++i) {
        sb[i] = scaled_block<F>(st[i], s2, d2, s2_fast);
        clean = clean && sb[i].clean && row_tile_at(r, i).ok;
      }
      if (__all_sync(0xFFFFFFFFu, clean)) {
#pragma unroll
        for (int i = 0; i < IT; ++i)
          fold = __vminu2(fold, clean_step<F, L>(p, row_tile_at(r, i), cur[i], sb[i], nf4_base, nf4_mids));
      } else {
#pragma unroll
        for (int i = 0; i < IT; ++i) {
          float v[8];
          to_float8(cur[i], v);
          fold = __vminu2(fold, quantize_step<F, L>(p, row_tile_at(r, i), v, block_stat_lanes<LPB>(v), s2, d2,
                                                    nf4_base, nf4_mids));
        }
      }
    } else {  // row-major steps in the linear layout
      ScaledBlock sb[IT];
      bool straight = false;
      if constexpr (quant_straight_steps<F, L>()) {  // Note [Clean blocks], as above
        BlockStat st[IT];
        block_stats<LPB>(cur, st);
        bool clean = whole_tile;
#pragma unroll
        for (int i = 0; i < IT; ++i) {
          sb[i] = scaled_block<F>(st[i], s2, d2, s2_fast);
          clean = clean && sb[i].clean;
        }
        straight = __all_sync(0xFFFFFFFFu, clean);
      }
      if (straight) {
#pragma unroll
        for (int i = 0; i < IT; ++i)  // the linear layout's offsets need no position
          fold = __vminu2(fold,
                          clean_step<F, L>(p, row_major_at(base + i * 256, pos), cur[i], sb[i], nf4_base, nf4_mids));
      } else {
        ChunkPos ps = pos;
#pragma unroll
        for (int i = 0; i < IT; ++i, ps.advance(4)) {  // a warp step covers 4 chunks
          float v[8];
          to_float8(cur[i], v);
          fold = __vminu2(fold, quantize_step<F, L>(p, row_major_at(base + i * 256, ps), v, block_stat_lanes<LPB>(v),
                                                    s2, d2, nf4_base, nf4_mids));
        }
      }
    }
    if constexpr (!kRowTiles) pos.advance(stride_q, stride_r);
  }
  // MXFP4: lower the range flag (2 before this kernel) to this lane's level; non-negative floats order as
  // their bits
  if constexpr (F == Format::mxfp4) {
    const uint32_t level = mxfp4_range_level(fold);
    if (level < 2 && p.scale2) atomicMin(reinterpret_cast<int*>(p.scale2), __float_as_int(static_cast<float>(level)));
  }
}

// Dequantise: one thread per 8 consecutive elements (4 linear code bytes), so that
// the code loads (4 bytes per lane) and the output stores (16 bytes per lane for
// bf16/f16, 32 for f32) are contiguous across the warp. Measured before (H100,
// 2026-11-22): one thread per 64-element chunk with a 16-way switch per NF4 code
// ran at 47 % (E2M1) and 15 % (NF4) of the copy bandwidth. NF4 values come from a
// 16-entry shared table built with nf4_value (the same fp32 bits), so the
// result is still value * scale rounded once, as in the reference.
inline constexpr int kDequantElems = 8;

template <Format F, typename T, Layout L>
__global__ void __launch_bounds__(kConvertThreads) dequantize_kernel(const ConvertParams p) {
  constexpr int B = block_size(F);
  __shared__ float table[16];
  if constexpr (uses_nf4_table(F)) {
    if (threadIdx.x < 16) table[threadIdx.x] = nf4_value(threadIdx.x);
    __syncthreads();
  }
  const int64_t o = blockIdx.x * static_cast<int64_t>(kConvertThreads) + threadIdx.x;  // octet
  if (o >= p.chunks * 8) return;
  const int64_t c = o >> 3;                 // chunk (64 elements)
  const int u = static_cast<int>(o & 7);    // linear code bytes 4u..4u+3 of the chunk
  uint32_t w;
  if constexpr (L == Layout::linear) {
    w = __ldg(reinterpret_cast<const uint32_t*>(p.codes + c * 32) + u);
  } else {  // linear byte 4u + i sits at gemm_byte_perm(4u + i) = 8i + u
    const uint8_t* cb = p.codes + gemm_chunk(c / p.kc_per_row, c % p.kc_per_row, p.kc_per_row * 64) + u;
    w = static_cast<uint32_t>(__ldg(cb)) | (static_cast<uint32_t>(__ldg(cb + 8)) << 8) |
        (static_cast<uint32_t>(__ldg(cb + 16)) << 16) | (static_cast<uint32_t>(__ldg(cb + 24)) << 24);
  }
  const int sub = (8 * u) / B;  // block of these 8 elements inside the chunk
  uint32_t sc;
  if constexpr (L == Layout::linear) {
    const int64_t blk = c * (64 / B) + sub;
    sc = F == Format::nf4 ? __ldg(reinterpret_cast<const uint32_t*>(p.scales) + blk) : __ldg(p.scales + blk);
  } else {
    const int64_t n = c / p.kc_per_row, kc = c % p.kc_per_row;
    const int64_t soff = gemm_scale_chunk(n, kc, p.kc_per_row * 64, chunk_scale_bytes(F));
    sc = F == Format::nf4 ? __ldg(reinterpret_cast<const uint32_t*>(p.scales + soff)) : __ldg(p.scales + soff + sub);
  }
  float s2 = 1.0f;
  if constexpr (F == Format::nvfp4) s2 = __ldg(p.scale2);
  if constexpr (F == Format::nf4_dq) s2 = __ldg(p.scale2 + c / kDqGroup);
  const float s = block_scale<F>(sc, s2);
  float v[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const uint32_t code = (w >> (4 * i)) & 15u;
    if constexpr (uses_nf4_table(F)) v[i] = table[code] * s;
    else v[i] = decode<F>(code, s);
  }
  T* dst = static_cast<T*>(p.out) + o * 8;
  if constexpr (sizeof(T) == 4) {
    reinterpret_cast<float4*>(dst)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(dst)[1] = make_float4(v[4], v[5], v[6], v[7]);
  } else {
    uint4 q;
    q.x = dev::Dt<T>::pack2(v[0], v[1]);
    q.y = dev::Dt<T>::pack2(v[2], v[3]);
    q.z = dev::Dt<T>::pack2(v[4], v[5]);
    q.w = dev::Dt<T>::pack2(v[6], v[7]);
    *reinterpret_cast<uint4*>(dst) = q;
  }
}

}  // namespace vstack::quant
