// Streams and events: one worker thread per stream runs its ops in order.
//
// Note [Legacy NULL stream]
// The legacy stream of a context orders with every blocking stream of that
// context (user streams created without CU_STREAM_NON_BLOCKING, and the
// per-thread streams): an op on it depends on the last op enqueued so far on
// each blocking stream, and an op on a blocking stream depends on the last op
// enqueued so far on the legacy stream. Dependencies are (stream, sequence
// number) pairs the worker waits for before running the op, so no op ever
// runs early, whichever worker gets there first.
#include <chrono>
#include <unordered_map>
#include <unordered_set>

#include "internal.hpp"

struct CUstream_st : std::enable_shared_from_this<CUstream_st> {
  CUctx_st* ctx = nullptr;
  fakecuda::StreamKind kind = fakecuda::StreamKind::kUser;
  unsigned flags = 0;
  int priority = 0;

  std::mutex m;  // guards q and stop; enqueued/completed change under it
  std::condition_variable cv;
  std::deque<fakecuda::Op> q;
  std::atomic<uint64_t> enqueued{0};
  std::atomic<uint64_t> completed{0};
  bool stop = false;
  std::thread worker;

  std::shared_ptr<fakecuda::Capture> capture;  // LOCKING: driver lock

  ~CUstream_st() {
    if (worker.joinable()) worker.detach();
  }

  void run() {
    const unsigned delay = fakecuda::config().delay_us;
    for (;;) {
      fakecuda::Op op;
      {
        fakecuda::Lock l(m);
        cv.wait(l, [&] { return stop || !q.empty(); });
        if (q.empty()) return;
        op = std::move(q.front());
        q.pop_front();
      }
      if (delay != 0) std::this_thread::sleep_for(std::chrono::microseconds(delay));
      for (const fakecuda::Dep& d : op.deps) fakecuda::wait_stream(d.stream.get(), d.seq);
      if (op.run) op.run();
      op = fakecuda::Op{};
      {
        fakecuda::Lock l(m);
        completed.fetch_add(1, std::memory_order_release);
      }
      cv.notify_all();
    }
  }

  uint64_t push(fakecuda::Op op) {
    uint64_t seq;
    {
      fakecuda::Lock l(m);
      q.push_back(std::move(op));
      seq = enqueued.fetch_add(1, std::memory_order_acq_rel) + 1;
    }
    cv.notify_all();
    return seq;
  }

  void shutdown() {  // LOCKING: driver lock NOT held
    {
      fakecuda::Lock l(m);
      stop = true;
    }
    cv.notify_all();
    if (!worker.joinable()) return;
    if (worker.get_id() == std::this_thread::get_id())
      worker.detach();  // destroyed from one of its own host callbacks
    else
      worker.join();
  }
};

struct CUevent_st {
  struct Record {
    std::shared_ptr<CUstream_st> stream;
    uint64_t seq = 0;
    std::chrono::steady_clock::time_point when;  // written by the op, read after it completed
  };
  unsigned flags = 0;
  std::shared_ptr<Record> record;                 // null: never recorded
  std::shared_ptr<fakecuda::Capture> captured;    // recorded into a capture
};

