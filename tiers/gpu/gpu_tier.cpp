// The gpu tier: device memory of the compute device, cuMemCreate'd in chunks.
#include "tiers/tiers.hpp"

namespace vstack::tiers {

std::unique_ptr<Backend> make_gpu_tier(prim::Vmm& vmm, const TierConfig& c, TierStats* st) {
  return make_vmm_backend(vmm, "gpu", TierKind::gpu, {prim::LocKind::device, c.device}, c.capacity_bytes, st);
}

}  // namespace vstack::tiers
