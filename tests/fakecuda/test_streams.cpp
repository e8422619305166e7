// Streams and events: in-order execution, cross-stream waits, the legacy NULL
// stream, per-thread streams, callbacks, many threads at once.
// Cases tagged [delay] run again with FAKECUDA_DELAY_US=3000 (meson.build),
// which sleeps before every op and so widens every race window.
#define CATCH_CONFIG_EXTERNAL_INTERFACES  // for the listener below
#include <algorithm>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "test_util.hpp"

using namespace fakecuda_test;

namespace {

// Appends a label when its host function runs.
struct Log {
  std::mutex m;
  std::vector<std::string> order;
  struct Entry {
    Log* log;
    std::string label;
  };
  std::vector<std::unique_ptr<Entry>> entries;

  void* label(const std::string& s) {
    entries.push_back(std::make_unique<Entry>(Entry{this, s}));
    return entries.back().get();
  }
  static void fn(void* p) {
    auto* e = static_cast<Entry*>(p);
    std::lock_guard<std::mutex> l(e->log->m);
    e->log->order.push_back(e->label);
  }
  std::vector<std::string> snapshot() {
    std::lock_guard<std::mutex> l(m);
    return order;
  }
  size_t index(const std::string& s) {
    auto o = snapshot();
    return static_cast<size_t>(std::find(o.begin(), o.end(), s) - o.begin());
  }
};

void sleep_fn(void* ms) { sleep_ms(static_cast<int>(reinterpret_cast<intptr_t>(ms))); }

struct OpenGates : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void sectionEnded(Catch::SectionStats const&) override { open_all_gates(); }
  void testCaseEnded(Catch::TestCaseStats const&) override { open_all_gates(); }
};

}  // namespace

CATCH_REGISTER_LISTENER(OpenGates)

TEST_CASE("a stream runs its work in order, asynchronously", "[streams][delay]") {
  use_device();
  CUstream s = nullptr;
  CU_OK(cuStreamCreate(&s, 0));
  Gate& gate = new_gate();
  CU_OK(cuLaunchHostFunc(s, Gate::wait_fn, &gate));
  constexpr size_t n = 4096;
  CUdeviceptr d = 0;
  CU_OK(cuMemAlloc(&d, n * 4));
  std::vector<uint32_t> in(n), out(n, 0xdeadbeef);
  std::mt19937 rng(7);
  for (auto& x : in) x = rng();
  CU_OK(cuMemsetD32Async(d, 0, n, s));
  CU_OK(cuMemcpyHtoDAsync(d, in.data(), n * 4, s));
  CU_OK(cuMemcpyDtoHAsync(out.data(), d, n * 4, s));
  REQUIRE(cuStreamQuery(s) == CUDA_ERROR_NOT_READY);  // held by the gate
  sleep_ms(10);
  REQUIRE(out[0] == 0xdeadbeef);  // nothing ran past the gate
  gate.open();
  CU_OK(cuStreamSynchronize(s));
  CU_OK(cuStreamQuery(s));
  REQUIRE(out == in);
  CU_OK(cuMemFree(d));
  CU_OK(cuStreamDestroy(s));
}

