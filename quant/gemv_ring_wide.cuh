// The decode ring with wide row blocks (sm_90): Note [Wide row blocks] in quant/gemv_plan.hpp. The
// producer, the slots and the chunk's arithmetic are the ring kernel's (quant/gemv_ring.cuh); what
// differs is the order of the stages and where x comes from.
//
// A CTA owns one row block of GX tiles (one round: the launch has ceil(tiles / GX) <= SMs CTAs). Its
// stages run slice-major: slice s (chunks 16 s .. 16 s + 15 of K), tile 0 .. GX - 1. Per slice the
// producer loads x's 16 chunks x M rows (one box copy, 128-byte swizzled) into one of two x buffers
// and then one stage per tile (the G = 1 boxes of codes and scales: 16 chunks of one tile). Consumer
// warp w of W = 16 / CW reads the x fragments of its chunks w, w + W, ... once per slice, releases the x
// buffer, and computes those chunks of each of the GX stages into that tile's sums (CW = 2 for the NF4
// formats: Note [Two chunks a warp] in quant/gemv_plan.hpp). A stage of a tile past N gets no copy: the
// producer arrives on its full barrier without bytes, and those stale rows are never stored.
//
// The ring has R GX slots (wide_ring_slots: R slices of K a round), so the consumers' loop, unrolled over
// R slices x GX tiles, waits on and reads slot (s mod R) GX + t at a constant address and flips its
// phase once a round; the producer walks the same slots in order.
//
// Shared memory: region A holds the barriers and, from kWideXAddr, the x buffers that fit there (both at
// MT = 1, one at MT = 2: 16 chunks x 8 or 16 rows x 128 B, 16 / 32 KB, 1024-aligned for the swizzle);
// region B the other x buffer, then the slots (codes and scales of 16 chunks, 1 KB-aligned). After the
// last stage the row block's sums, [W warps][8 MT columns][tiles x 16 rows] fp32, alias everything from
// kWideXAddr on (x buffers, table, region B: all free by then), all GX tiles at once (wide_pass); a
// thread per (row, column) adds the W warps' sums in warp order (deterministic).
//
// Note [NF4_DQ scale2 after the sums]. Above kWideDq2Max the launcher takes NF4_DQ only where K's blocks a row
// (kc) divide a scale2 group (ring_wide_instance's check in quant/gemv_plan.hpp), so one g2 serves all of a row's
// chunks. The chunk then multiplies its mma result by the E4M3 absmax alone (gemv::G2Later), and each warp's
// sums are multiplied by their rows' g2 once, after the loop: y = g2 * sum_b(a_b * mma_b) where the ring and the
// narrower instances compute sum_b(fl(a_b * g2) * mma_b). The per-block rounding of a_b * g2 goes and one
// rounding of the sum by g2 comes, inside quant/FORMAT.md's bound. The g2 loads stay before the loop: loaded in
// the epilogue instead (docs/labs/s43_dq_g2_epilogue.patch) they were an L2 round trip after the last barrier,
// 0.7-2 % slower. As built (H200, 2026-12-02, 3 rotated rounds, bench/RESULTS.md "Session 44"): 0.98-0.99 at
// M = 9..16 on 8192², 10240x4096 and 12288x4096, 0.99-1.00 at 14336x4096 and at M <= 8 (12288x4096 0.99).
// Range: sum_b(a_b * mma_b) must fit fp32 without g2 (a_b <= 448), so bf16 x beyond about 2^105 at K = 16384
// overflows here where the per-chunk product would not (FORMAT.md's range limit); f16 x cannot reach it. A g2
// of Inf or NaN (quantize never writes one: G / 448 of a finite G, or 1) gives a non-finite y on both paths,
// Inf here where a zero block (a = 0) makes the per-chunk product NaN.
#pragma once

#include "quant/gemv_ring.cuh"

