// Fused dequant-GEMM on Hopper tensor cores (wgmma, sm_90a): the compute regime.
//
// Note [Transposed wgmma GEMM]. The kernel computes y^T = W * x^T: the decoded
// weight is the wgmma A operand, from registers, and x is the B operand, from
// shared memory. x rows are K-contiguous, which is exactly wgmma's K-major B: a
// TMA box of [BT tokens][64 k] with the 128-byte swizzle lands as one SW128 block
// (kernels/wgmma.cuh, Note [SW128 tiles]). The register A fragment of warp w of a
// warpgroup is the mma.sync m16n8k16 A layout of rows 16w..16w+15 — the layout the
// GEMM weight layout was built for (FORMAT.md, Note [GEMM layout]): lane (g, q) reads
// 8 bytes of row g and 8 of row g + 8 per 64-wide chunk and decodes them straight into
// its 16 A registers for the chunk's four k16 steps.
//
// CTA: NWG consumer warpgroups (64 weight rows each, BW = 64 * NWG) x BT tokens, plus
// a producer warpgroup whose first lane streams x, the weight codes and the chunk scales of
// each 64-wide k chunk through a STAGES-deep ring of shared-memory stages with TMA
// (full/empty mbarriers; L2 hints: x evict-first, weights evict-last, so the weights stay in
// L2 while the x tiles sweep past). CTAs are persistent (one per SM slot, work items strided by
// the grid) and the ring runs on across items, so the next item's loads overlap the epilogue. An
// item is a tile, or in a short last round half a tile's rows with the k chunks split between the
// two consumer warpgroups (Note [Split tail] in gemm_traits.hpp), or, where the tiles are few, one
// K slice of a tile, summed with the others through a workspace (Note [K split] there).
// A consumer warpgroup, per group of KG k16 steps (KG = 4: one group per chunk):
//   issue the group's wgmma m64nBTk16 (A registers of its buffer); commit; wait<1>: the
//   previous group retired -> its A buffer is free (and, at a chunk's first group, the
//   previous chunk's stage goes back to the producer); decode the next group into that
//   buffer while this group runs.
// ptxas keeps register-A wgmmas asynchronous only with wait<0|1> here: deeper waits
// (several groups in flight) drew C7513 "wgmma serialized". Measured H100 2026-11-22
// (8192^3, nvfp4): the group size barely matters (KG 1 / 2 / 4: 635 / 662 / 663 TFLOPS at
// M = 1024 non-persistent; persistent KG 4 the best at M = 4096, 620 vs 570).
// The decode is on the critical path: a warpgroup's next wgmma group waits for it, so its
// instruction count sets the speed (H100, 2026-11-22: 17 % more instructions per chunk, from run-time
// chunk strides, cost 5-15 % at M >= 1024). Hence 32-bit LDS addressing (Note at `smem` below),
// PRMT-based nibble extraction, and the NF4_DQ group scale kept per row instead of loaded per chunk.
// Decode (Note [Pair decode] in gemm_kernel.cuh for the exact formats):
//   - kAluDecode (NVFP4 any dtype; MXFP4 bf16): a code byte becomes the dtype bits of
//     value * 2^-126 (bf16) / 2^-14 (f16) with integer ops only (format.hpp
//     e2m1_pair_bits; wgdev::e2m1_pair_bits here, 3 ops per pair in bf16), then one exact
//     HMUL2 by 2^126 / 2^14 and one exact HMUL2 by the block scale (a 256-entry table of
//     packed scales). Measured faster than a 256-entry
//     pair table + HMUL2 (bank conflicts) and than the fp32 path below (8192^3 M = 1024:
//     680 vs 607 / 641 TFLOPS).
//   - otherwise (NF4, NF4_DQ, MXFP4 in f16): code value * block scale in fp32 from a
//     16-entry table in static shared memory (conflict-free, constant address: one PRMT and
//     one LDS per code, the nibbles of a code word scaled and masked at once), rounded once to
//     x's dtype.
// Epilogue: fp32 accumulators * NVFP4's per-tensor scale + bias, rounded to x's dtype,
// transposed through shared memory into 16-byte row stores of y (masked at the M and
// N edges). TMA zero-fills x rows >= M and weight rows >= N; those outputs are never
// stored.
// Tried and dropped (H100, 2026-11-22): clusters of 2 CTAs sharing the x tile by TMA
// multicast (2x slower: 290 vs 666 TFLOPS; L2 was not the limit, 44 % busy), three consumer
// warpgroups (BT 128 / 192: 437 / 554 TFLOPS).
#pragma once