TEST_CASE("events: query, synchronize, cross-stream wait, elapsed time", "[streams][delay]") {
  use_device();
  CUstream a = nullptr, b = nullptr;
  CU_OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  CU_OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUevent e0 = nullptr, e1 = nullptr, notiming = nullptr;
  CU_OK(cuEventCreate(&e0, 0));
  CU_OK(cuEventCreate(&e1, 0));
  CU_OK(cuEventCreate(&notiming, CU_EVENT_DISABLE_TIMING));
  CU_OK(cuEventQuery(e0));  // never recorded: complete

  Gate& gate = new_gate();
  Log log;
  CU_OK(cuEventRecord(e0, a));
  CU_OK(cuLaunchHostFunc(a, Gate::wait_fn, &gate));
  CU_OK(cuLaunchHostFunc(a, sleep_fn, reinterpret_cast<void*>(intptr_t{5})));
  CU_OK(cuLaunchHostFunc(a, Log::fn, log.label("a")));
  CU_OK(cuEventRecord(e1, a));
  CU_OK(cuEventRecordWithFlags(notiming, a, CU_EVENT_RECORD_DEFAULT));
  CU_OK(cuStreamWaitEvent(b, e1, 0));
  CU_OK(cuLaunchHostFunc(b, Log::fn, log.label("b")));

  REQUIRE(cuEventQuery(e1) == CUDA_ERROR_NOT_READY);
  float ms = 0;
  REQUIRE(cuEventElapsedTime(&ms, e0, e1) == CUDA_ERROR_NOT_READY);
  sleep_ms(20);
  REQUIRE(log.snapshot().empty());  // b waits for a's event
  gate.open();
  CU_OK(cuEventSynchronize(e1));
  CU_OK(cuEventQuery(e1));
  CU_OK(cuStreamSynchronize(b));
  REQUIRE(log.snapshot() == std::vector<std::string>{"a", "b"});
  CU_OK(cuEventElapsedTime(&ms, e0, e1));
  REQUIRE(ms >= 4.5f);  // the gate wait + the 5 ms sleep lie between
  CU_OK(cuEventElapsedTime_v2(&ms, e0, e1));
  REQUIRE(ms >= 4.5f);
  REQUIRE(cuEventElapsedTime(&ms, e0, notiming) == CUDA_ERROR_INVALID_HANDLE);

  // Re-recording moves the event; the earlier record stays complete.
  Gate& gate2 = new_gate();
  CU_OK(cuLaunchHostFunc(a, Gate::wait_fn, &gate2));
  CU_OK(cuEventRecord(e1, a));
  REQUIRE(cuEventQuery(e1) == CUDA_ERROR_NOT_READY);
  gate2.open();
  CU_OK(cuEventSynchronize(e1));

  CU_OK(cuEventDestroy(e0));
  CU_OK(cuEventDestroy(e1));
  CU_OK(cuEventDestroy(notiming));
  REQUIRE(cuEventQuery(e0) == CUDA_ERROR_INVALID_HANDLE);
  CU_OK(cuStreamDestroy(a));
  CU_OK(cuStreamDestroy(b));
}

