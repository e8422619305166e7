// Shared helpers of the pager's GPU test programs. These programs are ordinary
// CUDA runtime applications: they know nothing of vstack and must run the same
// natively and under `vstack-run`.
#pragma once

#include <cuda_runtime.h>

#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../cuda_check.hpp"  // CK(): every CUDA call checked

namespace pagertest {

// After a kernel launch: the launch itself must have been accepted.
#define CK_LAUNCH() CK(cudaGetLastError())

constexpr uint64_t kMiB = 1ull << 20;

// The pattern word `i` of a buffer whose key is `key`. splitmix64's finaliser:
// every word differs from its neighbours, from the same word of every other
// buffer and from every other generation of the same buffer, so a page that
// lands at the wrong address, an older copy of a page, or a page of another
// allocation is detected.
__host__ __device__ inline uint32_t pattern(uint64_t key, uint64_t i) {
  uint64_t x = key ^ (i * 0x9E3779B97F4A7C15ull);
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<uint32_t>(x);
}

// Byte `b` of a buffer with key `key` (little endian words).
__host__ __device__ inline uint8_t pattern_byte(uint64_t key, uint64_t b) {
  return static_cast<uint8_t>(pattern(key, b / 4) >> (8 * (b % 4)));
}

// Key of generation `gen` of allocation `id`.
__host__ __device__ inline uint64_t make_key(uint64_t id, uint64_t gen) {
  return (id * 0xD1B54A32D192ED03ull) ^ (gen * 0x8CB92BA72F3D8DD7ull) ^ 0x5851F42D4C957F2Dull;
}

// Where a verifying kernel reports: number of wrong bytes and the lowest wrong
// byte offset (UINT64_MAX when none).
struct ErrorSlot {
  unsigned long long wrong;
  unsigned long long first;
};

// Parse "--name value" style integer options.
inline bool arg_u64(int argc, char** argv, const char* name, uint64_t* out) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) {
      char* end = nullptr;
      unsigned long long v = std::strtoull(argv[i + 1], &end, 0);
      if (end == argv[i + 1] || *end != '\0') {
        std::fprintf(stderr, "bad value for %s: '%s'\n", name, argv[i + 1]);
        std::exit(64);
      }
      *out = v;
      return true;
    }
  }
  return false;
}

// Small deterministic PRNG for the host side (xorshift64*).
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
  }
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
  double unit() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
};

}  // namespace pagertest
