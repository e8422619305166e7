// Decode-regime FP4 kernel, M <= 16: y = x * W^T (+ bias) streaming the weight
// from HBM straight into registers. Launch plan: quant/gemv_plan.hpp.
//
// Note [Decode kernel]. The weight is the mma A operand (16 rows x 16 k), x the
// B operand (k x 8 columns = up to 8 rows of x; two mmas for M > 8). In the
// GEMM layout (FORMAT.md) lane r of a quad finds, in the 8 bytes at 8r of a
// 32-byte chunk, exactly its A-fragment codes for the chunk's four k16 steps,
// and step b uses only the codes of 16-element block b: so each k16 mma sees a
// single NVFP4 block (two steps share an MXFP4 block, four an NF4 block). The
// codes are decoded WITHOUT their scale (a code byte indexes a 256-entry table
// of (low, high) value pairs in x's dtype: exact for E2M1, NF4 rounded once),
// the mma runs with a zero accumulator over the scale's steps, and the fp32
// result is multiplied by the block scale into the fp32 accumulator. So the
// scale never has to fit x's dtype (MXFP4 with f16 x is exact over the whole
// E8M0 range) and NF4 weights are rounded once, as the test bound assumes.
//
// The table has one copy per shared-memory bank at byte * 256 + lane * 4, so
// that a single PRMT of (lane * 4, code word) forms the address: conflict-free
// lookups at PRMT + LDS per code byte (64 KB per CTA, half of each 256-byte
// row unused; a byte * 128 table needed SHF + LOP3 + LEA + IMAD per lookup).
// No decode takes fewer instructions a register: an exact ALU E2M1 -> f16 decode
// took 1.13x the time on the H200 (no layout makes it a shift and a mask), and a
// two-instruction one that no layout realises ran as fast as the table
// (docs/NOTES.md, session 50).
//
// Memory: no shared-memory ring. Lane (g, r) loads its 8 fragment bytes of rows
// g and g+8 per chunk with `ld.global.nc.L1::no_allocate.L2::256B.v2` straight
// into registers (the tile's chunk is one 512-byte block of the GEMM layout, so
// each warp load reads 256 contiguous bytes: FORMAT.md, "Tiles"), in batches of kGemvBatch chunks, two batches in flight per
// warp; the CTA (16 warps, one per SM, persistent along N) streams its batches
// across row blocks, so the loads of the next block are issued before this
// block's partials are summed (two __syncthreads per block). x's K slice is
// loaded once per CTA into shared memory in fragment order (Note [Decode x
// fragments]); rows >= M of the 8-wide mma column tile alias rows < M or are
// zero: those columns are never stored.
//
// Note [Decode x fragments]. Lane (g, r) needs, per chunk and mma column tile, the
// B fragments of the four k16 steps: x row g at k = 16 s + 2 r, +1 and 16 s + 8 +
// 2 r, +1 (8 words). x is stored so that these are 32 contiguous bytes per lane,
// read with two 16-byte loads, the 16-byte units XOR-swizzled by row. At M = 1 all
// 8 rows alias: 4 distinct addresses per load, one shared-memory wavefront each,
// 2 per chunk where ldmatrix.x4 of the row-major slice took 8; M = 8: 8 either way.
// Used for M <= 2 only: measured (H100, bench, nvfp4 M = 1) 8192^2 16.7 -> 16.6 us, 4096^2
// 8.2 -> 7.0, 14336x4096 17.1 -> 15.9, 4096x14336 17.4 -> 16.4; at M = 4..16 it was as often
// 3-12 % slower as faster (its x is stored before the first weight loads).
// Measured (H100, 2026-11-22, same run as the old per-warp cp.async-ring kernel,
// bench_fp4.py --decode): 4096^2 8.5 us (was 11.5), 8192^2 M = 1 22.9 (21.9),
// M = 8 30.1 (23.8), M = 16 42.8 (45.9); 14336x4096 M = 1 20.6 (19.5);
// 4096x14336 M = 1 22.0 (24.6), M = 16 50.7 (41.5); MXFP4 / NF4_DQ now within
// 10 % of NVFP4 (were 25-40 % slower). Per tile-chunk (16 rows x 64 k): ~67 SASS
// instructions of compute + ~20 of loads (the first version, with per-chunk
// 64-bit address math and q / nb divisions, ran 167 and 26 us); ncu at M = 1:
// 0.42 issued/cycle/scheduler, stalls per issue: long scoreboard 1.36, MIO
// throttle 1.35, barrier 0.68 (of 9.4); 28 shared wavefronts per tile-chunk,
// L1/TEX (LDS + LDSM + LDG) 62 % busy. Tried and dropped: an L2 bulk prefetch
// (cp.async.bulk.prefetch.L2) of the next row block's codes (slower: 29.4 vs
// 24.8 us); 2 CTAs x 8 warps per SM with a 32 KB table (26-27 us).
// Note [NVFP4 scale in A]. The exception to "decoded without their scale": NVFP4 at MT = 2 (M = 9..16), and at MT = 1
// where nvfp4_scale_in_a says (below), on sm_89+. An E2M1 value (at most 2 significant bits) times an E4M3 scale (at
// most 4, exponents 2^-9..2^8) has at most 6 significant bits in 2^-10..2688, so the product is exact in bf16 and in
// f16 (normal or subnormal). So the fragment is multiplied by its rows' scales in x's dtype (HMUL2 with a half
// broadcast, free in the operand) and the mma accumulates straight into acc: per tile-chunk 16 HMUL2, 2 PRMT and the
// scale conversions (4 CVT; bf16 also widens and repacks) in place of 32 FFMA and the group accumulators (98 -> 88.5
// SASS at MT = 2 GX = 4, bf16). Measured (H100, 2026-11-23, bench_fp4.py M = 16, 6 alternations against the fp32-scale
// build): NVFP4 0.978-0.988 on the seven bench shapes, the other formats 0.990-1.004; the worst error statistic of the
// GPU matmul case unchanged under a replayed seed. NF4 scales are fp32 and its values are not exact.
// At MT = 1 (M = 3..8, where the columns are not packed) there are 16 FFMA a tile-chunk to replace, not 32:
// f16 x saves 5 SASS (78.5 -> 73 at GX 4), bf16 x costs 6 more (85: its scales are widened and repacked).
// Measured (H200, driver 580.159.04, 2026-11-28, bench_fp4.py --decode, M = 3, 4, 8, three rounds in rotated
// order (f16 two), a lab against its control built the same way; bench/RESULTS.md "Session 34"): f16 0.954-0.992
// at every wide GX (2..7; 8192^2 0.954, 12288x4096 0.97, 4096^2 and 4096x14336 0.98), 0.997-1.000 in the ring
// kernel (28672x4096) and at 2048x8192; bf16 0.982-0.984 at GX 4 (8192^2 74.4 -> 75.6 % of the read stream),
// 0.994-0.996 at GX 5, but 1.00-1.015 at GX 3, 1.007-1.010 at GX 6, 1.016-1.024 at GX 2 and 7, 1.06 in the ring
// kernel. So nvfp4_scale_in_a (quant/gemv_plan.hpp) took it at MT = 1 for f16 and, for bf16, at GX 4 and 5.
// Session 36 (H200, lab sa2 against main's build, three rotated rounds, bench/RESULTS.md "Session 36"): once the
// fp32 path ran two chunks a warp (Note [Two chunks a warp] in quant/gemv_plan.hpp), bf16's wide instances were
// faster on it everywhere: MT = 1 GX 4, 5 0.967-0.974 (8192^2 M = 3..8 74.9-75.7 -> 77.3-78.3 % of the read stream),
// MT = 2 0.979-0.993 but 1.004 at 4096x14336; f16's stayed with the scale in A (its fp32 path 1.04-1.06 at MT = 2,
// 0.99-1.01 at MT = 1). So bf16 x took it at MT = 2 outside the wide kernel only; since session 42 bf16's MT = 2
// wide instances take it too, with pairs made by a shift (Note [NVFP4 shifted pairs]).
// MXFP4 folds with bf16 x only, and only where the scale is in 2^-63..2^64 (E8M0 spans 2^-127..2^127,
// beyond f16; bf16 2^(e - 127) is just e << 7): a warp whose chunk holds any other scale byte (0, 0xFF
// NaN, the tiny scales of the tests, zero-filled rows past N) takes the fp32 path for that chunk, by a
// vote (4 SASS). The products then stay normal bf16 and exact. Per tile-chunk 16 HMUL2 + 2 PRMT + 2 SHL
// + the vote in place of 16 FFMA and four E8M0 decodes of 5 SASS, and the fp32 path's registers leave the
// hot loop: the MT = 2 instances no longer spill (GX 5-7 spilled 20-44 B). Measured (H100, 2026-11-23,
// bench_fp4.py M = 16, 6 alternations, the same call as a full GPU suite on the lab build): MXFP4
// 0.937-0.970 on the six large bench shapes (8192^2 73.7 -> 76.9 % of the stream, 14336x4096 67.9 ->
// 72.5 %), 4096^2 0.996; the other formats 0.986-1.013. Without the vote (a lab that always folds) the wide
// kernel runs 0.976-0.99 at M = 16; folding every chunk and checking the bytes after the loop (two ALU
// instructions a chunk, or a checker warp, and a per-CTA exact pass on a miss) kept at most 1 % of that
// (H100, 2026-11-24, docs/NOTES.md session 25), so the vote stays in the loop and the check moved to the
// quantizer (Note [MXFP4 range flag]).
// Where the time goes (H100, nvfp4 M = 1, lab builds, docs/NOTES.md): at 8192^2 the compute alone
// (weights from registers) takes 12.9 us, the loads alone 16.0, both 21.2, and a pure read of the
// same bytes 14.1 (bench/quant/read_floor.cu). A warp issues batch i + 2's loads only after it has
// computed batch i, so the two barely overlap; deeper register batches, 32 warps of 64 registers and
// a producer warp feeding a shared-memory ring by bulk copies or 2-D TMA were all slower (NOTES).
// The loads were the larger cost than that: with rows K/2 bytes apart each 8-byte warp load touched
// 8 lines. The tile layout (a 16-row tile's chunk in one 512-byte block) took 8192^2 M = 1 from
// 21.4 to 17.5 us, 14336x4096 20.2 -> 17.3, 4096x14336 21.4 -> 18.6 (bench, H100, 2026-11-22).
#pragma once