TEST_CASE("the legacy NULL stream orders with blocking streams only", "[streams][delay]") {
  use_device();
  CUstream blocking = nullptr, other = nullptr, nonblocking = nullptr;
  CU_OK(cuStreamCreate(&blocking, 0));
  CU_OK(cuStreamCreate(&other, 0));
  CU_OK(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
  Log log;

  SECTION("an op on the NULL stream waits for earlier work on blocking streams") {
    Gate& g = new_gate();
    CU_OK(cuLaunchHostFunc(blocking, Gate::wait_fn, &g));
    CU_OK(cuLaunchHostFunc(blocking, Log::fn, log.label("blocking")));
    CU_OK(cuLaunchHostFunc(nullptr, Log::fn, log.label("null")));
    CU_OK(cuLaunchHostFunc(CU_STREAM_LEGACY, Log::fn, log.label("legacy")));
    CU_OK(cuLaunchHostFunc(nonblocking, Log::fn, log.label("nonblocking")));
    CU_OK(cuStreamSynchronize(nonblocking));  // not held up by the gate
    sleep_ms(10);
    REQUIRE(log.snapshot() == std::vector<std::string>{"nonblocking"});
    g.open();
    CU_OK(cuStreamSynchronize(nullptr));
    REQUIRE(log.snapshot() == std::vector<std::string>{"nonblocking", "blocking", "null", "legacy"});
  }
  SECTION("later work on blocking streams waits for the NULL stream") {
    Gate& g = new_gate();
    CU_OK(cuLaunchHostFunc(nullptr, Gate::wait_fn, &g));
    CU_OK(cuLaunchHostFunc(nullptr, Log::fn, log.label("null")));
    CU_OK(cuLaunchHostFunc(blocking, Log::fn, log.label("blocking")));
    CU_OK(cuLaunchHostFunc(CU_STREAM_PER_THREAD, Log::fn, log.label("per-thread")));
    CU_OK(cuLaunchHostFunc(nonblocking, Log::fn, log.label("nonblocking")));
    CU_OK(cuStreamSynchronize(nonblocking));
    sleep_ms(10);
    REQUIRE(log.snapshot() == std::vector<std::string>{"nonblocking"});
    REQUIRE(cuStreamQuery(blocking) == CUDA_ERROR_NOT_READY);
    g.open();
    CU_OK(cuStreamSynchronize(blocking));
    CU_OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
    auto o = log.snapshot();
    REQUIRE(o.size() == 4);
    REQUIRE(log.index("null") < log.index("blocking"));
    REQUIRE(log.index("null") < log.index("per-thread"));
  }
  SECTION("synchronous copies go through the NULL stream") {
    Gate& g = new_gate();
    CUdeviceptr d = 0;
    CU_OK(cuMemAlloc(&d, 4));
    CU_OK(cuLaunchHostFunc(blocking, Gate::wait_fn, &g));
    CU_OK(cuMemsetD32Async(d, 0xaaaa5555u, 1, blocking));
    std::thread opener([&] {
      sleep_ms(20);
      g.open();
    });
    uint32_t v = 0;
    CU_OK(cuMemcpyDtoH(&v, d, 4));  // must wait for the gated memset
    REQUIRE(v == 0xaaaa5555u);
    opener.join();
    CU_OK(cuMemFree(d));
  }
  CU_OK(cuCtxSynchronize());
  CU_OK(cuStreamDestroy(blocking));
  CU_OK(cuStreamDestroy(other));
  CU_OK(cuStreamDestroy(nonblocking));
}

TEST_CASE("per-thread default streams: one per thread, _ptsz maps 0 to it", "[streams][delay]") {
  use_device();
  Gate& g = new_gate();
  Log log;
  // This thread's per-thread stream is held by the gate...
  CU_OK(cuLaunchHostFunc_ptsz(nullptr, Gate::wait_fn, &g));
  CU_OK(cuLaunchHostFunc(CU_STREAM_PER_THREAD, Log::fn, log.label("mine")));
  REQUIRE(cuStreamQuery_ptsz(nullptr) == CUDA_ERROR_NOT_READY);
  // ...another thread's is not.
  void* theirs = log.label("theirs");
  bool ok = false;
  std::thread t([&] {
    ok = try_use_device(0) && cuLaunchHostFunc_ptsz(nullptr, Log::fn, theirs) == CUDA_SUCCESS &&
         cuStreamSynchronize_ptsz(nullptr) == CUDA_SUCCESS;
  });
  t.join();
  REQUIRE(ok);
  REQUIRE(log.snapshot() == std::vector<std::string>{"theirs"});
  // _ptds copies use the (gated) per-thread stream too.
  uint32_t v = 1, w = 0;
  std::thread opener([&] {
    sleep_ms(20);
    g.open();
  });
  CU_OK(cuMemcpyHtoD_v2_ptds(reinterpret_cast<CUdeviceptr>(&w), &v, 4));
  REQUIRE(log.snapshot() == std::vector<std::string>{"theirs", "mine"});
  REQUIRE(w == 1);
  opener.join();
}

TEST_CASE("callbacks, destroy with pending work, context synchronize", "[streams][delay]") {
  use_device();
  CUstream s = nullptr;
  CU_OK(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, -1));
  struct Seen {
    CUstream stream = nullptr;
    CUresult status = CUDA_ERROR_UNKNOWN;
    std::atomic<int> calls{0};
  } seen;
  auto cb = [](CUstream h, CUresult st, void* p) {
    auto* x = static_cast<Seen*>(p);
    x->stream = h;
    x->status = st;
    ++x->calls;
  };
  CU_OK(cuStreamAddCallback(s, cb, &seen, 0));
  REQUIRE(cuStreamAddCallback(s, cb, &seen, 1) == CUDA_ERROR_INVALID_VALUE);
  std::atomic<int> ran{0};
  for (int i = 0; i < 5; ++i)
    CU_OK(cuLaunchHostFunc(s, [](void* p) { ++*static_cast<std::atomic<int>*>(p); }, &ran));
  CU_OK(cuStreamDestroy(s));  // pending work still runs
  REQUIRE(ran == 5);
  REQUIRE(seen.calls == 1);
  REQUIRE(seen.stream == s);
  REQUIRE(seen.status == CUDA_SUCCESS);
  REQUIRE(cuStreamQuery(s) == CUDA_ERROR_INVALID_HANDLE);

  CUstream a = nullptr, b = nullptr;
  CU_OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  CU_OK(cuStreamCreate(&b, 0));
  ran = 0;
  for (CUstream x : {a, b, static_cast<CUstream>(nullptr)})
    for (int i = 0; i < 3; ++i)
      CU_OK(cuLaunchHostFunc(x, [](void* p) { sleep_ms(1); ++*static_cast<std::atomic<int>*>(p); },
                             &ran));
  CU_OK(cuCtxSynchronize());
  REQUIRE(ran == 9);
  CU_OK(cuStreamDestroy(a));
  CU_OK(cuStreamDestroy(b));
}

