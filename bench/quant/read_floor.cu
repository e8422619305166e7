// Size-matched read floor for the decode-regime FP4 GEMM: how fast can a kernel merely READ the
// bytes a decode step reads (NVFP4 codes + scales of the bench shapes), timed as bench_fp4.py times
// the GEMM (CUDA graphs of back-to-back calls cycling over >= 256 MB of buffer copies)? Where even
// the best of these read kernels is below a bandwidth bar, the GEMM's design would have to read
// faster than all of them to meet it.
//
// Build and run (sm_90):
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a bench/quant/read_floor.cu -o /tmp/read_floor
//   /tmp/read_floor          (or /tmp/read_floor calls: the "call" part only; deep: more calls in flight;
//   trace: a chain of calls stamped CTA by CTA)
//
// Two read kernels, each in variants:
// - "ld": 16-byte non-caching loads, 8 per thread in flight, each CTA a contiguous share: "plain"
//   (one 512-thread CTA per SM, or four), "pdl" (programmatic dependent launch: the next call's
//   CTAs launch early and wait in griddepcontrol.wait), "pdl+pf" (also an L2 bulk prefetch of the
//   first 25 / 50 / 100 % of the CTA's share before that wait).
// - "bulk" (session 28): one thread per CTA keeps a ring of S slots of 16 KB filled by bulk copies
//   (cp.async.bulk global -> shared, completing on an mbarrier), as the decode ring kernels' producer
//   does; E of the slots are issued before griddepcontrol.wait, as the decode kernels load their
//   first stages' weights early (Note [Early weights] in quant/gemv_plan.hpp). With S = 6 (96 KB) a
//   CTA leaves room on its SM for the next call's CTA, which then starts its early slots while this
//   call still runs; with S = 13 (208 KB, like the decode kernels' 227 KB) it cannot.
// - "call" (session 31): the bulk reader plus what every decode call must do after its dependency
//   wait: read x (M = 1: K bf16 values, by one bulk copy or by a second warp's 16-byte loads) and then
//   write its rows of y. No arithmetic. It bounds what any kernel that waits for the
//   kernel before it (x is that kernel's output) can reach: `read_floor calls` runs only this part.
// - "trace" (session 51): the call kernel with a globaltimer stamp per CTA (entry, wait passed, x in,
//   drained, end) and the early pieces landed at the wait, for chains of 64 calls: how many calls are in
//   flight, when the wait returns, and what a delay of the next call's first copy, hot weights (one copy)
//   or 1 / 2 / 3 CTAs an SM do. Stamping slows the x-by-bulk-copy calls; its steady figures are untraced.
// Two timing methods: "replay" (events around one replay of R = max(copies, 8) calls on an idle
// stream, bench_fp4.py's method until session 28) and "steady" (a spin kernel before each start
// event, and the difference of the replay times of graphs of 8R and R calls over 7R: bench_fp4.py's
// method since). Prints µs per call, and for the best variant TB/s and % of the 1 GiB figure.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CK(...)                                                                              \
  do {                                                                                       \
    cudaError_t e_ = (__VA_ARGS__);                                                          \
    if (e_ != cudaSuccess) {                                                                 \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));                \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

struct ReadArgs {
  const uint4* src;
  size_t n16;   // 16-byte units
  size_t pf16;  // units per CTA prefetched to L2 before the dependency wait
  int* sink;
  int pdl;
};

__global__ void __launch_bounds__(512, 1) read_kernel(ReadArgs a) {
  const size_t per = (a.n16 + gridDim.x - 1) / gridDim.x;
  const size_t b = blockIdx.x * per, e = min(a.n16, b + per);
  if (a.pdl) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (a.pf16 && threadIdx.x == 0) {
    const size_t pe = min(e, b + a.pf16);
    for (size_t u = b; u < pe; u += 4096) {  // 64 KB per bulk prefetch
      const unsigned bytes = static_cast<unsigned>(min(size_t{4096}, pe - u) * 16);
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(a.src + u), "r"(bytes) : "memory");
    }
  }
  if (a.pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
  uint32_t acc = 0;
  size_t u = b + threadIdx.x;
#pragma unroll 1
  for (; u + 7 * blockDim.x < e; u += 8 * blockDim.x) {
    uint4 v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j)
      asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                   : "=r"(v[j].x), "=r"(v[j].y), "=r"(v[j].z), "=r"(v[j].w)
                   : "l"(a.src + u + j * blockDim.x));
#pragma unroll
    for (int j = 0; j < 8; ++j) acc ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  for (; u < e; u += blockDim.x) {
    const uint4 v = a.src[u];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9E3779B9u) a.sink[0] = 1;  // keeps the loads; practically never true
}

constexpr unsigned kBulkPiece = 16384;  // bytes per bulk copy (a slot)

struct BulkArgs {
  const uint8_t* src;
  size_t bytes;  // a multiple of 16
  int* sink;
  int pdl;
  int slots;  // ring slots of kBulkPiece in dynamic shared memory (after 128 bytes of barriers)
  int early;  // slots issued before griddepcontrol.wait
};

__device__ __forceinline__ void bulk_issue(uint32_t slot_addr, uint32_t bar, const uint8_t* src, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(slot_addr), "l"(src), "r"(bytes), "r"(bar) : "memory");
}