namespace fakecuda {
namespace {

struct Registry {
  std::unordered_map<const CUstream_st*, std::shared_ptr<CUstream_st>> streams;  // user streams
  std::unordered_set<const CUevent_st*> events;
};

Registry& registry() {  // LOCKING: driver lock
  static Registry* r = new Registry;
  return *r;
}

std::shared_ptr<CUstream_st> make_stream(CUctx_st* ctx, StreamKind kind, unsigned flags,
                                         int priority) {
  auto s = std::make_shared<CUstream_st>();
  s->ctx = ctx;
  s->kind = kind;
  s->flags = flags;
  s->priority = priority;
  s->worker = std::thread([self = s] { self->run(); });
  return s;
}

void forget_stream(CUstream_st* s) {  // LOCKING: driver lock
  auto& v = s->ctx->streams;
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] == s) {
      v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  if (s->capture) capture_invalidate(*s->capture);
  s->capture.reset();
}

// Per-thread default streams of this thread, one per context; destroyed
// (after draining) when the thread exits.
struct PerThread {
  std::vector<std::shared_ptr<CUstream_st>> streams;
  ~PerThread() {
    for (auto& s : streams) {
      {
        Lock lock(driver_lock());
        forget_stream(s.get());
      }
      s->shutdown();
    }
  }
};
thread_local PerThread t_per_thread;

std::shared_ptr<CUstream_st> per_thread_stream(CUctx_st* ctx) {  // LOCKING: driver lock
  for (auto& s : t_per_thread.streams)
    if (s->ctx == ctx) return s;
  auto s = make_stream(ctx, StreamKind::kPerThread, 0, 0);
  ctx->streams.push_back(s.get());
  t_per_thread.streams.push_back(s);
  return s;
}

bool blocking(const CUstream_st* s) {
  return s->kind != StreamKind::kLegacy && (s->flags & CU_STREAM_NON_BLOCKING) == 0;
}

void add_dep(std::vector<Dep>& deps, CUstream_st* t) {
  uint64_t n = t->enqueued.load(std::memory_order_acquire);
  if (n > t->completed.load(std::memory_order_acquire))
    deps.push_back(Dep{t->shared_from_this(), n});
}

// Adds the implicit dependencies of Note [Legacy NULL stream] and queues the op.
CUresult enqueue(CUstream_st* s, Op op, uint64_t* seq) {  // LOCKING: driver lock
  CUctx_st* ctx = s->ctx;
  if (s->kind == StreamKind::kLegacy) {
    for (CUstream_st* t : ctx->streams)
      if (blocking(t) && t->capture) {
        capture_invalidate(*t->capture);
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
      }
    for (CUstream_st* t : ctx->streams)
      if (blocking(t)) add_dep(op.deps, t);
  } else if (blocking(s) && ctx->legacy) {
    add_dep(op.deps, ctx->legacy.get());
  }
  uint64_t n = s->push(std::move(op));
  if (seq != nullptr) *seq = n;
  return CUDA_SUCCESS;
}

CUresult find_event(CUevent e) {  // LOCKING: driver lock
  return e != nullptr && registry().events.count(e) != 0 ? CUDA_SUCCESS
                                                          : CUDA_ERROR_INVALID_HANDLE;
}

}  // namespace

void wait_stream(CUstream_st* s, uint64_t seq) {
  if (s->completed.load(std::memory_order_acquire) >= seq) return;
  Lock l(s->m);
  s->cv.wait(l, [&] { return s->completed.load(std::memory_order_acquire) >= seq; });
}

uint64_t stream_enqueued(const CUstream_st* s) { return s->enqueued.load(); }
uint64_t stream_completed(const CUstream_st* s) { return s->completed.load(); }
std::shared_ptr<Capture>& stream_capture(CUstream_st* s) { return s->capture; }
bool stream_is_legacy(const CUstream_st* s) { return s->kind == StreamKind::kLegacy; }

bool legacy_blocked_by_capture(const CUstream_st* legacy) {
  for (const CUstream_st* t : legacy->ctx->streams)
    if (blocking(t) && t->capture) return true;
  return false;
}

std::shared_ptr<CUstream_st> legacy_stream(CUctx_st* ctx) {
  if (!ctx->legacy) ctx->legacy = make_stream(ctx, StreamKind::kLegacy, 0, 0);
  return ctx->legacy;
}

CUresult resolve_stream(CUstream h, bool per_thread_default, std::shared_ptr<CUstream_st>* out) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (h == nullptr) h = per_thread_default ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
  if (h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
    CUctx_st* ctx = nullptr;
    if (CUresult r = need_context(&ctx)) return r;
    *out = h == CU_STREAM_LEGACY ? legacy_stream(ctx) : per_thread_stream(ctx);
    return CUDA_SUCCESS;
  }
  auto it = registry().streams.find(h);
  if (it == registry().streams.end()) return CUDA_ERROR_INVALID_HANDLE;
  *out = it->second;
  return CUDA_SUCCESS;
}