namespace vstack::quant {

// MT: 8-column mma tiles (1: M <= 8, 2: M <= 16). GX: tiles per row block (ring_wide_instance). PK: packed
// columns (wide_pack, Note [Packed columns] in quant/gemv_plan.hpp).
// Registers (wide_threads, quant/gemv_plan.hpp): the sums take GX x MT x 4 of them. A producer warpgroup,
// whose lanes but one only lend registers (setmaxnreg): 112 for 16 consumer warps (96 is the most a
// 544-thread CTA launches with: __maxnreg__(120) compiled, but those instances failed ring_fits on the
// H100; at 96, MT = 1 spilled 8-32 bytes for MXFP4 at GX >= 5 and MT = 2 8-64 bytes from GX = 4 on), 240
// for 8. ptxas allocates the consumers' code up to the setmaxnreg count (R237 in the CW = 2 SASS), not the
// launch's. docs/NOTES.md has the measurements.
// The instance's chunks a consumer warp (wide_chunk_warps).
template <Format F, typename T, int MT, int GX, bool PK>
inline constexpr int kWideCW = wide_chunk_warps(F, std::is_same_v<T, __nv_bfloat16>, MT, GX, PK);
template <Format F, typename T, int MT, int GX, bool PK = false>
__global__ void __launch_bounds__(wide_threads(kWideCW<F, T, MT, GX, PK>), 1)
    fp4_gemv_wide_kernel(const GemmParams p, const __grid_constant__ RingArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using D = dev::Dt<T>;
  namespace hp = hopper;
  constexpr int SB = chunk_scale_bytes(F);
  constexpr int64_t kX = wide_x_bytes(MT);
  constexpr int64_t kCodes = kRingChunks * 512;
  constexpr int64_t kSlot = wide_slot_bytes(SB);
  static_assert(kX % kRingSlotAlign == 0, "the slots stay 1 KB-aligned after the x buffers");
  extern __shared__ __align__(128) uint8_t smem[];
  constexpr int kR = wide_ring_slices(GX, SB, MT);  // slices of K a round of the ring
  constexpr int slots = wide_ring_slots(GX, SB, MT);  // as the launch's wide_layout (a.slots is not read)
  // chunks of a stage per consumer warp: warp, warp + W, ...; two add into one set of sums where each chunk's
  // mma starts from zero and is added by FFMA (wide_chunks_by_ffma)
  constexpr int CW = kWideCW<F, T, MT, GX, PK>;
  constexpr int W = wide_warps(CW);  // consumer warps
  constexpr bool kEarlyX = wide_early_x(MT);  // Note [Early x]
  constexpr int NG = chunk_groups(F);
  static_assert(!PK || (MT == 1 && NG > 1), "packed columns: one column tile, several scale groups");
  // Note [NVFP4 shifted pairs]: the table times 2^120, rebuilt without the factor for a tensor whose range flag
  // does not hold
  constexpr bool kShifted = gemv::kShiftedPairs<F, T, MT, GX>;
  const uint32_t base = hp::smem_addr(smem);
  if (base > kRingBaseMax) __trap();  // the layout assumes it (Note [Ring kernel])
  const int64_t lut_off = kRingLutAddr - base;
  uint8_t* const region_b = smem + lut_off + kGemvLutBytes;
  // the x buffers: the first wide_x_in_a in region A from kWideXAddr, the others in B, then the slots
  constexpr int kXA = wide_x_in_a(MT);
  uint8_t* const xa = smem + (kWideXAddr - base);
  auto xbuf = [&](int i) { return i < kXA ? xa + i * kX : region_b + (i - kXA) * kX; };
  uint8_t* const wbuf = region_b + (2 - kXA) * kX;
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem);  // region A: the barriers (the sums alias B)
  uint64_t* const empty = full + kRingMaxSlots;
  uint64_t* const xfull = empty + kRingMaxSlots;  // [2]
  uint64_t* const xempty = xfull + 2;             // [2]

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, r = lane & 3;
  const int kc_total = p.k / 64;
  const int tiles = (p.n + kGemvRows - 1) / kGemvRows;
  const int t0 = static_cast<int>(blockIdx.x) * GX;           // the row block's first tile
  const int S = (kc_total + kRingChunks - 1) / kRingChunks;  // slices of K
  const int early = min(min(a.early, slots), S * GX);        // stages whose weights precede the wait

