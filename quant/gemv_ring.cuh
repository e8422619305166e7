// Decode-regime FP4 kernel fed through a shared-memory ring (sm_90): Note [Ring kernel] in
// quant/gemv_plan.hpp. The chunk's arithmetic is the register-load kernel's (gemv::chunk_mma in
// quant/gemv_kernel.cuh); what differs is how the weight reaches it.
//
// Note [Ring feed]. The register-load kernel keeps two batches of four chunks per warp in flight in
// registers and issues batch i + 2's loads only after it has computed batch i, so a warp's loads and
// its arithmetic barely overlap (docs/NOTES.md: at 8192^2 M = 1 the compute alone took 12.9 us, the
// loads alone 13.3, both 16.5). Here one lane of a producer warp streams a tile's chunks, 16 at a time,
// with two cp.async.bulk copies (codes, then scales: with the tile layout both are contiguous) into
// the next free slot, completing on the slot's full mbarrier; consumer warp w reads chunk w of a stage
// from shared memory (two 8-byte loads of the codes, one of the scales, x's fragments: conflict-free),
// arrives on the slot's empty mbarrier and computes. The consumers wait on HBM only through the full
// barriers, and kRingSlots stages (54 KB for NVFP4) are in flight per SM without a register spent.
// Measured (H100, driver 580.159.04, 2026-11-22, bench_fp4.py, bf16, two alternations with the kernels of
// e6d414f, µs; bench/RESULTS.md "Session 11"): NVFP4 M = 1 8192^2 17.2-17.4 -> 15.8-16.0 (79-80 % of
// the read stream, x3.05 torch), 4096x14336 16.7-17.1 -> 14.4-14.5 (76 %), 14336x4096 16.3-16.4 ->
// 14.3-14.7 (75-77 %), 4096^2 7.2 -> 5.6-5.8; MXFP4 M = 1 8192^2 19.0-19.1 -> 15.4-15.7, 28672x8192 61.0-61.2
// -> 45.0-45.2. Over the 80 decode cells the geometric mean of new / old is 0.92 (the 52 ring cells
// 0.88, the others 1.00).
// Knobs (an earlier build, nvfp4 M = 1..4): 4-8 slots within ~3 % of each other (fewer suit K = 4096, more 8192^2; 8 slots of
// 16 in the first lab, 16.2 -> 15.4 us at 8192^2: fewer bytes in flight per SM were faster); an L2
// prefetch of the first two stages before the PDL wait 0-6 % faster than none, of the whole first tile
// up to 15 % slower (4096x14336 M = 1: 17.1 against 14.9); two chunks per warp per stage slower (lab).
// ptxas recomputed the lanes' slot, scale and x offsets from %tid in every trip (~20 instructions per
// chunk, 10 % of the time): gemv::pin keeps them in registers.
//
// Since session 12 the stages carry x's slices too, a stage covering G tiles, loaded by three TMA box
// copies (Note [Streamed x] in quant/gemv_plan.hpp): as fast or faster at every M than x resident,
// which session 13 removed; the measurements above are of that first kernel.
//
// Sums: warp w accumulates chunks w % C, w % C + C, ... of tile w / C in fp32 and each tile's warps'
// sums are added in warp order (deterministic; not the register-load kernel's order, whose warps own
// runs of consecutive chunks).
#pragma once

#include "kernels/hopper.cuh"
#include "kernels/tensor_map.hpp"
#include "quant/gemv_kernel.cuh"

