// Kernel-argument scanning.
//
// Per CUfunction (or CUkernel cast to one, as cudart 13 launches them) the
// parameter layout is asked once from cuFuncGetParamInfo, falling back to
// cuKernelGetParamInfo, and cached. At launch every 8-byte word of every
// parameter (structs and __grid_constant__ tensor maps included) and the
// whole `extra` buffer is looked up in the page table. The scan is
// conservative: a false hit costs bandwidth, never correctness.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "pool/pool.hpp"
#include "shim/cuda_api.hpp"

namespace vstack::shim {

struct ParamLayout {
  std::vector<uint32_t> size;  // bytes of each parameter, in order
  bool known = false;          // false: the driver would not tell
};

// The cached layout of f (computed on first use; thread safe).
const ParamLayout& layout_of(CUfunction f);

// Adds the references of one launch.
void scan_launch(const pool::Pool& pool, const ParamLayout& l, void** params, void** extra, pool::RefSet& out);

// Words of one launch, saved for graph nodes (same rules as scan_launch).
void collect_words(const ParamLayout& l, void** params, void** extra, std::vector<uint64_t>& out);

}  // namespace vstack::shim
