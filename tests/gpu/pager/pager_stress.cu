// Test (a): many allocations of mixed sizes whose sum is several times the GPU
// tier, written from kernels, then touched round after round in varied orders
// (kernels that verify and rewrite, copies, sets, frees and re-allocations),
// and finally verified byte for byte by a kernel and by copying everything
// back to the host. Then: one allocation beyond all tiers must fail cleanly
// with cudaErrorMemoryAllocation and leave the process working.
//
// Usage: pager_stress --footprint-mib N [--min-mib 1] [--max-mib 300]
//                     [--rounds 8] [--seed 1] [--streams 4] [--oom-bytes B]
// Exit status: 0 all correct, 1 wrong data or wrong OOM behaviour,
//              2 an unexpected CUDA error, 64 bad usage.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "common.cuh"

using namespace pagertest;

namespace {

// One verify/rewrite job. Passed BY VALUE as a kernel parameter (a struct
// holding a pointer), so the pointer sits inside a struct parameter.
struct Job {
  uint8_t* p;
  uint64_t bytes;
  uint64_t expect_key;  // pattern expected now (unless expect_const)
  uint64_t new_key;     // pattern written when rewrite != 0
  ErrorSlot* err;
  uint32_t expect_byte;  // the constant byte expected when expect_const != 0
  int expect_const;
  int rewrite;
};

__global__ void fill_kernel(uint8_t* p, uint64_t bytes, uint64_t key) {
  const uint64_t words = bytes / 4;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  const uint64_t t = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  uint32_t* w = reinterpret_cast<uint32_t*>(p);
  for (uint64_t i = t; i < words; i += stride) w[i] = pattern(key, i);
  for (uint64_t b = words * 4 + t; b < bytes; b += stride) p[b] = pattern_byte(key, b);
}

// blockIdx.y selects the job (a pair launch touches two allocations at once).
__global__ void check_rewrite_kernel(Job a, Job b) {
  const Job& j = blockIdx.y == 0 ? a : b;
  const uint64_t words = j.bytes / 4;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  const uint64_t t = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  uint32_t* w = reinterpret_cast<uint32_t*>(j.p);
  const uint32_t cword = j.expect_byte * 0x01010101u;
  unsigned long long wrong = 0, first = ~0ull;
  for (uint64_t i = t; i < words; i += stride) {
    const uint32_t want = j.expect_const ? cword : pattern(j.expect_key, i);
    const uint32_t got = w[i];
    if (got != want) {
      for (int k = 0; k < 4; ++k) {
        if (((got ^ want) >> (8 * k)) & 0xFF) {
          ++wrong;
          first = min(first, (unsigned long long)(i * 4 + k));
        }
      }
    }
    if (j.rewrite) w[i] = pattern(j.new_key, i);
  }
  for (uint64_t bi = words * 4 + t; bi < j.bytes; bi += stride) {
    const uint8_t want = j.expect_const ? uint8_t(j.expect_byte) : pattern_byte(j.expect_key, bi);
    if (j.p[bi] != want) {
      ++wrong;
      first = min(first, (unsigned long long)bi);
    }
    if (j.rewrite) j.p[bi] = pattern_byte(j.new_key, bi);
  }
  if (wrong) {
    atomicAdd(&j.err->wrong, wrong);
    atomicMin(&j.err->first, first);
  }
}

struct Alloc {
  uint64_t id = 0;
  uint8_t* p = nullptr;
  uint64_t bytes = 0;
  uint64_t gen = 0;
  bool async = false;  // from cudaMallocAsync
  int stream = 0;
};

constexpr int kThreads = 256;

int blocks_for(uint64_t bytes) {
  const uint64_t words = std::max<uint64_t>(bytes / 4, 1);
  return int(std::min<uint64_t>((words + kThreads - 1) / kThreads, 2048));
}

struct Tester {
  uint64_t footprint = 0, min_bytes = 0, max_bytes = 0, rounds = 8, seed = 1, nstreams = 4;
  uint64_t oom_bytes = 0;
  Rng rng{1};
  std::vector<Alloc> live;
  std::vector<cudaStream_t> streams;
  uint64_t next_id = 0;
  uint64_t live_bytes = 0;
  static constexpr uint64_t kMaxIds = 1 << 16;
  ErrorSlot* d_err = nullptr;  // kMaxIds slots + 1 for the scratch checks
  uint8_t* scratch = nullptr;  // D2D copy target, max_bytes big
  uint8_t* host_stage = nullptr;
  uint64_t stage_bytes = 64 * kMiB;
  uint64_t touches = 0, copies = 0, sets = 0, frees = 0;
  int failures = 0;

