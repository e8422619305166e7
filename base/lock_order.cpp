#include "base/lock_order.hpp"

#if VSTACK_CHECK_LEVEL >= 2
namespace vstack::lock_order {

namespace {
// Ranks held by this thread, as a bitset over rank / 10 (ranks are < 640).
thread_local unsigned long long held = 0;
int bit(LockRank r) { return static_cast<int>(r) / 10; }
}  // namespace

void acquire(LockRank r) {
  const unsigned long long mine = 1ull << bit(r);
  // Every held rank must be strictly lower than r.
  VSTACK_CHECK((held & ~(mine - 1)) == 0 && "lock order violated");
  held |= mine;
}

void release(LockRank r) { held &= ~(1ull << bit(r)); }

}  // namespace vstack::lock_order
#endif