  const uint32_t w_bytes = static_cast<uint32_t>(kRingChunks * (512 + 16 * SB));
  const uint32_t x_bytes = static_cast<uint32_t>(kRingChunks * a.l.x_pitch);
  uint64_t pol_w = 0, pol_x = 0;
  // stage i's weight boxes into slot `slot`: slice i / GX of tile t0 + i % GX; a tile past N gets no
  // copy (the phase completes; its rows are never stored)
  auto load_stage = [&](int i, int slot) {
    const int t = t0 + i % GX;
    if (t >= tiles) {
      hp::mbar_arrive(&full[slot]);
      return;
    }
    uint8_t* dst = wbuf + slot * kSlot;
    hp::mbar_arrive_expect_tx(&full[slot], w_bytes);
    hp::tma_load_3d(dst, &a.mw, &full[slot], 0, i / GX * kRingChunks, t, pol_w);
    hp::tma_load_2d(dst + kCodes, &a.ms, &full[slot], i / GX * kRingChunks * kScaleWords<F>, t, pol_w);
  };

  // slice s's x into buffer xs once its phase xph ^ 1 is free (the first use of a buffer passes at once)
  auto load_x = [&](int s, int xs, int xph) {
    hp::mbar_wait(&xempty[xs], xph ^ 1);
    hp::mbar_arrive_expect_tx(&xfull[xs], x_bytes);
    hp::tma_load_3d(xbuf(xs), &a.mx, &xfull[xs], 0, 0, s * kRingChunks, pol_x);
  };

  gemv::pdl_launch_dependents();
  if (warp < W) {
#pragma unroll
    for (int c = 0; c < CW; ++c)
      gemv::build_lut<F, T, kShifted>(reinterpret_cast<uint32_t*>(smem + lut_off), warp + W * c, lane);
    if constexpr (PK)  // the x buffers' zero lines (the box copies fill lines below them)
      if (warp < 2) reinterpret_cast<uint32_t*>(xbuf(warp) + kWideZeroLine * 128)[lane] = 0u;
  } else if (warp == W && lane == 0) {
    for (int s = 0; s < slots; ++s) {
      hp::mbar_init(&full[s], 1);
      hp::mbar_init(&empty[s], W);
    }
    for (int s = 0; s < 2; ++s) {
      hp::mbar_init(&xfull[s], 1);
      hp::mbar_init(&xempty[s], W);
    }
    hp::fence_barrier_init();
    // the weights of the first stages (Note [Early weights]), while the consumers build the table
    hp::prefetch_tensor_map(&a.mw);
    hp::prefetch_tensor_map(&a.ms);
    hp::prefetch_tensor_map(&a.mx);
    pol_w = hp::l2_policy(false);
    pol_x = hp::l2_policy(true);
    for (int i = 0; i < early; ++i) load_stage(i, i);
    // L2 prefetch of the pf_stages stages after the early ones (not x: the previous kernel may be
    // writing it)
    for (int i = early; i < early + a.pf_stages && i < S * GX; ++i) {
      const int t = t0 + i % GX, k0 = i / GX * kRingChunks, nc = min(kRingChunks, kc_total - k0);
      if (t >= tiles) continue;
      gemv::prefetch_l2(p.codes + gemm_chunk(kGemvRows * t, k0, p.k), nc * 512);
      gemv::prefetch_l2(p.scales + gemm_scale_chunk(kGemvRows * t, k0, p.k, SB), nc * 16 * SB);
    }
    if constexpr (kEarlyX) {  // Note [Early x]: slice 0's x once the kernel before has completed
      gemv::pdl_wait();
      load_x(0, 0, 0);
    }
  }
  __syncthreads();
  gemv::pdl_wait();

  if (warp >= W) {  // the producer: lane 0 of warp W
    hp::setmaxnreg_dec<kWideProducerRegs>();  // the producer warpgroup lends its registers
    if (warp == W && lane == 0) {
      int slot = 0, phase = 0, xs = 0, xph = 0;
      for (int s = 0, i = 0; s < S; ++s) {
        if (!kEarlyX || s > 0) load_x(s, xs, xph);  // Note [Early x]: else slice 0's x went out before the barrier
        if (++xs == 2) {
          xs = 0;
          xph ^= 1;
        }
        for (int t = 0; t < GX; ++t, ++i) {
          if (i >= early) {  // else its weights are on their way (slot i, armed)
            hp::mbar_wait(&empty[slot], phase ^ 1);
            load_stage(i, slot);
          }
          if (++slot == slots) {
            slot = 0;
            phase ^= 1;
          }
        }
      }
    }
    return;  // the consumers synchronise by named barrier 1 only
  }