namespace vstack::quant {

namespace gemv {

// An opaque use of v: ptxas must keep it in a register across the point, not recompute it there.
template <typename V>
__device__ __forceinline__ void pin(V& v) {
  asm volatile("" : "+r"(v));
}

// This lane's bytes of a chunk in a ring slot sp: the codes of rows g, g + 8 (lo, hi: 8 bytes each, 256
// apart) at code_off, their block scales (s_a, s_b: SB bytes each) at scale_off.
template <int SB>
__device__ __forceinline__ void slot_chunk(const uint8_t* sp, int code_off, int scale_off, uint2& lo, uint2& hi,
                                           uint32_t& s_a, uint32_t& s_b) {
  lo = *reinterpret_cast<const uint2*>(sp + code_off);
  hi = *reinterpret_cast<const uint2*>(sp + code_off + 256);
  const uint8_t* ss = sp + scale_off;
  if constexpr (SB == 4) {
    const uint2 w = *reinterpret_cast<const uint2*>(ss);
    s_a = w.x;
    s_b = w.y;
  } else if constexpr (SB == 2) {
    const uint32_t w = *reinterpret_cast<const uint32_t*>(ss);
    s_a = w & 0xFFFFu;
    s_b = w >> 16;
  } else {
    const uint32_t w = *reinterpret_cast<const uint16_t*>(ss);
    s_a = w & 0xFFu;
    s_b = w >> 8;
  }
}

// This lane's bytes of chunk w in a ring slot: the codes of rows g, g + 8 (FORMAT.md; 16 chunks' codes
// first), their scales after them (in the slot's chunk order).
template <int SB>
__device__ __forceinline__ void slot_offsets(int w, int lane, int& code_off, int& scale_off) {
  const int g = lane >> 2, r = lane & 3;
  code_off = w * 512 + g * 32 + r * 8;
  scale_off = kRingChunks * 512 + w * 16 * SB + g * 2 * SB;
}

// x's ldmatrix offsets of this lane in a buffer of 128-byte lines (a chunk's M rows of 64 values each,
// chunk-major) whose 16-byte pieces the TMA's 128-byte swizzle XORed with the line (the buffer
// 1024-byte aligned, at `base` bytes): x row (lane & 7) >> shift of the chunk whose first line is line0
// (rows past M: the next chunk's, or stale bytes; those columns are never stored; shift: Note [Packed
// columns]), matrix mi = lane / 8 = step 2h + mi / 2, k half mi % 2. Consecutive lines per ldmatrix (a
// line repeated reads once), so no bank conflict.
__device__ __forceinline__ void ring_x_offsets(int (&xoff)[2], int line0, int lane, int base, int shift = 0) {
  const int mi = lane >> 3;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int line = line0 + ((lane & 7) >> shift), piece = (2 * h + (mi >> 1)) * 2 + (mi & 1);
    xoff[h] = base + line * 128 + ((piece ^ (line & 7)) * 16);
  }
}

// Table entry of byte i (0..3) of code word w: the table is at kRingLutAddr (0x10000), so PRMT (lane * 4 |
// 0x10000, w) is the address. lane4 is the caller's (pinned) lane * 4 | kRingLutAddr.
__device__ __forceinline__ auto ring_lookup(const uint32_t& lane4) {
  return [&lane4](uint32_t w, int i) {
    uint32_t v;
    asm("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(__byte_perm(lane4, w, 0x3200u | (static_cast<uint32_t>(i + 4) << 4))));
    return v;
  };
}

// What a consumer lane of the ring kernels (this one and quant/gemv_ring_wide.cuh) keeps across its loop:
// lane4 (the table lookup's PRMT operand, ring_lookup) and its bytes of chunk `warp` in a slot
// (slot_offsets), which the loop pins in registers; and the epilogue's tensor scale, bias and output.
template <Format F, typename T>
struct RingLane {
  uint32_t lane4;
  int code_off, scale_off;
  float gs;
  const T* bias;
  T* y;
  __device__ __forceinline__ RingLane(const GemmParams& p, int warp, int lane)
      : lane4(static_cast<uint32_t>(lane) * 4 | static_cast<uint32_t>(kRingLutAddr)),
        gs(F == Format::nvfp4 ? __ldg(p.scale2) : 1.0f),
        bias(static_cast<const T*>(p.bias)),
        y(static_cast<T*>(p.y)) {
    slot_offsets<chunk_scale_bytes(F)>(warp, lane, code_off, scale_off);
  }
};

}  // namespace gemv

// Note [One run of scales]
// A tile's scales are one contiguous run over its chunks (layout.hpp: 16 SB bytes a chunk, chunk after
// chunk), so a stage's C chunks of scales are one run of C x 16 SB bytes a tile. The scales' tensor map
// describes that run as one box row of 4-byte words (C x 4 SB of them, at most 256: the TMA's limit on a
// box dimension) instead of C rows of 16 SB bytes: the same bytes land in the same places of the slot,
// in one row a tile rather than 16. Words, not bytes, because a row of 1 KB (NVFP4 and NF4, C = 16) is
// 1024 elements of one byte; the run's start and length (multiples of 16 SB bytes) are whole words.
// Expected: a little less work for the copy engine a stage, nothing where the stage's time is the
// consumers' (lab box, session 46: at GX 2 a stage without its code bytes still takes 0.92-0.96 of one).
// H200, driver 580.159.04, 2026-12-02, three rotated rounds against 16 rows (bench/RESULTS.md "Session
// 46"): y bit-identical on all 576 digest cells; 8192^2 M <= 8 0.984-0.995 (MXFP4 M = 8 75.8 -> 76.8 % of
// the read stream), 14336x4096 0.993-1.000, 4096x14336 and 4096^2 0.99-1.00 except NVFP4 at GX 2 with f16
// x (4096x14336 M = 4..16 1.004-1.008, 4096^2 M = 4..16 1.008-1.017; why is not known: its slots hold
// the same bytes, and NF4's 1 KB rows did not lose) and NVFP4 bf16 4096^2 M = 9 (1.009); no bar cell
// changed side; geometric mean over the bar's 80 cells 0.997 (bf16), 0.9985 (f16).
template <Format F>
inline constexpr int kScaleWords = 4 * chunk_scale_bytes(F);  // 4-byte words of one chunk's 16 rows' scales

struct RingArgs {
  CUtensorMap mw, ms, mx;  // the codes', the scales' and x's box copies (Note [Streamed x])
  RingLayout l;   // ring_layout of this launch
  int slots;      // ring slots used (<= the layout's)
  int pf_stages;  // stages of the first row block prefetched to L2 before the dependency wait
  int early;      // stages whose weights are loaded before the dependency wait (Note [Early weights])
};

// MT: 8-column mma tiles (1: M <= 8, 2: M <= 16). G = a.l.groups tiles per row block (Note [Streamed x]).
template <Format F, typename T, int MT>
__global__ void __launch_bounds__(kRingThreads, 1) fp4_gemv_ring_kernel(const GemmParams p, const __grid_constant__ RingArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using D = dev::Dt<T>;
  namespace hp = hopper;
  constexpr int SB = chunk_scale_bytes(F);
  constexpr int64_t kRed = ring_red_bytes(MT == 1 ? 1 : 16);  // the sums at 0, then the barriers
  constexpr int64_t kCodes = kRingChunks * 512;               // a slot's code bytes
  extern __shared__ __align__(128) uint8_t smem[];
  const RingLayout& L = a.l;
  const int slots = a.slots;
  const uint32_t base = hp::smem_addr(smem);
  if (base > kRingBaseMax) __trap();  // the layout assumes it (Note [Ring kernel])
  const int64_t lut_off = kRingLutAddr - base;
  uint8_t* const region_b = smem + lut_off + kGemvLutBytes;  // the slots, from its start
  float* const red = reinterpret_cast<float*>(smem);  // [2][16 warps][16 rows][8 MT]
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + kRed);
  uint64_t* const empty = full + kRingMaxSlots;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, r = lane & 3;
  const int kc_total = p.k / 64;
  const int tiles = (p.n + kGemvRows - 1) / kGemvRows;
  // a row block: G tiles; a stage: C chunks of each (G C = 16); warp w: tile w / C, chunk w % C
  const int G = L.groups, C = kRingChunks / G;
  const int blocks = (tiles + G - 1) / G;
  const int stages = (kc_total + C - 1) / C;  // per row block
  // this CTA's first stages whose weight boxes are loaded before the dependency wait (Note [Early weights])
  const int early = min(min(a.early, slots), (blocks - static_cast<int>(blockIdx.x) + static_cast<int>(gridDim.x) - 1) /
                                                 static_cast<int>(gridDim.x) * stages);

