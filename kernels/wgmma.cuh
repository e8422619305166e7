// Hopper warpgroup matrix multiply (wgmma, sm_90a) for the kernels of libvstack_kernels.so:
// shared-memory matrix descriptors, the 128-byte swizzle they assume, and the
// fence / commit / wait protocol. The instruction wrappers are generated
// (kernels/gen_wgmma.py -> wgmma_ops.inc).
//
// One wgmma m64nNk16 is issued by a warpgroup (4 consecutive warps, the first
// warp index divisible by 4) and computes D[64 x N] (+)= A[64 x 16] * B[16 x N]:
//   - A from shared memory (descriptor, K-major) or from registers: warp w of the
//     warpgroup holds rows 16w..16w+15 in the mma.sync m16n8k16 A layout
//     (a0: row g, k 2q..2q+1; a1: row g+8; a2: row g, k+8; a3: row g+8, k+8;
//     g = lane / 4, q = lane % 4).
//   - B from shared memory only. K-major (kTransB = 0): B is stored as N rows of
//     K elements. MN-major (kTransB = 1): K rows of N elements.
//   - D, fp32: d[j] is row 16w + g + 8 * ((j / 2) % 2), column 8 * (j / 4) + 2q + (j % 2),
//     i.e. the mma.sync C layout repeated N / 8 times.
//
// Note [SW128 tiles]
// Every shared-memory operand is a set of "SW128 blocks": [rows][64] 2-byte elements,
// rows 128 bytes apart, the block 1024-byte aligned, the 16-byte chunk c of row r stored
// at chunk c ^ (r % 8) (sw128_offset). The hardware applies the XOR to address bits
// 4..6 from bits 7..9, so the alignment is what makes software and hardware agree.
//   K-major operand (A, or B with kTransB = 0), K <= 64 per block: rows = M or N
//     index, 64 K values per row; 8-row groups 1024 bytes apart (SBO = 1024); LBO is
//     unused. The k16 step kk inside the block is the descriptor of the block + 32 * kk
//     bytes (desc_kmajor(block) + 2 * kk). Wider K: several blocks, one per 64 K.
//   MN-major operand (B with kTransB = 1): rows = K index, 64 N values per row; 8-row
//     (K) groups 1024 bytes apart (SBO); the next 64 N values live in the next block,
//     LBO bytes further (desc_mnmajor(block, lbo)). The k16 step kk is + 2048 * kk bytes.
//
// Protocol for one batch of wgmmas (PTX ISA "wgmma.fence", "commit_group", "wait_group"):
//   fence_operands(acc); arrive(); mma...(); commit(); wait<n>(); fence_operands(acc);
// arrive() must follow any register write to accumulators or A fragments and any
// shared-memory write (after fence_proxy_async() + a barrier for other threads' stores)
// that the wgmma reads. A registers and accumulators must not be touched until the
// wait<> that retires their group.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>

namespace vstack::wgmma {

// Byte offset of element (row, col), col < 64, of a 2-byte SW128 block (Note [SW128 tiles]).
__host__ __device__ constexpr uint32_t sw128_offset(uint32_t row, uint32_t col) {
  return row * 128u + ((((col >> 3) ^ row) & 7u) << 4) + ((col & 7u) << 1);
}

__device__ __forceinline__ uint64_t desc_sw128(const void* block, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(block));
  return static_cast<uint64_t>((a & 0x3FFFFu) >> 4) | (static_cast<uint64_t>((lbo_bytes >> 4) & 0x3FFFu) << 16) |
         (static_cast<uint64_t>((sbo_bytes >> 4) & 0x3FFFu) << 32) | (1ull << 62);
}
// K-major SW128 block; the k16 step kk is desc_kmajor(block) + 2 * kk.
__device__ __forceinline__ uint64_t desc_kmajor(const void* block) { return desc_sw128(block, 16, 1024); }
// MN-major SW128 blocks lbo_bytes apart along N; the k16 step kk is + 128 * kk (2048 bytes >> 4).
__device__ __forceinline__ uint64_t desc_mnmajor(const void* block, uint32_t lbo_bytes) {
  return desc_sw128(block, lbo_bytes, 1024);
}

__device__ __forceinline__ void arrive() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Make generic-proxy shared-memory stores visible to the async proxy (wgmma, TMA).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Keeps the compiler from moving accumulator reads/writes across arrive()/wait().
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_operands(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// d (+)= A * B for one m64nNk16; scale_d = 0 overwrites d. T: __nv_bfloat16 or __half.
template <int N, typename T, int kTransB>
__device__ void mma_ss(float (&d)[N / 2], uint64_t da, uint64_t db, int scale_d);
template <int N, typename T, int kTransB>
__device__ void mma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db, int scale_d);

#include "kernels/wgmma_ops.inc"

}  // namespace vstack::wgmma