__device__ __forceinline__ void bulk_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// One thread's ring: this CTA's contiguous share [b, e) of src in pieces of kBulkPiece, through `slots`
// slots at shared address `at` (bar: their mbarriers, 8 bytes each; base: the CTA's shared memory).
struct BulkRing {
  const uint8_t* src;
  size_t b, e, pieces, issued;
  uint32_t base, bar, at;
  int slots;
  __device__ BulkRing(const uint8_t* src_, size_t bytes, uint32_t base_, uint32_t bar_, uint32_t at_, int slots_)
      : src(src_), base(base_), bar(bar_), at(at_), slots(slots_) {
    const size_t per = ((bytes + gridDim.x - 1) / gridDim.x + 15) / 16 * 16;
    b = min(bytes, blockIdx.x * per);
    e = min(bytes, b + per);
    pieces = (e - b + kBulkPiece - 1) / kBulkPiece;
    issued = 0;
  }
  // mbarriers for the slots and `extra` more after them
  __device__ void init(int extra) const {
    for (int i = 0; i < slots + extra; ++i) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar + 8 * i));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __device__ void issue(size_t p) const {
    const size_t off = b + p * kBulkPiece;
    const int slot = static_cast<int>(p % slots);
    bulk_issue(at + slot * kBulkPiece, bar + 8 * slot, src + off, static_cast<unsigned>(min(size_t{kBulkPiece}, e - off)));
  }
  // issues pieces until n are (or all) in flight or done
  __device__ void issue_to(size_t n) {
    for (; issued < pieces && issued < n; ++issued) issue(issued);
  }
  // waits for every piece in order, f(its shared-memory offset from base), and reissues its slot
  template <typename F>
  __device__ void drain(F&& f) {
    for (size_t p = 0; p < pieces; ++p) {
      const int slot = static_cast<int>(p % slots);
      bulk_wait(bar + 8 * slot, static_cast<uint32_t>((p / slots) & 1));
      f(at - base + slot * kBulkPiece);
      if (issued < pieces) issue(issued++);
    }
  }
};

// One thread streams the CTA's contiguous share through the ring; a slot's piece is "read" when its
// copy has completed (the bytes are in this SM's shared memory), and the slot is then reissued.
__global__ void __launch_bounds__(32, 1) bulk_read_kernel(BulkArgs a) {
  extern __shared__ __align__(128) uint8_t smem[];
  if (threadIdx.x != 0) return;
  const uint32_t bars = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  BulkRing ring(a.src, a.bytes, bars, bars, bars + 128, a.slots);
  ring.init(0);
  if (a.pdl) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  ring.issue_to(a.early);
  if (a.pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
  ring.issue_to(a.slots);
  uint32_t acc = 0;
  ring.drain([&](uint32_t off) { acc ^= *reinterpret_cast<const uint32_t*>(smem + off); });
  if (acc == 0x9E3779B9u) a.sink[0] = 1;  // keeps the reads; practically never true
}

struct CallArgs {
  const uint8_t* w;  // the weights' bytes (a contiguous share per CTA)
  size_t bytes;      // a multiple of 16
  const uint4* x;    // M = 1: K bf16 values, read whole by every CTA after the wait
  unsigned x16;      // x's 16-byte units
  unsigned x_room;   // x_bulk: x's buffer in shared memory (x16 * 16 rounded up to 1 KB), before the slots
  int x_bulk;        // x by one bulk copy (1) or by warp 1's 16-byte loads (0)
  uint16_t* y;       // N values; CTA i writes rows [i * rows, (i + 1) * rows)
  int n, rows;
  int slots, early;
  int pf;  // also an L2 prefetch of the share past the slots, before the wait (`read_floor deep`)
  unsigned long long* stamps;  // `read_floor trace`: kStamps values a CTA (null: none)
  unsigned delay_ns;           // `read_floor trace`: the ring's first issue this long after the CTA's entry
};

// `read_floor trace`: what each CTA of a call records (globaltimer ns but kSmid and kLanded).
enum Stamp { kEntry, kWait, kX, kDrained, kEnd, kSmid, kLanded, kWait1, kStamps };

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Whether the slot's mbarrier has completed phase `parity` (no wait).
__device__ __forceinline__ bool bulk_done(uint32_t bar, uint32_t parity) {
  uint32_t ok;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}

// A decode call without its arithmetic, 64 threads: lane 0 of warp 0 keeps the weights' ring as
// bulk_read_kernel does (E slots issued before the wait); once x and every piece are in, warp 1
// writes the CTA's rows of y from what was read. x after the wait either by warp 1's 16-byte loads,
// or (x_bulk) by one bulk copy that lane 0 issues first after the wait and waits for before its slot
// loop (it queues behind the early slots).
__global__ void __launch_bounds__(64, 1) call_floor_kernel(CallArgs a) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ uint32_t folded;
  // [0, 1024): the slots' barriers, then x's; x's buffer (x_bulk); the slots
  const uint32_t bars = static_cast<uint32_t>(__cvta_generic_to_shared(smem)), xbar = bars + 8 * a.slots;
  const uint32_t xbuf = bars + 1024;
  unsigned long long* st = a.stamps ? a.stamps + static_cast<size_t>(blockIdx.x) * kStamps : nullptr;
  if (st && threadIdx.x == 0) {
    st[kEntry] = global_ns();
    uint32_t smid;
    asm("mov.u32 %0, %%smid;" : "=r"(smid));
    st[kSmid] = smid;
  }
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  uint32_t acc = 0;
  if (threadIdx.x == 0) {
    BulkRing ring(a.w, a.bytes, bars, bars, xbuf + (a.x_bulk ? a.x_room : 0), a.slots);
    ring.init(1);
    if (a.delay_ns) {  // lets the call before read its x before this call's weights take the memory system
      const unsigned long long t0 = global_ns();
      while (global_ns() - t0 < a.delay_ns) {
      }
    }
    ring.issue_to(a.early);
    if (a.pf)  // the rest of the share into L2 (a prefetch returns nothing to the SM: safe before the wait)
      for (size_t off = ring.b + static_cast<size_t>(a.slots) * kBulkPiece; off < ring.e; off += kBulkPiece)
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(a.w + off),
                     "r"(static_cast<unsigned>(min(size_t{kBulkPiece}, ring.e - off)))
                     : "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (st) {
      st[kWait] = global_ns();
      unsigned landed = 0;  // early pieces already in shared memory when the wait returned
      for (size_t p = 0; p < ring.issued; ++p) landed += bulk_done(bars + 8 * (p % a.slots), 0);
      st[kLanded] = landed;
    }
    if (a.x_bulk) bulk_issue(xbuf, xbar, reinterpret_cast<const uint8_t*>(a.x), a.x16 * 16);
    ring.issue_to(a.slots);
    if (a.x_bulk) {
      bulk_wait(xbar, 0);
      acc = *reinterpret_cast<const uint32_t*>(smem + 1024);
    }
    if (st && a.x_bulk) st[kX] = global_ns();
    ring.drain([&](uint32_t off) { acc ^= *reinterpret_cast<const uint32_t*>(smem + off); });
    if (st) st[kDrained] = global_ns();
    folded = acc;
  } else {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (st && threadIdx.x == 32) st[kWait1] = global_ns();
    if (threadIdx.x >= 32 && !a.x_bulk) {
      for (unsigned u = threadIdx.x - 32; u < a.x16; u += 32) {
        const uint4 v = a.x[u];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
      }
      if (st && threadIdx.x == 32) {  // x is in once its last load has returned (acc depends on all)
        asm volatile("" ::"r"(acc));
        st[kX] = global_ns() + (acc == 0x9E3779B9u);
      }
    }
  }
  __syncthreads();
  if (threadIdx.x >= 32) {
    acc ^= folded;
    for (int r = threadIdx.x - 32; r < a.rows; r += 32) {
      const int row = blockIdx.x * a.rows + r;
      if (row < a.n) a.y[row] = static_cast<uint16_t>(acc ^ static_cast<uint32_t>(r));
    }
    if (st && threadIdx.x == 32) st[kEnd] = global_ns();
  }
}