  gemv::pdl_launch_dependents();
  if (warp < kRingWarps) {
    gemv::build_lut<F, T>(reinterpret_cast<uint32_t*>(smem + lut_off), warp, lane);
  } else if (lane == 0) {
    for (int s = 0; s < slots; ++s) {
      hp::mbar_init(&full[s], 1);
      hp::mbar_init(&empty[s], kRingWarps);
    }
    hp::fence_barrier_init();
    // L2 prefetch of the first row block's pf_stages stages after the early ones (below) while the
    // previous kernel drains (a prefetch returns nothing to the SM). Not x: the previous kernel may be
    // writing it.
    const int k0 = min(kc_total, early * C), pf = min(kc_total - k0, a.pf_stages * C);
    for (int i = 0; i < G && pf > 0; ++i) {
      const int t = static_cast<int>(blockIdx.x) * G + i;
      if (t >= tiles) break;
      gemv::prefetch_l2(p.codes + gemm_chunk(kGemvRows * t, k0, p.k), pf * 512);
      gemv::prefetch_l2(p.scales + gemm_scale_chunk(kGemvRows * t, k0, p.k, SB), pf * 16 * SB);
    }
  }
  __syncthreads();
  // three box copies a stage; the weights are read once (evict first), x by every CTA
  const uint32_t stage_bytes = static_cast<uint32_t>(kRingChunks * (512 + 16 * SB) + C * L.x_pitch);
  uint64_t pol_w = 0, pol_x = 0;
  if (warp == kRingWarps && lane == 0) {
    hp::prefetch_tensor_map(&a.mw);
    hp::prefetch_tensor_map(&a.ms);
    hp::prefetch_tensor_map(&a.mx);
    pol_w = hp::l2_policy(false);
    pol_x = hp::l2_policy(true);
    // the weights of the first `early` stages (slots 0..early-1, their first phase), before the wait
    for (int i = 0; i < early; ++i) {
      const int rb = static_cast<int>(blockIdx.x) + i / stages * static_cast<int>(gridDim.x), c0 = i % stages * C;
      uint8_t* dst = region_b + i * L.slot_bytes;
      hp::mbar_arrive_expect_tx(&full[i], stage_bytes);
      hp::tma_load_3d(dst, &a.mw, &full[i], 0, c0, rb * G, pol_w);
      hp::tma_load_2d(dst + kCodes, &a.ms, &full[i], c0 * kScaleWords<F>, rb * G, pol_w);
    }
  }
  gemv::pdl_wait();

