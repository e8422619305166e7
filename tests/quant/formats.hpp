// The FP4 formats in enum order, for the tests that loop over every format (CPU and GPU).
#pragma once

#include <iterator>

#include "quant/format.hpp"

namespace vstack::quant {

inline constexpr Format kAllFormats[] = {Format::nvfp4, Format::mxfp4, Format::nf4, Format::nf4_dq};
static_assert(std::size(kAllFormats) == kNumFormats, "every format once");

}  // namespace vstack::quant
