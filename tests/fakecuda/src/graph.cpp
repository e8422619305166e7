// The graph API: building, querying, instantiating, updating, launching.
#include <cstring>

#include "graph.hpp"

namespace fakecuda {
namespace {

CUresult need_init() { return initialized() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED; }

void refresh_kernel_params(CUgraphNode_st* n) {
  n->kernel_params.clear();
  if (auto* k = std::get_if<KernelWork>(&n->work))
    for (size_t off : k->desc->offsets) n->kernel_params.push_back(k->params.data() + off);
}

}  // namespace

Graphs& graphs() {  // LOCKING: driver lock
  static Graphs* g = new Graphs;
  return *g;
}

CUgraphNode_st* add_node(CUgraph_st* g, Work w, std::vector<CUgraphNode_st*> deps) {
  auto n = std::make_unique<CUgraphNode_st>();
  n->graph = g;
  n->work = std::move(w);
  n->deps = std::move(deps);
  refresh_kernel_params(n.get());
  CUgraphNode_st* raw = n.get();
  g->nodes.push_back(std::move(n));
  graphs().nodes.insert(raw);
  return raw;
}

void destroy_graph(CUgraph g) {  // LOCKING: driver lock
  for (auto& n : g->nodes) graphs().nodes.erase(n.get());
  graphs().graphs.erase(g);
  delete g;
}

namespace {
// Validates graph + dependency list of an Add*Node call.
CUresult check_add(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n,
                   std::vector<CUgraphNode_st*>* dv) {
  if (out == nullptr || (n != 0 && deps == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  if (graphs().graphs.count(g) == 0) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < n; ++i) {
    if (graphs().nodes.count(deps[i]) == 0 || deps[i]->graph != g) return CUDA_ERROR_INVALID_VALUE;
    dv->push_back(deps[i]);
  }
  return CUDA_SUCCESS;
}

struct KernelNodeArgs {
  CUfunction func;
  unsigned gx, gy, gz, bx, by, bz, shmem;
  void** params;
  void** extra;
};

template <class P>
KernelNodeArgs kernel_args(const P& p, CUfunction func) {
  return {func, p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY, p.blockDimZ,
          p.sharedMemBytes, p.kernelParams, p.extra};
}

CUresult kernel_work(const KernelNodeArgs& a, KernelWork* out) {
  return make_kernel_work(a.func, a.gx, a.gy, a.gz, a.bx, a.by, a.bz, a.shmem, a.params, a.extra,
                          out);
}

CUresult add_kernel_node(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n,
                         const KernelNodeArgs& a) {
  if (CUresult r = need_init()) return r;
  Lock lock(driver_lock());
  std::vector<CUgraphNode_st*> dv;
  if (CUresult r = check_add(out, g, deps, n, &dv)) return r;
  KernelWork k;
  if (CUresult r = kernel_work(a, &k)) return r;
  *out = add_node(g, std::move(k), std::move(dv));
  return CUDA_SUCCESS;
}

template <class P>
CUresult kernel_node_params(CUgraphNode n, P* p) {
  if (CUresult r = need_init()) return r;
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  if (graphs().nodes.count(n) == 0) return CUDA_ERROR_INVALID_VALUE;
  const auto* k = std::get_if<KernelWork>(&n->work);
  if (k == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::memset(p, 0, sizeof *p);
  p->func = k->func;
  p->gridDimX = k->grid.x;
  p->gridDimY = k->grid.y;
  p->gridDimZ = k->grid.z;
  p->blockDimX = k->block.x;
  p->blockDimY = k->block.y;
  p->blockDimZ = k->block.z;
  p->sharedMemBytes = k->shared_mem;
  p->kernelParams = n->kernel_params.data();
  p->extra = nullptr;
  return CUDA_SUCCESS;
}

CUresult instantiate(CUgraphExec* out, CUgraph g) {  // LOCKING: driver lock
  if (out == nullptr || graphs().graphs.count(g) == 0) return CUDA_ERROR_INVALID_VALUE;
  auto* e = new CUgraphExec_st;
  auto works = std::make_shared<std::vector<Work>>();
  for (auto& n : g->nodes) {
    e->source.push_back(n.get());
    works->push_back(n->work);
  }
  e->works = std::move(works);
  graphs().execs.insert(e);
  *out = e;
  return CUDA_SUCCESS;
}

CUresult exec_set_kernel(CUgraphExec e, CUgraphNode n, const KernelNodeArgs& a) {
  if (CUresult r = need_init()) return r;
  Lock lock(driver_lock());
  if (graphs().execs.count(e) == 0) return CUDA_ERROR_INVALID_VALUE;
  size_t i = 0;
  while (i < e->source.size() && e->source[i] != n) ++i;
  if (i == e->source.size()) return CUDA_ERROR_INVALID_VALUE;
  if (!std::holds_alternative<KernelWork>((*e->works)[i])) return CUDA_ERROR_INVALID_VALUE;
  KernelWork k;
  if (CUresult r = kernel_work(a, &k)) return r;
  auto works = std::make_shared<std::vector<Work>>(*e->works);  // launched ones keep theirs
  (*works)[i] = std::move(k);
  e->works = std::move(works);
  return CUDA_SUCCESS;
}

CUresult exec_update(CUgraphExec e, CUgraph g, CUgraphExecUpdateResultInfo* info) {
  if (CUresult r = need_init()) return r;
  Lock lock(driver_lock());
  if (graphs().execs.count(e) == 0 || graphs().graphs.count(g) == 0) return CUDA_ERROR_INVALID_VALUE;
  CUgraphExecUpdateResultInfo res{CU_GRAPH_EXEC_UPDATE_SUCCESS, nullptr, nullptr};
  if (g->nodes.size() != e->source.size()) {
    res.result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
  } else {
    for (size_t i = 0; i < g->nodes.size(); ++i) {
      const CUgraphNode_st* n = g->nodes[i].get();
      if (node_type(n->work) != node_type((*e->works)[i])) {
        res.result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
        res.errorNode = const_cast<CUgraphNode_st*>(n);
        break;
      }
    }
  }
  if (info != nullptr) *info = res;
  if (res.result != CU_GRAPH_EXEC_UPDATE_SUCCESS) return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
  auto works = std::make_shared<std::vector<Work>>();
  for (auto& n : g->nodes) works->push_back(n->work);
  e->works = std::move(works);  // node identities stay those of the instantiated graph
  return CUDA_SUCCESS;
}

CUresult graph_launch(CUgraphExec e, CUstream h, bool ptd) {
  if (CUresult r = need_init()) return r;
  Lock lock(driver_lock());
  if (graphs().execs.count(e) == 0) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<CUstream_st> s;
  if (CUresult r = resolve_stream(h, ptd, &s)) return r;
  if (stream_capture(s.get())) {  // launching into a capture: inline the nodes
    for (const Work& w : *e->works)
      if (CUresult r = submit_work(s, w, nullptr)) return r;
    return CUDA_SUCCESS;
  }
  Op op;
  op.run = [works = e->works] {
    for (const Work& w : *works) execute(w);
  };
  return submit_op(s, std::move(op), nullptr);
}

CUresult graph_upload(CUgraphExec e, CUstream h, bool ptd) {
  if (CUresult r = need_init()) return r;
  Lock lock(driver_lock());
  if (graphs().execs.count(e) == 0) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<CUstream_st> s;
  return resolve_stream(h, ptd, &s);  // nothing to upload on the host
}

CUresult instantiate_with_params(CUgraphExec* out, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS* p,
                                 bool ptd) {
  if (CUresult r = need_init()) return r;
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  if (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) {
    std::shared_ptr<CUstream_st> s;
    if (CUresult r = resolve_stream(p->hUploadStream, ptd, &s)) return r;
  }
  p->hErrNode_out = nullptr;
  CUresult r = instantiate(out, g);
  p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
  return r;
}

}  // namespace
}  // namespace fakecuda

using namespace fakecuda;

// cuda.h maps these base names to newer versions; the driver also exports the
// older signatures under the base names.
#undef cuGraphAddKernelNode
#undef cuGraphKernelNodeGetParams
#undef cuGraphExecKernelNodeSetParams
#undef cuGraphInstantiate
#undef cuGraphExecUpdate

extern "C" {
CUresult cuGraphAddKernelNode(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                              const CUDA_KERNEL_NODE_PARAMS_v1*);
CUresult cuGraphKernelNodeGetParams(CUgraphNode, CUDA_KERNEL_NODE_PARAMS_v1*);
CUresult cuGraphExecKernelNodeSetParams(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v1*);
CUresult cuGraphInstantiate(CUgraphExec*, CUgraph, CUgraphNode*, char*, size_t);
CUresult cuGraphInstantiate_v2(CUgraphExec*, CUgraph, CUgraphNode*, char*, size_t);
CUresult cuGraphExecUpdate(CUgraphExec, CUgraph, CUgraphNode*, CUgraphExecUpdateResult*);
decltype(cuGraphLaunch) cuGraphLaunch_ptsz;
decltype(cuGraphUpload) cuGraphUpload_ptsz;
decltype(cuGraphInstantiateWithParams) cuGraphInstantiateWithParams_ptsz;
}

// ---- graphs ---------------------------------------------------------------------
FAKECUDA_API CUresult cuGraphCreate(CUgraph* g, unsigned int flags) {
  if (CUresult r = need_init()) return r;
  if (g == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  auto* graph = new CUgraph_st;
  Lock lock(driver_lock());
  graphs().graphs.insert(graph);
  *g = graph;
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuGraphDestroy(CUgraph g) {
  if (CUresult r = need_init()) return r;
  Lock lock(driver_lock());
  if (graphs().graphs.count(g) == 0) return CUDA_ERROR_INVALID_VALUE;
  destroy_graph(g);
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuGraphAddKernelNode_v2(CUgraphNode* out, CUgraph g, const CUgraphNode* deps,
                                              size_t n, const CUDA_KERNEL_NODE_PARAMS* p) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUfunction f = p->func != nullptr ? p->func : reinterpret_cast<CUfunction>(p->kern);
  return add_kernel_node(out, g, deps, n, kernel_args(*p, f));
}

FAKECUDA_API CUresult cuGraphAddKernelNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps,
                                           size_t n, const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return add_kernel_node(out, g, deps, n, kernel_args(*p, p->func));
}

FAKECUDA_API CUresult cuGraphAddMemcpyNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps,
                                           size_t n, const CUDA_MEMCPY3D* p, CUcontext) {
  if (CUresult r = need_init()) return r;
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  std::vector<CUgraphNode_st*> dv;
  if (CUresult r = check_add(out, g, deps, n, &dv)) return r;
  CopyWork c;
  if (CUresult r = copy_from_3d(*p, &c)) return r;
  *out = add_node(g, c, std::move(dv));
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuGraphAddMemsetNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps,
                                           size_t n, const CUDA_MEMSET_NODE_PARAMS* p, CUcontext) {
  if (CUresult r = need_init()) return r;
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  std::vector<CUgraphNode_st*> dv;
  if (CUresult r = check_add(out, g, deps, n, &dv)) return r;
  SetWork s;
  if (CUresult r = set_from_params(*p, &s)) return r;
  *out = add_node(g, s, std::move(dv));
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuGraphGetNodes(CUgraph g, CUgraphNode* nodes, size_t* n) {
  if (CUresult r = need_init()) return r;
  if (n == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  if (graphs().graphs.count(g) == 0) return CUDA_ERROR_INVALID_VALUE;
  const size_t count = g->nodes.size();
  if (nodes != nullptr) {
    for (size_t i = 0; i < *n; ++i) nodes[i] = i < count ? g->nodes[i].get() : nullptr;
    if (*n > count) *n = count;
  } else {
    *n = count;
  }
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType* type) {
  if (CUresult r = need_init()) return r;
  if (type == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  if (graphs().nodes.count(node) == 0) return CUDA_ERROR_INVALID_VALUE;
  *type = node_type(node->work);
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode n, CUDA_KERNEL_NODE_PARAMS* p) {
  return kernel_node_params(n, p);
}

FAKECUDA_API CUresult cuGraphKernelNodeGetParams(CUgraphNode n, CUDA_KERNEL_NODE_PARAMS_v1* p) {
  return kernel_node_params(n, p);
}

FAKECUDA_API CUresult cuGraphMemcpyNodeGetParams(CUgraphNode n, CUDA_MEMCPY3D* p) {
  if (CUresult r = need_init()) return r;
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  if (graphs().nodes.count(n) == 0) return CUDA_ERROR_INVALID_VALUE;
  const auto* c = std::get_if<CopyWork>(&n->work);
  if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *p = copy_to_3d(*c);
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuGraphMemsetNodeGetParams(CUgraphNode n, CUDA_MEMSET_NODE_PARAMS* p) {
  if (CUresult r = need_init()) return r;
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  if (graphs().nodes.count(n) == 0) return CUDA_ERROR_INVALID_VALUE;
  const auto* m = std::get_if<SetWork>(&n->work);
  if (m == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *p = CUDA_MEMSET_NODE_PARAMS{};
  p->dst = reinterpret_cast<CUdeviceptr>(m->dst);
  p->pitch = m->pitch;
  p->value = m->value;
  p->elementSize = m->element;
  p->width = m->width;
  p->height = m->height;
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode n, CUgraph* g) {
  if (CUresult r = need_init()) return r;
  if (g == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  (void)n;
  return CUDA_ERROR_INVALID_VALUE;  // no child-graph nodes are ever made here
}

FAKECUDA_API CUresult cuGraphExecNodeSetParams(CUgraphExec e, CUgraphNode n, CUgraphNodeParams* p) {
  if (CUresult r = need_init()) return r;
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (p->type == CU_GRAPH_NODE_TYPE_KERNEL) {
    const auto& k = p->kernel;
    CUfunction f = k.func != nullptr ? k.func : reinterpret_cast<CUfunction>(k.kern);
    return exec_set_kernel(e, n, kernel_args(k, f));
  }
  Lock lock(driver_lock());
  if (graphs().execs.count(e) == 0) return CUDA_ERROR_INVALID_VALUE;
  size_t i = 0;
  while (i < e->source.size() && e->source[i] != n) ++i;
  if (i == e->source.size() || node_type((*e->works)[i]) != p->type) return CUDA_ERROR_INVALID_VALUE;
  Work w;
  if (p->type == CU_GRAPH_NODE_TYPE_MEMCPY) {
    CopyWork c;
    if (CUresult r = copy_from_3d(p->memcpy.copyParams, &c)) return r;
    w = c;
  } else if (p->type == CU_GRAPH_NODE_TYPE_MEMSET) {
    const auto& m = p->memset;
    CUDA_MEMSET_NODE_PARAMS q{m.dst, m.pitch, m.value, m.elementSize, m.width, m.height};
    SetWork sw;
    if (CUresult r = set_from_params(q, &sw)) return r;
    w = sw;
  } else {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  auto works = std::make_shared<std::vector<Work>>(*e->works);
  (*works)[i] = std::move(w);
  e->works = std::move(works);
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuGraphInstantiateWithFlags(CUgraphExec* e, CUgraph g,
                                                  unsigned long long flags) {
  if (CUresult r = need_init()) return r;
  constexpr unsigned long long kKnown =
      CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
  if ((flags & ~kKnown) != 0) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(driver_lock());
  return instantiate(e, g);
}

FAKECUDA_API CUresult cuGraphInstantiate_v2(CUgraphExec* e, CUgraph g, CUgraphNode* err, char* log,
                                            size_t log_size) {
  if (CUresult r = need_init()) return r;
  if (err != nullptr) *err = nullptr;
  if (log != nullptr && log_size > 0) log[0] = '\0';
  Lock lock(driver_lock());
  return instantiate(e, g);
}

FAKECUDA_API CUresult cuGraphInstantiate(CUgraphExec* e, CUgraph g, CUgraphNode* err, char* log,
                                         size_t log_size) {
  if (CUresult r = need_init()) return r;
  if (err != nullptr) *err = nullptr;
  if (log != nullptr && log_size > 0) log[0] = '\0';
  Lock lock(driver_lock());
  return instantiate(e, g);
}

FAKECUDA_API CUresult cuGraphInstantiateWithParams(CUgraphExec* e, CUgraph g,
                                                   CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  return instantiate_with_params(e, g, p, false);
}
FAKECUDA_API CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* e, CUgraph g,
                                                        CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  return instantiate_with_params(e, g, p, true);
}

FAKECUDA_API CUresult cuGraphLaunch(CUgraphExec e, CUstream h) { return graph_launch(e, h, false); }
FAKECUDA_API CUresult cuGraphLaunch_ptsz(CUgraphExec e, CUstream h) {
  return graph_launch(e, h, true);
}
FAKECUDA_API CUresult cuGraphUpload(CUgraphExec e, CUstream h) { return graph_upload(e, h, false); }
FAKECUDA_API CUresult cuGraphUpload_ptsz(CUgraphExec e, CUstream h) {
  return graph_upload(e, h, true);
}

FAKECUDA_API CUresult cuGraphExecDestroy(CUgraphExec e) {
  if (CUresult r = need_init()) return r;
  Lock lock(driver_lock());
  if (graphs().execs.count(e) == 0) return CUDA_ERROR_INVALID_VALUE;
  graphs().execs.erase(e);
  delete e;  // launched copies hold their own snapshot of the works
  return CUDA_SUCCESS;
}

FAKECUDA_API CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec e, CUgraphNode n,
                                                        const CUDA_KERNEL_NODE_PARAMS* p) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUfunction f = p->func != nullptr ? p->func : reinterpret_cast<CUfunction>(p->kern);
  return exec_set_kernel(e, n, kernel_args(*p, f));
}

FAKECUDA_API CUresult cuGraphExecKernelNodeSetParams(CUgraphExec e, CUgraphNode n,
                                                     const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return exec_set_kernel(e, n, kernel_args(*p, p->func));
}

FAKECUDA_API CUresult cuGraphExecUpdate_v2(CUgraphExec e, CUgraph g,
                                           CUgraphExecUpdateResultInfo* info) {
  return exec_update(e, g, info);
}

FAKECUDA_API CUresult cuGraphExecUpdate(CUgraphExec e, CUgraph g, CUgraphNode* err,
                                        CUgraphExecUpdateResult* result) {
  CUgraphExecUpdateResultInfo info{};
  CUresult r = exec_update(e, g, &info);
  if (err != nullptr) *err = info.errorNode;
  if (result != nullptr) *result = info.result;
  return r;
}
