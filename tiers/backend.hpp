// A tier backend: a class of physical chunks (gpu, peer, host, nvme).
// It knows its capacity, hands out and takes back chunks (pooled for reuse:
// creating a pinned host chunk costs ~0.7 ms per 2 MiB), and says whether its
// chunks are mapped, i.e. readable by kernels through the application's VA.
//
// Invariant (checked by validate()):
//   used() == chunk bytes handed out + charged bytes
//   used() + pooled bytes <= capacity()   (pooled chunks are dropped to make room)
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/config.hpp"
#include "base/stats.hpp"
#include "base/status.hpp"
#include "pool/prim/vmm.hpp"

namespace vstack::tiers {

// Device work that may still touch a chunk, as an event plus who owns it.
// Shared between a migrated page (its data arrives when the fence passes)
// and the chunk it left (reusable once the fence passes).
class Fence {
 public:
  Fence(prim::Vmm& vmm, prim::Event ev) : vmm_(vmm), ev_(ev) {}
  ~Fence() { (void)vmm_.event_destroy(ev_); }
  Fence(const Fence&) = delete;
  Fence& operator=(const Fence&) = delete;
  prim::Event event() const { return ev_; }
  // True once the device passed it (cached).
  bool passed();
  Status wait();

 private:
  prim::Vmm& vmm_;
  prim::Event ev_;
  bool passed_ = false;
};
using FencePtr = std::shared_ptr<Fence>;

struct Chunk {
  prim::Handle handle = 0;
  prim::DevPtr staging = 0;  // permanent private mapping used as copy source/target
  uint64_t bytes = 0;
  FencePtr busy;             // set while device work may still use the chunk
  explicit operator bool() const { return bytes != 0; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const std::string& name() const = 0;
  virtual TierKind kind() const = 0;
  virtual bool mapped() const = 0;
  virtual uint64_t capacity() const = 0;
  virtual uint64_t used() const = 0;
  // A chunk of exactly `bytes` (a granule multiple). Code::out_of_memory when
  // it does not fit under the capacity (after dropping pooled chunks) or the
  // driver refuses; nothing changes then.
  virtual Result<Chunk> acquire(uint64_t bytes) = 0;
  // Back to the pool (kept for reuse; busy fence carried along).
  virtual void release(Chunk c) = 0;
  // Memory used outside the pool that counts against this tier (pass-through
  // allocations, the application's own cuMemCreate). out_of_memory if over.
  virtual Status charge(uint64_t bytes) = 0;
  virtual void uncharge(uint64_t bytes) = 0;
  // Destroy pooled chunks until at most `keep_bytes` stay pooled.
  virtual void trim(uint64_t keep_bytes) = 0;
  virtual bool validate() const = 0;
};

// A backend whose chunks are cuMemCreate handles at one location (gpu, peer, host).
// `stats` may be null.
std::unique_ptr<Backend> make_vmm_backend(prim::Vmm& vmm, std::string name, TierKind kind,
                                          prim::Location loc, uint64_t capacity, TierStats* stats);

}  // namespace vstack::tiers
