// Every cuMemcpy* / cuMemset* form of the subset. Synchronous forms queue on
// the legacy stream (the per-thread stream for _ptds) and wait; asynchronous
// ones queue on their stream (0 is the per-thread stream for _ptsz). The
// stream worker does the memcpy / memset on the raw addresses.
#include "internal.hpp"

namespace fakecuda {
namespace {

constexpr CUmemorytype kDev = CU_MEMORYTYPE_DEVICE;
constexpr CUmemorytype kHost = CU_MEMORYTYPE_HOST;

CUresult base_address(CUmemorytype type, const void* host, CUdeviceptr dev, uintptr_t* out) {
  switch (type) {
    case CU_MEMORYTYPE_HOST: *out = reinterpret_cast<uintptr_t>(host); return CUDA_SUCCESS;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED: *out = dev; return CUDA_SUCCESS;
    case CU_MEMORYTYPE_ARRAY: return CUDA_ERROR_NOT_SUPPORTED;  // no CUDA arrays here
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

CopyWork linear(uintptr_t dst, uintptr_t src, size_t n,
              CUmemorytype dst_type = CU_MEMORYTYPE_UNIFIED,
              CUmemorytype src_type = CU_MEMORYTYPE_UNIFIED) {
  CopyWork c;
  c.dst_type = dst_type;
  c.src_type = src_type;
  c.dst = reinterpret_cast<unsigned char*>(dst);
  c.src = reinterpret_cast<const unsigned char*>(src);
  c.width = n;
  return c;
}

CUresult copy_from_2d(const CUDA_MEMCPY2D* p, CopyWork* out) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_MEMCPY3D q{};
  q.srcXInBytes = p->srcXInBytes;
  q.srcY = p->srcY;
  q.srcMemoryType = p->srcMemoryType;
  q.srcHost = p->srcHost;
  q.srcDevice = p->srcDevice;
  q.srcArray = p->srcArray;
  q.srcPitch = p->srcPitch;
  q.srcHeight = p->Height;
  q.dstXInBytes = p->dstXInBytes;
  q.dstY = p->dstY;
  q.dstMemoryType = p->dstMemoryType;
  q.dstHost = p->dstHost;
  q.dstDevice = p->dstDevice;
  q.dstArray = p->dstArray;
  q.dstPitch = p->dstPitch;
  q.dstHeight = p->Height;
  q.WidthInBytes = p->WidthInBytes;
  q.Height = p->Height;
  q.Depth = 1;
  return copy_from_3d(q, out);
}

SetWork set_2d(CUdeviceptr dst, size_t pitch, unsigned value, unsigned element, size_t w, size_t h) {
  SetWork s;
  s.dst = reinterpret_cast<unsigned char*>(dst);
  s.pitch = pitch;
  s.value = value;
  s.element = element;
  s.width = w;
  s.height = h;
  return s;
}

CUresult check_set(const SetWork& s) {
  if (s.element != 1 && s.element != 2 && s.element != 4) return CUDA_ERROR_INVALID_VALUE;
  if (reinterpret_cast<uintptr_t>(s.dst) % s.element != 0) return CUDA_ERROR_INVALID_VALUE;
  if (s.height > 1 && s.pitch < s.width * s.element) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult set_sync(SetWork s, bool ptd) {
  if (CUresult r = check_set(s)) return r;
  return run_sync(nullptr, ptd, s);
}

CUresult set_async(SetWork s, CUstream h, bool ptd) {
  if (CUresult r = check_set(s)) return r;
  return run_async(h, ptd, s);
}

CUresult copy2d_sync(const CUDA_MEMCPY2D* p, bool ptd) {
  CopyWork c;
  if (CUresult r = copy_from_2d(p, &c)) return r;
  return run_sync(nullptr, ptd, c);
}

CUresult copy2d_async(const CUDA_MEMCPY2D* p, CUstream h, bool ptd) {
  CopyWork c;
  if (CUresult r = copy_from_2d(p, &c)) return r;
  return run_async(h, ptd, c);
}

CUresult copy3d_sync(const CUDA_MEMCPY3D* p, bool ptd) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CopyWork c;
  if (CUresult r = copy_from_3d(*p, &c)) return r;
  return run_sync(nullptr, ptd, c);
}

CUresult copy3d_async(const CUDA_MEMCPY3D* p, CUstream h, bool ptd) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CopyWork c;
  if (CUresult r = copy_from_3d(*p, &c)) return r;
  return run_async(h, ptd, c);
}

CUresult peer_check(CUcontext a, CUcontext b) {
  Lock lock(driver_lock());
  return valid_context(a) && valid_context(b) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

}  // namespace

CUresult copy_from_3d(const CUDA_MEMCPY3D& p, CopyWork* out) {
  uintptr_t src = 0, dst = 0;
  if (CUresult r = base_address(p.srcMemoryType, p.srcHost, p.srcDevice, &src)) return r;
  if (CUresult r = base_address(p.dstMemoryType, p.dstHost, p.dstDevice, &dst)) return r;
  if (p.srcLOD != 0 || p.dstLOD != 0) return CUDA_ERROR_INVALID_VALUE;
  size_t h = p.Height == 0 ? 1 : p.Height;
  size_t d = p.Depth == 0 ? 1 : p.Depth;
  bool rows = h > 1 || d > 1;
  if (rows && (p.srcPitch < p.WidthInBytes + p.srcXInBytes ||
               p.dstPitch < p.WidthInBytes + p.dstXInBytes))
    return CUDA_ERROR_INVALID_VALUE;
  if (d > 1 && (p.srcHeight < h + p.srcY || p.dstHeight < h + p.dstY))
    return CUDA_ERROR_INVALID_VALUE;
  CopyWork c;
  c.src = reinterpret_cast<const unsigned char*>(src) +
          (p.srcZ * p.srcHeight + p.srcY) * p.srcPitch + p.srcXInBytes;
  c.dst = reinterpret_cast<unsigned char*>(dst) +
          (p.dstZ * p.dstHeight + p.dstY) * p.dstPitch + p.dstXInBytes;
  c.src_pitch = p.srcPitch;
  c.dst_pitch = p.dstPitch;
  c.src_height = p.srcHeight;
  c.dst_height = p.dstHeight;
  c.width = p.WidthInBytes;
  c.height = h;
  c.depth = d;
  c.src_type = p.srcMemoryType;
  c.dst_type = p.dstMemoryType;
  *out = c;
  return CUDA_SUCCESS;
}

CUDA_MEMCPY3D copy_to_3d(const CopyWork& c) {
  CUDA_MEMCPY3D p{};
  p.srcMemoryType = c.src_type;
  p.dstMemoryType = c.dst_type;
  if (c.src_type == CU_MEMORYTYPE_HOST)
    p.srcHost = c.src;
  else
    p.srcDevice = reinterpret_cast<CUdeviceptr>(c.src);
  if (c.dst_type == CU_MEMORYTYPE_HOST)
    p.dstHost = c.dst;
  else
    p.dstDevice = reinterpret_cast<CUdeviceptr>(c.dst);
  bool rows = c.height > 1 || c.depth > 1;
  p.srcPitch = rows ? c.src_pitch : c.width;
  p.dstPitch = rows ? c.dst_pitch : c.width;
  p.srcHeight = rows ? c.src_height : 1;
  p.dstHeight = rows ? c.dst_height : 1;
  p.WidthInBytes = c.width;
  p.Height = c.height;
  p.Depth = c.depth;
  return p;
}

CUresult set_from_params(const CUDA_MEMSET_NODE_PARAMS& p, SetWork* out) {
  SetWork s = set_2d(p.dst, p.pitch, p.value, p.elementSize, p.width, p.height == 0 ? 1 : p.height);
  if (CUresult r = check_set(s)) return r;
  *out = s;
  return CUDA_SUCCESS;
}

}  // namespace fakecuda

using namespace fakecuda;

extern "C" {
decltype(cuMemcpy) cuMemcpy_ptds;
decltype(cuMemcpyAsync) cuMemcpyAsync_ptsz;
decltype(cuMemcpyHtoD_v2) cuMemcpyHtoD_v2_ptds;
decltype(cuMemcpyDtoH_v2) cuMemcpyDtoH_v2_ptds;
decltype(cuMemcpyDtoD_v2) cuMemcpyDtoD_v2_ptds;
decltype(cuMemcpyHtoDAsync_v2) cuMemcpyHtoDAsync_v2_ptsz;
decltype(cuMemcpyDtoHAsync_v2) cuMemcpyDtoHAsync_v2_ptsz;
decltype(cuMemcpyDtoDAsync_v2) cuMemcpyDtoDAsync_v2_ptsz;
decltype(cuMemcpyPeer) cuMemcpyPeer_ptds;
decltype(cuMemcpyPeerAsync) cuMemcpyPeerAsync_ptsz;
decltype(cuMemcpy2D_v2) cuMemcpy2D_v2_ptds;
decltype(cuMemcpy2DUnaligned_v2) cuMemcpy2DUnaligned_v2_ptds;
decltype(cuMemcpy2DAsync_v2) cuMemcpy2DAsync_v2_ptsz;
decltype(cuMemcpy3D_v2) cuMemcpy3D_v2_ptds;
decltype(cuMemcpy3DAsync_v2) cuMemcpy3DAsync_v2_ptsz;
decltype(cuMemsetD8_v2) cuMemsetD8_v2_ptds;
decltype(cuMemsetD16_v2) cuMemsetD16_v2_ptds;
decltype(cuMemsetD32_v2) cuMemsetD32_v2_ptds;
decltype(cuMemsetD8Async) cuMemsetD8Async_ptsz;
decltype(cuMemsetD16Async) cuMemsetD16Async_ptsz;
decltype(cuMemsetD32Async) cuMemsetD32Async_ptsz;
decltype(cuMemsetD2D8_v2) cuMemsetD2D8_v2_ptds;
decltype(cuMemsetD2D16_v2) cuMemsetD2D16_v2_ptds;
decltype(cuMemsetD2D32_v2) cuMemsetD2D32_v2_ptds;
decltype(cuMemsetD2D8Async) cuMemsetD2D8Async_ptsz;
decltype(cuMemsetD2D16Async) cuMemsetD2D16Async_ptsz;
decltype(cuMemsetD2D32Async) cuMemsetD2D32Async_ptsz;
}

// ---- 1D copies ----------------------------------------------------------------
FAKECUDA_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return run_sync(nullptr, false, linear(dst, src, n));
}
FAKECUDA_API CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return run_sync(nullptr, true, linear(dst, src, n));
}
FAKECUDA_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
  return run_async(h, false, linear(dst, src, n));
}
FAKECUDA_API CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
  return run_async(h, true, linear(dst, src, n));
}
FAKECUDA_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
  return run_sync(nullptr, false, linear(dst, reinterpret_cast<uintptr_t>(src), n, kDev, kHost));
}
FAKECUDA_API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void* src, size_t n) {
  return run_sync(nullptr, true, linear(dst, reinterpret_cast<uintptr_t>(src), n, kDev, kHost));
}
FAKECUDA_API CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  return run_sync(nullptr, false, linear(reinterpret_cast<uintptr_t>(dst), src, n, kHost, kDev));
}
FAKECUDA_API CUresult cuMemcpyDtoH_v2_ptds(void* dst, CUdeviceptr src, size_t n) {
  return run_sync(nullptr, true, linear(reinterpret_cast<uintptr_t>(dst), src, n, kHost, kDev));
}
FAKECUDA_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return run_sync(nullptr, false, linear(dst, src, n, kDev, kDev));
}
FAKECUDA_API CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return run_sync(nullptr, true, linear(dst, src, n, kDev, kDev));
}
FAKECUDA_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream h) {
  return run_async(h, false, linear(dst, reinterpret_cast<uintptr_t>(src), n, kDev, kHost));
}
FAKECUDA_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void* src, size_t n,
                                                CUstream h) {
  return run_async(h, true, linear(dst, reinterpret_cast<uintptr_t>(src), n, kDev, kHost));
}
FAKECUDA_API CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream h) {
  return run_async(h, false, linear(reinterpret_cast<uintptr_t>(dst), src, n, kHost, kDev));
}
FAKECUDA_API CUresult cuMemcpyDtoHAsync_v2_ptsz(void* dst, CUdeviceptr src, size_t n, CUstream h) {
  return run_async(h, true, linear(reinterpret_cast<uintptr_t>(dst), src, n, kHost, kDev));
}
FAKECUDA_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
  return run_async(h, false, linear(dst, src, n, kDev, kDev));
}
FAKECUDA_API CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n,
                                                CUstream h) {
  return run_async(h, true, linear(dst, src, n, kDev, kDev));
}
FAKECUDA_API CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
                                   size_t n) {
  if (CUresult r = peer_check(dctx, sctx)) return r;
  return run_sync(nullptr, false, linear(dst, src, n, kDev, kDev));
}
FAKECUDA_API CUresult cuMemcpyPeer_ptds(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,
                                        CUcontext sctx, size_t n) {
  if (CUresult r = peer_check(dctx, sctx)) return r;
  return run_sync(nullptr, true, linear(dst, src, n, kDev, kDev));
}
FAKECUDA_API CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,
                                        CUcontext sctx, size_t n, CUstream h) {
  if (CUresult r = peer_check(dctx, sctx)) return r;
  return run_async(h, false, linear(dst, src, n, kDev, kDev));
}
FAKECUDA_API CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,
                                             CUcontext sctx, size_t n, CUstream h) {
  if (CUresult r = peer_check(dctx, sctx)) return r;
  return run_async(h, true, linear(dst, src, n, kDev, kDev));
}