  hp::setmaxnreg_inc<wide_consumer_regs(CW)>();
  // This lane's x fragments: chunk `warp` of the slice, rows (lane & 7) + 8 mt (chunk warp + W c: W M lines
  // on, the same swizzle)
  int xoff[2];
  const int xstep = W * p.m * 128;
  int xst[2] = {xstep, xstep};  // chunk warp + W c's lines: xst c on (0 for the zero line)
  constexpr int kShift = PK ? (NG == 4 ? 2 : 1) : 0;  // PK: column c takes x row c / NG
  gemv::ring_x_offsets(xoff, warp * p.m, lane, 0, kShift);
  if constexpr (PK) {  // and zero outside the steps of scale group c % NG: the row of the x buffers' zero line
    const int mi = lane >> 3, c = lane & 7;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int stp = 2 * h + (mi >> 1), piece = stp * 2 + (mi & 1);  // as ring_x_offsets'
      // a piece the matrix's real rows (lines warp M + c / NG) do not use: no bank conflict
      const int vline = warp * p.m + (8 >> kShift);
      if (c % NG != stp / (4 / NG)) {
        xoff[h] = kWideZeroLine * 128 + ((piece ^ (vline & 7)) * 16);
        xst[h] = 0;
      }
    }
  }
  const auto pack = [&] {
    if constexpr (PK) return gemv::Packed(lane);
    else return gemv::NoPack{};
  }();
  // NVFP4's range flag, read once the kernel before has completed; without it the plain table (no thread reads
  // the table before the barrier below)
  bool plain = false;
  if constexpr (kShifted) {
    plain = gemv::all_fold<F, T, MT, GX>(p);
    if (!plain)
#pragma unroll
      for (int c = 0; c < CW; ++c) gemv::build_lut<F, T>(reinterpret_cast<uint32_t*>(smem + lut_off), warp + W * c, lane);
  }
  hp::named_barrier_sync(1, W * 32);
  gemv::RingLane<F, T> ln(p, warp, lane);  // this lane's bytes of chunk `warp` in a slot, and the epilogue's
  auto& [lane4, code_off, scale_off, gs, bias, y] = ln;
  const auto lookup = gemv::ring_lookup(lane4);
  constexpr int MC = 8 * MT;  // columns of the sums
  float acc[GX][MT][4];  // the warp's chunks add into the same sums (CW = 2: by FFMA)
