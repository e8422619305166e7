// Stream capture: capturing streams turn work into graph nodes (Note
// [Linear graphs] in graph.hpp), capture status queries, capture modes.
#include "graph.hpp"

namespace fakecuda {
namespace {

thread_local CUstreamCaptureMode t_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

CUresult need_init() { return initialized() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED; }

CUresult begin_capture(CUstream h, CUstreamCaptureMode mode, bool ptd, CUgraph into = nullptr,
                       const CUgraphNode* deps = nullptr, size_t ndeps = 0) {
  if (CUresult r = need_init()) return r;
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  std::shared_ptr<CUstream_st> s;
  if (CUresult r = resolve_stream(h, ptd, &s)) return r;
  if (stream_is_legacy(s.get())) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  auto& cap = stream_capture(s.get());
  if (cap) return CUDA_ERROR_ILLEGAL_STATE;
  auto c = std::make_shared<Capture>();
  if (into != nullptr) {  // cuStreamBeginCaptureToGraph: the caller keeps owning it
    if (graphs().graphs.count(into) == 0 || (ndeps != 0 && deps == nullptr))
      return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < ndeps; ++i) {
      if (graphs().nodes.count(deps[i]) == 0 || deps[i]->graph != into) return CUDA_ERROR_INVALID_VALUE;
      c->first_deps.push_back(deps[i]);
    }
    c->graph = into;
    c->into_existing = true;
  } else {
    c->graph = new CUgraph_st;
    graphs().graphs.insert(c->graph);
  }
  c->id = graphs().next_capture_id++;
  c->mode = mode;
  c->thread = std::this_thread::get_id();
  graphs().active.push_back(c);
  c->origin = s.get();
  c->members.push_back(s);
  cap = std::move(c);
  return CUDA_SUCCESS;
}

CUresult end_capture(CUstream h, CUgraph* out, bool ptd) {
  if (CUresult r = need_init()) return r;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  std::shared_ptr<CUstream_st> s;
  if (CUresult r = resolve_stream(h, ptd, &s)) return r;
  std::shared_ptr<Capture> c = stream_capture(s.get());
  if (!c) return CUDA_ERROR_ILLEGAL_STATE;
  if (c->origin != s.get()) return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
  for (auto& m : c->members) stream_capture(m.get()).reset();
  c->members.clear();
  auto& active = graphs().active;
  for (size_t i = 0; i < active.size();) {
    auto a = active[i].lock();
    if (!a || a == c)
      active.erase(active.begin() + static_cast<std::ptrdiff_t>(i));
    else
      ++i;
  }
  if (c->invalidated) {
    if (!c->into_existing) destroy_graph(c->graph);
    c->graph = nullptr;
    *out = nullptr;
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  *out = c->graph;  // the caller owns it now
  return CUDA_SUCCESS;
}

CUresult capture_info(CUstream h, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                      const CUgraphNode** deps, const CUgraphEdgeData** edges, size_t* ndeps,
                      bool ptd) {
  if (CUresult r = need_init()) return r;
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  std::shared_ptr<CUstream_st> s;
  if (CUresult r = resolve_stream(h, ptd, &s)) return r;
  if (stream_is_legacy(s.get()) && legacy_blocked_by_capture(s.get()))
    return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;  // the capture itself stays valid
  const std::shared_ptr<Capture>& c = stream_capture(s.get());
  if (edges != nullptr) *edges = nullptr;
  if (!c) {
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (ndeps != nullptr) *ndeps = 0;
    return CUDA_SUCCESS;
  }
  *status = c->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  if (id != nullptr) *id = c->id;
  if (graph != nullptr) *graph = c->graph;
  c->deps_out.clear();
  if (c->last != nullptr)
    c->deps_out.push_back(c->last);
  else
    c->deps_out = c->first_deps;
  if (deps != nullptr) *deps = c->deps_out.data();
  if (ndeps != nullptr) *ndeps = c->deps_out.size();
  return CUDA_SUCCESS;
}

CUresult is_capturing(CUstream h, CUstreamCaptureStatus* status, bool ptd) {
  return capture_info(h, status, nullptr, nullptr, nullptr, nullptr, nullptr, ptd);
}

}  // namespace

// Note [Capture modes] (cuThreadExchangeStreamCaptureMode): a thread whose
// mode is not RELAXED may not make potentially unsafe calls while it has a
// capture of its own begun in a non-RELAXED mode, or, in GLOBAL mode, while
// any other thread has a GLOBAL capture under way.
CUresult check_unsafe_call() {
  if (t_capture_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
  const auto me = std::this_thread::get_id();
  bool forbidden = false;
  for (auto& w : graphs().active) {
    auto c = w.lock();
    if (!c || c->members.empty()) continue;
    bool mine = c->thread == me && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED;
    bool global = c->thread != me && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
                  t_capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
    if (mine || global) {
      capture_invalidate(*c);
      forbidden = true;
    }
  }
  return forbidden ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

CUresult capture_append(Capture& c, Work w) {
  std::vector<CUgraphNode_st*> deps;
  if (c.last != nullptr)
    deps.push_back(c.last);
  else
    deps = c.first_deps;
  c.last = add_node(c.graph, std::move(w), std::move(deps));
  return CUDA_SUCCESS;
}

void capture_invalidate(Capture& c) { c.invalidated = true; }

}  // namespace fakecuda

using namespace fakecuda;

// cuda.h maps these base names to newer versions; the driver also exports the
// older signatures under the base names.
#undef cuStreamGetCaptureInfo
#undef cuStreamBeginCapture
#undef cuStreamBeginCaptureToGraph

extern "C" {
CUresult cuStreamGetCaptureInfo(CUstream, CUstreamCaptureStatus*, cuuint64_t*);
CUresult cuStreamGetCaptureInfo_ptsz(CUstream, CUstreamCaptureStatus*, cuuint64_t*);
CUresult cuStreamGetCaptureInfo_v2(CUstream, CUstreamCaptureStatus*, cuuint64_t*, CUgraph*,
                                   const CUgraphNode**, size_t*);
CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream, CUstreamCaptureStatus*, cuuint64_t*, CUgraph*,
                                        const CUgraphNode**, size_t*);
CUresult cuStreamBeginCapture(CUstream);
CUresult cuStreamBeginCapture_ptsz(CUstream);
CUresult cuStreamBeginCaptureToGraph(CUstream, CUgraph, const CUgraphNode*, const CUgraphEdgeData*,
                                     size_t, CUstreamCaptureMode);
CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream, CUgraph, const CUgraphNode*,
                                          const CUgraphEdgeData*, size_t, CUstreamCaptureMode);
decltype(cuStreamGetCaptureInfo_v3) cuStreamGetCaptureInfo_v3_ptsz;
decltype(cuStreamBeginCapture_v2) cuStreamBeginCapture_v2_ptsz;
decltype(cuStreamEndCapture) cuStreamEndCapture_ptsz;
decltype(cuStreamIsCapturing) cuStreamIsCapturing_ptsz;
}