  uint64_t random_size() {
    // log-uniform between min and max, plus an odd tail of 0..4095 bytes so
    // sizes are rarely multiples of anything.
    const double lo = std::log(double(min_bytes)), hi = std::log(double(max_bytes));
    uint64_t b = uint64_t(std::exp(lo + (hi - lo) * rng.unit()));
    b = std::max(min_bytes, std::min(max_bytes, b));
    if (rng.below(4) != 0) b = b - std::min<uint64_t>(b - 1, rng.below(4096));
    return b;
  }

  Job job(const Alloc& a, bool rewrite) const {
    Job j{};
    j.p = a.p;
    j.bytes = a.bytes;
    j.expect_key = make_key(a.id, a.gen);
    j.new_key = make_key(a.id, a.gen + 1);
    j.err = d_err + a.id;
    j.rewrite = rewrite;
    return j;
  }

  void allocate_one(uint64_t bytes, cudaStream_t fill_stream) {
    Alloc a;
    a.id = next_id++;
    if (a.id >= kMaxIds) {
      std::fprintf(stderr, "too many allocation ids\n");
      std::exit(64);
    }
    a.bytes = bytes;
    a.stream = int(a.id % nstreams);
    a.async = (a.id % 5) == 4;
    if (a.async) {
      CK(cudaMallocAsync(reinterpret_cast<void**>(&a.p), bytes, fill_stream));
    } else {
      CK(cudaMalloc(reinterpret_cast<void**>(&a.p), bytes));
    }
    fill_kernel<<<blocks_for(bytes), kThreads, 0, fill_stream>>>(a.p, bytes, make_key(a.id, 0));
    CK_LAUNCH();
    live_bytes += bytes;
    live.push_back(a);
  }

  void free_one(size_t idx) {
    Alloc a = live[idx];
    if (a.async) {
      CK(cudaFreeAsync(a.p, streams[a.stream]));
    } else {
      CK(cudaFree(a.p));
    }
    live_bytes -= a.bytes;
    live.erase(live.begin() + long(idx));
    ++frees;
  }

  // Verify (and optionally rewrite) allocation `a` on stream `s`.
  void touch(Alloc& a, cudaStream_t s, bool rewrite = true) {
    Job j = job(a, rewrite);
    check_rewrite_kernel<<<dim3(blocks_for(a.bytes), 1), kThreads, 0, s>>>(j, j);
    CK_LAUNCH();
    if (rewrite) ++a.gen;
    ++touches;
  }

  void touch_pair(Alloc& a, Alloc& b, cudaStream_t s) {
    Job ja = job(a, true), jb = job(b, true);
    const int blocks = std::max(blocks_for(a.bytes), blocks_for(b.bytes));
    check_rewrite_kernel<<<dim3(blocks, 2), kThreads, 0, s>>>(ja, jb);
    CK_LAUNCH();
    ++a.gen;
    ++b.gen;
    touches += 2;
  }

  // Reads the error slots; reports and counts every allocation with wrong bytes.
  bool check_errors(const char* where) {
    CK(cudaDeviceSynchronize());
    std::vector<ErrorSlot> h(kMaxIds + 1);
    CK(cudaMemcpy(h.data(), d_err, h.size() * sizeof(ErrorSlot), cudaMemcpyDeviceToHost));
    bool ok = true;
    for (uint64_t id = 0; id <= kMaxIds; ++id) {
      if (h[id].wrong == 0) continue;
      ok = false;
      uint64_t bytes = 0;
      for (auto& a : live)
        if (a.id == id) bytes = a.bytes;
      std::fprintf(stderr, "MISMATCH %s: %s %" PRIu64 " (%" PRIu64 " bytes): %llu wrong bytes, first at offset %llu\n",
                   where, id == kMaxIds ? "scratch copy of an allocation" : "allocation", id, bytes, h[id].wrong,
                   h[id].first);
    }
    if (!ok) {
      ++failures;
      // Reset so later rounds report their own errors only.
      reset_errors();
    }
    return ok;
  }

  void reset_errors() {
    std::vector<ErrorSlot> h(kMaxIds + 1, ErrorSlot{0, ~0ull});
    CK(cudaMemcpy(d_err, h.data(), h.size() * sizeof(ErrorSlot), cudaMemcpyHostToDevice));
  }