  if (warp == kRingWarps) {  // the producer: one lane streams the CTA's row blocks, stage by stage
    if (lane == 0) {
      int slot = 0, phase = 0, j = 0;
      for (int rb = blockIdx.x; rb < blocks; rb += gridDim.x)
        for (int q = 0; q < stages; ++q, ++j) {
          const int c0 = q * C;
          uint8_t* dst = region_b + slot * L.slot_bytes;
          if (j >= early) {  // else its weights are on their way (slot j, armed)
            hp::mbar_wait(&empty[slot], phase ^ 1);
            // whole boxes: tiles past N and chunks past K are zero-filled, and counted
            hp::mbar_arrive_expect_tx(&full[slot], stage_bytes);
            hp::tma_load_3d(dst, &a.mw, &full[slot], 0, c0, rb * G, pol_w);
            hp::tma_load_2d(dst + kCodes, &a.ms, &full[slot], c0 * kScaleWords<F>, rb * G, pol_w);
          }
          hp::tma_load_3d(dst + L.x, &a.mx, &full[slot], 0, 0, c0, pol_x);
          if (++slot == slots) {
            slot = 0;
            phase ^= 1;
          }
        }
    }
    return;  // the consumers synchronise by named barrier 1 only
  }

  // x's fragments from the slot (1024-byte aligned): chunk w % C of the stage, rows (lane & 7) + 8 mt;
  // mt = 1's rows are 1024 bytes on: an immediate offset.
  int xoff[2];
  gemv::ring_x_offsets(xoff, (warp % C) * p.m, lane, static_cast<int>(L.x));
  hp::named_barrier_sync(1, kRingWarps * 32);