#include <cooperative_groups.h>

#include <algorithm>
#include <type_traits>

#include "kernels/target.hpp"
#include "quant/device.cuh"
#include "quant/env.hpp"
#include "quant/format.hpp"
#include "quant/gemm_kernel.cuh"
#include "quant/gemv_plan.hpp"
#include "quant/layout.hpp"
#include "quant/splitk_workspace.hpp"

namespace vstack::quant {

namespace gemv {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
// Four E4M3 bytes -> two f16x2 (bytes 0, 1 and 2, 3; exact, NaN stays NaN). sm_89 and later.
__device__ __forceinline__ void e4m3x4_to_f16x2(uint32_t w, uint32_t& h01, uint32_t& h23) {
  asm("{\n.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %2;\ncvt.rn.f16x2.e4m3x2 %0, lo;\ncvt.rn.f16x2.e4m3x2 %1, hi;\n}\n"
      : "=r"(h01), "=r"(h23)
      : "r"(w));
}
#endif

// Four E4M3 scale bytes -> fp32 (exact; NaN stays NaN).
__device__ __forceinline__ void e4m3x4_to_f32(uint32_t w, float (&s)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t h01, h23;
  e4m3x4_to_f16x2(w, h01, h23);
  const __half2 a = *reinterpret_cast<const __half2*>(&h01), b = *reinterpret_cast<const __half2*>(&h23);
  s[0] = __low2float(a);
  s[1] = __high2float(a);
  s[2] = __low2float(b);
  s[3] = __high2float(b);
#else
#pragma unroll
  for (int i = 0; i < 4; ++i) s[i] = e4m3_value((w >> (8 * i)) & 0xFFu);
#endif
}

// 8-byte read-only global load, not kept in L1, with an L2 prefetch of the 256-byte block.
__device__ __forceinline__ uint2 ld_code8(const void* p) {
  uint2 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}
// The SB scale bytes (4, 2 or 1) of rows g and g + 8 of one chunk (adjacent in the GEMM layout),
// zero-extended; zero where !v (nothing is read).
template <int SB>
__device__ __forceinline__ void ld_scales(const uint8_t* p, bool v, uint32_t& a, uint32_t& b) {
  if constexpr (SB == 4) {
    const uint2 w = v ? ld_code8(p) : make_uint2(0, 0);
    a = w.x;
    b = w.y;
  } else {
    uint32_t w = 0;
    if (v) {
      if constexpr (SB == 2) asm volatile("ld.global.nc.L1::no_allocate.b32 %0, [%1];\n" : "=r"(w) : "l"(p));
      else asm volatile("ld.global.nc.L1::no_allocate.u16 %0, [%1];\n" : "=r"(w) : "l"(p));
    }
    a = w & (SB == 2 ? 0xFFFFu : 0xFFu);
    b = w >> (8 * SB);
  }
}

// Bulk L2 prefetch of [p, p + bytes) (16-byte aligned, bytes a multiple of 16); sm_90+, else nothing.
__device__ __forceinline__ void prefetch_l2(const void* p, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes) : "memory");
#else
  (void)p;
  (void)bytes;
#endif
}

// One sm_90+ instruction with a memory clobber; nothing on older devices.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define VSTACK_GEMV_SM90_OP(insn) asm volatile(insn "\n" ::: "memory")
#else
#define VSTACK_GEMV_SM90_OP(insn) ((void)0)
#endif

// Programmatic dependent launch: let the next kernel in the stream start its prologue now;
// wait for the previous one's memory before touching global memory.
__device__ __forceinline__ void pdl_launch_dependents() { VSTACK_GEMV_SM90_OP("griddepcontrol.launch_dependents;"); }
__device__ __forceinline__ void pdl_wait() { VSTACK_GEMV_SM90_OP("griddepcontrol.wait;"); }

// Split cluster barrier (all threads of the cluster, warp-uniform): arrive (release), then wait
// (acquire) until every thread of the cluster has arrived in the current phase.
__device__ __forceinline__ void cluster_arrive() { VSTACK_GEMV_SM90_OP("barrier.cluster.arrive.release.aligned;"); }
__device__ __forceinline__ void cluster_wait() { VSTACK_GEMV_SM90_OP("barrier.cluster.wait.acquire.aligned;"); }

// x fragments of chunk kc's four k16 steps, bx[mt][step][0..1], from the slice in shared memory.
template <int MT, bool XF>
__device__ __forceinline__ void x_fragments(uint32_t (&bx)[MT][4][2], const uint8_t* xs, const int (&xoff)[MT][2],
                                            int kc) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint32_t rr[4];  // steps 2h, 2h + 1: (b0, b1) each
      if constexpr (XF) {
        const uint4 v = *reinterpret_cast<const uint4*>(xs + xoff[mt][h] + kc * 128);
        rr[0] = v.x;
        rr[1] = v.y;
        rr[2] = v.z;
        rr[3] = v.w;
      } else {
        dev::ldmatrix_x4(rr, xs + xoff[mt][h] + kc * 128);
      }
      bx[mt][2 * h][0] = rr[0];
      bx[mt][2 * h][1] = rr[1];
      bx[mt][2 * h + 1][0] = rr[2];
      bx[mt][2 * h + 1][1] = rr[3];
    }
}