// ---- 2D and 3D copies -----------------------------------------------------------
FAKECUDA_API CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D* p) { return copy2d_sync(p, false); }
FAKECUDA_API CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D* p) { return copy2d_sync(p, true); }
FAKECUDA_API CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D* p) { return copy2d_sync(p, false); }
FAKECUDA_API CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D* p) {
  return copy2d_sync(p, true);
}
FAKECUDA_API CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* p, CUstream h) {
  return copy2d_async(p, h, false);
}
FAKECUDA_API CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D* p, CUstream h) {
  return copy2d_async(p, h, true);
}
FAKECUDA_API CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D* p) { return copy3d_sync(p, false); }
FAKECUDA_API CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D* p) { return copy3d_sync(p, true); }
FAKECUDA_API CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D* p, CUstream h) {
  return copy3d_async(p, h, false);
}
FAKECUDA_API CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D* p, CUstream h) {
  return copy3d_async(p, h, true);
}

// ---- sets ---------------------------------------------------------------------
FAKECUDA_API CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) {
  return set_sync(set_2d(d, n, v, 1, n, 1), false);
}
FAKECUDA_API CUresult cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char v, size_t n) {
  return set_sync(set_2d(d, n, v, 1, n, 1), true);
}
FAKECUDA_API CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n) {
  return set_sync(set_2d(d, 2 * n, v, 2, n, 1), false);
}
FAKECUDA_API CUresult cuMemsetD16_v2_ptds(CUdeviceptr d, unsigned short v, size_t n) {
  return set_sync(set_2d(d, 2 * n, v, 2, n, 1), true);
}
FAKECUDA_API CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned int v, size_t n) {
  return set_sync(set_2d(d, 4 * n, v, 4, n, 1), false);
}
FAKECUDA_API CUresult cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned int v, size_t n) {
  return set_sync(set_2d(d, 4 * n, v, 4, n, 1), true);
}
FAKECUDA_API CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream h) {
  return set_async(set_2d(d, n, v, 1, n, 1), h, false);
}
FAKECUDA_API CUresult cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream h) {
  return set_async(set_2d(d, n, v, 1, n, 1), h, true);
}
FAKECUDA_API CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream h) {
  return set_async(set_2d(d, 2 * n, v, 2, n, 1), h, false);
}
FAKECUDA_API CUresult cuMemsetD16Async_ptsz(CUdeviceptr d, unsigned short v, size_t n, CUstream h) {
  return set_async(set_2d(d, 2 * n, v, 2, n, 1), h, true);
}
FAKECUDA_API CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream h) {
  return set_async(set_2d(d, 4 * n, v, 4, n, 1), h, false);
}
FAKECUDA_API CUresult cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int v, size_t n, CUstream h) {
  return set_async(set_2d(d, 4 * n, v, 4, n, 1), h, true);
}
FAKECUDA_API CUresult cuMemsetD2D8_v2(CUdeviceptr d, size_t pitch, unsigned char v, size_t w,
                                      size_t hgt) {
  return set_sync(set_2d(d, pitch, v, 1, w, hgt), false);
}
FAKECUDA_API CUresult cuMemsetD2D8_v2_ptds(CUdeviceptr d, size_t pitch, unsigned char v, size_t w,
                                           size_t hgt) {
  return set_sync(set_2d(d, pitch, v, 1, w, hgt), true);
}
FAKECUDA_API CUresult cuMemsetD2D16_v2(CUdeviceptr d, size_t pitch, unsigned short v, size_t w,
                                       size_t hgt) {
  return set_sync(set_2d(d, pitch, v, 2, w, hgt), false);
}
FAKECUDA_API CUresult cuMemsetD2D16_v2_ptds(CUdeviceptr d, size_t pitch, unsigned short v, size_t w,
                                            size_t hgt) {
  return set_sync(set_2d(d, pitch, v, 2, w, hgt), true);
}
FAKECUDA_API CUresult cuMemsetD2D32_v2(CUdeviceptr d, size_t pitch, unsigned int v, size_t w,
                                       size_t hgt) {
  return set_sync(set_2d(d, pitch, v, 4, w, hgt), false);
}
FAKECUDA_API CUresult cuMemsetD2D32_v2_ptds(CUdeviceptr d, size_t pitch, unsigned int v, size_t w,
                                            size_t hgt) {
  return set_sync(set_2d(d, pitch, v, 4, w, hgt), true);
}
FAKECUDA_API CUresult cuMemsetD2D8Async(CUdeviceptr d, size_t pitch, unsigned char v, size_t w,
                                        size_t hgt, CUstream h) {
  return set_async(set_2d(d, pitch, v, 1, w, hgt), h, false);
}
FAKECUDA_API CUresult cuMemsetD2D8Async_ptsz(CUdeviceptr d, size_t pitch, unsigned char v,
                                             size_t w, size_t hgt, CUstream h) {
  return set_async(set_2d(d, pitch, v, 1, w, hgt), h, true);
}
FAKECUDA_API CUresult cuMemsetD2D16Async(CUdeviceptr d, size_t pitch, unsigned short v, size_t w,
                                         size_t hgt, CUstream h) {
  return set_async(set_2d(d, pitch, v, 2, w, hgt), h, false);
}
FAKECUDA_API CUresult cuMemsetD2D16Async_ptsz(CUdeviceptr d, size_t pitch, unsigned short v,
                                              size_t w, size_t hgt, CUstream h) {
  return set_async(set_2d(d, pitch, v, 2, w, hgt), h, true);
}
FAKECUDA_API CUresult cuMemsetD2D32Async(CUdeviceptr d, size_t pitch, unsigned int v, size_t w,
                                         size_t hgt, CUstream h) {
  return set_async(set_2d(d, pitch, v, 4, w, hgt), h, false);
}
FAKECUDA_API CUresult cuMemsetD2D32Async_ptsz(CUdeviceptr d, size_t pitch, unsigned int v,
                                              size_t w, size_t hgt, CUstream h) {
  return set_async(set_2d(d, pitch, v, 4, w, hgt), h, true);
}