  // Host check of `n` bytes at `off` of allocation `a` (current generation),
  // already copied to `buf`. Returns the number of wrong bytes.
  static uint64_t host_check(const uint8_t* buf, uint64_t key, uint64_t off, uint64_t n, uint64_t* first) {
    const unsigned nt = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
    std::vector<uint64_t> wrong(nt, 0), fst(nt, ~0ull);
    std::vector<std::thread> th;
    for (unsigned t = 0; t < nt; ++t) {
      th.emplace_back([&, t] {
        const uint64_t lo = n * t / nt, hi = n * (t + 1) / nt;
        uint64_t i = lo;
        while (i < hi) {
          // Whole pattern words where aligned (fast path), single bytes elsewhere.
          if ((off + i) % 4 == 0 && i + 4 <= hi) {
            uint32_t got;
            std::memcpy(&got, buf + i, 4);
            if (got == pattern(key, (off + i) / 4)) {
              i += 4;
              continue;
            }
          }
          if (buf[i] != pattern_byte(key, off + i)) {
            ++wrong[t];
            fst[t] = std::min(fst[t], off + i);
          }
          ++i;
        }
      });
    }
    for (auto& x : th) x.join();
    uint64_t w = 0;
    for (unsigned t = 0; t < nt; ++t) {
      w += wrong[t];
      *first = std::min(*first, fst[t]);
    }
    return w;
  }

  // Writes the pattern of `key` into n bytes of buf (offset 0), on all cores.
  static void host_fill(uint8_t* buf, uint64_t key, uint64_t n) {
    const unsigned nt = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
    std::vector<std::thread> th;
    for (unsigned t = 0; t < nt; ++t) {
      th.emplace_back([=] {
        const uint64_t lo = n * t / nt, hi = n * (t + 1) / nt;
        for (uint64_t i = lo; i < hi; ++i) buf[i] = pattern_byte(key, i);
      });
    }
    for (auto& x : th) x.join();
  }