// One chunk of a warp's decode work: codes lo (row g) / hi (row g + 8) and raw scales s_a / s_b of
// 16-row tile n0's chunk kc (of the slice from chunk kc0), times x's fragments bx of that chunk, into
// acc. lookup(w, i): the table entry of byte i of code word w. Shared by the register-load kernel and
// the ring kernel (quant/gemv_ring.cuh).
// NF4_DQ: g2(h) is the scale2 group value of row g + 8 h at this chunk, or (NoG2) it is loaded here.
// Pack: NoPack, or the lane's Packed (Note [Packed columns] in quant/gemv_plan.hpp; bx holds x only in the
// columns of each step's scale group).
struct NoG2 {};
// NF4_DQ where each row's blocks lie in one scale2 group: the caller multiplies the row's sums by that value
// after its loop (Note [NF4_DQ scale2 after the sums] in quant/gemv_ring_wide.cuh), so the chunk takes the
// absmax alone.
struct G2Later {};
struct NoPack {};
struct Packed {
  uint32_t sel;  // NVFP4: the PRMT selector of this lane's two scale groups (2 (r & 1), + 1) of rows g, g + 8
  __device__ __forceinline__ explicit Packed(int lane) : sel((lane & 1) ? 0x7632u : 0x5410u) {}
};
// The mma A fragment of k16 step stp of a chunk, decoded from codes lo (row g) / hi (row g + 8).
template <typename Lookup>
__device__ __forceinline__ void a_fragment(uint32_t (&af)[4], uint2 lo, uint2 hi, int stp, Lookup lookup) {
  const uint32_t wl = stp < 2 ? lo.x : lo.y, wh = stp < 2 ? hi.x : hi.y;
  const int b = (stp & 1) * 2;  // byte of the word
  af[0] = lookup(wl, b);
  af[1] = lookup(wh, b);
  af[2] = lookup(wl, b + 1);
  af[3] = lookup(wh, b + 1);
}
// A chunk's four k16 steps with each step's A fragment scaled in x's dtype by pair(step), the pair of its rows'
// scales, and the mma accumulating into acc (Note [NVFP4 scale in A]).
template <typename T, int MT, typename Lookup, typename Pair>
__device__ __forceinline__ void mma_scaled_steps(float (&acc)[MT][4], const uint32_t (&bx)[MT][4][2], uint2 lo,
                                                 uint2 hi, Lookup lookup, Pair pair) {
#pragma unroll
  for (int stp = 0; stp < 4; ++stp) {
    uint32_t af[4];
    a_fragment(af, lo, hi, stp, lookup);
    dev::Dt<T>::scale_rows(af, pair(stp));
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) dev::Dt<T>::mma(acc[mt], af, bx[mt][stp][0], bx[mt][stp][1]);
  }
}
// Note [MXFP4 range flag]. The vote of the MXFP4 fold below costs 2.4 % at 4096x14336 M = 16 (H100,
// docs/NOTES.md session 25), and every way of checking the bytes inside the loop cost as much. So the
// check moves to where the scales are made: an MXFP4 tensor may carry one fp32 in scale2, the least of
// its blocks' fold levels (FORMAT.md, mxfp4_fold_level): 2 where every block folds exactly into f16 (byte
// in 114..140, or a zero block), 1 into bf16 (byte in 64..191, or codes all +-0: bf16 scale 0 for byte
// 0 and Inf for the NaN byte give 0 and NaN, as the decode), else 0. vstack_fp4_quantize and the CPU
// reference write it. A decode kernel whose x dtype the flag covers runs its loop without a check (fold
// = std::true_type); anything else (no scale2, a lower level, a value the caller left unset) keeps bf16's
// per-chunk vote and f16's fp32 path. Chunks past K and tiles past N hold zero scales and codes or rows
// that are never stored, as on the vote's path. f16 has no vote: its range is narrower (E2M1 times
// 2^-13..2^13 stays normal f16) and its scale is (e - 112) << 10, three instructions a pair.
// Measured (H100, 2026-11-24, bench_fp4.py, rotated rounds): MXFP4 bf16 M = 9, 12, 16 0.949-0.987 against
// the vote on the four bench shapes (4096x14336 M = 16 74.8 -> 77.0 % of the read stream); f16 0.948-0.970
// against its fp32 path (72.5 -> 76.0 %). The flag costs the quantizer a one-thread kernel and a fold byte
// per block (mxfp4_fold_byte in format.hpp): MXFP4 8192^2 GEMM layout bf16 75.9-76.7 -> 79.1-79.8 us.
// Note [No MXFP4 fold at M <= 8]. From session 31 to 36 the wide kernel's bf16 MXFP4 instances at MT = 1 from GX
// 4 folded by the range flag: against the fp32 path at one chunk a warp (16 warps, GX 7 spilling 28 bytes) the
// fold read 0.955-0.985 (H200, 2026-11-28, docs/NOTES.md session 31). Since the fp32 path runs two chunks a warp
// without the special bytes (Note [MXFP4 without the special bytes], Note [Two chunks a warp]) the fold, whose
// four mma a chunk are one chain through the warp's chunks, is the slower one: bf16 MXFP4 takes the fp32 path at
// MT = 1 as f16 does, and packs its columns at M <= 4 at every GX (Note [Packed columns]).
// Measured (H200, driver 580.159.04, 2026-11-29, bench_fp4.py --decode --formats mxfp4, bf16, M = 1..5, 8, three
// rounds in rotated order; lab nf, the fold's GX bound past kRingWideMax, against the release build of 431e6ec;
// docs/NOTES.md session 37): GX 4 (8192^2) 0.969-0.984 (M = 1..8 75.1-75.7 -> 76.4-77.8 % of the read stream),
// GX 5 (10240x8192) 0.978-0.989, GX 6 (12288x4096) 0.967-0.981, GX 7 (14336x4096) 0.942-0.979 (73.6-76.1 ->
// 77.2-78.8 %); GX 2 (4096x14336, unchanged kernels) 0.998-1.001. No instance spills.
// Note [MXFP4 without the special bytes]. Where the flag is 1 or 2, no block has the E8M0 byte 0 or 255
// unless its codes are all +-0, and there the plain 2^(e - 127) as e << 23 (scale 0 or Inf) gives 0 x x = 0
// or Inf x 0 = NaN, as the decode. So every wide instance (MT = 1 and 2) has a flagged copy of its loop too:
// the fp32 path with e8m0x4_value_normal, without e8m0x4_value's special-byte branch. Without that branch region ptxas interleaves a warp's two chunks, and
// MXFP4's packed instances take two chunks a warp as NVFP4's do (Note [Two chunks a warp] in
// quant/gemv_plan.hpp; with the branch, in session 32, two cost 8-12 %). A tensor without the flag keeps the
// branch, at two chunks a warp in the packed instances.
// Measured (H200, driver 580.159.04, 2026-11-29, bench_fp4.py --decode --formats mxfp4, M = 1, 4, 8, two
// rounds in rotated order, labs nc (the branch-free copy) and nc2 (and two chunks a warp) against a control
// built the same way; docs/NOTES.md session 35): nc2 bf16 0.986 over 12 cells (4096^2 and 4096x14336 at
// M = 1, 4: 0.953-0.976; 4096x14336 M = 1 72.7 -> 74.5 % of the read stream), f16 0.975 (packed cells
// 0.956-0.976, 8192^2 M = 8 0.974); the GX >= 4 bf16 cells, which fold, 0.999-1.002. Except f16's unpacked
// GX 6, 7: there the second copy made ptxas spill (GX 7 28 -> 52 bytes, GX 6 0 -> 4) and 14336x4096 M = 8 ran
// 1.010x, so those instances kept one copy at 16 warps. Since session 36 the unpacked MT = 1 instances run two
// chunks a warp (Note [Two chunks a warp] in quant/gemv_plan.hpp) at up to 240 registers, where GX 6, 7 have
// both copies and do not spill, so every wide instance has the flagged copy.
// Note [MXFP4 fp32 path at M > 8]. At MT = 2 the wide instances take the fp32 path (the flagged copy without the
// special bytes, the other with them), not the fold, and so two chunks a warp (Note [Two chunks a warp]); the
// fold's four mma a chunk are one chain through the warp's chunks. Session 36's sa2 did the same for NVFP4 bf16.
// With E8M0 pairs in both copies ptxas spills from GX 5 (32, 112, 172 bytes at GX 5, 6, 7; the copy with the
// special bytes alone 20, 52, 76, the flagged one alone none), and so until session 38 those instances kept the
// fold. The copy with the special bytes decodes byte by byte above kWideMxPairsMaxGx (mxfp4_e8m0_pairs in
// quant/gemv_plan.hpp): no instance spills, and byte by byte measured faster from GX 3 too; at GX 2 the pairs are.
// Measured (H200, driver 580.159.04, 2026-11-29, bench_fp4.py --decode --formats mxfp4, three rounds in rotated
// order; docs/NOTES.md session 37): lab mx2 (the fp32 path at every GX) against the release build of 2297f1e, M = 12,
// 16: GX 5 (10240x8192) bf16 1.030, f16 0.980-0.984; GX 7 (14336x4096) bf16 1.105, f16 1.051. The fp32 path up to
// GX 4 (431e6ec) against the build before, M = 9, 12, 16 (only the GX 2..4 MT = 2 kernels differ; they are mx2's):
// bf16 GX 2 (4096^2, 4096x14336) 0.974-0.994, GX 4 (8192^2) 0.977-0.978 (M = 16 66.6 -> 68.1 % of the read
// stream); f16 0.963-0.980; GX 3 (6144x4096) 0.992-1.013; GX 7 1.000-1.003 (unchanged kernels).
// Session 38 (lab xc, the copy with the special bytes byte by byte at MT = 2 and the fp32 path at every GX,
// against the release build of ff688f4, which folded from GX 5; M = 9, 12, 16, three rounds; docs/NOTES.md
// session 38): GX 5 (10240x8192) bf16 0.991-0.997, f16 0.946-0.952; GX 6 (12288x4096) bf16 0.974-0.984, f16
// 0.925-0.933; GX 7 (14336x4096) bf16 0.977-0.979, f16 0.931-0.935 (M = 9 f16 63.9 -> 68.4 % of the read
// stream). Byte by byte where both ran the fp32 path: GX 4 (8192^2) 0.992-0.997, GX 3 (6144x4096, 6144x8192)
// 0.990-1.001, GX 2 (4096^2, 4096x14336) 1.009-1.018, bf16 and f16 alike.
// Whether the NVFP4 instance takes shifted pairs where the range flag holds (Note [NVFP4 shifted pairs]).
template <Format F, typename T, int MT, int GX>
inline constexpr bool kShiftedPairs =
    F == Format::nvfp4 && nvfp4_shifted_pairs(std::is_same_v<T, __nv_bfloat16>, MT, GX);
// Whether the kernel has a flagged copy of its loop, for tensors whose range flag holds: the fold (MT = 2 outside
// the wide kernel) or the fp32 path without the special bytes (the wide instances). GX: the wide instance's (0: any
// other kernel, which has the flagged copy at MT = 2 only).
// NVFP4: the wide instances with shifted pairs (kShiftedPairs), whose other copy is the fp32 path.
template <Format F, typename T, int MT, int GX = 0>
inline constexpr bool kFlagCopy = (F == Format::mxfp4 && (MT == 2 || (MT == 1 && GX > 0))) ||
                                  kShiftedPairs<F, T, MT, GX>;