// Holds the stream for ~`cycles` SM cycles, so that the host has enqueued the timed work before the
// start event completes (without it, an event recorded on an idle stream also times the host's
// submission of the graph replay that follows it).
__global__ void spin_kernel(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

constexpr long long kSpinCycles = 2000000;  // ~1 ms at 1.98 GHz: longer than the host's submission

// µs of one replay of `ge`, with or without a spin kernel in front of the start event.
static float replay_us(cudaGraphExec_t ge, cudaStream_t s, bool spin, cudaEvent_t e0, cudaEvent_t e1) {
  if (spin) {
    spin_kernel<<<1, 1, 0, s>>>(kSpinCycles);
    CK(cudaGetLastError());
  }
  CK(cudaEventRecord(e0, s));
  CK(cudaGraphLaunch(ge, s));
  CK(cudaEventRecord(e1, s));
  CK(cudaEventSynchronize(e1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  return ms * 1000.0f;
}

template <class Args>
static cudaGraphExec_t capture(void (*kernel)(Args), cudaLaunchConfig_t cfg, const std::vector<Args>& args,
                               int inner, cudaStream_t s) {
  auto launch = [&](int i) { CK(cudaLaunchKernelEx(&cfg, kernel, args[i % args.size()])); };
  for (int i = 0; i < 2; ++i) launch(i);
  CK(cudaStreamSynchronize(s));
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < inner; ++i) launch(i);
  CK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t ge;
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphDestroy(g));
  CK(cudaGraphLaunch(ge, s));
  CK(cudaStreamSynchronize(s));
  return ge;
}

static float median(std::vector<float> t) {
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// µs per call of back-to-back launches cycling over args, by the method: steady (the difference of
// graphs of 8R and R calls, a spin kernel in front of each replay) or replay (one graph of R calls on
// an idle stream, over R).
template <class Args>
static float graph_us(void (*kernel)(Args), cudaLaunchConfig_t cfg, const std::vector<Args>& args, int inner,
                      cudaStream_t s, bool steady) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  cudaGraphExec_t g1 = capture(kernel, cfg, args, inner, s);
  std::vector<float> t1, t8;
  float us;
  if (steady) {
    cudaGraphExec_t g8 = capture(kernel, cfg, args, 8 * inner, s);
    for (int r = 0; r < 9; ++r) {
      t1.push_back(replay_us(g1, s, true, e0, e1));
      t8.push_back(replay_us(g8, s, true, e0, e1));
    }
    CK(cudaGraphExecDestroy(g8));
    us = (median(t8) - median(t1)) / (7 * inner);
  } else {
    for (int r = 0; r < 9; ++r) t1.push_back(replay_us(g1, s, false, e0, e1));
    us = median(t1) / inner;
  }
  CK(cudaGraphExecDestroy(g1));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return us;
}

// A launch configuration of `grid` CTAs of `block` threads on s, a programmatic dependent (PDL) of the
// launch before it where pdl is set. Not copyable: the configuration points at its own attribute.
struct LaunchCfg {
  cudaLaunchAttribute at{};
  cudaLaunchConfig_t c{};
  LaunchCfg(int grid, int block, cudaStream_t s, bool pdl) {
    at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at.val.programmaticStreamSerializationAllowed = 1;
    c.gridDim = dim3(static_cast<unsigned>(grid));
    c.blockDim = dim3(static_cast<unsigned>(block));
    c.stream = s;
    c.attrs = &at;
    c.numAttrs = pdl ? 1 : 0;
  }
  LaunchCfg(const LaunchCfg&) = delete;
  LaunchCfg& operator=(const LaunchCfg&) = delete;
};

// The buffers of a chain of decode calls: `copies` weight buffers of `w_bytes` (filled with 1s), one y of n
// bf16 values per copy, and one x of `x_bytes` (filled with 2s), freed with the object.
struct CallBuffers {
  std::vector<void*> w, y;
  void* x = nullptr;
  CallBuffers(int copies, size_t w_bytes, int n, unsigned x_bytes) : w(copies), y(copies) {
    for (int i = 0; i < copies; ++i) {
      CK(cudaMalloc(&w[i], w_bytes));
      CK(cudaMemset(w[i], 1, w_bytes));
      CK(cudaMalloc(&y[i], static_cast<size_t>(n) * 2));
    }
    CK(cudaMalloc(&x, x_bytes));
    CK(cudaMemset(x, 2, x_bytes));
  }
  ~CallBuffers() {
    for (size_t i = 0; i < w.size(); ++i) {
      CK(cudaFree(w[i]));
      CK(cudaFree(y[i]));
    }
    CK(cudaFree(x));
  }
  CallBuffers(const CallBuffers&) = delete;
  CallBuffers& operator=(const CallBuffers&) = delete;
};

// `read_floor calls`: the bulk reader (S13 E13, S6 E6) against call_floor_kernel (x by a bulk copy, or by
// loads) with as many slots as fit one CTA an SM (227 KB) or two (112 KB each), every slot early; M = 1;
// steady method only.
static int run_calls(int sms, cudaStream_t s, int* sink) {
  struct Shape {
    const char* name;
    size_t n, k;
  };
  const Shape shapes[] = {{"1 GiB", 0, 0}, {"4096x4096", 4096, 4096}, {"14336x4096", 14336, 4096},
                          {"4096x14336", 4096, 14336}, {"8192x8192", 8192, 8192}};
  double big = 0;
  std::printf("us per call (steady): bulk S13 E13 | bulk S6 E6 | call, x by a bulk copy: 1 CTA an SM | 2 CTAs"
              " | call, x by loads: 1 CTA an SM | 2 CTAs | best call: TB/s, %% of the 1 GiB figure\n");
  for (const Shape& sh : shapes) {
    const size_t bytes = sh.n ? sh.n * sh.k / 2 + sh.n * sh.k / 16 : size_t{1} << 30;  // NVFP4 codes + scales
    const unsigned x_bytes = static_cast<unsigned>(sh.n ? sh.k * 2 : 16 * 1024);
    const int n = sh.n ? static_cast<int>(sh.n) : 4096, rows = (n + sms - 1) / sms;
    const int copies = std::max<int>(2, static_cast<int>((size_t{256} << 20) / bytes + 1));
    const CallBuffers buf(copies, bytes, n, x_bytes);
    const int inner = std::max(copies, 8);
    std::printf("%-12s %8.2f MB |", sh.name, bytes / 1e6);
    float best = 1e30f;
    for (int v = 0; v < 6; ++v) {
      LaunchCfg lc(sms, 32, s, true);
      cudaLaunchConfig_t& c = lc.c;
      float us;
      int per_sm = 0;
      if (v < 2) {
        const int slots = v == 0 ? 13 : 6;
        c.dynamicSmemBytes = 128 + static_cast<size_t>(slots) * kBulkPiece;
        CK(cudaFuncSetAttribute(bulk_read_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(c.dynamicSmemBytes)));
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, bulk_read_kernel, 32, c.dynamicSmemBytes));
        std::vector<BulkArgs> args;
        for (void* b : buf.w) args.push_back(BulkArgs{static_cast<const uint8_t*>(b), bytes, sink, 1, slots, slots});
        us = graph_us(bulk_read_kernel, c, args, inner, s, true);
      } else {
        const int x_bulk = v < 4;                                // v = 2, 3: x by a bulk copy; 4, 5: by loads
        const size_t room = v % 2 == 0 ? 227 * 1024 : 112 * 1024;  // one or two CTAs an SM
        const unsigned x_room = x_bulk ? (x_bytes + 1023) / 1024 * 1024 : 0;
        const int slots = std::min<int>(13, static_cast<int>((room - 1024 - x_room) / kBulkPiece));
        c.blockDim = dim3(64);
        c.dynamicSmemBytes = 1024 + x_room + static_cast<size_t>(slots) * kBulkPiece;
        CK(cudaFuncSetAttribute(call_floor_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(c.dynamicSmemBytes)));
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, call_floor_kernel, 64, c.dynamicSmemBytes));
        std::vector<CallArgs> args;
        for (int i = 0; i < copies; ++i)
          args.push_back(CallArgs{static_cast<const uint8_t*>(buf.w[i]), bytes, static_cast<const uint4*>(buf.x), x_bytes / 16,
                                  x_room, x_bulk, static_cast<uint16_t*>(buf.y[i]), n, rows, slots, slots, 0});
        us = graph_us(call_floor_kernel, c, args, inner, s, true);
        best = std::min(best, us);
        std::printf(" S%d", slots);
      }
      std::printf(" %7.2f (%d/SM) |", us, per_sm);
    }
    const double tbs = bytes / (best * 1e-6) / 1e12;
    if (big == 0) big = tbs;
    std::printf(" %6.3f TB/s %5.1f %%\n", tbs, 100.0 * tbs / big);
  }
  return 0;
}

