// Launchers of the attention kernels, one per (dtype, head_dim, causal); each is instantiated
// in one generated file under gen/ (see generate_kernels.py) and called by api.cu.
#pragma once

#include <cuda_runtime.h>

#include "attn/params.hpp"
#include "vstack/kernels.h"

namespace vstack::attn {

template <typename T, int D, bool Causal>
vstack_status_t launch_fwd(const FwdParams& p, cudaStream_t stream);

template <typename T, int D, bool Causal>
vstack_status_t launch_bwd(const BwdParams& p, cudaStream_t stream);

}  // namespace vstack::attn