// Whether the tensor's range flag lets every chunk fold for x of type T (read once per thread: one uniform
// load).
template <Format F, typename T, int MT, int GX = 0>
__device__ __forceinline__ bool all_fold(const GemmParams& p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890  // the fold is sm_89+: the fp32 path either way below
  if constexpr (F == Format::nvfp4 && kFlagCopy<F, T, MT, GX>) {
    return __ldg(p.scale2 + 1) == kNvfp4Plain;  // every scale byte plain (FORMAT.md)
  } else if constexpr (kFlagCopy<F, T, MT, GX>) {
    if (!p.scale2) return false;
    const float level = __ldg(p.scale2);
    // the bf16 fold, and the fp32 path without the special bytes wherever MXFP4 does not fold (mxfp4_folds),
    // need level 1 or 2 whatever x's type
    return level == kMxfp4FoldF16 ||
           ((!mxfp4_folds(MT, GX) || std::is_same_v<T, __nv_bfloat16>) && level == kMxfp4FoldBf16);
  }
#endif
  (void)p;
  return false;
}
// body(std::true_type{}) where every chunk folds, else body(std::false_type{}): two copies of the
// caller's loop for the formats that fold by the flag, one for the others.
template <Format F, typename T, int MT, int GX = 0, typename Body>
__device__ __forceinline__ void with_fold(bool all, Body&& body) {
  if constexpr (kFlagCopy<F, T, MT, GX>) {
    if (all) {
      body(std::true_type{});
      return;
    }
  }
  body(std::false_type{});
}

// Note [NVFP4 shifted pairs]. bf16 has no conversion from E4M3: Note [NVFP4 scale in A]'s bf16 pairs are f16
// pairs (one CVT) widened to fp32 and packed again, 3 instructions a pair, which is why bf16's wide instances took
// the fp32 path instead (two chunks a warp, 32 FFMA a tile-chunk at MT = 2). But an E4M3 byte b in 0..0x7E placed
// 4 bits up in a bf16 half is exactly value(b) x 2^-120: its 4 exponent bits land in the low 4 of bf16's 8 (bias
// 7 against 127) and its 3 mantissa bits at the top of bf16's 7; exponent 0 (E4M3 m/8 x 2^-6) becomes bf16's
// subnormal m/8 x 2^-126. So one PRMT puts bytes (a_j, b_j) of rows g, g + 8 into the low bytes of a pair's
// halves, the high bytes copies of their sign bit (zero: the PRMT selector's sign mode), and one shift makes the
// pair. With the code table holding the E2M1 values times 2^120 (exact in bf16: at most 6 x 2^120), HMUL2 gives
// value x scale, exact and normal as in Note [NVFP4 scale in A]. A negative byte (sign bit set) or the NaN byte
// 0x7F would give a wrong finite scale, so this holds only for tensors whose range flag (scale2[1], FORMAT.md)
// says that every byte is plain; for any other the kernel rebuilds the table without the factor and runs the fp32
// path (the other copy of its loop: with_fold). Per tile-chunk at MT = 2: 16 HMUL2, 4 PRMT and 4 shifts in place
// of 32 FFMA, 8 HADD2, 4 F2FP and 2 PRMT.
// Measured (H200, driver 580.159.04, 2026-12-01; bench/RESULTS.md "Session 42"): HMUL2.BF16 keeps subnormal
// inputs (every byte 0..0x7E times every E2M1 value x 2^120, 4064 products exact). ncu at 8192^2 M = 16 (GX 4):
// 112.1 -> 93.0 warp instructions a tile-chunk (at two chunks a warp, each its own sums), but the stall on fixed
// latencies rose from 17 to 28 % of samples, so the time fell by 5 %, not 17. Three rotated rounds against the
// fp32 path, M = 9 and 16: at one chunk a warp (16 warps) 0.939-0.943 at GX 4 (8192^2 M = 16 65.4 -> 69.6 % of
// the read stream), 0.947-0.948 at GX 2 (4096x14336), 0.954-0.963 at GX 6, 0.959-0.960 at GX 7, 0.962-0.978 at
// GX 3, 0.968-0.985 at GX 5; at two chunks a warp with a set of sums each 0.953-0.990 (GX 5 0.963-0.965), with
// one set 0.962-0.993. At MT = 1 (two chunks, sums each) 1.00-1.03: bf16's MT = 1 keeps the fp32 path. As built
// (one chunk a warp, the flag read by the consumers before their barrier, the fp32 copy beside; against the fp32
// path, three rounds on the bar's shapes): 4096x14336 0.939-0.940 (M = 16 60.6 -> 64.5 % of the read stream),
// 4096^2 0.974-0.976, 8192^2 0.960-0.961 (65.4 -> 68.2 %), 14336x4096 0.990-0.994; every other cell of the
// bar 0.997-1.003, and the decode digests of every other instance bit-identical. So at GX 4 and 7 it keeps only
// half of the lab's gain (the lab read no flag and had one copy of the loop). The copy is the cost, not the load
// (session 43, three rounds, M = 9 and 16): the flag's load without the copy (docs/labs/s42_one_copy.patch) runs
// as the lab, 0.967-0.968 of the shipped kernels at GX 7, 0.983-0.989 at GX 4, 0.999-1.006 at GX 2, 3, 5, 6; the
// flag read by the producer lane instead (s42_flag_by_producer.patch) 1.02-1.04. The copy changes NVVM's address
// arithmetic in the other (its slot addresses are shared, not recomputed) and so ptxas's schedule of it (one LDS,
// two PRMT and three NOPs more a trip at GX 4). It cannot be moved out of line: ptxas inlines a __noinline__
// function called once, and a call through a pointer makes it ignore setmaxnreg (C7506: 96 registers, a 392-byte
// stack). MXFP4's wide flag copies cost nothing (their loops alone: 0.993-1.020).
__device__ __forceinline__ uint32_t shifted_pair(uint32_t s_a, uint32_t s_b, int stp) {
  uint32_t t;  // bytes: a_j, sign(a_j), b_j, sign(b_j)
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(t) : "r"(s_a), "r"(s_b), "r"(nvfp4_shifted_pair_sel(stp)));
  return t << 4;
}

// Gx: the wide instance's GX as std::integral_constant (0: any other kernel), for nvfp4_shifted_pairs.
template <Format F, typename T, int MT, typename Lookup, typename G2 = NoG2, typename Fold = std::false_type,
          typename Pack = NoPack, typename Gx = std::integral_constant<int, 0>>
__device__ __forceinline__ void chunk_mma_bx(float (&acc)[MT][4], const GemmParams& p, const uint32_t (&bx)[MT][4][2],
                                             int g, int kc_total, int kc0, int kc, uint2 lo, uint2 hi, uint32_t s_a,
                                             uint32_t s_b, int n0, Lookup lookup, G2 g2 = {}, Fold = {},
                                             Pack pack = {}, Gx = {}) {
  using D = dev::Dt<T>;
  // MXFP4 folds at MT = 2 but in the wide instances (Note [MXFP4 fp32 path at M > 8])
  constexpr bool kMxFold = F == Format::mxfp4 && mxfp4_folds(MT, Gx::value);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  // Note [NVFP4 shifted pairs]: where the range flag holds (Fold), else the fp32 path below
  constexpr bool kShifted = kShiftedPairs<F, T, MT, Gx::value>;
  static_assert(!kShifted || std::is_same_v<Pack, NoPack>, "MT = 2 never packs its columns");
  if constexpr (kShifted && Fold::value) {
    mma_scaled_steps<T, MT>(acc, bx, lo, hi, lookup, [&](int stp) { return shifted_pair(s_a, s_b, stp); });
    return;
  }
  // Note [NVFP4 scale in A]; not where the columns are packed (their scales are per column)
  if constexpr (F == Format::nvfp4 && std::is_same_v<Pack, NoPack> && !kShifted &&
                nvfp4_scale_in_a(std::is_same_v<T, __nv_bfloat16>, MT)) {
    uint32_t sg[4];  // scale group j of rows (g, g + 8) as f16x2
    e4m3x4_to_f16x2(__byte_perm(s_a, s_b, 0x5140), sg[0], sg[1]);
    e4m3x4_to_f16x2(__byte_perm(s_a, s_b, 0x7362), sg[2], sg[3]);
    mma_scaled_steps<T, MT>(acc, bx, lo, hi, lookup, [&](int stp) { return D::from_f16x2(sg[stp]); });
    return;
  }
  // Note [NVFP4 scale in A]; MT = 2 only (Note [No MXFP4 fold at M <= 8])
  if constexpr (kMxFold && std::is_same_v<T, __nv_bfloat16>) {
    // E8M0 bytes e in 64..191 (bits 7 and 6 differ): bf16 2^(e - 127) is e << 7, and its products with
    // E2M1 values are normal bf16, exact. Where any byte of the warp's chunk lies outside: the fp32 path,
    // unless the tensor's range flag says every chunk folds (Fold, Note [MXFP4 range flag]).
    const uint32_t w = s_a | (s_b << 16);
    if (Fold::value || __all_sync(0xFFFFFFFFu, ((w ^ (w << 1)) & 0x80808080u) == 0x80808080u)) {
      const uint32_t sg[2] = {__byte_perm(s_a, s_b, 0x2420) << 7, __byte_perm(s_a, s_b, 0x2521) << 7};
      mma_scaled_steps<T, MT>(acc, bx, lo, hi, lookup, [&](int stp) { return sg[stp >> 1]; });
      return;
    }
  }
  if constexpr (kMxFold && std::is_same_v<T, __half> && Fold::value) {  // the flag's f16 fold
    // E8M0 bytes e in 114..140: f16 2^(e - 127) has exponent field e - 112 = (e + 16) mod 64, formed per half
    // of the pair (e_g, e_g+8) as ((pair << 10) + (16 << 10)) & 0xFC00: the low half's carry and spill land in
    // bits 16..19, which the high half's mask drops.
    uint32_t sg[2] = {__byte_perm(s_a, s_b, 0x2420), __byte_perm(s_a, s_b, 0x2521)};
#pragma unroll
    for (int i = 0; i < 2; ++i) sg[i] = ((sg[i] << 10) + 0x40004000u) & 0xFC00FC00u;
    mma_scaled_steps<T, MT>(acc, bx, lo, hi, lookup, [&](int stp) { return sg[stp >> 1]; });
    return;
  }
#endif
  constexpr int NG = chunk_groups(F);  // scales per row and chunk
  constexpr int G = 4 / NG;            // k16 steps per scale
  if constexpr (!std::is_same_v<Pack, NoPack>) {  // Note [Packed columns]: this lane's columns 2 r, 2 r + 1
    static_assert(MT == 1 && NG > 1 && (F == Format::nvfp4 || F == Format::mxfp4), "packed columns");
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int stp = 0; stp < 4; ++stp) {
      uint32_t af[4];
      a_fragment(af, lo, hi, stp, lookup);
      D::mma(d, af, bx[0][stp][0], bx[0][stp][1]);
    }
    float s4[4];  // the scales of d's (row, group): rows g, g, g + 8, g + 8; groups (2 r, 2 r + 1) mod NG
    if constexpr (F == Format::nvfp4) gemv::e4m3x4_to_f32(__byte_perm(s_a, s_b, pack.sel), s4);
    else if constexpr (Fold::value) e8m0x4_value_normal(s_a, s_b, s4);  // Note [MXFP4 without the special bytes]
    else e8m0x4_value(s_a, s_b, s4);  // groups 0, 1 of rows g, g + 8
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[0][e] = fmaf(d[e], s4[e], acc[0][e]);
    return;
  }
  // Block scales of rows g and g+8: sc[0 / 1][group]
  float sc[2][NG];
  // Not at MT = 2 where the fold's chunks fail the vote (ptxas spilled 16 bytes, 3 % slower), nor in the wide
  // instances' copy with the special bytes above kWideMxPairsMaxGx (Note [MXFP4 fp32 path at M > 8])
  constexpr bool kE8m0Pairs = F == Format::mxfp4 && mxfp4_e8m0_pairs(MT, Gx::value, Fold::value);
  if constexpr (kE8m0Pairs) {  // Note [E8M0 pairs] (quant/format.hpp)
    float s4[4];
    if constexpr (Fold::value) e8m0x4_value_normal(s_a, s_b, s4);  // Note [MXFP4 without the special bytes]
    else e8m0x4_value(s_a, s_b, s4);
    sc[0][0] = s4[0];
    sc[0][1] = s4[1];
    sc[1][0] = s4[2];
    sc[1][1] = s4[3];
  }
