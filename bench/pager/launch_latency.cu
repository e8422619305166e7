// Host cost of a kernel launch: empty kernels with no arguments, and with 8
// pointer arguments into allocated (and already touched) device memory. Run
// natively and under vstack-run (bench/pager/run.sh does both, alternately):
// the difference is what the shim adds per launch (target < 1 us).
//
// Method: batches of --batch launches (fewer than the launch queue holds, so
// the host never waits for the GPU inside a batch); the stream is drained
// before each batch and only the launch calls are timed. Prints the median,
// 10th and 90th percentile of the per-launch time over --batches batches.
//
// Usage: launch_latency [--batch 256] [--batches 400] [--reps 3]
// Output lines: "launch_latency args=<0|8> median_us=<x> p10_us=<x> p90_us=<x> launches=<n>"
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../../tests/gpu/pager/common.cuh"  // CK(): every CUDA call checked

__global__ void empty0() {}
__global__ void empty8(float* a, float* b, float* c, float* d, float* e, float* f, float* g, float* h) {
  // Never true at run time (the pointers are valid); keeps the arguments alive.
  if (a == nullptr && threadIdx.x == 1023) *b = *c + *d + *e + *f + *g + *h;
}
__global__ void touch(float* p, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] = 1.0f;
}

static double run(int nargs, float* const* bufs, cudaStream_t s, int batch, int batches, std::vector<double>& per_launch) {
  using clk = std::chrono::steady_clock;
  for (int b = 0; b < batches; ++b) {
    CK(cudaStreamSynchronize(s));
    const auto t0 = clk::now();
    if (nargs == 0) {
      for (int i = 0; i < batch; ++i) empty0<<<1, 32, 0, s>>>();
    } else {
      for (int i = 0; i < batch; ++i)
        empty8<<<1, 32, 0, s>>>(bufs[0], bufs[1], bufs[2], bufs[3], bufs[4], bufs[5], bufs[6], bufs[7]);
    }
    const auto t1 = clk::now();
    per_launch.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / batch);
  }
  CK(cudaGetLastError());
  CK(cudaStreamSynchronize(s));
  std::vector<double> v = per_launch;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  int batch = 256, batches = 400, reps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--batch")) batch = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--batches")) batches = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--batch 256] [--batches 400] [--reps 3]\n", argv[0]);
      return 64;
    }
  }
  if (batch <= 0 || batches <= 0 || reps <= 0) return 64;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float* bufs[8];
  const size_t n = (4u << 20) / sizeof(float);
  for (auto& b : bufs) {
    CK(cudaMalloc(reinterpret_cast<void**>(&b), n * sizeof(float)));
    touch<<<64, 256, 0, s>>>(b, n);  // resident before timing
    CK(cudaGetLastError());
  }
  CK(cudaStreamSynchronize(s));
  std::vector<double> w;
  run(0, bufs, s, batch, 20, w);  // warm-up (module load, first-launch costs)
  run(8, bufs, s, batch, 20, w);
  for (int nargs : {0, 8}) {
    std::vector<double> all;
    for (int r = 0; r < reps; ++r) run(nargs, bufs, s, batch, batches, all);
    std::sort(all.begin(), all.end());
    std::printf("launch_latency args=%d median_us=%.3f p10_us=%.3f p90_us=%.3f launches=%zu\n", nargs,
                all[all.size() / 2], all[all.size() / 10], all[all.size() * 9 / 10], all.size() * size_t(batch));
  }
  for (auto b : bufs) CK(cudaFree(b));
  CK(cudaStreamDestroy(s));
  return 0;
}
