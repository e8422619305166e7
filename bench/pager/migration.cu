// Copy-engine bandwidth between pinned host memory and the GPU with
// cudaMemcpyAsync: host-to-device, device-to-host, both at once (two streams),
// each as one large copy and as a run of page-sized copies. This is the
// baseline the pager's achieved migration bandwidth (stats gbps_in/gbps_out)
// is compared against. Run natively.
//
// Usage: migration [--mib 1024] [--page-mib 32] [--reps 10]
// Output: one line per case, "migration case=<name> gbps=<median> min=<x> max=<x>"
// (GB/s = 1e9 bytes/s; "both" counts the bytes of both directions).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../../tests/gpu/pager/common.cuh"  // CK(): every CUDA call checked

struct Ctx {
  size_t bytes, piece;
  char *h1, *h2, *d1, *d2;
  cudaStream_t s1, s2;
  cudaEvent_t a1, b1, a2, b2;
};

// Copies `bytes` from src to dst on stream s in pieces of `piece` bytes.
static void copy(void* dst, const void* src, size_t bytes, size_t piece, cudaMemcpyKind k, cudaStream_t s) {
  for (size_t off = 0; off < bytes; off += piece)
    CK(cudaMemcpyAsync(static_cast<char*>(dst) + off, static_cast<const char*>(src) + off, std::min(piece, bytes - off),
                       k, s));
}

// dir: 0 = H2D, 1 = D2H, 2 = both. Returns GB/s of one repetition.
static double once(Ctx& c, int dir, size_t piece) {
  CK(cudaDeviceSynchronize());
  CK(cudaEventRecord(c.a1, c.s1));
  CK(cudaStreamWaitEvent(c.s2, c.a1, 0));
  if (dir == 0 || dir == 2) copy(c.d1, c.h1, c.bytes, piece, cudaMemcpyHostToDevice, c.s1);
  if (dir == 1) copy(c.h2, c.d2, c.bytes, piece, cudaMemcpyDeviceToHost, c.s1);
  if (dir == 2) copy(c.h2, c.d2, c.bytes, piece, cudaMemcpyDeviceToHost, c.s2);
  CK(cudaEventRecord(c.b2, c.s2));
  CK(cudaStreamWaitEvent(c.s1, c.b2, 0));
  CK(cudaEventRecord(c.b1, c.s1));
  CK(cudaEventSynchronize(c.b1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, c.a1, c.b1));
  const double moved = double(c.bytes) * (dir == 2 ? 2 : 1);
  return moved / (ms * 1e-3) / 1e9;
}

int main(int argc, char** argv) {
  size_t mib = 1024, page_mib = 32;
  int reps = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--mib")) mib = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--page-mib")) page_mib = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--mib 1024] [--page-mib 32] [--reps 10]\n", argv[0]);
      return 64;
    }
  }
  if (mib == 0 || page_mib == 0 || reps <= 0) return 64;
  Ctx c{};
  c.bytes = mib << 20;
  CK(cudaMallocHost(reinterpret_cast<void**>(&c.h1), c.bytes));
  CK(cudaMallocHost(reinterpret_cast<void**>(&c.h2), c.bytes));
  CK(cudaMalloc(reinterpret_cast<void**>(&c.d1), c.bytes));
  CK(cudaMalloc(reinterpret_cast<void**>(&c.d2), c.bytes));
  std::memset(c.h1, 1, c.bytes);
  std::memset(c.h2, 2, c.bytes);
  CK(cudaMemset(c.d1, 3, c.bytes));
  CK(cudaMemset(c.d2, 4, c.bytes));
  CK(cudaStreamCreateWithFlags(&c.s1, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&c.s2, cudaStreamNonBlocking));
  for (auto* e : {&c.a1, &c.b1, &c.a2, &c.b2}) CK(cudaEventCreate(e));

  const char* names[] = {"h2d", "d2h", "both"};
  for (size_t piece : {c.bytes, page_mib << 20}) {
    for (int dir = 0; dir < 3; ++dir) {
      once(c, dir, piece);  // warm-up
      std::vector<double> v;
      for (int r = 0; r < reps; ++r) v.push_back(once(c, dir, piece));
      std::sort(v.begin(), v.end());
      char name[64];
      if (piece == c.bytes) std::snprintf(name, sizeof name, "%s", names[dir]);
      else std::snprintf(name, sizeof name, "%s_%zum", names[dir], page_mib);
      std::printf("migration case=%s gbps=%.2f min=%.2f max=%.2f bytes=%zu\n", name, v[v.size() / 2], v.front(),
                  v.back(), c.bytes);
    }
  }
  CK(cudaFreeHost(c.h1));
  CK(cudaFreeHost(c.h2));
  CK(cudaFree(c.d1));
  CK(cudaFree(c.d2));
  return 0;
}