// `read_floor deep` (session 47): the call floor with more calls in flight. A CTA of call N + 1 can only start
// its early slots once a CTA of an earlier call leaves room on its SM; with two CTAs an SM only one call ahead
// streams while this one waits, reads x and writes y. Here P CTAs an SM (228 / P KB less 1 KB each) and a grid
// of G x SMs CTAs (shares 1 / (G SMs) of the bytes), so about P / G calls are resident; the slots are issued
// before the wait and the rest of the CTA's share is prefetched into L2 there. x by one bulk copy; steady method.
static int run_deep(int sms, cudaStream_t s) {
  struct Shape {
    const char* name;
    size_t n, k;
  };
  const Shape shapes[] = {{"4096x4096", 4096, 4096}, {"14336x4096", 14336, 4096}, {"4096x14336", 4096, 14336},
                          {"8192x8192", 8192, 8192}};
  struct Deep {
    int p, g;
  };
  const Deep ds[] = {{2, 1}, {3, 1}, {4, 1}, {4, 2}, {6, 2}, {8, 2}, {6, 3}};
  std::printf("us per call (steady), call floor with P CTAs an SM and G x SMs CTAs a call (PpGg: slots S, "
              "resident/SM):\n");
  for (const Shape& sh : shapes) {
    const size_t bytes = sh.n * sh.k / 2 + sh.n * sh.k / 16;  // NVFP4 codes + scales
    const unsigned x_bytes = static_cast<unsigned>(sh.k * 2);
    const int n = static_cast<int>(sh.n);
    const int copies = std::max<int>(2, static_cast<int>((size_t{256} << 20) / bytes + 1));
    const CallBuffers buf(copies, bytes, n, x_bytes);
    const int inner = std::max(copies, 8);
    std::printf("%-12s %8.2f MB |", sh.name, bytes / 1e6);
    float best = 1e30f;
    for (const Deep& d : ds) {
      const int grid = d.g * sms, rows = (n + grid - 1) / grid;
      const size_t room = (228 / d.p - 1) * size_t{1024};
      const unsigned x_room = (x_bytes + 1023) / 1024 * 1024;
      const size_t share = (bytes + grid - 1) / grid;
      const int slots = std::min<int>(static_cast<int>((share + kBulkPiece - 1) / kBulkPiece),
                                      static_cast<int>((room - 1024 - x_room) / kBulkPiece));
      if (slots < 1) {
        std::printf(" P%dG%d    -    |", d.p, d.g);
        continue;
      }
      LaunchCfg lc(grid, 64, s, true);
      cudaLaunchConfig_t& c = lc.c;
      c.dynamicSmemBytes = 1024 + x_room + static_cast<size_t>(slots) * kBulkPiece;
      CK(cudaFuncSetAttribute(call_floor_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(c.dynamicSmemBytes)));
      int per_sm = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, call_floor_kernel, 64, c.dynamicSmemBytes));
      std::vector<CallArgs> args;
      for (int i = 0; i < copies; ++i)
        args.push_back(CallArgs{static_cast<const uint8_t*>(buf.w[i]), bytes, static_cast<const uint4*>(buf.x), x_bytes / 16,
                                x_room, 1, static_cast<uint16_t*>(buf.y[i]), n, rows, slots, slots, 1});
      const float us = graph_us(call_floor_kernel, c, args, inner, s, true);
      best = std::min(best, us);
      std::printf(" P%dG%d S%d %d/SM %6.2f |", d.p, d.g, slots, per_sm, us);
    }
    std::printf(" best %6.3f TB/s\n", bytes / (best * 1e-6) / 1e12);
  }
  return 0;
}

