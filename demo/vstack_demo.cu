// The vstack demo: an ordinary CUDA program that knows nothing of vstack.
// It allocates --footprint-mib of device memory in --chunk-mib allocations,
// writes a distinct pattern into every byte from kernels, then reads every
// byte back with a verifying kernel, and prints a one-line verdict.
//
// Run natively, the footprint must fit the GPU. Run under
//   build/tools/vstack-run --config configs/demo.json -- vstack_demo --footprint-mib 3x-the-GPU-tier
// it works the same although the GPU tier holds only a third of it: the pager
// moves pages between the GPU and the host as the kernels need them.
// (The footprint comes from the command line: under vstack cudaMemGetInfo
// reports the capacity of all tiers, not the GPU tier.)
//
// Exit status: 0 every byte correct, 1 wrong bytes, 2 a CUDA error, 64 usage.
#include <cuda_runtime.h>

#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <vector>

#define CK(call)                                                                                       \
  do {                                                                                                 \
    cudaError_t e_ = (call);                                                                           \
    if (e_ != cudaSuccess) {                                                                           \
      std::fprintf(stderr, "vstack demo: %s failed at %s:%d: %s\n", #call, __FILE__, __LINE__,         \
                   cudaGetErrorString(e_));                                                            \
      std::exit(2);                                                                                    \
    }                                                                                                  \
  } while (0)

namespace {

constexpr uint64_t kMiB = 1ull << 20;

// A different 32-bit value for every word of every allocation.
__host__ __device__ inline uint32_t pattern(uint64_t alloc, uint64_t word) {
  uint64_t x = (alloc << 40) ^ word ^ 0x243F6A8885A308D3ull;
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

__global__ void write_kernel(uint32_t* p, uint64_t words, uint64_t alloc) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride) p[i] = pattern(alloc, i);
}

__global__ void verify_kernel(const uint32_t* p, uint64_t words, uint64_t alloc, unsigned long long* wrong) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  unsigned long long bad = 0;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride) {
    const uint32_t d = p[i] ^ pattern(alloc, i);
    bad += __popc((((d & 0x7F7F7F7Fu) + 0x7F7F7F7Fu) | d) & 0x80808080u);  // wrong bytes in this word
  }
  if (bad) atomicAdd(wrong, bad);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t footprint_mib = 0, chunk_mib = 256, tier_mib = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    uint64_t* dst = nullptr;
    if (!std::strcmp(argv[i], "--footprint-mib")) dst = &footprint_mib;
    if (!std::strcmp(argv[i], "--chunk-mib")) dst = &chunk_mib;
    if (!std::strcmp(argv[i], "--tier-mib")) dst = &tier_mib;
    if (!dst) break;
    *dst = std::strtoull(argv[i + 1], nullptr, 10);
  }
  if (footprint_mib == 0 || chunk_mib == 0) {
    std::fprintf(stderr, "usage: %s --footprint-mib N [--chunk-mib 256] [--tier-mib T (for the message)]\n", argv[0]);
    return 64;
  }
  std::printf("vstack demo: pid %d, footprint %" PRIu64 " MiB in %" PRIu64 " MiB allocations\n", int(getpid()),
              footprint_mib, chunk_mib);
  std::fflush(stdout);

  const uint64_t n = (footprint_mib + chunk_mib - 1) / chunk_mib;
  std::vector<uint32_t*> bufs(n);
  std::vector<uint64_t> words(n);
  unsigned long long* d_wrong = nullptr;
  CK(cudaMalloc(reinterpret_cast<void**>(&d_wrong), sizeof *d_wrong));
  CK(cudaMemset(d_wrong, 0, sizeof *d_wrong));

  auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t mib = (i + 1 == n) ? footprint_mib - chunk_mib * (n - 1) : chunk_mib;
    words[i] = mib * kMiB / 4;
    CK(cudaMalloc(reinterpret_cast<void**>(&bufs[i]), mib * kMiB));
    write_kernel<<<1024, 256>>>(bufs[i], words[i], i);
    CK(cudaGetLastError());
  }
  CK(cudaDeviceSynchronize());
  const double t_write = seconds_since(t0);

  t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < n; ++i) {
    verify_kernel<<<1024, 256>>>(bufs[i], words[i], i, d_wrong);
    CK(cudaGetLastError());
  }
  unsigned long long wrong = 0;
  CK(cudaMemcpy(&wrong, d_wrong, sizeof wrong, cudaMemcpyDeviceToHost));
  const double t_verify = seconds_since(t0);

  for (auto* p : bufs) CK(cudaFree(p));
  CK(cudaFree(d_wrong));

  char ratio[96] = "";
  if (tier_mib) {
    std::snprintf(ratio, sizeof ratio, " (%.1fx the %" PRIu64 " MiB GPU tier)", double(footprint_mib) / double(tier_mib),
                  tier_mib);
  }
  std::printf("vstack demo: wrote and verified %" PRIu64 " MiB%s in %" PRIu64
              " allocations: %s (write %.3f s, verify %.3f s)\n",
              footprint_mib, ratio, n, wrong ? "WRONG BYTES" : "every byte correct", t_write, t_verify);
  if (wrong) std::printf("vstack demo: %llu bytes differ from what was written\n", wrong);
  return wrong ? 1 : 0;
}