#pragma unroll
  for (int h = 0; h < 2 && !kE8m0Pairs; ++h) {
    const uint32_t w = h == 0 ? s_a : s_b;
    if constexpr (F == Format::nvfp4) {
      gemv::e4m3x4_to_f32(w, sc[h]);
    } else if constexpr (F == Format::mxfp4) {
      sc[h][0] = e8m0_value_sel(w & 0xFFu);
      sc[h][1] = e8m0_value_sel(w >> 8);
    } else if constexpr (F == Format::nf4) {
      sc[h][0] = __uint_as_float(w);
    } else {
      float g2v = 1.0f;  // G2Later: the caller multiplies the sums by g2
      if constexpr (std::is_same_v<G2, NoG2>) {
        const int row = n0 + g + 8 * h;  // its scale2 group: (row * K/64 + chunk) / 256 (L1-resident)
        g2v = row < p.n ? __ldg(p.scale2 + (static_cast<int64_t>(row) * kc_total + kc0 + kc) / kDqGroup) : 0.0f;
      } else if constexpr (!std::is_same_v<G2, G2Later>) {
        g2v = g2(h);
      }
      float s4[4];
      gemv::e4m3x4_to_f32(w, s4);
      sc[h][0] = s4[0] * g2v;
    }
  }
#pragma unroll
  for (int grp = 0; grp < NG; ++grp) {
    float d[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int e = 0; e < 4; ++e) d[mt][e] = 0.0f;
#pragma unroll
    for (int stp = grp * G; stp < (grp + 1) * G; ++stp) {
      uint32_t af[4];
      a_fragment(af, lo, hi, stp, lookup);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) D::mma(d[mt], af, bx[mt][stp][0], bx[mt][stp][1]);
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      acc[mt][0] = fmaf(d[mt][0], sc[0][grp], acc[mt][0]);
      acc[mt][1] = fmaf(d[mt][1], sc[0][grp], acc[mt][1]);
      acc[mt][2] = fmaf(d[mt][2], sc[1][grp], acc[mt][2]);
      acc[mt][3] = fmaf(d[mt][3], sc[1][grp], acc[mt][3]);
    }
  }
}

// The same, x's fragments read from the slice in shared memory (xs, this lane's offsets xoff).
template <Format F, typename T, int MT, bool XF, typename Lookup, typename Fold>
__device__ __forceinline__ void chunk_mma(float (&acc)[MT][4], const GemmParams& p, const uint8_t* xs,
                                          const int (&xoff)[MT][2], int g, int kc_total, int kc0, int kc, uint2 lo,
                                          uint2 hi, uint32_t s_a, uint32_t s_b, int n0, Lookup lookup, Fold fold) {
  uint32_t bx[MT][4][2];
  x_fragments<MT, XF>(bx, xs, xoff, kc);
  chunk_mma_bx<F, T, MT>(acc, p, bx, g, kc_total, kc0, kc, lo, hi, s_a, s_b, n0, lookup, NoG2{}, fold);
}

// element_value(F, c) of a code c < 16 with neither a branch nor an indexed load: for NF4 a chain of 15
// selects over its values as immediates, written in PTX (the same chain in C++ was compiled back into the
// switch's branch tree, and an indexed constant-bank load per lane serialises the warp's 16 addresses:
// docs/NOTES.md, "The code table"); E2M1's decode is arithmetic already.
template <Format F>
__device__ __forceinline__ float code_value(uint32_t c) {
  if constexpr (!uses_nf4_table(F)) {
    return element_value(F, c);
  } else {
    float v = element_value(F, 0u);
#pragma unroll
    for (uint32_t j = 1; j < 16; ++j)
      asm("{\n .reg .pred q;\n setp.eq.u32 q, %1, %2;\n selp.f32 %0, %3, %0, q;\n}"
          : "+f"(v)
          : "r"(c), "r"(j), "f"(element_value(F, j)));
    return v;
  }
}

// Code byte -> (value(low nibble), value(high nibble)) in T, 32 copies (one per bank) at
// byte * 256 + lane * 4 of lut, so that one PRMT of the code word and the lane makes the address. kShifted: the
// values times 2^120 (Note [NVFP4 shifted pairs]).
// Warp w writes the rows of bytes 16 w .. 16 w + 15. No global memory: runs before the previous
// kernel has finished (PDL).
template <Format F, typename T, bool kShifted = false>
__device__ __forceinline__ void build_lut(uint32_t* lut, int warp, int lane) {
  const uint32_t byte = static_cast<uint32_t>(warp * 16 + (lane & 15));
  const float f = kShifted ? 0x1p120f : 1.0f;
  const uint32_t e = dev::Dt<T>::pack2(code_value<F>(byte & 15) * f, code_value<F>(byte >> 4) * f);
#pragma unroll 4
  for (int j = 0; j < 16; ++j) lut[(warp * 16 + j) * 64 + lane] = __shfl_sync(0xFFFFFFFFu, e, j);
}

// x rows [0, M) of the K slice from chunk kc0 (nk chunks) into xs (mrows rows of pitch bytes; rows
// M..mrows-1 and pieces past the slice zero-filled), by threads tid of nthreads. XF (M <= 2): in the
// order the mma B fragments take them (Note [Decode x fragments]), by plain stores. Else row-major
// for ldmatrix, 16-byte pieces XOR-swizzled by row, by cp.async (committed; the caller waits).
template <bool XF>
__device__ __forceinline__ void load_x(uint8_t* xs, const GemmParams& p, int pitch, int mrows, int nk, int kc0,
                                       int tid, int nthreads) {
  if constexpr (XF) {
    const int per_row = pitch / 16;  // 16-byte pieces of 8 k values
    const uint4* xg = static_cast<const uint4*>(p.x);
    for (int i = tid; i < mrows * per_row; i += nthreads) {
      const int row = i / per_row, ch = i % per_row;
      const bool v = row < p.m && ch < nk * 8;
      const uint4 w = v ? __ldg(xg + (static_cast<int64_t>(row) * p.k + kc0 * 64) / 8 + ch) : make_uint4(0, 0, 0, 0);
      const int s = (ch % 8) >> 1, hh = ch & 1;  // the piece's k16 step and k half
      uint8_t* d = xs + row * pitch + (ch / 8) * 128 + (s & 1) * 8 + hh * 4;
      const uint32_t wr[4] = {w.x, w.y, w.z, w.w};  // pair r: k 2 r, 2 r + 1 of the piece
#pragma unroll
      for (int r2 = 0; r2 < 4; ++r2) *reinterpret_cast<uint32_t*>(d + (((2 * r2 + (s >> 1)) ^ (row & 7)) * 16)) = wr[r2];
    }
  } else {
    const int per_row = pitch / 16;
    const char* xg = static_cast<const char*>(p.x);
    for (int i = tid; i < mrows * per_row; i += nthreads) {
      const int row = i / per_row, ch = i % per_row;
      const bool v = row < p.m && ch < nk * 8;
      dev::cp_async16(xs + row * pitch + ((ch ^ (row & 7)) * 16),
                      xg + (static_cast<int64_t>(v ? row : 0) * p.k + kc0 * 64 + (v ? ch : 0) * 8) * 2, v ? 16 : 0);
    }
    dev::cp_async_commit();
  }
}

