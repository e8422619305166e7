// Checks the C API's arguments and turns them into kernel parameters. Host-only C++ (no CUDA),
// so tests/attn/ runs it on the CPU. Each failure returns a status and records a message that
// names the argument (vstack_last_error()).
#pragma once

#include <cstddef>

#include "attn/params.hpp"
#include "vstack/attn.h"

namespace vstack::attn {

vstack_status_t validate_shape(const vstack_attn_shape_t& in, Shape* out);

// Forward / backward arguments (everything but the split count and the workspace).
vstack_status_t validate_fwd(const vstack_attn_fwd_args_t& a, FwdParams* out);
vstack_status_t validate_bwd(const vstack_attn_bwd_args_t& a, BwdParams* out);

// Workspace layouts (each piece 256-byte aligned).
size_t fwd_workspace_bytes(const Shape& s, int num_splits);
size_t bwd_workspace_bytes(const Shape& s);
void fwd_workspace_carve(const Shape& s, int num_splits, void* ws, FwdParams* p);
void bwd_workspace_carve(const Shape& s, void* ws, BwdParams* p);

}  // namespace vstack::attn
