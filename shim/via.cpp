#include "shim/via.hpp"

#include "shim/real.hpp"

namespace vstack::shim {

pool::Pool::Target target(CUstream s, bool per_thread_entry) {
  pool::Pool::Target t;
  t.per_thread = s == CU_STREAM_PER_THREAD || (per_thread_entry && s == nullptr);
  t.stream = t.per_thread ? CU_STREAM_PER_THREAD : (s == CU_STREAM_LEGACY ? nullptr : s);
  if (captures_active().load(std::memory_order_relaxed) > 0 && real().cuStreamIsCapturing) {
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult e = real().cuStreamIsCapturing(static_cast<CUstream>(t.stream), &st);
    // The legacy stream cannot be captured; asking may fail while others capture.
    t.capturing = e == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE;
  }
  return t;
}

RelaxedCapture::RelaxedCapture() {
  if (captures_active().load(std::memory_order_relaxed) > 0 && real().cuThreadExchangeStreamCaptureMode) {
    on_ = real().cuThreadExchangeStreamCaptureMode(&mode_) == CUDA_SUCCESS;
  }
}

RelaxedCapture::~RelaxedCapture() {
  if (on_) real().cuThreadExchangeStreamCaptureMode(&mode_);
}

}  // namespace vstack::shim