// `read_floor chain` (session 47): what is left of a call with (almost) no weights: the dependency wait, x (K bf16
// values, by a bulk copy or by loads, or none) and y's N values, back-to-back, with and without PDL. A kernel that
// must wait for the one before it and read x cannot take less a call than this chain, whatever its bytes.
static int run_chain(int sms, cudaStream_t s) {
  const int ks[] = {4096, 8192, 14336};
  std::printf("us per call (steady), 16 bytes of weights (one piece, CTA 0), grid = SMs, 1 CTA an SM:\n");
  std::printf("K      | PDL: x bulk | x loads | no x | no PDL: x bulk | x loads | no x\n");
  for (int k : ks) {
    const int n = 4096, rows = (n + sms - 1) / sms;
    const unsigned x_bytes = static_cast<unsigned>(k * 2);
    const int copies = 8;
    const CallBuffers buf(copies, 4096, n, x_bytes);
    std::printf("%-6d |", k);
    for (int pdl = 1; pdl >= 0; --pdl)
      for (int xm = 0; xm < 3; ++xm) {  // 0: x by a bulk copy, 1: by loads, 2: no x
        LaunchCfg lc(sms, 64, s, pdl);
        cudaLaunchConfig_t& c = lc.c;
        const unsigned x_room = xm == 0 ? (x_bytes + 1023) / 1024 * 1024 : 0;
        c.dynamicSmemBytes = 1024 + x_room + kBulkPiece;
        CK(cudaFuncSetAttribute(call_floor_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(c.dynamicSmemBytes)));
        std::vector<CallArgs> args;
        for (int i = 0; i < copies; ++i)
          args.push_back(CallArgs{static_cast<const uint8_t*>(buf.w[i]), 16, static_cast<const uint4*>(buf.x),
                                  xm == 2 ? 0u : x_bytes / 16, x_room, xm == 0, static_cast<uint16_t*>(buf.y[i]), n, rows,
                                  1, 1, 0});
        std::printf(" %6.2f |", graph_us(call_floor_kernel, c, args, 64, s, true));
      }
    std::printf("\n");
  }
  return 0;
}