#pragma unroll
  for (int t = 0; t < GX; ++t)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[t][mt][e] = 0.0f;
  // NF4_DQ: the scale2 values of rows g, g + 8 of each tile. A row's blocks span at most two scale2 groups
  // (ring_wide_tiles): its value is g2a before chunk g2k, g2b from it (the ring kernel's scheme), at GX <=
  // kWideDq2Max (kDq2). Above it they lie in one group (K / 64 divides kDqGroup), and the sums take it once,
  // after the loop (kG2Later: Note [NF4_DQ scale2 after the sums]).
  constexpr bool kDq2 = F == Format::nf4_dq && GX <= kWideDq2Max;
  constexpr bool kG2Later = F == Format::nf4_dq && !kDq2;
  float g2a[GX][2], g2b[kDq2 ? GX : 1][2];
  int g2k[kDq2 ? GX : 1][2];
  if constexpr (F == Format::nf4_dq) {
#pragma unroll
    for (int t = 0; t < GX; ++t)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = kGemvRows * (t0 + t) + g + 8 * h;
        const int64_t b0 = static_cast<int64_t>(row) * kc_total, grp = b0 / kDqGroup;  // its first block's group
        g2a[t][h] = row < p.n ? __ldg(p.scale2 + grp) : 0.0f;  // rows past N are never stored
        if constexpr (kDq2) {
          g2k[t][h] = static_cast<int>(std::min<int64_t>((grp + 1) * kDqGroup - b0, kc_total));
          g2b[t][h] = row < p.n && g2k[t][h] < kc_total ? __ldg(p.scale2 + grp + 1) : g2a[t][h];
        }
      }
  }
  // Two copies of the loop for MXFP4 (every instance): one for tensors whose range flag holds, which folds
  // (Note [MXFP4 range flag]) or skips the E8M0 special bytes (Note [MXFP4 without the special bytes]); likewise
  // for NVFP4's shifted pairs (Note [NVFP4 shifted pairs]), whose other copy is the fp32 path
  gemv::with_fold<F, T, MT, GX>(kShifted ? plain : gemv::all_fold<F, T, MT, GX>(p), [&](auto fold) {
    int phase = 0;
    for (int s0 = 0; s0 < S; s0 += kR, phase ^= 1) {
#pragma unroll
      for (int rr = 0; rr < kR; ++rr) {
        const int s = s0 + rr;
        if (kR > 1 && s >= S) break;
        // Kept in registers: ptxas otherwise recomputes these lane offsets from %tid in every trip.
        gemv::pin(code_off);
        gemv::pin(scale_off);
        gemv::pin(lane4);
        gemv::pin(xoff[0]);
        gemv::pin(xoff[1]);
        const int kc = s * kRingChunks + warp;  // chunks past K: zero x and zero scales, they add 0
        const int xs = s & 1;
        hp::mbar_wait(&xfull[xs], (s >> 1) & 1);
        uint32_t bx[CW][MT][4][2];
#pragma unroll
        for (int c = 0; c < CW; ++c) {
          int xo[MT][2];  // an immediate offset for mt = 1
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) xo[mt][h] = xoff[h] + mt * 8 * 128 + c * xst[h];
          gemv::x_fragments<MT, false>(bx[c], xbuf(xs), xo, 0);
        }
        __syncwarp();
        if (lane == 0) hp::mbar_arrive(&xempty[xs]);
#pragma unroll
        for (int t = 0; t < GX; ++t) {
          const int slot = rr * GX + t;
          const uint8_t* sp = wbuf + slot * kSlot;
          hp::mbar_wait(&full[slot], phase);
          uint2 lo[CW], hi[CW];
          uint32_t s_a[CW], s_b[CW];
#pragma unroll
          for (int c = 0; c < CW; ++c)  // chunk warp + W c: W chunks on in the slot
            gemv::slot_chunk<SB>(sp, code_off + c * W * 512, scale_off + c * W * 16 * SB, lo[c], hi[c], s_a[c], s_b[c]);
          __syncwarp();
          if (lane == 0) hp::mbar_arrive(&empty[slot]);
          const int n0 = kGemvRows * (t0 + t);
#pragma unroll
          for (int c = 0; c < CW; ++c) {
            const int kcc = kc + c * W;
            // NF4_DQ's scale2: the row's value at this chunk (kDq2), or none here (kG2Later: after the loop)
            const auto g2 = [&] {
              if constexpr (kDq2) return [&](int h) { return kcc < g2k[t][h] ? g2a[t][h] : g2b[t][h]; };
              else if constexpr (kG2Later) return gemv::G2Later{};
              else return gemv::NoG2{};
            }();
            gemv::chunk_mma_bx<F, T, MT>(acc[t], p, bx[c], g, kc_total, 0, kcc, lo[c], hi[c], s_a[c], s_b[c], n0,
                                         lookup, g2, fold, pack, std::integral_constant<int, GX>{});
          }
        }
      }
    }
  });
  if constexpr (kG2Later)  // Note [NF4_DQ scale2 after the sums]
#pragma unroll
    for (int t = 0; t < GX; ++t)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[t][mt][e] *= g2a[t][e >> 1];
  // The sums, aliasing everything from kWideXAddr on (kWideSumBytes): every stage has been consumed, every
  // table lookup made and nothing more is in flight (one row block) once all consumers pass the barrier
  // below. Each warp writes [warp][column][tile, row] (wide_sum_pitch), then a thread per (row, column)
  // adds the warps' in warp order.
  static_assert(wide_pass(MT, CW) >= GX, "the row block's sums fit at once");
  constexpr int SP = wide_sum_pitch(GX);
  float* sums = reinterpret_cast<float*>(xa);
  hp::named_barrier_sync(1, W * 32);  // free: the slots', x's and the table's last reads