#include <cuda.h>  // CUtensorMap (types only)

#include "kernels/hopper.cuh"
#include "kernels/tensor_map.hpp"
#include "kernels/wgmma.cuh"
#include "quant/env.hpp"
#include "quant/gemm_kernel.cuh"
#include "quant/splitk_workspace.hpp"

namespace vstack::quant {

namespace hp = vstack::hopper;

struct WgmmaParams {
  CUtensorMap mx;  // x: [M][K] 2-byte elements, box [BT][64], SW128
  CUtensorMap mw;  // codes: [Npad / 16 tiles][K / 64 chunks x 512 B] as u32, box [BW / 16][128] = [BW][32 B]
  CUtensorMap ms;  // scales: [Npad / 16 tiles][K / 64 chunks x 16 SB] bytes, box [BW / 16][16 SB]
  GemmParams p;
  int whole, items;  // work items (Note [Split tail] in gemm_traits.hpp)
  int ksplit, kcs;   // K slices per tile and chunks per slice (Note [K split]); 1, K / 64 without
};

// E2M1 codes are decoded with integer ops where the product code * scale is exact in T.
template <Format F, typename T>
inline constexpr bool kAluDecode = kPairDecode<F, T>;

namespace wgdev {

// format.hpp e2m1_pair_bits() of byte j of the code word w, from the word's nibbles split once
// per word: lo = w & 0x0F0F0F0F, hi = (w >> 4) & 0x0F0F0F0F. The decode is on the critical path of
// the GEMM (a consumer warpgroup's next wgmma waits for it), so every integer op counts:
//   - one PRMT builds z = [lo_j, 0, hi_j, 0] (bytes; selector msb = replicate the sign bit of
//     the byte, which is 0 in lo / hi: a zero byte), the low nibble at bits 0..3, the high one
//     at bits 16..19;
//   - bf16: z * (2^6 + 2^12) puts e1 e0 m at bits 6..8 / 22..24 and the sign at 15 / 31 with no
//     overlapping terms (no carries), and one AND keeps those bits: 3 ops per pair instead of 7
//     (extract, multiply by 0x1001, two shifts, two masks);
//   - f16 (e1 e0 m at 9..11: the two terms would overlap at bit 12): two shifts and masks.
template <typename T>
__device__ __forceinline__ uint32_t e2m1_pair_bits(uint32_t lo, uint32_t hi, int j) {
  const uint32_t sel = j | ((8 | j) << 4) | ((4 + j) << 8) | ((12 + j) << 12);
  uint32_t z;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(z) : "r"(lo), "r"(hi), "r"(sel));
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return (z * ((1u << 6) | (1u << 12))) & 0x81C081C0u;
  } else {
    return ((z << 9) & 0x0E000E00u) | ((z << 12) & 0x80008000u);
  }
}
template <typename T>
__host__ __device__ constexpr float e2m1_pair_fix() {
  return std::is_same_v<T, __nv_bfloat16> ? 0x1p126f : 0x1p14f;
}

}  // namespace wgdev