// `read_floor trace` (session 51): when each CTA of a chain of dependent calls enters, passes its dependency wait,
// has x, has drained its weights and ends (globaltimer), and how many of its early pieces had landed at the wait.
// Answers where a call's time goes between "the call before ended" and "this call ended": whether call N + 1's
// CTAs run while call N does (PDL's early launch), whether call N + 2 can (how many grids are in flight), and what
// the wait, x and y cost in a steady chain. The call floor kernel as `read_floor calls` runs it; R calls a graph.
static void print_trace(const std::vector<unsigned long long>& h, int calls, int grid, int from, int to) {
  unsigned long long base = ~0ull;  // the earliest entry: stamps as ns after it (doubles keep them exact)
  for (int c = 0; c < calls; ++c)
    for (int b = 0; b < grid; ++b) base = std::min(base, h[(static_cast<size_t>(c) * grid + b) * kStamps + kEntry]);
  auto at = [&](int c, int b, int k) {
    const unsigned long long v = h[(static_cast<size_t>(c) * grid + b) * kStamps + k];
    return k == kSmid || k == kLanded ? static_cast<double>(v) : static_cast<double>(v - base);
  };
  std::vector<double> e(calls), s0(calls), s1(calls), w0(calls), w1(calls);
  std::vector<float> xs;
  double landed = 0;
  for (int c = 0; c < calls; ++c) {
    e[c] = s1[c] = w1[c] = 0;
    s0[c] = w0[c] = 1e300;
    for (int b = 0; b < grid; ++b) {
      e[c] = std::max(e[c], std::max(at(c, b, kEnd), at(c, b, kDrained)));
      s0[c] = std::min(s0[c], at(c, b, kEntry));
      s1[c] = std::max(s1[c], at(c, b, kEntry));
      w0[c] = std::min(w0[c], std::min(at(c, b, kWait), at(c, b, kWait1)));
      w1[c] = std::max(w1[c], std::max(at(c, b, kWait), at(c, b, kWait1)));
      if (c >= from && c < to) {
        xs.push_back(static_cast<float>(at(c, b, kX) - std::min(at(c, b, kWait), at(c, b, kWait1))));
        landed += at(c, b, kLanded);
      }
    }
  }
  std::vector<float> period, lead0, lead1, lead2, rel0, rel1, wait_to_end, inflight, handoff;
  for (int c = std::max(from, 2); c < to; ++c) {
    period.push_back(static_cast<float>(e[c] - e[c - 1]));
    lead0.push_back(static_cast<float>(s0[c] - e[c - 1]));
    lead1.push_back(static_cast<float>(s1[c] - e[c - 1]));
    lead2.push_back(static_cast<float>(s0[c] - e[c - 2]));
    rel0.push_back(static_cast<float>(w0[c] - e[c - 1]));
    rel1.push_back(static_cast<float>(w1[c] - e[c - 1]));
    wait_to_end.push_back(static_cast<float>(e[c] - w1[c]));
    int n = 0;
    for (int d = 0; d < c; ++d) n += e[d] > s0[c];
    inflight.push_back(static_cast<float>(n));
  }
  // per SM: call c + 1's first CTA entry there after call c's last CTA end there
  std::vector<double> last_end(1024, 0);
  for (int c = 0; c < to; ++c) {
    std::vector<double> first_in(1024, 1e300), end_here(1024, 0);
    for (int b = 0; b < grid; ++b) {
      const int sm = static_cast<int>(at(c, b, kSmid)) & 1023;
      first_in[sm] = std::min(first_in[sm], at(c, b, kEntry));
      end_here[sm] = std::max(end_here[sm], at(c, b, kEnd));
    }
    for (int sm = 0; sm < 1024; ++sm) {
      if (c >= from && first_in[sm] < 1e299 && last_end[sm] > 0)
        handoff.push_back(static_cast<float>(first_in[sm] - last_end[sm]));
      if (end_here[sm] > 0) last_end[sm] = end_here[sm];
    }
  }
  // the timer's step: the smallest positive difference between the sorted stamps of the window
  std::vector<double> all;
  for (int c = from; c < to; ++c)
    for (int b = 0; b < grid; ++b)
      for (int k : {kEntry, kWait, kX, kDrained, kEnd}) all.push_back(at(c, b, k));
  std::sort(all.begin(), all.end());
  double step = 1e300;
  for (size_t i = 1; i < all.size(); ++i)
    if (all[i] > all[i - 1]) step = std::min(step, all[i] - all[i - 1]);
  const double pieces = static_cast<double>(to - from) * grid;
  std::printf(" period %6.2f | start-prev end %6.2f .. %6.2f | start-end(c-2) %6.2f | wait-prev end %6.2f .."
              " %6.2f | x %5.2f | wait..end %5.2f | in flight %2.0f (max %2.0f) | SM hand-off %5.2f | landed"
              " %4.2f/CTA | step %.0f ns\n",
              median(period) / 1e3, median(lead0) / 1e3, median(lead1) / 1e3, median(lead2) / 1e3, median(rel0) / 1e3,
              median(rel1) / 1e3, median(xs) / 1e3, median(wait_to_end) / 1e3, median(inflight),
              *std::max_element(inflight.begin(), inflight.end()), handoff.empty() ? 0.0f : median(handoff) / 1e3,
              landed / pieces, step);
}