  // This lane's bytes in a slot: chunk `warp`'s (tile-major: tile w / C's C chunks, then the next tile's)
  gemv::RingLane<F, T> ln(p, warp, lane);
  auto& [lane4, code_off, scale_off, gs, bias, y] = ln;
  const auto lookup = gemv::ring_lookup(lane4);
  constexpr int MC = 8 * MT;  // columns of the sums
  const int ti = warp / C, cw = warp % C;
  int slot = 0, phase = 0, par = 0;
  const uint8_t* sp = region_b;
  // Two copies of the loop where MXFP4 folds by the range flag: one without a check (Note [MXFP4 range flag])
  gemv::with_fold<F, T, MT>(gemv::all_fold<F, T, MT>(p), [&](auto fold) {
    for (int rb = blockIdx.x; rb < blocks; rb += gridDim.x, par ^= 1) {
      const int n0 = kGemvRows * (rb * G + ti);
      float acc[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][e] = 0.0f;
      // NF4_DQ: rows g, g + 8's scale2 values over this tile's K. A row's blocks (one per chunk) are
      // consecutive in the scale2 groups of kDqGroup blocks, so along K <= 64 kDqGroup (the ring's limit
      // for NF4_DQ, gemv_ring_mode) the group changes at most once: the value at chunk kc is g2a[h] before
      // chunk g2k[h], g2b[h] from it. Two loads per tile instead of a 64-bit index, a division and a load
      // per row and chunk: 8192^2 M = 1 18.7-19.1 -> 17.7 us, 4096x14336 16.1-16.5 -> 15.3-15.6 (H100).
      [[maybe_unused]] float g2a[2] = {0.0f, 0.0f}, g2b[2] = {0.0f, 0.0f};
      [[maybe_unused]] int g2k[2] = {0, 0};
      if constexpr (F == Format::nf4_dq) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = n0 + g + 8 * h;
          if (row >= p.n) continue;  // its scales are zero: any finite value
          const int64_t b0 = static_cast<int64_t>(row) * kc_total;  // its first block
          const int64_t grp = b0 / kDqGroup;
          g2k[h] = static_cast<int>(std::min<int64_t>((grp + 1) * kDqGroup - b0, kc_total));
          g2a[h] = __ldg(p.scale2 + grp);
          g2b[h] = g2k[h] < kc_total ? __ldg(p.scale2 + grp + 1) : g2a[h];
        }
      }
      for (int q = 0; q < stages; ++q) {
        // Kept in registers: ptxas otherwise recomputes these lane offsets from %tid in every trip
        // (~20 instructions per chunk).
        gemv::pin(code_off);
        gemv::pin(scale_off);
        gemv::pin(lane4);
        gemv::pin(xoff[0]);
        gemv::pin(xoff[1]);
        // Every chunk is computed, whole boxes: the box copies zero-fill the chunks past K and tiles past
        // N, whose codes decode to finite values (NF4 code 0: -1) and whose scales to 0 (scale2 0 past
        // N), so they add exactly 0 to the kept sums (the rows past N are never stored).
        const int kc = q * C + cw;
        hp::mbar_wait(&full[slot], phase);
        // Everything this chunk needs from shared memory, before the slot is released: codes, scales,
        // x's fragments.
        uint2 lo, hi;
        uint32_t s_a, s_b;
        gemv::slot_chunk<SB>(sp, code_off, scale_off, lo, hi, s_a, s_b);
        uint32_t bx[MT][4][2];
        int xo[MT][2];  // an immediate offset for mt = 1
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int h = 0; h < 2; ++h) xo[mt][h] = xoff[h] + mt * 8 * 128;
        gemv::x_fragments<MT, false>(bx, sp, xo, 0);
        __syncwarp();
        if (lane == 0) hp::mbar_arrive(&empty[slot]);
        sp += L.slot_bytes;
        if (++slot == slots) {
          slot = 0;
          phase ^= 1;
          sp = region_b;
        }
        if constexpr (F == Format::nf4_dq) {
          auto g2 = [&](int h) { return kc < g2k[h] ? g2a[h] : g2b[h]; };
          gemv::chunk_mma_bx<F, T, MT, decltype(lookup), decltype(g2)>(acc, p, bx, g, kc_total, 0, kc, lo, hi, s_a,
                                                                       s_b, n0, lookup, g2);
        } else {
          gemv::chunk_mma_bx<F, T, MT, decltype(lookup)>(acc, p, bx, g, kc_total, 0, kc, lo, hi, s_a, s_b, n0, lookup,
                                                         gemv::NoG2{}, fold);
        }
      }
      // The row block's sums, each tile's C warps in warp order. Two buffers: the barrier of row block
      // rb + 1 also orders row block rb - 1's reads before this buffer is written again. Thread i < 16 G
      // owns output row n0 + i % 16 G of every M column i / 16 G, i / 16 G + 512 / 16 G, ...: consecutive
      // threads store consecutive rows of y (coalesced), and a thread's row and bias are fixed.
      float* rb_sums = red + par * kRingWarps * MC * kRingSumPitch;  // [warp][column][row]
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          rb_sums[(warp * MC + mt * 8 + 2 * r + (e & 1)) * kRingSumPitch + g + 8 * (e >> 1)] = acc[mt][e];
      hp::named_barrier_sync(1, kRingWarps * 32);
      const int lg = 3 + __ffs(G);  // log2(16 G)
      const int nl = tid & ((kGemvRows << (lg - 4)) - 1), n = kGemvRows * rb * G + nl;
      if (n < p.n) {
        const float bv = bias ? D::to_f(bias[n]) : 0.0f;
        const float* src = rb_sums + (nl >> 4) * C * MC * kRingSumPitch + (nl & 15);  // tile nl / 16's first warp
        for (int m = tid >> lg; m < p.m; m += (kRingWarps * 32) >> lg) {
          float v = 0.0f;
          for (int w = 0; w < C; ++w) v += src[(w * MC + m) * kRingSumPitch];
          v *= gs;
          if (bias) v += bv;
          y[static_cast<int64_t>(m) * p.n + n] = D::from_f(v);
        }
      }
    }
  });