// This lane's x addresses in the slice, chunk 0 (chunk kc at + kc * 128). XF: fragment units 2 r + h
// of x row g + 8 mt (aliased below mrows). Else ldmatrix: x row (lane & 7) + 8 mt (aliased), matrix
// mi = lane / 8 = step 2h + mi / 2, k half mi % 2; 16-byte pieces XOR-swizzled by row.
template <int MT, bool XF>
__device__ __forceinline__ void x_offsets(int (&xoff)[MT][2], int lane, int mrows, int pitch) {
  const int g = lane >> 2, r = lane & 3;  // the mma fragment's row group and pair
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if constexpr (XF) {
        const int row = (g + 8 * mt) & (mrows - 1);
        xoff[mt][h] = row * pitch + (((2 * r + h) ^ (row & 7)) * 16);
      } else {
        const int mi = lane >> 3;
        const int row = ((lane & 7) + 8 * mt) & (mrows - 1);
        xoff[mt][h] = row * pitch + ((((2 * h + (mi >> 1)) * 2 + (mi & 1)) ^ (row & 7)) * 16);
      }
    }
}

struct Args {
  int kcs;         // chunks per CTA
  int kcw;         // chunks per warp
  int mrows;       // x rows in shared memory (pow2 >= M)
  int tiles;       // 16-row tiles per row block (1, 2, 4, 8): warp w owns tile w % tiles, K run w / tiles
  int row_blocks;  // row blocks; CTA (s, y) does blocks y, y + gridDim.y, ...
};

}  // namespace gemv