static int run_trace(int sms, cudaStream_t s) {
  struct Case {
    const char* name;
    size_t n, k;  // weights: NVFP4 bytes of n x k (n = 0: 16 bytes, the chain alone; x of k bf16)
    int pdl, smem_kb, x_bulk;  // smem_kb: the CTA's dynamic shared memory (200: one CTA an SM, 100: two, 70: three)
    unsigned delay_ns;
    int hot;  // one weight copy for every call (hot in L2) instead of copies past L2
  };
  const Case cases[] = {
      {"4096^2 1/SM", 4096, 4096, 1, 200, 1, 0, 0},         {"4096^2 1/SM hot", 4096, 4096, 1, 200, 1, 0, 1},
      {"4096^2 2/SM", 4096, 4096, 1, 100, 1, 0, 0},         {"4096^2 2/SM hot", 4096, 4096, 1, 100, 1, 0, 1},
      {"4096^2 2/SM x ld", 4096, 4096, 1, 100, 0, 0, 0},    {"4096^2 2/SM d300", 4096, 4096, 1, 100, 1, 300, 0},
      {"4096^2 2/SM d450", 4096, 4096, 1, 100, 1, 450, 0},  {"4096^2 2/SM d600", 4096, 4096, 1, 100, 1, 600, 0},
      {"4096^2 2/SM d750", 4096, 4096, 1, 100, 1, 750, 0},  {"4096^2 2/SM d900", 4096, 4096, 1, 100, 1, 900, 0},
      {"4096^2 2/SM d1200", 4096, 4096, 1, 100, 1, 1200, 0}, {"4096^2 2/SM x ld d600", 4096, 4096, 1, 100, 0, 600, 0},
      {"4096^2 2/SM d600 hot", 4096, 4096, 1, 100, 1, 600, 1},
      {"4096^2 3/SM", 4096, 4096, 1, 70, 1, 0, 0},          {"4096^2 no PDL 1/SM", 4096, 4096, 0, 200, 1, 0, 0},
      {"chain K 4096 PDL", 0, 4096, 1, 100, 1, 0, 1},       {"chain K 4096 no PDL", 0, 4096, 0, 100, 1, 0, 1},
      {"8192^2 1/SM", 8192, 8192, 1, 200, 1, 0, 0},         {"8192^2 1/SM hot", 8192, 8192, 1, 200, 1, 0, 1},
      {"8192^2 2/SM", 8192, 8192, 1, 100, 1, 0, 0},         {"8192^2 2/SM hot", 8192, 8192, 1, 100, 1, 0, 1},
      {"4096x14336 1/SM", 4096, 14336, 1, 200, 1, 0, 0},    {"4096x14336 1/SM hot", 4096, 14336, 1, 200, 1, 0, 1},
      {"14336x4096 1/SM", 14336, 4096, 1, 200, 1, 0, 0},    {"14336x4096 1/SM hot", 14336, 4096, 1, 200, 1, 0, 1}};
  const int calls = 64, from = 16, to = 56;
  std::printf("µs (medians over calls %d..%d of a graph of %d; 'prev end' = the last CTA end of the call before):\n",
              from, to - 1, calls);
  for (const Case& cs : cases) {
    const size_t bytes = cs.n ? cs.n * cs.k / 2 + cs.n * cs.k / 16 : 16;
    const unsigned x_bytes = static_cast<unsigned>(cs.k * 2);
    const int n = cs.n ? static_cast<int>(cs.n) : 4096, grid = sms, rows = (n + grid - 1) / grid;
    const int copies =
        cs.hot ? 1 : std::min(calls, std::max<int>(2, static_cast<int>((size_t{256} << 20) / bytes + 1)));
    const CallBuffers buf(copies, std::max<size_t>(bytes, 4096), n, x_bytes);
    unsigned long long* stamps;
    const size_t nst = static_cast<size_t>(calls) * grid * kStamps;
    CK(cudaMalloc(&stamps, nst * 8));
    CK(cudaMemset(stamps, 0, nst * 8));
    LaunchCfg lc(grid, 64, s, cs.pdl);
    cudaLaunchConfig_t& c = lc.c;
    const size_t room = static_cast<size_t>(cs.smem_kb) * 1024;
    const unsigned x_room = cs.x_bulk ? (x_bytes + 1023) / 1024 * 1024 : 0;
    const size_t share = (bytes + grid - 1) / grid;
    const int slots = std::max(1, std::min<int>(static_cast<int>((share + kBulkPiece - 1) / kBulkPiece),
                                                static_cast<int>((room - 1024 - x_room) / kBulkPiece)));
    c.dynamicSmemBytes = std::max(room, 1024 + x_room + static_cast<size_t>(slots) * kBulkPiece);
    CK(cudaFuncSetAttribute(call_floor_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            static_cast<int>(c.dynamicSmemBytes)));
    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, call_floor_kernel, 64, c.dynamicSmemBytes));
    std::vector<CallArgs> plain, traced;
    for (int i = 0; i < calls; ++i) {
      CallArgs a{static_cast<const uint8_t*>(buf.w[i % copies]), bytes, static_cast<const uint4*>(buf.x), x_bytes / 16,
                 x_room, cs.x_bulk, static_cast<uint16_t*>(buf.y[i % copies]), n, rows, slots, slots, 0, nullptr,
                 cs.delay_ns};
      plain.push_back(a);
      a.stamps = stamps + static_cast<size_t>(i) * grid * kStamps;
      traced.push_back(a);
    }
    const float untraced = graph_us(call_floor_kernel, c, plain, calls, s, true);
    const float with = graph_us(call_floor_kernel, c, traced, calls, s, true);
    std::printf("%-26s %6.2f MB S%-2d %d/SM | steady %6.2f us, traced %6.2f |", cs.name, bytes / 1e6, slots, per_sm,
                untraced, with);
    // one more replay after a spin, then the stamps of its calls
    cudaGraphExec_t ge = capture(call_floor_kernel, c, traced, calls, s);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    replay_us(ge, s, true, e0, e1);
    std::vector<unsigned long long> h(nst);
    CK(cudaMemcpy(h.data(), stamps, nst * 8, cudaMemcpyDeviceToHost));
    print_trace(h, calls, grid, from, to);
    CK(cudaGraphExecDestroy(ge));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaFree(stamps));
  }
  return 0;
}

