// Handlers: every cuMemcpy* and cuMemset* form. A copy or set references
// exactly the bytes it touches; the pool backs/promotes them and orders the
// call after data still arriving, like a launch.
#pragma once

#include "shim/via.hpp"

namespace vstack::shim {

// Bytes touched by a 2D/3D copy side: [first byte, last byte].
struct Span {
  CUdeviceptr ptr = 0;
  uint64_t bytes = 0;
};
Span span_2d(const CUDA_MEMCPY2D& c, bool src);
Span span_3d(const CUDA_MEMCPY3D& c, bool src);

// A copy/set touching up to two device ranges, enqueued on stream s.
template <class Enqueue>
CUresult device_op(CUstream s, bool per_thread, Span a, Span b, Enqueue&& enqueue, const char* what) {
  pool::Pool* pl = pool_ready();
  if (!pl) return enqueue();
  add(stats().global.copies, 1);
  return run_access(
      *pl, target(s, per_thread),
      [&](pool::RefSet& refs) {
        pl->add_range(a.ptr, a.bytes, refs);
        pl->add_range(b.ptr, b.bytes, refs);
      },
      enqueue, what);
}

template <class V>
CUresult on_cuMemcpy(const V& real, CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return device_op(nullptr, real.per_thread(), {dst, n}, {src, n}, [&] { return real(dst, src, n); }, "cuMemcpy");
}
template <class V>
CUresult on_cuMemcpyAsync(const V& real, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return device_op(s, real.per_thread(), {dst, n}, {src, n}, [&] { return real(dst, src, n, s); }, "cuMemcpyAsync");
}
template <class V>
CUresult on_cuMemcpyHtoD(const V& real, CUdeviceptr dst, const void* src, size_t n) {
  return device_op(nullptr, real.per_thread(), {dst, n}, {}, [&] { return real(dst, src, n); }, "cuMemcpyHtoD");
}
template <class V>
CUresult on_cuMemcpyDtoH(const V& real, void* dst, CUdeviceptr src, size_t n) {
  return device_op(nullptr, real.per_thread(), {src, n}, {}, [&] { return real(dst, src, n); }, "cuMemcpyDtoH");
}
template <class V>
CUresult on_cuMemcpyDtoD(const V& real, CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return device_op(nullptr, real.per_thread(), {dst, n}, {src, n}, [&] { return real(dst, src, n); }, "cuMemcpyDtoD");
}
template <class V>
CUresult on_cuMemcpyHtoDAsync(const V& real, CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  return device_op(s, real.per_thread(), {dst, n}, {}, [&] { return real(dst, src, n, s); }, "cuMemcpyHtoDAsync");
}
template <class V>
CUresult on_cuMemcpyDtoHAsync(const V& real, void* dst, CUdeviceptr src, size_t n, CUstream s) {
  return device_op(s, real.per_thread(), {src, n}, {}, [&] { return real(dst, src, n, s); }, "cuMemcpyDtoHAsync");
}
template <class V>
CUresult on_cuMemcpyDtoDAsync(const V& real, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return device_op(s, real.per_thread(), {dst, n}, {src, n}, [&] { return real(dst, src, n, s); }, "cuMemcpyDtoDAsync");
}
template <class V>
CUresult on_cuMemcpyPeer(const V& real, CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n) {
  return device_op(nullptr, real.per_thread(), {dst, n}, {src, n}, [&] { return real(dst, dc, src, sc, n); }, "cuMemcpyPeer");
}
template <class V>
CUresult on_cuMemcpyPeerAsync(const V& real, CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n,
                              CUstream s) {
  return device_op(s, real.per_thread(), {dst, n}, {src, n}, [&] { return real(dst, dc, src, sc, n, s); },
                   "cuMemcpyPeerAsync");
}
template <class V>
CUresult on_cuMemcpy2D(const V& real, const CUDA_MEMCPY2D* c) {
  if (!c) return real(c);
  return device_op(nullptr, real.per_thread(), span_2d(*c, false), span_2d(*c, true), [&] { return real(c); }, "cuMemcpy2D");
}
template <class V>
CUresult on_cuMemcpy2DAsync(const V& real, const CUDA_MEMCPY2D* c, CUstream s) {
  if (!c) return real(c, s);
  return device_op(s, real.per_thread(), span_2d(*c, false), span_2d(*c, true), [&] { return real(c, s); }, "cuMemcpy2DAsync");
}
template <class V>
CUresult on_cuMemcpy3D(const V& real, const CUDA_MEMCPY3D* c) {
  if (!c) return real(c);
  return device_op(nullptr, real.per_thread(), span_3d(*c, false), span_3d(*c, true), [&] { return real(c); }, "cuMemcpy3D");
}
template <class V>
CUresult on_cuMemcpy3DAsync(const V& real, const CUDA_MEMCPY3D* c, CUstream s) {
  if (!c) return real(c, s);
  return device_op(s, real.per_thread(), span_3d(*c, false), span_3d(*c, true), [&] { return real(c, s); }, "cuMemcpy3DAsync");
}

// Sets: element size E, N elements, or a 2D block of Width elements × Height rows.
template <class V, class T>
CUresult memset_1d(const V& real, CUdeviceptr dst, T v, size_t n) {
  return device_op(nullptr, real.per_thread(), {dst, n * sizeof(T)}, {}, [&] { return real(dst, v, n); }, "cuMemsetD");
}
template <class V, class T>
CUresult memset_1d_async(const V& real, CUdeviceptr dst, T v, size_t n, CUstream s) {
  return device_op(s, real.per_thread(), {dst, n * sizeof(T)}, {}, [&] { return real(dst, v, n, s); }, "cuMemsetDAsync");
}
inline uint64_t span_2d_set(size_t pitch, size_t width_bytes, size_t height) {
  return height == 0 ? 0 : (height - 1) * pitch + width_bytes;
}
template <class V, class T>
CUresult memset_2d(const V& real, CUdeviceptr dst, size_t pitch, T v, size_t w, size_t h) {
  return device_op(nullptr, real.per_thread(), {dst, span_2d_set(pitch, w * sizeof(T), h)}, {},
                   [&] { return real(dst, pitch, v, w, h); }, "cuMemsetD2D");
}
template <class V, class T>
CUresult memset_2d_async(const V& real, CUdeviceptr dst, size_t pitch, T v, size_t w, size_t h, CUstream s) {
  return device_op(s, real.per_thread(), {dst, span_2d_set(pitch, w * sizeof(T), h)}, {},
                   [&] { return real(dst, pitch, v, w, h, s); }, "cuMemsetD2DAsync");
}

template <class V> CUresult on_cuMemsetD8(const V& r, CUdeviceptr d, unsigned char v, size_t n) { return memset_1d(r, d, v, n); }
template <class V> CUresult on_cuMemsetD16(const V& r, CUdeviceptr d, unsigned short v, size_t n) { return memset_1d(r, d, v, n); }
template <class V> CUresult on_cuMemsetD32(const V& r, CUdeviceptr d, unsigned int v, size_t n) { return memset_1d(r, d, v, n); }
template <class V> CUresult on_cuMemsetD8Async(const V& r, CUdeviceptr d, unsigned char v, size_t n, CUstream s) { return memset_1d_async(r, d, v, n, s); }
template <class V> CUresult on_cuMemsetD16Async(const V& r, CUdeviceptr d, unsigned short v, size_t n, CUstream s) { return memset_1d_async(r, d, v, n, s); }
template <class V> CUresult on_cuMemsetD32Async(const V& r, CUdeviceptr d, unsigned int v, size_t n, CUstream s) { return memset_1d_async(r, d, v, n, s); }
template <class V> CUresult on_cuMemsetD2D8(const V& r, CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h) { return memset_2d(r, d, p, v, w, h); }
template <class V> CUresult on_cuMemsetD2D16(const V& r, CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h) { return memset_2d(r, d, p, v, w, h); }
template <class V> CUresult on_cuMemsetD2D32(const V& r, CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h) { return memset_2d(r, d, p, v, w, h); }
template <class V> CUresult on_cuMemsetD2D8Async(const V& r, CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h, CUstream s) { return memset_2d_async(r, d, p, v, w, h, s); }
template <class V> CUresult on_cuMemsetD2D16Async(const V& r, CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h, CUstream s) { return memset_2d_async(r, d, p, v, w, h, s); }
template <class V> CUresult on_cuMemsetD2D32Async(const V& r, CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h, CUstream s) { return memset_2d_async(r, d, p, v, w, h, s); }

}  // namespace vstack::shim