// ---- capture --------------------------------------------------------------------
FAKECUDA_API CUresult cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode mode) {
  return begin_capture(h, mode, false);
}
FAKECUDA_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream h, CUstreamCaptureMode mode) {
  return begin_capture(h, mode, true);
}
FAKECUDA_API CUresult cuStreamBeginCapture(CUstream h) {
  return begin_capture(h, CU_STREAM_CAPTURE_MODE_GLOBAL, false);
}
FAKECUDA_API CUresult cuStreamBeginCapture_ptsz(CUstream h) {
  return begin_capture(h, CU_STREAM_CAPTURE_MODE_GLOBAL, true);
}
FAKECUDA_API CUresult cuStreamBeginCaptureToGraph(CUstream h, CUgraph g, const CUgraphNode* deps,
                                                  const CUgraphEdgeData* edges, size_t n,
                                                  CUstreamCaptureMode mode) {
  (void)edges;  // default edges only (see README)
  if (g == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return begin_capture(h, mode, false, g, deps, n);
}
FAKECUDA_API CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream h, CUgraph g,
                                                       const CUgraphNode* deps,
                                                       const CUgraphEdgeData* edges, size_t n,
                                                       CUstreamCaptureMode mode) {
  (void)edges;
  if (g == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return begin_capture(h, mode, true, g, deps, n);
}
FAKECUDA_API CUresult cuStreamEndCapture(CUstream h, CUgraph* g) { return end_capture(h, g, false); }
FAKECUDA_API CUresult cuStreamEndCapture_ptsz(CUstream h, CUgraph* g) {
  return end_capture(h, g, true);
}
FAKECUDA_API CUresult cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus* st) {
  return is_capturing(h, st, false);
}
FAKECUDA_API CUresult cuStreamIsCapturing_ptsz(CUstream h, CUstreamCaptureStatus* st) {
  return is_capturing(h, st, true);
}
FAKECUDA_API CUresult cuStreamGetCaptureInfo(CUstream h, CUstreamCaptureStatus* st, cuuint64_t* id) {
  return capture_info(h, st, id, nullptr, nullptr, nullptr, nullptr, false);
}
FAKECUDA_API CUresult cuStreamGetCaptureInfo_ptsz(CUstream h, CUstreamCaptureStatus* st,
                                                  cuuint64_t* id) {
  return capture_info(h, st, id, nullptr, nullptr, nullptr, nullptr, true);
}
FAKECUDA_API CUresult cuStreamGetCaptureInfo_v2(CUstream h, CUstreamCaptureStatus* st,
                                                cuuint64_t* id, CUgraph* g,
                                                const CUgraphNode** deps, size_t* n) {
  return capture_info(h, st, id, g, deps, nullptr, n, false);
}
FAKECUDA_API CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream h, CUstreamCaptureStatus* st,
                                                     cuuint64_t* id, CUgraph* g,
                                                     const CUgraphNode** deps, size_t* n) {
  return capture_info(h, st, id, g, deps, nullptr, n, true);
}
FAKECUDA_API CUresult cuStreamGetCaptureInfo_v3(CUstream h, CUstreamCaptureStatus* st,
                                                cuuint64_t* id, CUgraph* g,
                                                const CUgraphNode** deps,
                                                const CUgraphEdgeData** edges, size_t* n) {
  return capture_info(h, st, id, g, deps, edges, n, false);
}
FAKECUDA_API CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream h, CUstreamCaptureStatus* st,
                                                     cuuint64_t* id, CUgraph* g,
                                                     const CUgraphNode** deps,
                                                     const CUgraphEdgeData** edges, size_t* n) {
  return capture_info(h, st, id, g, deps, edges, n, true);
}

FAKECUDA_API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  if (mode == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL && *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      *mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  std::swap(*mode, t_capture_mode);
  return CUDA_SUCCESS;
}
