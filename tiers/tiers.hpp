// Factories: one per tier kind (one folder each), and make_tier() dispatching on the config.
#pragma once

#include "tiers/backend.hpp"

namespace vstack::tiers {

std::unique_ptr<Backend> make_gpu_tier(prim::Vmm& vmm, const TierConfig& c, TierStats* st);
std::unique_ptr<Backend> make_peer_tier(prim::Vmm& vmm, const TierConfig& c, TierStats* st);
std::unique_ptr<Backend> make_host_tier(prim::Vmm& vmm, const TierConfig& c, TierStats* st);

// c.capacity_bytes must be resolved (not auto). nvme → Code::not_supported for now.
Result<std::unique_ptr<Backend>> make_tier(prim::Vmm& vmm, const TierConfig& c, TierStats* st);

}  // namespace vstack::tiers
