// Small device helpers of the FP4 kernels: cp.async, ldmatrix, mma.sync, dtype glue.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace vstack::quant::dev {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async copy; bytes < 16 zero-fills the rest (0: nothing is read).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(bytes));
}
// 16-byte read-only global load that is not kept in L1 (streamed data read once).
__device__ __forceinline__ uint4 ld_stream16(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
// A store that only lanes with pred make, as one predicated instruction: written as `if (pred) *p = v`
// the compiler may move the address arithmetic under a branch, which ends a straight-line block.
// 1, 2 or 4 bytes.
template <typename T>
__device__ __forceinline__ void st_global_if(bool pred, T* p, T v) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4, "1, 2 or 4 bytes");
  const uint32_t w = static_cast<uint32_t>(v);
  if constexpr (sizeof(T) == 1)
    asm volatile("{ .reg .pred q; setp.ne.u32 q, %0, 0; @q st.global.u8 [%1], %2; }\n" ::"r"(static_cast<uint32_t>(pred)), "l"(p), "r"(w));
  else if constexpr (sizeof(T) == 2)
    asm volatile("{ .reg .pred q; setp.ne.u32 q, %0, 0; @q st.global.u16 [%1], %2; }\n" ::"r"(static_cast<uint32_t>(pred)), "l"(p), "r"(w));
  else
    asm volatile("{ .reg .pred q; setp.ne.u32 q, %0, 0; @q st.global.u32 [%1], %2; }\n" ::"r"(static_cast<uint32_t>(pred)), "l"(p), "r"(w));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}

// An mma A fragment's rows scaled (Dt::scale_rows): a[0], a[2] (row g) by the low half of the pair s,
// a[1], a[3] (row g + 8) by the high half; P2 is the pair type (__half2 or __nv_bfloat162).
template <typename P2>
__device__ __forceinline__ void scale_rows_by(uint32_t (&a)[4], uint32_t s) {
  const P2 s2 = *reinterpret_cast<const P2*>(&s);
  P2 sl, sh;
  if constexpr (std::is_same_v<P2, __half2>) {
    sl = __low2half2(s2);
    sh = __high2half2(s2);
  } else {
    sl = __low2bfloat162(s2);
    sh = __high2bfloat162(s2);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const P2 v = __hmul2(*reinterpret_cast<const P2*>(&a[i]), i & 1 ? sh : sl);
    a[i] = *reinterpret_cast<const uint32_t*>(&v);
  }
}

template <typename T>
struct Dt;

template <>
struct Dt<__nv_bfloat16> {
  __device__ __forceinline__ static uint32_t pack2(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
  // elementwise product of two packed pairs, rounded to nearest
  __device__ __forceinline__ static uint32_t mul2(uint32_t a, uint32_t b) {
    __nv_bfloat162 r = __hmul2(*reinterpret_cast<__nv_bfloat162*>(&a), *reinterpret_cast<__nv_bfloat162*>(&b));
    return *reinterpret_cast<uint32_t*>(&r);
  }
  // An f16x2 pair as a pair of this type (exact for the values both hold: E4M3 scales).
  __device__ __forceinline__ static uint32_t from_f16x2(uint32_t s) {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&s));
    return pack2(f.x, f.y);
  }
  __device__ __forceinline__ static void scale_rows(uint32_t (&a)[4], uint32_t s) {
    scale_rows_by<__nv_bfloat162>(a, s);
  }
  __device__ __forceinline__ static float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ __forceinline__ static __nv_bfloat16 from_f(float v) { return __float2bfloat16_rn(v); }
  __device__ __forceinline__ static void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

template <>
struct Dt<__half> {
  __device__ __forceinline__ static uint32_t pack2(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
  __device__ __forceinline__ static uint32_t mul2(uint32_t a, uint32_t b) {
    __half2 r = __hmul2(*reinterpret_cast<__half2*>(&a), *reinterpret_cast<__half2*>(&b));
    return *reinterpret_cast<uint32_t*>(&r);
  }
  __device__ __forceinline__ static uint32_t from_f16x2(uint32_t s) { return s; }
  __device__ __forceinline__ static void scale_rows(uint32_t (&a)[4], uint32_t s) { scale_rows_by<__half2>(a, s); }
  __device__ __forceinline__ static float to_f(__half v) { return __half2float(v); }
  __device__ __forceinline__ static __half from_f(float v) { return __float2half_rn(v); }
  __device__ __forceinline__ static void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

template <>
struct Dt<float> {
  __device__ __forceinline__ static float to_f(float v) { return v; }
  __device__ __forceinline__ static float from_f(float v) { return v; }
};

}  // namespace vstack::quant::dev