  // D2H spot check of a random slice of `a` on stream `s` (after its last touch).
  bool spot_check(Alloc& a, cudaStream_t s) {
    const uint64_t n = std::min<uint64_t>(a.bytes, 1 + rng.below(4 * kMiB));
    const uint64_t off = rng.below(a.bytes - n + 1);
    CK(cudaMemcpyAsync(host_stage, a.p + off, n, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    ++copies;
    uint64_t first = ~0ull;
    const uint64_t w = host_check(host_stage, make_key(a.id, a.gen), off, n, &first);
    if (w) {
      std::fprintf(stderr, "MISMATCH spot check: allocation %" PRIu64 " bytes [%" PRIu64 ", +%" PRIu64 "): %" PRIu64 " wrong, first at %" PRIu64 "\n",
                   a.id, off, n, w, first);
      ++failures;
      return false;
    }
    return true;
  }

  void sync_all() { CK(cudaDeviceSynchronize()); }

  std::vector<size_t> order_all() {
    std::vector<size_t> o(live.size());
    for (size_t i = 0; i < o.size(); ++i) o[i] = i;
    return o;
  }

  void shuffle(std::vector<size_t>& o) {
    for (size_t i = o.size(); i > 1; --i) std::swap(o[i - 1], o[rng.below(i)]);
  }

  // One round; the type cycles through the ways an application touches memory.
  void round(uint64_t r) {
    const int type = int(r % 6);
    const char* names[] = {"forward", "reverse+streams", "random+spot", "repeats+pairs", "copies+sets", "churn+strided"};
    auto t0 = std::chrono::steady_clock::now();
    std::vector<size_t> o = order_all();
    switch (type) {
      case 0:
        for (size_t i : o) touch(live[i], streams[0]);
        break;
      case 1:
        std::reverse(o.begin(), o.end());
        for (size_t i : o) touch(live[i], streams[live[i].stream]);
        break;
      case 2:
        shuffle(o);
        for (size_t k = 0; k < o.size(); ++k) {
          Alloc& a = live[o[k]];
          touch(a, streams[a.stream]);
          if (k % 8 == 0) spot_check(a, streams[a.stream]);
        }
        break;
      case 3: {
        const size_t n = live.size() * 2;
        for (size_t k = 0; k < n; ++k) {
          const size_t i = rng.below(live.size());
          if (rng.below(3) == 0) {
            size_t j = rng.below(live.size());
            if (j == i) j = (i + 1) % live.size();
            touch_pair(live[i], live[j], streams[0]);
          } else {
            touch(live[i], streams[0]);
          }
        }
        break;
      }
      case 4: {
        shuffle(o);
        for (size_t k = 0; k < o.size(); ++k) {
          Alloc& a = live[o[k]];
          cudaStream_t s = streams[a.stream];
          switch (k % 4) {
            case 0: {  // host writes the next generation with a copy (small ones)
              if (a.bytes <= stage_bytes) {
                const uint64_t key = make_key(a.id, a.gen + 1);
                CK(cudaStreamSynchronize(s));  // host_stage reuse
                host_fill(host_stage, key, a.bytes);
                CK(cudaMemcpyAsync(a.p, host_stage, a.bytes, cudaMemcpyHostToDevice, s));
                CK(cudaStreamSynchronize(s));
                ++a.gen;
                ++copies;
                touch(a, s);  // check the copied generation on the device
              } else {
                touch(a, s);
              }
              break;
            }
            case 1: {  // memset, then a kernel checks the constant and rewrites
              const uint32_t c = uint32_t(rng.below(256));
              CK(cudaMemsetAsync(a.p, int(c), a.bytes, s));
              ++sets;
              Job j = job(a, true);
              j.expect_const = 1;
              j.expect_byte = c;
              check_rewrite_kernel<<<dim3(blocks_for(a.bytes), 1), kThreads, 0, s>>>(j, j);
              CK_LAUNCH();
              ++a.gen;
              ++touches;
              break;
            }
            case 2: {  // device-to-device copy into scratch; the scratch must hold a's pattern
              CK(cudaMemcpyAsync(scratch, a.p, a.bytes, cudaMemcpyDeviceToDevice, s));
              ++copies;
              Alloc view = a;
              view.p = scratch;
              Job j = job(view, false);
              j.err = d_err + kMaxIds;
              check_rewrite_kernel<<<dim3(blocks_for(a.bytes), 1), kThreads, 0, s>>>(j, j);
              CK_LAUNCH();
              CK(cudaStreamSynchronize(s));  // scratch is reused by the next case 2
              touch(a, s);
              break;
            }
            default:
              touch(a, s);
              spot_check(a, s);
          }
        }
        break;
      }
      case 5: {
        sync_all();
        // free about a tenth, then allocate until the footprint is back
        const size_t nfree = std::max<size_t>(1, live.size() / 10);
        for (size_t k = 0; k < nfree && live.size() > 1; ++k) free_one(rng.below(live.size()));
        sync_all();
        while (live_bytes < footprint) allocate_one(random_size(), streams[0]);
        sync_all();
        for (size_t start = 0; start < 3; ++start)
          for (size_t i = start; i < live.size(); i += 3) touch(live[i], streams[live[i].stream]);
        break;
      }
    }
    const bool ok = check_errors(names[type]);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("round %2" PRIu64 " %-16s %4zu allocations %8.1f MiB  %8.1f ms  %s\n", r, names[type], live.size(),
                double(live_bytes) / kMiB, ms, ok ? "ok" : "MISMATCH");
    std::fflush(stdout);
  }

  // Beyond all tiers: must fail with cudaErrorMemoryAllocation, not crash, and
  // leave the process working.
  bool oom_check() {
    bool ok = true;
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, oom_bytes);
    if (e != cudaErrorMemoryAllocation) {
      std::fprintf(stderr, "OOM check: cudaMalloc(%" PRIu64 ") returned %s, expected cudaErrorMemoryAllocation\n", oom_bytes,
                   cudaGetErrorName(e));
      if (e == cudaSuccess) CK(cudaFree(p));
      ok = false;
    }
    cudaGetLastError();  // clear the (non-sticky) allocation error
    e = cudaMallocAsync(&p, oom_bytes, streams[0]);
    if (e != cudaErrorMemoryAllocation) {
      std::fprintf(stderr, "OOM check: cudaMallocAsync(%" PRIu64 ") returned %s, expected cudaErrorMemoryAllocation\n",
                   oom_bytes, cudaGetErrorName(e));
      if (e == cudaSuccess) CK(cudaFreeAsync(p, streams[0]));
      ok = false;
    }
    cudaGetLastError();
    // The process still works: a small allocation, a kernel, a copy back.
    uint8_t* q = nullptr;
    CK(cudaMalloc(reinterpret_cast<void**>(&q), 3 * kMiB + 5));
    fill_kernel<<<64, kThreads>>>(q, 3 * kMiB + 5, 77);
    CK_LAUNCH();
    CK(cudaMemcpy(host_stage, q, 3 * kMiB + 5, cudaMemcpyDeviceToHost));
    uint64_t first = ~0ull;
    if (host_check(host_stage, 77, 0, 3 * kMiB + 5, &first) != 0) {
      std::fprintf(stderr, "OOM check: an allocation after the refused one holds wrong data\n");
      ok = false;
    }
    CK(cudaFree(q));
    std::printf("oom check: %" PRIu64 " MiB beyond all tiers -> cudaErrorMemoryAllocation: %s\n", oom_bytes / kMiB,
                ok ? "ok" : "WRONG");
    if (!ok) ++failures;
    return ok;
  }

  // Every byte: a verifying kernel, then a copy of everything to the host.
  void final_verify() {
    for (auto& a : live) touch(a, streams[a.stream], false);
    check_errors("final kernel check");
    uint64_t checked = 0, wrong_allocs = 0;
    for (auto& a : live) {
      uint64_t wrong = 0, first = ~0ull;
      for (uint64_t off = 0; off < a.bytes; off += stage_bytes) {
        const uint64_t n = std::min(stage_bytes, a.bytes - off);
        CK(cudaMemcpy(host_stage, a.p + off, n, cudaMemcpyDeviceToHost));
        wrong += host_check(host_stage, make_key(a.id, a.gen), off, n, &first);
        checked += n;
      }
      if (wrong) {
        ++wrong_allocs;
        std::fprintf(stderr, "MISMATCH final host check: allocation %" PRIu64 " (%" PRIu64 " bytes): %" PRIu64 " wrong, first at %" PRIu64 "\n",
                     a.id, a.bytes, wrong, first);
      }
    }
    if (wrong_allocs) ++failures;
    std::printf("final: %" PRIu64 " bytes copied back and compared on the host, %" PRIu64 " allocations wrong\n", checked,
                wrong_allocs);
  }

  int run() {
    rng = Rng(seed);
    streams.resize(nstreams);
    for (auto& s : streams) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaMalloc(reinterpret_cast<void**>(&d_err), (kMaxIds + 1) * sizeof(ErrorSlot)));
    reset_errors();
    CK(cudaMalloc(reinterpret_cast<void**>(&scratch), max_bytes));
    CK(cudaMallocHost(reinterpret_cast<void**>(&host_stage), stage_bytes));

    auto t0 = std::chrono::steady_clock::now();
    while (live_bytes < footprint) allocate_one(random_size(), streams[0]);
    check_errors("initial fill");
    std::printf("allocated %zu allocations, %.1f MiB (sizes %.2f .. %.2f MiB) + %.1f MiB scratch\n", live.size(),
                double(live_bytes) / kMiB, double(min_bytes) / kMiB, double(max_bytes) / kMiB,
                double(max_bytes) / kMiB);
    for (uint64_t r = 0; r < rounds; ++r) round(r);
    if (oom_bytes) oom_check();
    final_verify();
    while (!live.empty()) free_one(live.size() - 1);
    CK(cudaFree(scratch));
    CK(cudaFree(d_err));
    CK(cudaFreeHost(host_stage));
    for (auto& s : streams) CK(cudaStreamDestroy(s));
    CK(cudaDeviceSynchronize());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("pager_stress: %" PRIu64 " allocations made, %" PRIu64 " kernel touches, %" PRIu64 " copies, %" PRIu64
                " sets, %" PRIu64 " frees in %.1f s: %s\n",
                next_id, touches, copies, sets, frees, s, failures ? "FAILED" : "all bytes correct");
    return failures ? 1 : 0;
  }
};

}  // namespace

int main(int argc, char** argv) {
  Tester t;
  uint64_t fp_mib = 0, min_mib = 1, max_mib = 300;
  if (!arg_u64(argc, argv, "--footprint-mib", &fp_mib) || fp_mib == 0) {
    std::fprintf(stderr,
                 "usage: %s --footprint-mib N [--min-mib 1] [--max-mib 300] [--rounds 8] [--seed 1] [--streams 4] "
                 "[--oom-bytes B]\n",
                 argv[0]);
    return 64;
  }
  arg_u64(argc, argv, "--min-mib", &min_mib);
  arg_u64(argc, argv, "--max-mib", &max_mib);
  arg_u64(argc, argv, "--rounds", &t.rounds);
  arg_u64(argc, argv, "--seed", &t.seed);
  arg_u64(argc, argv, "--streams", &t.nstreams);
  arg_u64(argc, argv, "--oom-bytes", &t.oom_bytes);
  if (min_mib == 0 || max_mib < min_mib || t.nstreams == 0) {
    std::fprintf(stderr, "bad sizes/streams\n");
    return 64;
  }
  t.footprint = fp_mib * kMiB;
  t.min_bytes = min_mib * kMiB;
  t.max_bytes = max_mib * kMiB;
  return t.run();
}
