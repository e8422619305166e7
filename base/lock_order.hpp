// Note [Lock order]
// Locks are taken in this order and never the other way round. Debug builds
// check it per thread: taking a lock whose rank is not higher than the highest
// rank held aborts. A function that expects locks says so with a `// LOCKING:`
// comment.
//
//   rank 10  Pool::mu_      (shared: launch fast path; exclusive: faults,
//                            allocation, free, migration, eviction)
//   rank 20  StreamTable::mu_ (per-launch completion tracking)
//   rank 30  Tier::mu_      (a tier's chunk free list and counters)
//   rank 40  Stats (atomics only; the dump thread takes no pool lock)
#pragma once

#include <mutex>
#include <shared_mutex>

#include "base/check.hpp"

namespace vstack {

enum class LockRank : int { pool = 10, streams = 20, tier = 30 };

namespace lock_order {
#if VSTACK_CHECK_LEVEL >= 2
void acquire(LockRank r);
void release(LockRank r);
#else
inline void acquire(LockRank) {}
inline void release(LockRank) {}
#endif
}  // namespace lock_order

// A mutex that knows its rank.
template <class M, LockRank R>
class RankedMutex {
 public:
  void lock() { lock_order::acquire(R); m_.lock(); }
  void unlock() { m_.unlock(); lock_order::release(R); }
  void lock_shared() { lock_order::acquire(R); m_.lock_shared(); }
  void unlock_shared() { m_.unlock_shared(); lock_order::release(R); }

 private:
  M m_;
};

}  // namespace vstack