// Note [Split sums]. With K split over a cluster, each row block ends with: write this CTA's sums to
// `part`, cluster barrier, read every rank's `part` for this rank's rows, and a second barrier so that
// no CTA overwrites or frees its `part` while others read it. The SPLIT instance (launched for S > 1)
// turns that second barrier into an arrive (release) whose wait (acquire) comes just before `part`
// is next written, or at exit: a rank no longer stalls on the slowest one twice per block.
// Measured (H100, 2026-11-22, bench_fp4.py, 3 alternations with the old kernels in one call):
// 8192x28672 M = 8 (S8T8, up to 5 blocks per cluster) 72.4-73.3 -> 68.4-68.7 us nvfp4, M = 16
// 86.7-87.5 -> 83.9-85.0; 4096x14336 M = 16 32.2-33.2 -> 31.1-31.5; forced multi-block plans 9-14 %
// faster; one-block plans (8192^2 M = 16) unchanged. The S = 1 instance keeps the two-barrier form
// (reachable only if launched with S > 1): the same change there, or removing the cluster path from
// it, altered ptxas's allocation of the main loop (spills of 8-24 bytes in the NF4 / MXFP4 kernels,
// NVFP4 S = 1 cells 1-7 % slower; docs/NOTES.md). As it stands the S = 1 instances' SASS is identical
// to the kernels before the split, and the SPLIT instances' to the variant timed above (apart from the
// parameter offsets, since GemmParams holds the workspace).
//
// Note [Workspace split]. A cluster holds at most 8 CTAs and must fit in one GPC, so the H100 runs 15
// clusters of 8 (120 SMs) or 30 of 4; with row blocks that do not divide evenly the busiest cluster
// does up to 40 % more than the average (4096x14336 M = 16, S8T8: 32 blocks on 15 clusters, 3 for the
// busiest). The WS instance splits K without clusters: the S CTAs of a row block are any S CTAs of the
// grid (S x resident / S of them, persistent along N as before). Each writes its CTA sums of row block
// rb to its slot of the workspace (fp32, [row block][slice][rows][16]), fences, and counts itself in
// on the block's counter; the CTA that arrives last reads the S slots in slice order, stores y and
// sets the counter back to 0. So the sums are those of the cluster path, in the same order (y is the
// same bits for the same (S, T): checked on the GPU for four formats), nothing waits, and every launch
// leaves the counters at 0 for the next. The workspace is the launcher's (quant/splitk_workspace.hpp): one
// per device and stream for eager launches, one per capture for graphs.
// Measured (H100, 2026-11-22, bench_fp4.py: CUDA-graph replays, the plan's choice, two alternations with
// the cluster-only kernels, µs): 4096x14336 M = 16 (S4T8 against S8T8 in clusters) nvfp4 31.3-31.6 ->
// 24.6-25.0, nf4 29.8 -> 24.3-24.6, mxfp4 32.5-32.6 -> 24.1-24.5, nf4_dq 33.7-33.9 -> 25.1-25.6;
// 8192x28672 M = 8 (S4T8 against S8T8) nvfp4 67.1-67.4 -> 63.4-63.5, nf4_dq 72.8-73.7 -> 62.4. It loses
// where clusters balance as well (8192^2 M = 16 S2T8 27.5 against 26.0-26.5; 8192x28672 M = 16 S8T8
// 83.4-83.5 against 82.1-82.8), and the cost model keeps the clusters there (Note [Decode plan cost]).
// The last CTA must have its S loads in flight together: summed in a loop of one load per trip
// (#pragma unroll 1, tried against a spill), 8192x28672 M = 16 took 97 us instead of 83.
//
// MT: 8-column mma tiles (1: M <= 8, 2: M <= 16). XF: x in fragment order (M <= 2). SPLIT: launched
// with K split over S > 1 CTAs: a cluster (Note [Split sums]), or with WS the workspace (Note
// [Workspace split]).
template <Format F, typename T, int MT, bool XF, bool SPLIT, bool WS = false>
__global__ void __launch_bounds__(kGemvThreads, kGemvMinBlocks) fp4_gemv_kernel(const GemmParams p, const gemv::Args a) {
  using D = dev::Dt<T>;
  constexpr int SB = chunk_scale_bytes(F);
  constexpr int U = kGemvBatch;
  extern __shared__ __align__(128) uint8_t smem[];
  uint32_t* lut = reinterpret_cast<uint32_t*>(smem);             // [byte][64 words]: words 0..31 = lanes' copies
  float* red = reinterpret_cast<float*>(smem + kGemvLutBytes);  // [16 warps][16 rows][16 columns]
  [[maybe_unused]] float* part = red + kGemvWarps * kGemvRows * 16;  // [16 * tiles rows][16 columns] (clusters)
  uint8_t* xs = smem + kGemvLutBytes + kGemvRedBytes;          // x slice

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, r = lane & 3;
  const int kc_total = p.k / 64;
  const int kc0 = blockIdx.x * a.kcs;              // this CTA's first chunk
  const int nk = min(a.kcs, kc_total - kc0);       // chunks of this slice
  const int tile = warp % a.tiles, krun = warp / a.tiles;
  const int pitch = static_cast<int>(gemv_x_pitch(a.kcs));
  const int rows = kGemvRows * a.tiles;                           // rows per row block
  const int w0 = krun * a.kcw, w1 = min(w0 + a.kcw, nk);          // this warp's chunks of the slice
  // The CTA's work is a stream of batches: row blocks blockIdx.y, + gridDim.y, ... (persistent
  // along N), each nb batches of U chunks (chunks >= w1 are neither read nor computed). Every
  // warp has the same count, so the per-block __syncthreads match.
  const int nb = (a.kcw + U - 1) / U;
  const int my_blocks = (a.row_blocks - static_cast<int>(blockIdx.y) + static_cast<int>(gridDim.y) - 1) /
                        static_cast<int>(gridDim.y);
  const int nq = my_blocks * nb;
  const int ystep = static_cast<int>(gridDim.y);

  gemv::pdl_launch_dependents();
  // L2 prefetch of the first row block's codes and scales while the previous kernel drains. A
  // prefetch returns no data to this SM and L2 is the device's point of coherence, so it is safe
  // before pdl_wait() even if the previous kernel wrote the weights. Measured (H100, nvfp4,
  // back-to-back calls): 8192^2 M = 1 22.35 -> 21.14 us, 4096^2 M = 16 12.3 -> 11.0.
  if (static_cast<int>(blockIdx.y) < a.row_blocks) {
    const int n0 = static_cast<int>(blockIdx.y) * rows;
    if (tid < a.tiles) {  // a tile's chunks of this slice: nk contiguous 512-byte blocks
      if (n0 + kGemvRows * tid < p.n)
        gemv::prefetch_l2(p.codes + gemm_chunk(n0 + kGemvRows * tid, kc0, p.k), nk * 512);
    } else if (tid >= kGemvThreads / 2 && tid - kGemvThreads / 2 < a.tiles) {  // and its scales: one run
      const int t = tid - kGemvThreads / 2;
      if (n0 + kGemvRows * t < p.n) gemv::prefetch_l2(p.scales + gemm_scale_chunk(n0 + kGemvRows * t, kc0, p.k, SB), nk * 16 * SB);
    }
  }
  gemv::build_lut<F, T>(lut, warp, lane);
  gemv::pdl_wait();

  // A batch: U chunks of rows g and g+8 of this warp's tile (8 code bytes each: this lane's
  // fragment bytes) and their scales.
  struct Batch {
    uint2 ca[U], cb[U];
    uint32_t sa[U], sb[U];
  };
  // The load cursor: the next batch's row block and place in it, and its row and scale pointers
  // (advanced per batch; 64-bit products only when the block changes).
  struct Cursor {
    int blk, sub;
    bool live;
    const uint8_t *ca, *sa;
  };
  auto start_block = [&](Cursor& cu, int blk) {
    const int n0 = blk * rows + tile * kGemvRows;
    cu.blk = blk;
    cu.sub = 0;
    // Rows n..Npad-1 of a live tile exist in the GEMM layout and have zero scales: their
    // products are 0 or, for codes * x beyond fp32, only ever reach rows that are not stored.
    cu.live = blk < a.row_blocks && n0 < p.n;
    const int64_t kc = kc0 + w0;
    cu.ca = p.codes + gemm_chunk(n0 + g, kc, p.k) + r * 8;  // row g + 8: 256 bytes on
    cu.sa = p.scales + gemm_scale_chunk(n0, kc, p.k, SB) + g * 2 * SB;  // rows g, g + 8: adjacent
  };
  auto load = [&](Batch& bt, Cursor& cu) {  // nothing is read beyond the warp's run, the stream or N
    const int nv = cu.live ? min(U, w1 - (w0 + cu.sub * U)) : 0;
    const uint8_t* sa = cu.sa;
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const bool v = j < nv;
      bt.ca[j] = v ? gemv::ld_code8(cu.ca + j * 512) : make_uint2(0, 0);  // 256 contiguous bytes per warp
      bt.cb[j] = v ? gemv::ld_code8(cu.ca + j * 512 + 256) : make_uint2(0, 0);
      gemv::ld_scales<SB>(sa, v, bt.sa[j], bt.sb[j]);
      sa += 16 * SB;
    }
    cu.ca += U * 512;
    cu.sa = sa;
    if (++cu.sub == nb) start_block(cu, cu.blk + ystep);
  };
  // x's slice: XF stored before the first weight loads are issued, else by cp.async issued before
  // the first weight batches: issued after them, x's requests queued behind ~64 KB of weights per
  // SM (trace, 8192^2 M = 1: compute began 5 us after pdl_wait).
  gemv::load_x<XF>(xs, p, pitch, a.mrows, nk, kc0, tid, kGemvThreads);
  Batch b0, b1;
  Cursor cur;
  start_block(cur, static_cast<int>(blockIdx.y));
  load(b0, cur);
  load(b1, cur);
  if constexpr (!XF) dev::cp_async_wait<0>();
  __syncthreads();

  int xoff[MT][2];
  gemv::x_offsets<MT, XF>(xoff, lane, a.mrows, pitch);
  const uint8_t* lutb = smem;
  const uint32_t lane4 = static_cast<uint32_t>(lane) * 4;
  // Table entry of byte i (0..3) of w: address byte(w, i) * 256 + lane * 4 = one PRMT.
  auto lookup = [&](uint32_t w, int i) {
    return *reinterpret_cast<const uint32_t*>(lutb + __byte_perm(lane4, w, 0x1100u | (static_cast<uint32_t>(i + 4) << 4)));
  };
  float acc[MT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[mt][e] = 0.0f;

  // One chunk kc (of the slice): codes lo (row g) / hi (row g+8), raw scales s_a / s_b; n0: the tile's first row.
  // fold: the MXFP4 fold by the range flag, without a check (Note [MXFP4 range flag]), or not.
  auto compute = [&](auto fold, int kc, uint2 lo, uint2 hi, uint32_t s_a, uint32_t s_b, int n0) {
    gemv::chunk_mma<F, T, MT, XF>(acc, p, xs, xoff, g, kc_total, kc0, kc, lo, hi, s_a, s_b, n0, lookup, fold);
  };

  const float gs = F == Format::nvfp4 ? __ldg(p.scale2) : 1.0f;
  const T* bias = static_cast<const T*>(p.bias);
  T* y = static_cast<T*>(p.y);
  auto store = [&](int n, int m, float v) {
    v *= gs;
    if (bias) v += D::to_f(bias[n]);
    y[static_cast<int64_t>(m) * p.n + n] = D::from_f(v);
  };
  const int runs = kGemvWarps / a.tiles;
  auto cta_sum = [&](int i) {  // i = row * 16 + column of the row block: its warps' partials in warp order
    const int t = i / (16 * kGemvRows), rt = i % (16 * kGemvRows);
    float v = 0.0f;
    for (int q = 0; q < runs; ++q) v += red[(q * a.tiles + t) * kGemvRows * 16 + rt];
    return v;
  };
  // Row block rb done: sum the partials (the next batches are in flight meanwhile).
  auto finish = [&](int rb) {
    const int n_blk = rb * rows;
    __syncthreads();  // every thread is done reading the previous block's partials
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        red[(warp * kGemvRows + g + 8 * (e >> 1)) * 16 + mt * 8 + 2 * r + (e & 1)] = acc[mt][e];
        acc[mt][e] = 0.0f;
      }
    __syncthreads();
    if constexpr (WS) {  // Note [Workspace split]
      const int S = static_cast<int>(gridDim.x);
      const int64_t slot = static_cast<int64_t>(rows) * 16;
      float* mine = p.ws_part + (static_cast<int64_t>(rb) * S + blockIdx.x) * slot;
      for (int i = tid; i < rows * 16; i += kGemvThreads)
        if (i % 16 < p.m) __stcg(mine + i, cta_sum(i));
      __threadfence();  // this CTA's sums are visible device-wide before it counts itself in
      __syncthreads();
      __shared__ int last;
      if (tid == 0) last = atomicAdd(p.ws_count + rb, 1u) == static_cast<unsigned>(S - 1);
      __syncthreads();
      if (last) {
        __threadfence();
        const float* all = p.ws_part + static_cast<int64_t>(rb) * S * slot;
        for (int i = tid; i < rows * 16; i += kGemvThreads) {
          const int n = n_blk + i / 16, m = i % 16;
          if (m < p.m && n < p.n) {
            float v = 0.0f;
#pragma unroll
            for (int q = 0; q < kGemvMaxSplit; ++q)  // the S loads in flight together, summed in slice order
              if (q < S) v += __ldcg(all + q * slot + i);
            store(n, m, v);
          }
        }
        if (tid == 0) p.ws_count[rb] = 0;  // for the next call on this stream
      }
      return;
    }
    if (gridDim.x == 1) {  // the whole K in this CTA
      for (int i = tid; i < rows * 16; i += kGemvThreads) {
        const int n = n_blk + i / 16, m = i % 16;
        if (m < p.m && n < p.n) store(n, m, cta_sum(i));
      }
      return;
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    // Split K: the gridDim.x CTAs of this row block are one cluster; sum their partials
    // through distributed shared memory in rank order (deterministic). Note [Split sums].
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    if constexpr (SPLIT)  // every rank is done reading this CTA's previous partials (arrive below)
      if (rb != static_cast<int>(blockIdx.y)) gemv::cluster_wait();
    for (int i = tid; i < rows * 16; i += kGemvThreads) part[i] = cta_sum(i);
    cluster.sync();
    const int S = static_cast<int>(gridDim.x), rank = static_cast<int>(blockIdx.x);
    const int per = (rows + S - 1) / S;
    const int r0 = rank * per, r1 = min(rows, r0 + per);
    for (int i = tid; i < (r1 - r0) * p.m; i += kGemvThreads) {
      const int rl = r0 + i / p.m, m = i % p.m;
      const int n = n_blk + rl;
      if (n >= p.n) continue;
      float v = 0.0f;
      for (int q = 0; q < S; ++q) v += cluster.map_shared_rank(part, q)[rl * 16 + m];
      store(n, m, v);
    }
    if constexpr (SPLIT) gemv::cluster_arrive();  // done reading: waited for above, or at exit
    else cluster.sync();  // keep this CTA's partials alive until every rank has read them
#endif
  };
  // The compute cursor: the row block and place of the batch being computed.
  int cblk = static_cast<int>(blockIdx.y), csub = 0;
  auto run = [&](auto fold, const Batch& bt) {
    const int n0 = cblk * rows + tile * kGemvRows;
    const int c = w0 + csub * U;
    if (n0 < p.n) {
      if (c + U <= w1) {  // whole batch: straight-line, so the chunks' latency chains interleave
#pragma unroll
        for (int j = 0; j < U; ++j) compute(fold, c + j, bt.ca[j], bt.cb[j], bt.sa[j], bt.sb[j], n0);
      } else {
#pragma unroll
        for (int j = 0; j < U; ++j)
          if (c + j < w1) compute(fold, c + j, bt.ca[j], bt.cb[j], bt.sa[j], bt.sb[j], n0);
      }
    }
  };
  auto next = [&]() {  // after a batch (and the loads that follow it): sum a finished block
    if (++csub == nb) {
      finish(cblk);
      csub = 0;
      cblk += ystep;
    }
  };

  // Two batches in flight: compute one while the other loads, across row blocks (a block's
  // partials are summed after the next batch's loads are issued). nq is the CTA's: the
  // __syncthreads of finish() are uniform.
  // __syncthreads: uniform, in either copy of the loop (Note [MXFP4 range flag])
  gemv::with_fold<F, T, MT>(gemv::all_fold<F, T, MT>(p), [&](auto fold) {
    for (int q = 0; q < nq; q += 2) {
      run(fold, b0);
      load(b0, cur);
      next();
      if (q + 1 < nq) {
        run(fold, b1);
        load(b1, cur);
        next();
      }
    }
  });
  if constexpr (SPLIT && !WS)  // keep this CTA's partials alive until every rank has read the last block's
    if (gridDim.x > 1 && nq > 0) gemv::cluster_wait();
}