#pragma unroll
  for (int tt = 0; tt < GX; ++tt) {
    if constexpr (PK) {  // a row's NG columns (lanes' pairs 2 r, 2 r + 1; NVFP4: lanes r, r ^ 1) into column m
      float a0 = acc[tt][0][0] + acc[tt][0][1], a1 = acc[tt][0][2] + acc[tt][0][3];  // rows g, g + 8
      if constexpr (NG == 4) {
        a0 += __shfl_xor_sync(0xFFFFFFFFu, a0, 1);
        a1 += __shfl_xor_sync(0xFFFFFFFFu, a1, 1);
      }
      if (NG == 2 || (r & 1) == 0) {
        float* col = sums + (warp * MC + 2 * r / NG) * SP + tt * kGemvRows + g;
        col[0] = a0;
        col[8] = a1;
      }
    } else {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          sums[(warp * MC + mt * 8 + 2 * r + (e & 1)) * SP + tt * kGemvRows + g + 8 * (e >> 1)] = acc[tt][mt][e];
    }
  }
  hp::named_barrier_sync(1, W * 32);
  for (int i = tid; i < GX * kGemvRows * p.m; i += W * 32) {  // consecutive threads: consecutive rows
    const int nl = i % (GX * kGemvRows), m = i / (GX * kGemvRows);
    const int n = kGemvRows * t0 + nl;
    if (n >= p.n) continue;
    const float* src = sums + m * SP + nl;
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < W; ++w) v += src[w * MC * SP];
    v *= gs;
    if (bias) v += D::to_f(bias[n]);
    y[static_cast<int64_t>(m) * p.n + n] = D::from_f(v);
  }
#else
  (void)p;
  (void)a;
#endif
}

// The wide kernel's launch: one CTA per row block of GX tiles (the caller checked GX = ceil(tiles /
// SMs), so one round, and asked ring_fits).
template <Format F, typename T, int MT, int GX, bool PK>
cudaError_t launch_gemv_wide(const GemmParams& p, cudaStream_t stream) {
  const int64_t blocks = ((p.n + kGemvRows - 1) / kGemvRows + GX - 1) / GX;
  if (blocks > p.sms) return cudaErrorInvalidValue;  // one round only (the sums alias the slots)
  const RingLayout l = wide_layout(p.m, chunk_scale_bytes(F), GX);
  RingArgs a = ring_args(l, l.slots, wide_early_stages(F, GX, MT, PK));
  return launch_ring_kernel<F>(fp4_gemv_wide_kernel<F, T, MT, GX, PK>, p, a, blocks, stream,
                               wide_threads(kWideCW<F, T, MT, GX, PK>));
}

// The instance of GX (ring_wide_instance: 2..7): whether this device runs it, and its launch.
template <Format F, typename T, int MT, bool PK = false>
struct WideInstance {
  // PK: only the formats whose columns pack (wide_pack)
  static constexpr bool kExists = !PK || wide_pack(F, 1);
  template <int GX>
  static bool fits() {
    if constexpr (!kExists) return false;
    else return ring_fits<fp4_gemv_wide_kernel<F, T, MT, GX, PK>, wide_threads(kWideCW<F, T, MT, GX, PK>)>();
  }
  static bool usable(int gx) {
    static_assert(kRingWideMax == 7, "an instance per GX below");
    switch (gx) {
      case 2: return fits<2>();
      case 3: return fits<3>();
      case 4: return fits<4>();
      case 5: return fits<5>();
      case 6: return fits<6>();
      case 7: return fits<7>();
      default: return false;
    }
  }
  template <int GX>
  static cudaError_t launch(const GemmParams& p, cudaStream_t stream) {
    if constexpr (!kExists) return cudaErrorInvalidValue;
    else return launch_gemv_wide<F, T, MT, GX, PK>(p, stream);
  }
  static cudaError_t launch(const GemmParams& p, int gx, cudaStream_t stream) {
    switch (gx) {
      case 2: return launch<2>(p, stream);
      case 3: return launch<3>(p, stream);
      case 4: return launch<4>(p, stream);
      case 5: return launch<5>(p, stream);
      case 6: return launch<6>(p, stream);
      case 7: return launch<7>(p, stream);
      default: return cudaErrorInvalidValue;
    }
  }
};

}  // namespace vstack::quant