// KS: the K chunks of a tile are split over P.ksplit work items (Note [K split]); a separate instance,
// so that the kernels without the split keep their code.
template <class C, Format F, typename T, bool KS>
__global__ void __launch_bounds__(C::THREADS, 1) fp4_gemm_wgmma_kernel(const __grid_constant__ WgmmaParams P) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using D = dev::Dt<T>;
  constexpr bool kAlu = kAluDecode<F, T>;
  constexpr bool kPair = kAlu;  // packed (s, s) scales
  constexpr int SB = chunk_scale_bytes(F);
  constexpr int S = C::STAGES;
  const GemmParams& p = P.p;
  extern __shared__ uint8_t smem_raw[];
  // 1 KB aligned (SW128). Offsetting the __shared__ array itself (not a pointer rebuilt from an
  // integer) keeps the shared address space visible to the compiler: the per-chunk code and scale
  // reads become LDS with 32-bit addresses instead of generic loads with 64-bit address arithmetic.
  uint8_t* smem = smem_raw + ((1024u - (dev::smem_u32(smem_raw) & 1023u)) & 1023u);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + C::BAR_OFF);
  uint64_t* empty = full + S;
  // 16 code values in static shared memory: its address is a constant, so a lookup is one
  // LDS [index * 4 + const] after a shift and a mask (NF4 and the fp32 decode path).
  __shared__ float lut[16];
  uint32_t* scale_lut = reinterpret_cast<uint32_t*>(smem + C::LUT_OFF);  // scale code -> (s, s) in T

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // Persistent CTAs: item blockIdx.x + i * gridDim.x (Note [Split tail] in gemm_traits.hpp for
  // items and tiles); consecutive tiles share the x tile (n fastest), so the CTAs running at one
  // time cover a few x tiles and all weight tiles.
  const int tiles_n = (p.n + C::BW - 1) / C::BW;
  const int kc_total = p.k / 64;

  if (tid < 16) lut[tid] = element_value(F, tid);
  __shared__ float sc_f32[256];  // scale code -> fp32 (E4M3 for NVFP4 / NF4_DQ, E8M0 for MXFP4)
  __shared__ int ks_last;        // KS: this item arrived last for its tile
  if constexpr (F != Format::nf4) {
    for (int i = tid; i < 256; i += C::THREADS) sc_f32[i] = F == Format::mxfp4 ? e8m0_value(i) : e4m3_value(i);
  }
  if constexpr (kPair) {
    for (int i = tid; i < 256; i += C::THREADS) {
      const float s = F == Format::nvfp4 ? e4m3_value(i) : e8m0_value(i);
      scale_lut[i] = D::pack2(s, s);
    }
  }
  if (tid == 0) {
    for (int s = 0; s < S; ++s) {
      hp::mbar_init(&full[s], 1);
      hp::mbar_init(&empty[s], 4 * C::NWG);  // every consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    wgmma::fence_proxy_async();
  }
  __syncthreads();

  // Work item -> tile, half and K slice. half < 0: a whole tile, or its K slice [ks, ke) of the chunks
  // (Note [K split] in gemm_traits.hpp); 0 / 1: the weight rows [64 half, 64 half + 64) of a tail
  // tile, its k chunks shared by the two consumer warpgroups (Note [Split tail]).
  struct Item {
    int tile, half, slice, ks, ke;
  };
  auto item_of = [&](int item) {
    Item it;
    if constexpr (KS) {
      it.tile = item / P.ksplit;
      it.slice = item - it.tile * P.ksplit;
      it.half = -1;
      it.ks = it.slice * P.kcs;
      it.ke = min(kc_total, it.ks + P.kcs);
    } else {
      if (item < P.whole) {
        it.tile = item;
        it.half = -1;
      } else {
        it.tile = P.whole + (item - P.whole) / 2;
        it.half = (item - P.whole) % 2;
      }
      it.slice = 0;
      it.ks = 0;
      it.ke = kc_total;
    }
    return it;
  };

  // ---- consumers ----
  auto consume = [&]() {
    const int wg = warp >> 2, g = lane >> 2, q = lane & 3;
    uint32_t abuf[2 * C::KG][4];  // A fragments of the running wgmma group and of the next one
    float acc[C::BT / 2];
    int it0 = 0;  // ring index of the current item's first chunk (chunks count on across items)
    // One work item; kSplit (compile-time, so that whole tiles keep constant chunk strides and
    // ring indices): half of a tile's rows, k chunks shared by the warpgroups (Note [Split tail]).
    auto run_item = [&](auto split_c, const Item& item) {
      constexpr bool split = decltype(split_c)::value;
      const int tile = item.tile, half = item.half, ke = item.ke;
      const int n0 = (tile % tiles_n) * C::BW, m0 = (tile / tiles_n) * C::BT;
      // this thread's weight rows r0, r0 + 8 (CTA-local); this warpgroup's chunks kf, kf + st, ... < ke
      const int r0 = (split ? half : wg) * 64 + (warp & 3) * 16 + g;
      const int kf = item.ks + (split ? wg : 0);
      constexpr int st = split ? 2 : 1;
      const int n_own = kf < ke ? (ke - kf + st - 1) / st : 0;
      const int ring0 = it0 - item.ks;  // ring index of chunk kc: ring0 + kc
#pragma unroll
      for (int i = 0; i < C::BT / 2; ++i) acc[i] = 0.0f;

      // NF4_DQ: the group scales of rows r0, r0 + 8. The group of (row n, chunk kc) is
      // (n * kc_total + kc) / kDqGroup: it changes at most once per kDqGroup chunks of a row (never
      // inside a row where kc_total divides kDqGroup, K <= 16384), so a thread keeps the two scales
      // and the first chunk g2_next at which either changes: one compare per chunk instead of an
      // index and a global load per row and chunk (those cost NF4_DQ 10 % against NF4).
      float g2c[2] = {0.0f, 0.0f};
      int g2_next = 0;
      auto g2_refresh = [&](int kc) {  // (rare: rows >= N keep 0, which only they multiply)
        int next = 0x7FFFFFFF;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int gn = n0 + r0 + 8 * h;
          if (gn < p.n) {
            const int64_t row = static_cast<int64_t>(gn) * kc_total, gi = (row + kc) / kDqGroup;
            g2c[h] = __ldg(p.scale2 + gi);
            next = min(next, static_cast<int>((gi + 1) * kDqGroup - row));
          }
        }
        g2_next = next;
      };
      if constexpr (F == Format::nf4_dq) g2_refresh(kf);

      // What a thread needs of one chunk: its 2 x 8 code bytes and the scale of each k16 step.
      struct Chunk {
        uint2 cw[2];
        uint32_t sp[2][4];  // kPair: (s, s) in T
        float sc[2][4];     // otherwise: fp32
      };
      auto load_chunk = [&](Chunk& c, int kc) {
        const uint8_t* sW = smem + ((ring0 + kc) % S) * C::STAGE_BYTES + C::X_BYTES;
        const uint8_t* sS = sW + C::W_BYTES;
        if constexpr (F == Format::nf4_dq) {
          if (kc >= g2_next) g2_refresh(kc);
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = r0 + 8 * h;
          c.cw[h] = *reinterpret_cast<const uint2*>(sW + r * 32 + q * 8);
          const uint8_t* sr = sS + gemm_scale_slot(r) * SB;  // row r's scale bytes of this chunk
          if constexpr (kPair && F == Format::nvfp4) {
            const uint32_t w = *reinterpret_cast<const uint32_t*>(sr);
#pragma unroll
            for (int s = 0; s < 4; ++s) c.sp[h][s] = scale_lut[(w >> (8 * s)) & 0xFFu];
          } else if constexpr (kPair) {  // MXFP4
            const uint32_t w = *reinterpret_cast<const uint16_t*>(sr);
            c.sp[h][0] = c.sp[h][1] = scale_lut[w & 0xFFu];
            c.sp[h][2] = c.sp[h][3] = scale_lut[w >> 8];
          } else if constexpr (F == Format::nvfp4) {
            const uint32_t w = *reinterpret_cast<const uint32_t*>(sr);
#pragma unroll
            for (int s = 0; s < 4; ++s) c.sc[h][s] = sc_f32[(w >> (8 * s)) & 0xFFu];
          } else if constexpr (F == Format::mxfp4) {
            const uint32_t w = *reinterpret_cast<const uint16_t*>(sr);
            c.sc[h][0] = c.sc[h][1] = sc_f32[w & 0xFFu];
            c.sc[h][2] = c.sc[h][3] = sc_f32[w >> 8];
          } else if constexpr (F == Format::nf4) {
            const float v = *reinterpret_cast<const float*>(sr);
#pragma unroll
            for (int s = 0; s < 4; ++s) c.sc[h][s] = v;
          } else {  // NF4_DQ: value(E4M3 code) * g2, one fp32 rounding as the reference (rows >= N: g2 = 0)
            const float v = sc_f32[*sr] * g2c[h];
#pragma unroll
            for (int s = 0; s < 4; ++s) c.sc[h][s] = v;
          }
        }
      };

      // Decode k16 step s of chunk c into the A fragment a (mma.sync A layout, FORMAT.md Note [GEMM layout]).
      auto decode_step = [&](const Chunk& c, int s, uint32_t (&a)[4]) {  // s: unrolled, compile-time
        constexpr float kFix = wgdev::e2m1_pair_fix<T>();
        [[maybe_unused]] const uint32_t fix2 = kAlu ? D::pack2(kFix, kFix) : 0u;
#pragma unroll
        for (int hi = 0; hi < 2; ++hi)    // k 16s + 2q (a0/a1) or + 8 (a2/a3): byte 2s + hi
#pragma unroll
          for (int h = 0; h < 2; ++h) {  // row r0 (a0/a2) or r0 + 8 (a1/a3)
            const uint32_t word = s < 2 ? c.cw[h].x : c.cw[h].y;
            const int j = (s & 1) * 2 + hi;  // byte of the word
            uint32_t v;
            if constexpr (kAlu) {
              const uint32_t lo = word & 0x0F0F0F0Fu, hi4 = (word >> 4) & 0x0F0F0F0Fu;
              v = D::mul2(D::mul2(wgdev::e2m1_pair_bits<T>(lo, hi4, j), fix2), c.sp[h][s]);
            } else {
              // byte offsets (code * 4) of the two nibbles: both nibbles of every byte scaled and
              // masked at once, then one PRMT (zero-extending byte j) per nibble
              const uint32_t lo4 = (word << 2) & 0x3C3C3C3Cu, hi4 = (word >> 2) & 0x3C3C3C3Cu;
              const uint32_t o0 = __byte_perm(lo4, 0u, 0x4440u | j), o1 = __byte_perm(hi4, 0u, 0x4440u | j);
              const char* lb = reinterpret_cast<const char*>(lut);
              const float f = c.sc[h][s];
              v = D::pack2(*reinterpret_cast<const float*>(lb + o0) * f, *reinterpret_cast<const float*>(lb + o1) * f);
            }
            a[hi * 2 + h] = v;
          }
      };

      // A chunk's stage goes back to the producer once every consumer warp has arrived on it: a
      // warpgroup arrives after its wgmmas on the chunk retired, or, for a chunk of the other
      // warpgroup (split items), once the chunk has landed (so the arrival counts in its phase).
      auto release = [&](int kc) {
        __syncwarp();
        if (lane == 0) hp::mbar_arrive(&empty[(ring0 + kc) % S]);
      };
      auto skip = [&](int kc) {
        const int it = ring0 + kc;
        while (!hp::mbar_try_wait(&full[it % S], (it / S) & 1)) {}
        release(kc);
      };

      // k16-step pipeline: a wgmma group is KG k16 steps; step s of a chunk runs on A buffer
      // s % (2 KG). After committing a group, wait<1> retires the previous one (ptxas keeps
      // register-A wgmmas asynchronous only with wait<0|1>: deeper waits draw C7513), then the
      // next group's steps are decoded into the freed buffers while this group runs. The next
      // chunk's codes and scales are read from its stage after the chunk's first group.
      constexpr int KG = C::KG, NG = 4 / KG, NB = 2 * KG;  // NB A buffers: the running group and the next
      static_assert(KG == 1 || KG == 2 || KG == 4, "k16 steps per wgmma group");
      // The j-th chunk of this warpgroup uses buffers from (4 j + s) % NB; chunks are processed in
      // pairs so that this index is a compile-time constant.
      auto buf = [](int par, int s) { return (par * 4 + s) % NB; };
      Chunk cur, nxt;
      if (n_own > 0) {
        while (!hp::mbar_try_wait(&full[(ring0 + kf) % S], ((ring0 + kf) / S) & 1)) {}
        load_chunk(cur, kf);
#pragma unroll
        for (int j = 0; j < KG; ++j) decode_step(cur, j, abuf[buf(0, j)]);
      }
      auto chunk = [&](auto psel, int kc) {
        constexpr int par = decltype(psel)::value;
        const int it = ring0 + kc;  // ring index of chunk kc
        const uint64_t db = wgmma::desc_kmajor(smem + (it % S) * C::STAGE_BYTES);
        const bool more = kc + st < ke;
#pragma unroll
        for (int gi = 0; gi < NG; ++gi) {
#pragma unroll
          for (int j = 0; j < KG; ++j) wgmma::fence_operands(abuf[buf(par, gi * KG + j)]);
          wgmma::arrive();
#pragma unroll
          for (int j = 0; j < KG; ++j)
            wgmma::mma_rs<C::BT, T, 0>(acc, abuf[buf(par, gi * KG + j)], db + 2 * (gi * KG + j), 1);
          wgmma::commit();
          wgmma::wait<1>();  // the previous group retired: its A buffers (the next group's) are free
#pragma unroll
          for (int j = 0; j < KG; ++j) wgmma::fence_operands(abuf[buf(par, (gi + 1) * KG + j)]);
          if (gi == 0) {
            // this warpgroup's previous chunk of the item retired (without KS kf is 0 or wg, and the
            // test is written as before the split so that those kernels keep their SASS)
            if (KS ? kc - st >= kf : kc >= st) release(kc - st);
            if constexpr (split) {  // (only without KS: the item starts at chunk 0)
              if (kc >= 1) skip(kc - 1);  // the other warpgroup's chunk in between
            }
            if (more) {
              while (!hp::mbar_try_wait(&full[(it + st) % S], ((it + st) / S) & 1)) {}
              load_chunk(nxt, kc + st);
            }
          }
          if (gi + 1 < NG) {
#pragma unroll
            for (int j = 0; j < KG; ++j) decode_step(cur, (gi + 1) * KG + j, abuf[buf(par, (gi + 1) * KG + j)]);
          } else if (more) {
            cur = nxt;
#pragma unroll
            for (int j = 0; j < KG; ++j) decode_step(cur, j, abuf[buf(1 - par, j)]);
          }
        }
      };
      for (int kc = kf; kc < ke; kc += 2 * st) {
        chunk(std::integral_constant<int, 0>{}, kc);
        if (kc + st < ke) chunk(std::integral_constant<int, 1>{}, kc + st);
      }
      wgmma::wait<0>();
      wgmma::fence_operands(acc);
      // The item's last chunk of this warpgroup retired; the other warpgroup's chunks after it
      // (split items) are released once they have landed.
      const int k_last = n_own > 0 ? kf + (n_own - 1) * st : -1;
      if (k_last >= 0) release(k_last);
      if constexpr (split) {
        for (int kc = k_last + 1; kc < ke; ++kc) skip(kc);
      }

      // A K slice (Note [K split]): its fp32 partials go to the workspace; the item that arrives
      // last for the tile sums the slices in slice order and runs the epilogue.
      if constexpr (KS) {
        const int t = tid;  // consumer thread
        constexpr int kSlot = C::BT * C::BW, kThreads = 128 * C::NWG;
        float* part = p.ws_part + static_cast<int64_t>(tile) * P.ksplit * kSlot + t;  // slice q: + q * kSlot
#pragma unroll
        for (int j = 0; j < C::BT / 2; ++j) __stcg(part + item.slice * kSlot + j * kThreads, acc[j]);
        __threadfence();  // the partials are visible device-wide before this item counts itself in
        hp::named_barrier_sync(1, kThreads);
        if (t == 0) ks_last = atomicAdd(p.ws_count + tile, 1u) == static_cast<unsigned>(P.ksplit - 1);
        hp::named_barrier_sync(1, kThreads);
        if (!ks_last) return;
        __threadfence();
        // slice by slice, each slice's BT / 2 loads in flight together (one load per trip of a
        // loop over the slices would wait BT / 2 x ksplit times on L2); summed in slice order
#pragma unroll
        for (int j = 0; j < C::BT / 2; ++j) acc[j] = 0.0f;
        for (int q = 0; q < P.ksplit; ++q) {
#pragma unroll
          for (int j = 0; j < C::BT / 2; ++j) acc[j] += __ldcg(part + q * kSlot + j * kThreads);
        }
        if (t == 0) p.ws_count[tile] = 0;  // for the next launch on this stream
      }

      // ---- epilogue: y[m0 + t][n0 + r] = acc * g + bias[n0 + r], through shared memory ----
      // The output tile has its own buffer: the producer is already filling the stages with the
      // next item's chunks. The barrier keeps this item's writes behind the last item's reads.
      hp::named_barrier_sync(1, 128 * C::NWG);  // consumer warps only
      if constexpr (split) {
        // The two partial sums of the same rows meet in the output buffer as fp32, [j][thread]:
        // warpgroup 0's (even chunks) + warpgroup 1's (odd chunks), always in this order.
        static_assert(C::NWG != 2 || C::BT / 2 * 128 * 4 <= C::Y_BYTES, "split-tail partials fit the output buffer");
        float* sR = reinterpret_cast<float*>(smem + C::Y_OFF);
        const int t = tid & 127;
        if (wg == 1) {
#pragma unroll
          for (int j = 0; j < C::BT / 2; ++j) sR[j * 128 + t] = acc[j];
        }
        hp::named_barrier_sync(1, 128 * C::NWG);
        if (wg == 0) {
#pragma unroll
          for (int j = 0; j < C::BT / 2; ++j) acc[j] += sR[j * 128 + t];
        }
        hp::named_barrier_sync(1, 128 * C::NWG);
      }
      T* sY = reinterpret_cast<T*>(smem + C::Y_OFF);
      const float gs = F == Format::nvfp4 ? __ldg(p.scale2) : 1.0f;
      const T* bias = static_cast<const T*>(p.bias);
      if (!split || wg == 0) {
        float bv[2] = {0.0f, 0.0f};
#pragma unroll
        for (int h = 0; h < 2; ++h)
          if (bias && n0 + r0 + 8 * h < p.n) bv[h] = D::to_f(bias[n0 + r0 + 8 * h]);
#pragma unroll
        for (int j = 0; j < C::BT / 2; ++j) {
          const int h = (j >> 1) & 1;
          const int t = 8 * (j >> 2) + 2 * q + (j & 1);
          sY[t * C::Y_PITCH + r0 + 8 * h] = D::from_f(acc[j] * gs + bv[h]);
        }
      }
      hp::named_barrier_sync(1, 128 * C::NWG);  // consumer warps only
      T* y = static_cast<T*>(p.y);
      const bool vec = (p.n % 8) == 0 && (reinterpret_cast<uintptr_t>(p.y) % 16) == 0;
      // columns [c0, c0 + cols) of the tile: all of them, or a split item's 64
      const int c0 = split ? 64 * half : 0, cols = split ? 64 : C::BW;
      const int vpr = cols / 8;  // 16-byte vectors per tile row
      for (int i = tid; i < C::BT * vpr; i += 128 * C::NWG) {
        const int t = i / vpr, v = i % vpr;
        const int gm = m0 + t, gn = n0 + c0 + 8 * v;
        if (gm >= p.m || gn >= p.n) continue;
        const T* src = sY + t * C::Y_PITCH + c0 + 8 * v;
        T* dst = y + static_cast<int64_t>(gm) * p.n + gn;
        if (vec && gn + 8 <= p.n) {
          *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
        } else {
          for (int e = 0; e < 8 && gn + e < p.n; ++e) dst[e] = src[e];
        }
      }
    };
    for (int i = blockIdx.x; i < P.items; i += gridDim.x) {
      const Item item = item_of(i);
      if constexpr (C::NWG == 2 && !KS) {  // (the host splits only with two consumer warpgroups)
        if (item.half >= 0) {
          run_item(std::true_type{}, item);
          it0 += item.ke - item.ks;
          continue;
        }
      }
      run_item(std::false_type{}, item);
      it0 += item.ke - item.ks;
    }
  };

  if (warp >= 4 * C::NWG) {  // producer warpgroup: lane 0 of its first warp issues every TMA
    if constexpr (C::REGS_PRODUCER > 0) hp::setmaxnreg_dec<C::REGS_PRODUCER>();
    if (warp == 4 * C::NWG && lane == 0) {
      hp::prefetch_tensor_map(&P.mx);
      hp::prefetch_tensor_map(&P.mw);
      hp::prefetch_tensor_map(&P.ms);
      constexpr uint32_t kBytes = C::X_BYTES + C::BW * 32 + C::BW * SB;
      // x tiles are read by the CTAs of one wave only (evict first); weight tiles by every wave of
      // CTAs that sweeps the x tiles (evict last: they stay in L2 between waves).
      const uint64_t pol_x = hp::l2_policy(false), pol_w = hp::l2_policy(true);
      int it = 0;
      for (int i = blockIdx.x; i < P.items; i += gridDim.x) {
        // (a tail-split item loads the whole tile's weight rows: W is 1/8 of a stage's bytes)
        const Item item = item_of(i);
        const int n0 = (item.tile % tiles_n) * C::BW, m0 = (item.tile / tiles_n) * C::BT;
        for (int kc = item.ks; kc < item.ke; ++kc, ++it) {
          const int s = it % S;
          if (it >= S) while (!hp::mbar_try_wait(&empty[s], ((it / S) - 1) & 1)) {}
          uint8_t* st = smem + s * C::STAGE_BYTES;
          hp::mbar_arrive_expect_tx(&full[s], kBytes);
          hp::tma_load_2d(st, &P.mx, &full[s], kc * 64, m0, pol_x);
          hp::tma_load_2d(st + C::X_BYTES, &P.mw, &full[s], kc * 128, n0 / 16, pol_w);
          hp::tma_load_2d(st + C::X_BYTES + C::W_BYTES, &P.ms, &full[s], kc * 16 * SB, n0 / 16, pol_w);
        }
      }
    }
  } else {
    if constexpr (C::REGS_CONSUMER > 0) hp::setmaxnreg_inc<C::REGS_CONSUMER>();
    consume();
  }
