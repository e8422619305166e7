// prim::Vmm over the real CUDA driver. The driver functions are resolved once
// through a caller-supplied resolver (the shim passes its real-driver lookup,
// so the pool never goes through the shim's own hooks).
#pragma once

#include <cuda.h>

#include <memory>

#include "pool/prim/vmm.hpp"

namespace vstack::prim {

using Resolver = void* (*)(const char* name);

struct CudaVmmOptions {
  int device = 0;      // the compute device: mappings grant it access
};

// Resolves the functions; fails with driver_error naming the first missing one.
Result<std::unique_ptr<Vmm>> make_cuda_vmm(Resolver resolve, const CudaVmmOptions& opts);

}  // namespace vstack::prim
