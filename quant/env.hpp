// Settings read from the environment by the FP4 launchers: tests and benchmarks force a plan or a
// config with them; unset in normal use. Host code.
#pragma once

#include <cstdlib>

namespace vstack::quant {

// The value of the environment variable `name`, or nullptr where it is missing or empty.
inline const char* env_value(const char* name) {
  const char* e = std::getenv(name);
  return e && *e ? e : nullptr;
}

// Whether it is set to something (not missing, not empty).
inline bool env_set(const char* name) { return env_value(name) != nullptr; }

// Its integer value (atoi), or `unset` where it is missing or empty.
inline int env_int(const char* name, int unset) {
  const char* e = env_value(name);
  return e ? std::atoi(e) : unset;
}

// A switch: -1 where it is missing or empty, 0 where its integer value is 0, else 1.
inline int env_flag(const char* name) { return env_set(name) ? (env_int(name, 0) != 0 ? 1 : 0) : -1; }

// The same where it lies in [lo, hi], else `otherwise` (missing and empty included).
inline int env_int_in(const char* name, int lo, int hi, int otherwise) {
  const int v = env_int(name, lo - 1);
  return v >= lo && v <= hi ? v : otherwise;
}

// The same where it is a power of two in [1, max], else 0 (missing and empty included).
inline int env_pow2(const char* name, int max) {
  const int v = env_int(name, 0);
  return v >= 1 && v <= max && (v & (v - 1)) == 0 ? v : 0;
}

}  // namespace vstack::quant
