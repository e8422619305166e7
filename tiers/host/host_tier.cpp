// The host tier: pinned host memory as cuMemCreate(CU_MEM_LOCATION_TYPE_HOST_NUMA)
// chunks, mapped into the same VA as device chunks.
//
// Note [Why host chunks stay mapped]
// Rationale: the kernel-argument scan cannot see pointers stored in device
// memory. If demoted pages were unmapped, a kernel reaching one that way would
// fault. Mapped host chunks make such a kernel correct, only slower (~51 GB/s
// kernel reads on H200 instead of ~3.8 TB/s).
// Approach: HOST_NUMA VMM chunks (device attribute 141) mapped with device
// read/write access; one VA range may mix device and host chunks (measured).
// Limitations: creating them pins memory, ~0.7 ms per 2 MiB, so chunks are
// pooled and reused rather than created per migration.
#include "tiers/tiers.hpp"

namespace vstack::tiers {

std::unique_ptr<Backend> make_host_tier(prim::Vmm& vmm, const TierConfig& c, TierStats* st) {
  return make_vmm_backend(vmm, "host", TierKind::host, {prim::LocKind::host_numa, c.numa_node},
                          c.capacity_bytes, st);
}

Result<std::unique_ptr<Backend>> make_tier(prim::Vmm& vmm, const TierConfig& c, TierStats* st) {
  switch (c.kind) {
    case TierKind::gpu: return make_gpu_tier(vmm, c, st);
    case TierKind::peer: return make_peer_tier(vmm, c, st);
    case TierKind::host: return make_host_tier(vmm, c, st);
    case TierKind::nvme: break;
  }
  return Status(Code::not_supported, "tier kind nvme is not implemented in this build (gpu, peer, host are)");
}

}  // namespace vstack::tiers
