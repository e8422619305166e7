// The peer tier: device memory of another GPU, mapped into the compute
// device's VA (NVLink: ~342 GB/s kernel reads, 354 GB/s copies on 2× H200).
// The mapping grants the compute device access, so pages here stay readable
// by kernels, like host pages, only faster.
#include "tiers/tiers.hpp"

namespace vstack::tiers {

std::unique_ptr<Backend> make_peer_tier(prim::Vmm& vmm, const TierConfig& c, TierStats* st) {
  return make_vmm_backend(vmm, "peer" + std::to_string(c.device), TierKind::peer,
                          {prim::LocKind::device, c.device}, c.capacity_bytes, st);
}

}  // namespace vstack::tiers