CUresult submit_work(const std::shared_ptr<CUstream_st>& s, Work w, uint64_t* seq) {
  if (seq != nullptr) *seq = 0;
  if (s->capture) {
    if (s->capture->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    return capture_append(*s->capture, std::move(w));
  }
  Op op;
  op.run = [w = std::move(w)] { execute(w); };
  return enqueue(s.get(), std::move(op), seq);
}

CUresult submit_op(const std::shared_ptr<CUstream_st>& s, Op op, uint64_t* seq) {
  if (s->capture) {
    capture_invalidate(*s->capture);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return enqueue(s.get(), std::move(op), seq);
}

CUresult run_async(CUstream h, bool per_thread_default, Work w) {
  Lock lock(driver_lock());
  std::shared_ptr<CUstream_st> s;
  if (CUresult r = resolve_stream(h, per_thread_default, &s)) return r;
  return submit_work(s, std::move(w), nullptr);
}

CUresult run_sync(CUstream h, bool per_thread_default, Work w) {
  std::shared_ptr<CUstream_st> s;
  uint64_t seq = 0;
  {
    Lock lock(driver_lock());
    if (CUresult r = resolve_stream(h, per_thread_default, &s)) return r;
    if (s->capture) {  // a synchronous call on a capturing stream
      capture_invalidate(*s->capture);
      return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (CUresult r = submit_work(s, std::move(w), &seq)) return r;
  }
  wait_stream(s.get(), seq);
  return CUDA_SUCCESS;
}

void sync_context(CUctx_st* ctx) {
  std::vector<Dep> all;
  {
    Lock lock(driver_lock());
    if (ctx->legacy) all.push_back(Dep{ctx->legacy, ctx->legacy->enqueued.load()});
    for (CUstream_st* t : ctx->streams) all.push_back(Dep{t->shared_from_this(), t->enqueued.load()});
  }
  for (const Dep& d : all) wait_stream(d.stream.get(), d.seq);
}

}  // namespace fakecuda

using namespace fakecuda;

namespace {

CUresult stream_synchronize(CUstream h, bool ptd) {
  std::shared_ptr<CUstream_st> s;
  uint64_t seq = 0;
  {
    Lock lock(driver_lock());
    if (CUresult r = resolve_stream(h, ptd, &s)) return r;
    if (s->capture) {
      capture_invalidate(*s->capture);
      return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (s->kind == StreamKind::kLegacy) {
      // Synchronizing the legacy stream waits for the blocking streams too.
      if (CUresult r = enqueue(s.get(), Op{}, &seq)) return r;
    } else {
      seq = s->enqueued.load();
    }
  }
  wait_stream(s.get(), seq);
  return CUDA_SUCCESS;
}

bool idle(const CUstream_st* s) { return s->completed.load() >= s->enqueued.load(); }

CUresult stream_query(CUstream h, bool ptd) {
  Lock lock(driver_lock());
  std::shared_ptr<CUstream_st> s;
  if (CUresult r = resolve_stream(h, ptd, &s)) return r;
  if (s->capture) {
    capture_invalidate(*s->capture);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (!idle(s.get())) return CUDA_ERROR_NOT_READY;
  if (s->kind == StreamKind::kLegacy)
    for (CUstream_st* t : s->ctx->streams)
      if (blocking(t) && !idle(t)) return CUDA_ERROR_NOT_READY;
  return CUDA_SUCCESS;
}

CUresult stream_wait_event(CUstream h, CUevent e, unsigned flags, bool ptd) {
  if (flags != 0 && flags != CU_EVENT_WAIT_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  std::shared_ptr<CUstream_st> s;
  if (CUresult r = resolve_stream(h, ptd, &s)) return r;
  if (CUresult r = find_event(e)) return r;
  if (e->captured) {
    if (e->captured->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (s->capture == e->captured) return CUDA_SUCCESS;  // linear graph: already ordered
    if (s->capture) return CUDA_ERROR_STREAM_CAPTURE_MERGE;
    if (s->kind == StreamKind::kLegacy) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    s->capture = e->captured;  // s joins the capture (fork)
    e->captured->members.push_back(s);
    return CUDA_SUCCESS;
  }
  if (s->capture) {
    capture_invalidate(*s->capture);
    return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  }
  if (!e->record) return CUDA_SUCCESS;
  Op op;
  op.deps.push_back(Dep{e->record->stream, e->record->seq});
  return enqueue(s.get(), std::move(op), nullptr);
}

CUresult stream_add_callback(CUstream h, CUstreamCallback cb, void* data, unsigned flags,
                             bool ptd) {
  if (cb == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  std::shared_ptr<CUstream_st> s;
  if (CUresult r = resolve_stream(h, ptd, &s)) return r;
  Op op;
  op.run = [cb, h, data] { cb(h, CUDA_SUCCESS, data); };
  return submit_op(s, std::move(op), nullptr);
}

CUresult event_record(CUevent e, CUstream h, unsigned flags, bool ptd) {
  if (flags != CU_EVENT_RECORD_DEFAULT && flags != CU_EVENT_RECORD_EXTERNAL)
    return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  if (CUresult r = find_event(e)) return r;
  std::shared_ptr<CUstream_st> s;
  if (CUresult r = resolve_stream(h, ptd, &s)) return r;
  if (s->capture) {
    if (s->capture->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    e->captured = s->capture;
    return CUDA_SUCCESS;
  }
  auto rec = std::make_shared<CUevent_st::Record>();
  Op op;
  CUevent_st::Record* raw = rec.get();
  op.run = [rec] { rec->when = std::chrono::steady_clock::now(); };
  uint64_t seq = 0;
  if (CUresult r = enqueue(s.get(), std::move(op), &seq)) return r;
  raw->stream = s;
  raw->seq = seq;
  e->record = std::move(rec);
  e->captured.reset();
  return CUDA_SUCCESS;
}

std::shared_ptr<CUevent_st::Record> event_record_of(CUevent e, CUresult* r) {
  Lock lock(driver_lock());
  *r = find_event(e);
  if (*r != CUDA_SUCCESS) return nullptr;
  return e->record;
}

bool reached(const CUevent_st::Record& rec) { return stream_completed(rec.stream.get()) >= rec.seq; }

CUresult elapsed(float* ms, CUevent a, CUevent b) {
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<CUevent_st::Record> ra, rb;
  {
    Lock lock(driver_lock());
    if (CUresult r = find_event(a)) return r;
    if (CUresult r = find_event(b)) return r;
    if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
    ra = a->record;
    rb = b->record;
  }
  if (!ra || !rb) return CUDA_ERROR_INVALID_HANDLE;
  if (!reached(*ra) || !reached(*rb)) return CUDA_ERROR_NOT_READY;
  // The record ops completed (acquire on `completed`), so `when` is visible.
  *ms = std::chrono::duration<float, std::milli>(rb->when - ra->when).count();
  return CUDA_SUCCESS;
}

CUresult destroy_stream(CUstream h);

CUresult create_stream(CUstream* ph, unsigned flags, int priority) {
  if (ph == nullptr || (flags & ~unsigned{CU_STREAM_NON_BLOCKING}) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx = nullptr;
  if (CUresult r = need_context(&ctx)) return r;
  Lock lock(driver_lock());
  auto s = make_stream(ctx, StreamKind::kUser, flags, priority);
  registry().streams.emplace(s.get(), s);
  ctx->streams.push_back(s.get());
  *ph = s.get();
  return CUDA_SUCCESS;
}

}  // namespace

// cuda.h maps these to _v2; the driver exports both names.
#undef cuEventElapsedTime
#undef cuStreamDestroy
extern "C" {
decltype(cuStreamDestroy_v2) cuStreamDestroy;
decltype(cuStreamSynchronize) cuStreamSynchronize_ptsz;
decltype(cuStreamQuery) cuStreamQuery_ptsz;
decltype(cuStreamWaitEvent) cuStreamWaitEvent_ptsz;
decltype(cuStreamAddCallback) cuStreamAddCallback_ptsz;
decltype(cuEventRecord) cuEventRecord_ptsz;
decltype(cuEventRecordWithFlags) cuEventRecordWithFlags_ptsz;
decltype(cuEventElapsedTime_v2) cuEventElapsedTime;
}

FAKECUDA_API CUresult cuStreamCreate(CUstream* ph, unsigned int flags) {
  return create_stream(ph, flags, 0);
}

FAKECUDA_API CUresult cuStreamCreateWithPriority(CUstream* ph, unsigned int flags, int priority) {
  return create_stream(ph, flags, priority < -5 ? -5 : (priority > 0 ? 0 : priority));
}

FAKECUDA_API CUresult cuStreamDestroy_v2(CUstream h) { return destroy_stream(h); }
FAKECUDA_API CUresult cuStreamDestroy(CUstream h) { return destroy_stream(h); }

namespace {
CUresult destroy_stream(CUstream h) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  std::shared_ptr<CUstream_st> s;
  {
    Lock lock(driver_lock());
    auto it = registry().streams.find(h);
    if (it == registry().streams.end()) return CUDA_ERROR_INVALID_HANDLE;
    s = it->second;
    registry().streams.erase(it);
    forget_stream(s.get());
  }
  s->shutdown();  // queued work still runs first, as on the real driver
  return CUDA_SUCCESS;
}
}  // namespace

FAKECUDA_API CUresult cuStreamSynchronize(CUstream h) { return stream_synchronize(h, false); }
FAKECUDA_API CUresult cuStreamSynchronize_ptsz(CUstream h) { return stream_synchronize(h, true); }
FAKECUDA_API CUresult cuStreamQuery(CUstream h) { return stream_query(h, false); }
FAKECUDA_API CUresult cuStreamQuery_ptsz(CUstream h) { return stream_query(h, true); }

FAKECUDA_API CUresult cuStreamWaitEvent(CUstream h, CUevent e, unsigned int flags) {
  return stream_wait_event(h, e, flags, false);
}
FAKECUDA_API CUresult cuStreamWaitEvent_ptsz(CUstream h, CUevent e, unsigned int flags) {
  return stream_wait_event(h, e, flags, true);
}

FAKECUDA_API CUresult cuStreamAddCallback(CUstream h, CUstreamCallback cb, void* data,
                                          unsigned int flags) {
  return stream_add_callback(h, cb, data, flags, false);
}
FAKECUDA_API CUresult cuStreamAddCallback_ptsz(CUstream h, CUstreamCallback cb, void* data,
                                               unsigned int flags) {
  return stream_add_callback(h, cb, data, flags, true);
}

FAKECUDA_API CUresult cuLaunchHostFunc(CUstream h, CUhostFn fn, void* data) {
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return run_async(h, false, HostWork{fn, data});
}
FAKECUDA_API CUresult cuLaunchHostFunc_ptsz(CUstream h, CUhostFn fn, void* data) {
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return run_async(h, true, HostWork{fn, data});
}

FAKECUDA_API CUresult cuEventCreate(CUevent* pe, unsigned int flags) {
  constexpr unsigned kKnown =
      CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if (pe == nullptr || (flags & ~kKnown) != 0) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx = nullptr;
  if (CUresult r = need_context(&ctx)) return r;
  auto* e = new CUevent_st;
  e->flags = flags;
  Lock lock(driver_lock());
  registry().events.insert(e);
  *pe = e;
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuEventRecord(CUevent e, CUstream h) { return event_record(e, h, 0, false); }
FAKECUDA_API CUresult cuEventRecord_ptsz(CUevent e, CUstream h) {
  return event_record(e, h, 0, true);
}
FAKECUDA_API CUresult cuEventRecordWithFlags(CUevent e, CUstream h, unsigned int flags) {
  return event_record(e, h, flags, false);
}
FAKECUDA_API CUresult cuEventRecordWithFlags_ptsz(CUevent e, CUstream h, unsigned int flags) {
  return event_record(e, h, flags, true);
}

FAKECUDA_API CUresult cuEventQuery(CUevent e) {
  CUresult r = CUDA_SUCCESS;
  auto rec = event_record_of(e, &r);
  if (r != CUDA_SUCCESS) return r;
  if (!rec) return CUDA_SUCCESS;  // never recorded: nothing to wait for
  return reached(*rec) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

FAKECUDA_API CUresult cuEventSynchronize(CUevent e) {
  CUresult r = CUDA_SUCCESS;
  auto rec = event_record_of(e, &r);
  if (r != CUDA_SUCCESS) return r;
  if (rec) wait_stream(rec->stream.get(), rec->seq);
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuEventDestroy_v2(CUevent e) {
  Lock lock(driver_lock());
  if (CUresult r = find_event(e)) return r;
  registry().events.erase(e);
  delete e;  // pending record ops hold their own Record, not the event
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuEventElapsedTime(float* ms, CUevent a, CUevent b) { return elapsed(ms, a, b); }
FAKECUDA_API CUresult cuEventElapsedTime_v2(float* ms, CUevent a, CUevent b) {
  return elapsed(ms, a, b);
}