#endif
}

// 2-D tensor map: inner dimension d0 elements of dt, d1 rows `stride` bytes apart.
inline bool encode_map(CUtensorMap* m, const void* base, CUtensorMapDataType dt, uint64_t d0, uint64_t d1,
                       uint64_t stride, uint32_t b0, uint32_t b1, CUtensorMapSwizzle sw) {
  return kernels::encode_tiled<2>(m, dt, base, {d0, d1}, {stride}, {b0, b1}, sw);
}

// VSTACK_FP4_GEMM_KSPLIT=<s> (1..8) forces the K split of the wgmma GEMM (Note [K split]): for tests and
// benchmarks of the schedule; unset in normal use.
inline int forced_gemm_ksplit() {
  static const int v = env_int_in("VSTACK_FP4_GEMM_KSPLIT", 1, kWgMaxKSplit, 0);
  return v;
}

// Falls back to the mma.sync kernel (config `large`) where the tensor-map encoder is missing.
template <class C, Format F, typename T>
cudaError_t launch_gemm_wgmma(const GemmParams& p, cudaStream_t stream) {
  if (!kernels::tensor_map_encoder()) return launch_gemm<CfgLarge, F, T>(p, stream);
  auto kern = fp4_gemm_wgmma_kernel<C, F, T, false>;
  auto kern_ks = fp4_gemm_wgmma_kernel<C, F, T, true>;
  static const cudaError_t attr = [&] {
    const cudaError_t e =
        cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(C::SMEM_BYTES));
    return e != cudaSuccess ? e
                            : cudaFuncSetAttribute(kern_ks, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   static_cast<int>(C::SMEM_BYTES));
  }();
  if (attr != cudaSuccess) return attr;
  constexpr int SB = chunk_scale_bytes(F);
  WgmmaParams P{};
  P.p = p;
  const bool ok =
      encode_map(&P.mx, p.x, CU_TENSOR_MAP_DATA_TYPE_UINT16, p.k, p.m, uint64_t(p.k) * 2, 64, C::BT,
                 CU_TENSOR_MAP_SWIZZLE_128B) &&
      encode_map(&P.mw, p.codes, CU_TENSOR_MAP_DATA_TYPE_UINT32, uint64_t(p.k) * 2, uint64_t(p.npad) / 16,
                 uint64_t(p.k) * 8, 128, C::BW / 16, CU_TENSOR_MAP_SWIZZLE_NONE) &&
      encode_map(&P.ms, p.scales, CU_TENSOR_MAP_DATA_TYPE_UINT8, uint64_t(p.k) / 4 * SB, uint64_t(p.npad) / 16,
                 uint64_t(p.k) / 4 * SB, 16 * SB, C::BW / 16, CU_TENSOR_MAP_SWIZZLE_NONE);
  if (!ok) return cudaErrorInvalidValue;
  // Persistent grid: as many CTAs as fit on the device at once, at most one per item.
  auto resident_of = [&](auto k) {
    int dev = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, C::THREADS, C::SMEM_BYTES) != cudaSuccess)
      return 0;
    return sms * per_sm;
  };
  static const int resident = resident_of(kern), resident_ks = resident_of(kern_ks);
  if (resident <= 0 || resident_ks <= 0) return cudaErrorInvalidConfiguration;
  const int64_t tiles = int64_t((p.n + C::BW - 1) / C::BW) * ((p.m + C::BT - 1) / C::BT);
  const int64_t kc_total = p.k / 64;
  const int fk = forced_gemm_ksplit();
  WgSchedule sch =
      wg_schedule(tiles, resident_ks, C::NWG == 2, kc_total, fk > 0 ? fk : wg_ksplit(tiles, resident_ks, kc_total));
  if (sch.ksplit > 1) {  // Note [K split]; without a workspace (an allocation failed), no split
    const int64_t floats = wg_ws_floats(tiles, sch.ksplit, C::BT, C::BW);
    const SplitKWorkspace ws =
        4 * (floats + tiles) <= kSplitKWsMaxBytes ? splitk_workspace(stream, floats, tiles) : SplitKWorkspace{};
    P.p.ws_part = ws.part;
    P.p.ws_count = ws.count;
    if (!ws.part) sch.ksplit = 1;
  }
  if (sch.ksplit == 1) sch = wg_schedule(tiles, resident, C::NWG == 2, kc_total);
  P.whole = static_cast<int>(sch.whole);
  P.items = static_cast<int>(sch.items);
  P.ksplit = sch.ksplit;
  P.kcs = sch.kcs;
  (sch.ksplit > 1 ? kern_ks : kern)<<<static_cast<unsigned>(sch.grid), C::THREADS, C::SMEM_BYTES, stream>>>(P);
  return cudaGetLastError();
}

}  // namespace vstack::quant
