#include "shim/hooks_launch.hpp"

#include <cstring>
#include <vector>

#include "base/log.hpp"
#include "shim/exports.hpp"
#include "shim/hooks_copy.hpp"
#include "shim/real.hpp"

namespace vstack::shim {

namespace {

void kernel_words(const CUDA_KERNEL_NODE_PARAMS& p, std::vector<uint64_t>& out) {
  CUfunction f = p.func ? p.func : reinterpret_cast<CUfunction>(p.kern);
  if (!f) return;
  collect_words(layout_of(f), p.kernelParams, p.extra, out);
}

void walk(CUgraph g, SideTables::GraphRefs& refs, int depth) {
  const Real& r = real();
  size_t n = 0;
  if (depth > 16 || !r.cuGraphGetNodes || r.cuGraphGetNodes(g, nullptr, &n) != CUDA_SUCCESS || n == 0) return;
  std::vector<CUgraphNode> nodes(n);
  if (r.cuGraphGetNodes(g, nodes.data(), &n) != CUDA_SUCCESS) return;
  for (CUgraphNode node : nodes) {
    CUgraphNodeType type;
    if (r.cuGraphNodeGetType(node, &type) != CUDA_SUCCESS) continue;
    switch (type) {
      case CU_GRAPH_NODE_TYPE_KERNEL: {
        CUDA_KERNEL_NODE_PARAMS p{};
        if (r.cuGraphKernelNodeGetParams_v2(node, &p) == CUDA_SUCCESS) kernel_words(p, refs.words);
        break;
      }
      case CU_GRAPH_NODE_TYPE_MEMCPY: {
        CUDA_MEMCPY3D c{};
        if (r.cuGraphMemcpyNodeGetParams(node, &c) == CUDA_SUCCESS) {
          for (bool src : {false, true}) {
            Span s = span_3d(c, src);
            if (s.bytes) refs.ranges.emplace_back(s.ptr, s.bytes);
          }
        }
        break;
      }
      case CU_GRAPH_NODE_TYPE_MEMSET: {
        CUDA_MEMSET_NODE_PARAMS m{};
        if (r.cuGraphMemsetNodeGetParams(node, &m) == CUDA_SUCCESS && m.height > 0)
          refs.ranges.emplace_back(m.dst, (m.height - 1) * m.pitch + m.width * m.elementSize);
        break;
      }
      case CU_GRAPH_NODE_TYPE_GRAPH: {
        CUgraph child = nullptr;
        if (r.cuGraphChildGraphNodeGetGraph(node, &child) == CUDA_SUCCESS) walk(child, refs, depth + 1);
        break;
      }
      default: break;
    }
  }
}

}  // namespace

void record_graph(CUgraphExec exec, CUgraph graph) {
  SideTables::GraphRefs refs;
  walk(graph, refs, 0);
  std::lock_guard g(side().mu);
  side().graphs[exec] = std::move(refs);
}

void add_graph_node(CUgraphExec exec, const CUDA_KERNEL_NODE_PARAMS& p) {
  std::vector<uint64_t> words;
  kernel_words(p, words);
  std::lock_guard g(side().mu);
  auto& w = side().graphs[exec].words;  // conservative: old references stay
  w.insert(w.end(), words.begin(), words.end());
}

CUresult graph_launch(CUgraphExec exec, CUstream s, bool per_thread, FunctionRef<CUresult()> enqueue) {
  pool::Pool* pl = pool_ready();
  add(stats().global.launches, 1);
  SideTables::GraphRefs refs;
  {
    std::lock_guard g(side().mu);
    auto it = side().graphs.find(exec);
    if (it != side().graphs.end()) refs = it->second;
  }
  return run_access(
      *pl, target(s, per_thread),
      [&](pool::RefSet& out) {
        if (!refs.words.empty()) pl->scan_words(refs.words.data(), refs.words.size() * 8, out);
        for (auto& [p, n] : refs.ranges) pl->add_range(p, n, out);
      },
      enqueue, "cuGraphLaunch");
}

CUresult get_proc_address(const char* symbol, void** pfn, CUresult r) {
  if (r != CUDA_SUCCESS || !pfn || !*pfn) return r;
  // Map the real pointer back to the exact export it is (so _v2/_ptsz/_ptds
  // pick the matching hook); cuGetProcAddress itself comes back as ours.
  if (void* h = hook_for_real(*pfn)) {
    *pfn = h;
  } else if (symbol && std::strncmp(symbol, "cuGetProcAddress", 16) == 0) {
    if (void* own = hook_by_name("cuGetProcAddress_v2")) *pfn = own;
  }
  return r;
}

}  // namespace vstack::shim