TEST_CASE("a chain across two streams stays correct under delays", "[streams][delay]") {
  use_device();
  CUstream a = nullptr, b = nullptr;
  CU_OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  CU_OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUevent ea = nullptr, eb = nullptr;
  CU_OK(cuEventCreate(&ea, CU_EVENT_DISABLE_TIMING));
  CU_OK(cuEventCreate(&eb, CU_EVENT_DISABLE_TIMING));
  CUdeviceptr x = 0, y = 0;
  CU_OK(cuMemAlloc(&x, 4));
  CU_OK(cuMemAlloc(&y, 4));
  CU_OK(cuMemsetD32(x, 0, 1));
  // Ping-pong: a writes x = i, b copies x -> y, a waits for b before the next.
  std::vector<uint32_t> seen(12, 0);
  for (uint32_t i = 1; i <= 12; ++i) {
    CU_OK(cuMemsetD32Async(x, i, 1, a));
    CU_OK(cuEventRecord(ea, a));
    CU_OK(cuStreamWaitEvent(b, ea, 0));
    CU_OK(cuMemcpyDtoDAsync(y, x, 4, b));
    CU_OK(cuMemcpyDtoHAsync(&seen[i - 1], y, 4, b));
    CU_OK(cuEventRecord(eb, b));
    CU_OK(cuStreamWaitEvent(a, eb, 0));
  }
  CU_OK(cuStreamSynchronize(a));
  for (uint32_t i = 1; i <= 12; ++i) REQUIRE(seen[i - 1] == i);
  CU_OK(cuMemFree(x));
  CU_OK(cuMemFree(y));
  CU_OK(cuEventDestroy(ea));
  CU_OK(cuEventDestroy(eb));
  CU_OK(cuStreamDestroy(a));
  CU_OK(cuStreamDestroy(b));
}

TEST_CASE("many threads allocate, copy and synchronize at once", "[streams]") {
  use_device();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([t, &failures] {
      if (!try_use_device(t % 2)) ++failures;
      CUstream s = nullptr;
      if (cuStreamCreate(&s, t % 3 == 0 ? 0 : CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) ++failures;
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < 100; ++i) {
        size_t n = 1 + rng() % 2048;
        std::vector<unsigned char> in(n), out(n, 0);
        for (auto& c : in) c = static_cast<unsigned char>(rng());
        CUdeviceptr d = 0;
        if (cuMemAlloc(&d, n) != CUDA_SUCCESS) {
          ++failures;
          continue;
        }
        bool ok = cuMemcpyHtoDAsync(d, in.data(), n, s) == CUDA_SUCCESS &&
                  cuMemcpyDtoHAsync(out.data(), d, n, s) == CUDA_SUCCESS &&
                  cuStreamSynchronize(s) == CUDA_SUCCESS && cuMemFree(d) == CUDA_SUCCESS;
        if (!ok || out != in) ++failures;
      }
      if (cuStreamDestroy(s) != CUDA_SUCCESS) ++failures;
    });
  for (auto& th : threads) th.join();
  REQUIRE(failures == 0);
}