// VSTACK_GEMV_SPLIT=<s> forces the split of the decode kernel (1..8, where x's slice fits): for
// benchmarks of the plan; unset in normal use.
inline int forced_gemv_split() {
  static const int v = env_int_in("VSTACK_GEMV_SPLIT", 1, kGemvMaxSplit, 0);
  return v;
}

// VSTACK_GEMV_TILES=<t> (1, 2, 4, 8) forces the tiles per CTA, likewise.
inline int forced_gemv_tiles() {
  static const int v = env_pow2("VSTACK_GEMV_TILES", 8);
  return v;
}

// VSTACK_GEMV_WS=0 / 1: S > 1 only through clusters / only through the workspace (benchmarks and tests
// of the plans); unset: the plan's choice.
inline int forced_gemv_ws() {
  static const int v = env_flag("VSTACK_GEMV_WS");
  return v;
}

template <Format F, typename T, int MT, bool XF, bool SPLIT, bool WS = false>
cudaError_t gemv_smem_optin(int smem_optin) {
  static const cudaError_t attr = cudaFuncSetAttribute(
      fp4_gemv_kernel<F, T, MT, XF, SPLIT, WS>, cudaFuncAttributeMaxDynamicSharedMemorySize, gemv_smem_cap(smem_optin));
  return attr;
}

// Persistent CTAs along N: as many row-block workers (CTAs for s = 1, clusters of s CTAs else) as
// run at once with smem bytes each. Asked once per (s, smem) and kernel (single device assumed, as
// for the smem opt-in); the plan's model where the occupancy API fails.
template <Format F, typename T, int MT, bool XF, bool SPLIT, bool WS = false>
int64_t gemv_workers(int s, int64_t smem, int sms) {
  struct Entry {
    int split = 0;
    int64_t smem = 0;
    int64_t n = 0;
  };
  static Entry cache[64];
  for (const Entry& e : cache)
    if (e.split == s && e.smem == smem) return e.n;
  int n = 0;
  cudaError_t err;
  if (s == 1) {
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, fp4_gemv_kernel<F, T, MT, XF, SPLIT, WS>, kGemvThreads,
                                                        static_cast<size_t>(smem));
    n *= sms;
  } else {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(static_cast<unsigned>(s));
    cfg.blockDim = dim3(kGemvThreads);
    cfg.dynamicSmemBytes = static_cast<size_t>(smem);
    cudaLaunchAttribute la{};
    la.id = cudaLaunchAttributeClusterDimension;
    la.val.clusterDim.x = static_cast<unsigned>(s);
    la.val.clusterDim.y = 1;
    la.val.clusterDim.z = 1;
    cfg.attrs = &la;
    cfg.numAttrs = 1;
    err = cudaOccupancyMaxActiveClusters(&n, fp4_gemv_kernel<F, T, MT, XF, SPLIT>, &cfg);
  }
  int64_t w = n;
  if (err != cudaSuccess || n < 1) {
    (void)cudaGetLastError();  // not this call's error: clear it
    w = gemv_workers_model(sms, s);
  }
  for (Entry& e : cache)
    if (e.split == 0) {
      e = Entry{s, smem, w};
      break;
    }
  return w;
}

template <Format F, typename T, int MT, bool XF>
cudaError_t launch_gemv_mt(const GemmParams& p0, cudaStream_t stream) {
  GemmParams p = p0;
  if (const cudaError_t e = gemv_smem_optin<F, T, MT, XF, false>(p.smem_optin); e != cudaSuccess) return e;
  const bool clusters = kernels::has_sm90_features(p.cc);  // an sm_80 build on an H100 has no cluster sums
  const int64_t x_max = gemv_x_max(p.smem_optin);
  if (clusters)
    if (const cudaError_t e = gemv_smem_optin<F, T, MT, XF, true>(p.smem_optin); e != cudaSuccess) return e;
  const int fw = forced_gemv_ws();
  int64_t ws_ctas = 0;  // CTAs of the workspace kernel that run at once (one per SM: registers)
  if (fw != 0) {
    if (const cudaError_t e = gemv_smem_optin<F, T, MT, XF, true, true>(p.smem_optin); e != cudaSuccess) return e;
    ws_ctas = gemv_workers<F, T, MT, XF, true, true>(1, gemv_smem_cap(p.smem_optin), p.sms);
  }
  auto workers_of = [&](int s) -> int64_t {  // 0 where x's slice does not fit S = s
    const GemvPlan q = gemv_plan_for(p.m, p.n, p.k, s, 1, 1, false, x_max);
    if (!q.ok) return 0;
    return s == 1 ? gemv_workers<F, T, MT, XF, false>(s, q.smem, p.sms) : gemv_workers<F, T, MT, XF, true>(s, q.smem, p.sms);
  };
  int64_t workers[kGemvMaxSplit + 1] = {};
  for (int s = 1; s <= (clusters ? kGemvMaxSplit : 1); s *= 2) workers[s] = workers_of(s);
  const bool cluster_plans = clusters && fw != 1;
  GemvPlan pl = plan_gemv(p.m, p.n, p.k, p.sms, cluster_plans, workers, ws_ctas, x_max);
  if (!pl.ok) return cudaErrorInvalidConfiguration;
  const int fs = cluster_plans || ws_ctas > 0 ? forced_gemv_split() : 0, ft = forced_gemv_tiles();
  if (fs > 0 || ft > 0) {  // benchmarks of the plan: a forced (S, T) where x's slice fits
    const int s = fs > 0 ? fs : pl.split;
    const bool ws = s > 1 && (s == pl.split ? pl.ws : !cluster_plans);
    const int64_t w = ws ? ws_ctas / s : workers[s] > 0 ? workers[s] : workers_of(s);  // S = 3, 5, 6, 7 not asked above
    if (const GemvPlan f = gemv_plan_for(p.m, p.n, p.k, s, ft > 0 ? ft : pl.tiles, w, ws, x_max); f.ok) pl = f;
  }
  if (pl.ws) {  // Note [Workspace split]; without a workspace (a stream capture), the plan without one
    const SplitKWorkspace ws = splitk_workspace(stream, gemv_ws_floats(pl), pl.row_blocks);
    p.ws_part = ws.part;
    p.ws_count = ws.count;
    if (!ws.part) {
      pl = plan_gemv(p.m, p.n, p.k, p.sms, clusters, workers, 0, x_max);
      if (!pl.ok) return cudaErrorInvalidConfiguration;
    }
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(pl.split), static_cast<unsigned>(pl.workers));
  cfg.blockDim = dim3(kGemvThreads);
  cfg.dynamicSmemBytes = static_cast<size_t>(pl.smem);
  cfg.stream = stream;
  cudaLaunchAttribute la[2];
  int na = 0;
  if (pl.split > 1 && !pl.ws) {
    la[na].id = cudaLaunchAttributeClusterDimension;
    la[na].val.clusterDim.x = static_cast<unsigned>(pl.split);
    la[na].val.clusterDim.y = 1;
    la[na].val.clusterDim.z = 1;
    ++na;
  }
  if (clusters) {  // programmatic dependent launch: the table and the L2 prefetch while the previous kernel drains
    la[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    la[na].val.programmaticStreamSerializationAllowed = 1;
    ++na;
  }
  cfg.attrs = la;
  cfg.numAttrs = static_cast<unsigned>(na);
  gemv::Args a{static_cast<int>(pl.kc_per_cta), static_cast<int>(pl.kc_per_warp), pl.mrows, pl.tiles,
               static_cast<int>(pl.row_blocks)};
  if (pl.ws) return cudaLaunchKernelEx(&cfg, fp4_gemv_kernel<F, T, MT, XF, true, true>, p, a);
  return pl.split > 1 ? cudaLaunchKernelEx(&cfg, fp4_gemv_kernel<F, T, MT, XF, true>, p, a)
                      : cudaLaunchKernelEx(&cfg, fp4_gemv_kernel<F, T, MT, XF, false>, p, a);
}

template <Format F, typename T>
cudaError_t launch_gemv(const GemmParams& p, cudaStream_t stream) {
  if (p.m > 8) return launch_gemv_mt<F, T, 2, false>(p, stream);
  if (p.m > 2) return launch_gemv_mt<F, T, 1, false>(p, stream);
  return launch_gemv_mt<F, T, 1, true>(p, stream);
}

}  // namespace vstack::quant
