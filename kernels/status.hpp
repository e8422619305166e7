// Helpers shared by quant/ and attn/ for their C API entry points.
#pragma once

#include "vstack/kernels.h"

namespace vstack::kernels {

// Record a printf-style message as vstack_last_error() and return s.
vstack_status_t fail(vstack_status_t s, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void clear_error();

}  // namespace vstack::kernels