#else
  (void)p;
  (void)a;
#endif
}

// VSTACK_GEMV_RING=0 / 1: never / wherever it fits, the ring kernel (benchmarks and tests; with 1 a
// matmul fails where the device cannot run it); unset: the launcher's choice (the ring kernel wherever
// it fits, unless a plan of the register-load kernel is forced).
inline int forced_gemv_ring() {
  static const int v = env_flag("VSTACK_GEMV_RING");
  return v;
}

// VSTACK_GEMV_RING_SLOTS=<n> (kRingMinSlots..kRingMaxSlots) / VSTACK_GEMV_RING_PF=<stages> (0..64): the
// ring's slots and the first tile's L2 prefetch, for benchmarks; unset in normal use.
inline int forced_gemv_ring_slots() {
  static const int v = env_int_in("VSTACK_GEMV_RING_SLOTS", kRingMinSlots, kRingMaxSlots, 0);
  return v;
}
inline int forced_gemv_ring_pf() {
  static const int v = env_int_in("VSTACK_GEMV_RING_PF", 0, 64, -1);
  return v;
}

// VSTACK_GEMV_RING_EARLY=<stages> (0..kRingMaxSlots): the stages whose weights are loaded before the
// dependency wait (Note [Early weights]), for benchmarks; unset in normal use.
inline int forced_gemv_ring_early() {
  static const int v = env_int_in("VSTACK_GEMV_RING_EARLY", 0, kRingMaxSlots, -1);
  return v;
}

// VSTACK_GEMV_RING_G=<G> (1, 2, 4, 8): the streamed-x ring with G tiles per row block (Note [Streamed x])
// wherever its layout fits (elsewhere the launcher's choice), for tests and benchmarks.
inline int forced_gemv_ring_groups() {
  static const int v = env_pow2("VSTACK_GEMV_RING_G", 8);
  return v;
}

// Whether a CTA of a ring kernel (Threads: 544, or kWideThreads) fits an SM of this device with
// kRingSmem of dynamic shared memory (with whatever static and reserved shared memory it has; the
// layouts assume no static) and its registers. Asked once per kernel, which is left opted in to
// kRingSmem; single device assumed.
template <auto Kernel, int Threads = kRingThreads>
bool ring_fits() {
  static const bool ok = [] {
    int n = 0;
    if (cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kRingSmem)) !=
            cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, Kernel, Threads, static_cast<size_t>(kRingSmem)) !=
            cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return n >= 1;
  }();
  return ok;
}

