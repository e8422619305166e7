// Three levels of assertion, keyed to the meson option `checks`:
//   VSTACK_CHECK           always on (cheap invariants whose failure means corruption)
//   VSTACK_DCHECK          debug builds (checks=debug or expensive)
//   VSTACK_EXPENSIVE(stmt) runs stmt only with checks=expensive (e.g. pool validate())
// The failure path does not allocate: it writes a fixed message with write(2) and aborts.
#pragma once

#ifndef VSTACK_CHECK_LEVEL
#define VSTACK_CHECK_LEVEL 2
#endif

namespace vstack {
[[noreturn]] void check_failed(const char* expr, const char* file, int line) noexcept;
}

#define VSTACK_CHECK(cond) \
  ((cond) ? (void)0 : ::vstack::check_failed(#cond, __FILE__, __LINE__))

#if VSTACK_CHECK_LEVEL >= 2
#define VSTACK_DCHECK(cond) VSTACK_CHECK(cond)
#else
#define VSTACK_DCHECK(cond) ((void)0)
#endif

#if VSTACK_CHECK_LEVEL >= 3
#define VSTACK_EXPENSIVE(stmt) \
  do {                         \
    stmt;                      \
  } while (0)
#else
#define VSTACK_EXPENSIVE(stmt) ((void)0)
#endif