int main(int argc, char** argv) {
  int dev = 0, sms = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, dev));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int* sink;
  CK(cudaMalloc(&sink, 4));
  if (argc > 1 && std::string(argv[1]) == "calls") {
    std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);
    return run_calls(sms, s, sink);
  }
  if (argc > 1 && std::string(argv[1]) == "deep") {
    std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);
    return run_deep(sms, s);
  }
  if (argc > 1 && std::string(argv[1]) == "trace") {
    std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);
    return run_trace(sms, s);
  }
  if (argc > 1 && std::string(argv[1]) == "chain") {
    std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);
    return run_chain(sms, s);
  }
  // "ld": 110 KB of (unused) shared memory per CTA: one CTA per SM plus room for one CTA of the next
  // call (PDL). "bulk": the ring's slots (set per variant below).
  CK(cudaFuncSetAttribute(read_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 110 * 1024));
  struct Size {
    const char* name;
    size_t bytes;
  };
  // NVFP4 codes (N x K / 2) + E4M3 scales (N x K / 16) of the bench shapes
  const Size sizes[] = {{"1 GiB", size_t{1} << 30},
                        {"4096x4096", 4096ull * 4096 / 2 + 4096ull * 4096 / 16},
                        {"14336x4096", 14336ull * 4096 / 2 + 14336ull * 4096 / 16},
                        {"4096x14336", 4096ull * 14336 / 2 + 4096ull * 14336 / 16},
                        {"8192x8192", 8192ull * 8192 / 2 + 8192ull * 8192 / 16}};
  struct Variant {
    const char* name;
    bool bulk;
    int ctas_per_sm, smem_kb, pdl, pf_pct;  // ld
    int slots, early;                       // bulk
  };
  const Variant vs[] = {{"plain", false, 1, 110, 0, 0},      {"plain x4", false, 4, 0, 0, 0},
                        {"pdl", false, 1, 110, 1, 0},        {"pdl+pf25", false, 1, 110, 1, 25},
                        {"pdl+pf50", false, 1, 110, 1, 50},  {"pdl+pf100", false, 1, 110, 1, 100},
                        {"bulk S13 E0", true, 1, 0, 1, 0, 13, 0}, {"bulk S13 E4", true, 1, 0, 1, 0, 13, 4},
                        {"bulk S13 E13", true, 1, 0, 1, 0, 13, 13}, {"bulk S6 E0", true, 1, 0, 1, 0, 6, 0},
                        {"bulk S6 E6", true, 1, 0, 1, 0, 6, 6}};
  std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);
  std::printf("us per call, variants:");
  for (const Variant& v : vs) std::printf(" %s,", v.name);
  std::printf(" | floor\n");
  double big[2] = {0, 0};
  for (const Size& sz : sizes) {
    const int copies = std::max<int>(2, static_cast<int>((size_t{256} << 20) / sz.bytes + 1));
    std::vector<void*> bufs(copies);
    for (auto& b : bufs) {
      CK(cudaMalloc(&b, sz.bytes));
      CK(cudaMemset(b, 1, sz.bytes));
    }
    for (int steady = 0; steady < 2; ++steady) {
      std::printf("%-12s %8.2f MB %-7s|", sz.name, sz.bytes / 1e6, steady ? "steady" : "replay");
      float best = 1e30f;
      for (const Variant& v : vs) {
        LaunchCfg lc(sms * v.ctas_per_sm, v.bulk ? 32 : 512, s, v.pdl);
        cudaLaunchConfig_t& c = lc.c;
        const int inner = std::max(copies, 8);
        float us;
        if (v.bulk) {
          c.dynamicSmemBytes = 128 + static_cast<size_t>(v.slots) * kBulkPiece;
          CK(cudaFuncSetAttribute(bulk_read_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(c.dynamicSmemBytes)));
          std::vector<BulkArgs> args;
          for (void* b : bufs)
            args.push_back(BulkArgs{static_cast<const uint8_t*>(b), sz.bytes, sink, v.pdl, v.slots, v.early});
          us = graph_us(bulk_read_kernel, c, args, inner, s, steady);
        } else {
          c.dynamicSmemBytes = static_cast<size_t>(v.smem_kb) * 1024;
          const size_t n16 = sz.bytes / 16, per = (n16 + c.gridDim.x - 1) / c.gridDim.x;
          std::vector<ReadArgs> args;
          for (void* b : bufs)
            args.push_back(ReadArgs{static_cast<const uint4*>(b), n16, per * v.pf_pct / 100, sink, v.pdl});
          us = graph_us(read_kernel, c, args, inner, s, steady);
        }
        best = std::min(best, us);
        std::printf(" %7.2f", us);
      }
      const double tbs = sz.bytes / (best * 1e-6) / 1e12;
      if (big[steady] == 0) big[steady] = tbs;
      std::printf(" | %7.2f us %6.3f TB/s %5.1f %%\n", best, tbs, 100.0 * tbs / big[steady]);
    }
    for (void* b : bufs) CK(cudaFree(b));
  }
  return 0;
}