// The ring's box copies (Note [Streamed x]): codes as [tiles][K / 64 chunks][512 bytes], boxes of
// G tiles x C chunks; scales as [tiles][a tile's K / 64 x 16 SB bytes in 4-byte words], boxes of G tiles
// x one run of C chunks' bytes (Note [One run of scales]); x as [K / 64 chunks][M rows][64 values] (x's
// own row-major strides taken in that order), boxes of C chunks x M rows, 128-byte swizzled.
template <Format F>
bool encode_ring_maps(RingArgs& a, const GemmParams& p) {
  constexpr cuuint64_t SB = chunk_scale_bytes(F);
  static_assert(kRingChunks * kScaleWords<F> <= 256,
                "a stage's run of scales is one box row (Note [One run of scales])");
  const cuuint64_t kc = static_cast<cuuint64_t>(p.k) / 64, tiles = static_cast<cuuint64_t>(p.npad) / kGemvRows;
  const cuuint32_t c = kRingChunks / a.l.groups, g = static_cast<cuuint32_t>(a.l.groups);
  using kernels::encode_tiled;
  return encode_tiled<3>(&a.mw, CU_TENSOR_MAP_DATA_TYPE_UINT32, p.codes, {128, kc, tiles}, {512, kc * 512},
                         {128, c, g}, CU_TENSOR_MAP_SWIZZLE_NONE) &&
         encode_tiled<2>(&a.ms, CU_TENSOR_MAP_DATA_TYPE_UINT32, p.scales, {kc * kScaleWords<F>, tiles},
                         {kc * 16 * SB}, {static_cast<cuuint32_t>(c * kScaleWords<F>), g},
                         CU_TENSOR_MAP_SWIZZLE_NONE) &&
         encode_tiled<3>(&a.mx, CU_TENSOR_MAP_DATA_TYPE_UINT16, p.x, {64, static_cast<cuuint64_t>(p.m), kc},
                         {static_cast<cuuint64_t>(p.k) * 2, 128}, {64, static_cast<cuuint32_t>(p.m), c},
                         CU_TENSOR_MAP_SWIZZLE_128B);
}

// A ring kernel's arguments with layout l, `slots` of its slots used, the tensor maps still to encode.
inline RingArgs ring_args(const RingLayout& l, int slots, int early = kRingEarlyStages) {
  RingArgs a{};
  a.l = l;
  a.slots = slots;
  a.pf_stages = forced_gemv_ring_pf() >= 0 ? forced_gemv_ring_pf() : kRingPrefetchStages;
  a.early = forced_gemv_ring_early() >= 0 ? forced_gemv_ring_early() : early;
  return a;
}

// A ring kernel's launch on `ctas` CTAs of `threads` (kRingThreads, or kWideThreads) with kRingSmem
// (the attribute set by ring_fits, which the caller asked), as a programmatic dependent of the stream's
// previous kernel, its tensor maps encoded for p here.
template <Format F, typename Kernel>
cudaError_t launch_ring_kernel(Kernel kernel, const GemmParams& p, RingArgs& a, int64_t ctas, cudaStream_t stream,
                               int threads = kRingThreads) {
  if (!encode_ring_maps<F>(a, p)) return cudaErrorInvalidValue;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(ctas));
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = static_cast<size_t>(kRingSmem);
  cfg.stream = stream;
  cudaLaunchAttribute la{};
  la.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  la.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &la;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, p, a);
}

// The ring kernel's launch with layout l (the caller asked ring_fits).
template <Format F, typename T, int MT>
cudaError_t launch_gemv_ring(const GemmParams& p, const RingLayout& l, cudaStream_t stream) {
  const int64_t tiles = (p.n + kGemvRows - 1) / kGemvRows;
  const int64_t blocks = (tiles + l.groups - 1) / l.groups;
  const int fs = forced_gemv_ring_slots();
  RingArgs a = ring_args(l, std::min(l.slots, fs > 0 ? fs : kRingSlots));
  return launch_ring_kernel<F>(fp4_gemv_ring_kernel<F, T, MT>, p, a, blocks < p.sms ? blocks : p.sms, stream);
}

}  // namespace vstack::quant
