// Status strings and the thread-local last-error message of the kernels' C API.
#include "kernels/status.hpp"

#include <cstdio>
#include <cstdarg>

namespace {
thread_local char g_last_error[512] = "";
}

extern "C" VSTACK_API const char* vstack_status_string(vstack_status_t s) {
  switch (s) {
    case VSTACK_OK: return "ok";
    case VSTACK_ERR_INVALID_ARGUMENT: return "invalid argument";
    case VSTACK_ERR_UNSUPPORTED_SHAPE: return "unsupported shape";
    case VSTACK_ERR_UNSUPPORTED_DTYPE: return "unsupported dtype";
    case VSTACK_ERR_MISALIGNED: return "misaligned pointer";
    case VSTACK_ERR_UNSUPPORTED_DEVICE: return "unsupported device";
    case VSTACK_ERR_CUDA: return "CUDA error";
    case VSTACK_ERR_OUT_OF_MEMORY: return "out of memory";
  }
  return "unknown status";
}

extern "C" VSTACK_API const char* vstack_last_error(void) { return g_last_error; }

namespace vstack::kernels {

vstack_status_t fail(vstack_status_t s, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(g_last_error, sizeof(g_last_error), fmt, ap);
  va_end(ap);
  return s;
}

void clear_error() { g_last_error[0] = '\0'; }

}  // namespace vstack::kernels
