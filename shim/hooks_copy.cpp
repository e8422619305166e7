#include "shim/hooks_copy.hpp"

namespace vstack::shim {

namespace {
bool is_device(CUmemorytype t) { return t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_UNIFIED; }
}  // namespace

Span span_2d(const CUDA_MEMCPY2D& c, bool src) {
  const CUmemorytype t = src ? c.srcMemoryType : c.dstMemoryType;
  if (!is_device(t) || c.Height == 0) return {};
  const CUdeviceptr base = src ? c.srcDevice : c.dstDevice;
  const size_t x = src ? c.srcXInBytes : c.dstXInBytes, y = src ? c.srcY : c.dstY;
  const size_t pitch = src ? c.srcPitch : c.dstPitch;
  return {base + y * pitch + x, (c.Height - 1) * pitch + c.WidthInBytes};
}

Span span_3d(const CUDA_MEMCPY3D& c, bool src) {
  const CUmemorytype t = src ? c.srcMemoryType : c.dstMemoryType;
  if (!is_device(t) || c.Height == 0 || c.Depth == 0) return {};
  const CUdeviceptr base = src ? c.srcDevice : c.dstDevice;
  const size_t x = src ? c.srcXInBytes : c.dstXInBytes, y = src ? c.srcY : c.dstY, z = src ? c.srcZ : c.dstZ;
  const size_t pitch = src ? c.srcPitch : c.dstPitch, h = src ? c.srcHeight : c.dstHeight;
  return {base + (z * h + y) * pitch + x, ((c.Depth - 1) * h + (c.Height - 1)) * pitch + c.WidthInBytes};
}

}  // namespace vstack::shim
