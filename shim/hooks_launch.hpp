// Handlers: kernel launches, graphs, stream capture, stream destruction.
#pragma once


#include "base/function_ref.hpp"
#include "shim/scan.hpp"
#include "shim/via.hpp"

namespace vstack::shim {

template <class Enqueue>
CUresult launch(CUfunction f, CUstream s, bool per_thread, void** params, void** extra, Enqueue&& enqueue) {
  pool::Pool* pl = pool_ready();
  if (!pl) return enqueue();
  add(stats().global.launches, 1);
  const ParamLayout& l = layout_of(f);
  return run_access(
      *pl, target(s, per_thread), [&](pool::RefSet& refs) { scan_launch(*pl, l, params, extra, refs); }, enqueue,
      "kernel launch");
}

template <class V>
CUresult on_cuLaunchKernel(const V& real, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                           unsigned bz, unsigned smem, CUstream s, void** params, void** extra) {
  return launch(f, s, real.per_thread(), params, extra,
                [&] { return real(f, gx, gy, gz, bx, by, bz, smem, s, params, extra); });
}

template <class V>
CUresult on_cuLaunchKernelEx(const V& real, const CUlaunchConfig* cfg, CUfunction f, void** params, void** extra) {
  if (!cfg) return real(cfg, f, params, extra);
  return launch(f, cfg->hStream, real.per_thread(), params, extra, [&] { return real(cfg, f, params, extra); });
}

template <class V>
CUresult on_cuLaunchCooperativeKernel(const V& real, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                      unsigned by, unsigned bz, unsigned smem, CUstream s, void** params) {
  return launch(f, s, real.per_thread(), params, nullptr,
                [&] { return real(f, gx, gy, gz, bx, by, bz, smem, s, params); });
}

// Graphs: the references of every kernel/memcpy/memset node are collected at
// instantiation (and update), and made resident at each graph launch.
void record_graph(CUgraphExec exec, CUgraph graph);
void add_graph_node(CUgraphExec exec, const CUDA_KERNEL_NODE_PARAMS& p);
CUresult graph_launch(CUgraphExec exec, CUstream s, bool per_thread, FunctionRef<CUresult()> enqueue);

template <class V>
CUresult on_cuGraphInstantiateWithFlags(const V& real, CUgraphExec* exec, CUgraph g, unsigned long long flags) {
  CUresult r = real(exec, g, flags);
  if (r == CUDA_SUCCESS && pool_ready()) record_graph(*exec, g);
  return r;
}
template <class V>
CUresult on_cuGraphInstantiateWithParams(const V& real, CUgraphExec* exec, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  CUresult r = real(exec, g, p);
  if (r == CUDA_SUCCESS && pool_ready()) record_graph(*exec, g);
  return r;
}
template <class V>
CUresult on_cuGraphLaunch(const V& real, CUgraphExec exec, CUstream s) {
  if (!pool_ready()) return real(exec, s);
  return graph_launch(exec, s, real.per_thread(), [&] { return real(exec, s); });
}
template <class V>
CUresult on_cuGraphExecDestroy(const V& real, CUgraphExec exec) {
  {
    std::lock_guard g(side().mu);
    side().graphs.erase(exec);
  }
  return real(exec);
}
template <class V>
CUresult on_cuGraphExecKernelNodeSetParams(const V& real, CUgraphExec exec, CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS* p) {
  CUresult r = real(exec, n, p);
  if (r == CUDA_SUCCESS && p && pool_ready()) add_graph_node(exec, *p);
  return r;
}
template <class V>
CUresult on_cuGraphExecNodeSetParams(const V& real, CUgraphExec exec, CUgraphNode n, CUgraphNodeParams* p) {
  CUresult r = real(exec, n, p);
  if (r == CUDA_SUCCESS && p && pool_ready() && p->type == CU_GRAPH_NODE_TYPE_KERNEL) {
    CUDA_KERNEL_NODE_PARAMS k{};
    k.func = p->kernel.func;
    k.kern = p->kernel.kern;
    k.kernelParams = p->kernel.kernelParams;
    k.extra = p->kernel.extra;
    add_graph_node(exec, k);
  }
  return r;
}
template <class V>
CUresult on_cuGraphExecUpdate(const V& real, CUgraphExec exec, CUgraph g, CUgraphExecUpdateResultInfo* info) {
  CUresult r = real(exec, g, info);
  if (r == CUDA_SUCCESS && pool_ready()) record_graph(exec, g);
  return r;
}

// Capture bookkeeping: launches only ask the driver about capture state while
// some capture may be in progress.
template <class V>
CUresult on_cuStreamBeginCapture(const V& real, CUstream s, CUstreamCaptureMode mode) {
  CUresult r = real(s, mode);
  if (r == CUDA_SUCCESS) captures_active().fetch_add(1);
  return r;
}
template <class V>
CUresult on_cuStreamBeginCaptureToGraph(const V& real, CUstream s, CUgraph g, const CUgraphNode* deps,
                                        const CUgraphEdgeData* data, size_t n, CUstreamCaptureMode mode) {
  CUresult r = real(s, g, deps, data, n, mode);
  if (r == CUDA_SUCCESS) captures_active().fetch_add(1);
  return r;
}
template <class V>
CUresult on_cuStreamEndCapture(const V& real, CUstream s, CUgraph* g) {
  pool::Pool::Target t = target(s, real.per_thread());
  CUresult r = real(s, g);
  // The capture ends whether or not it was valid.
  if (t.capturing) captures_active().fetch_sub(1);
  return r;
}

template <class V>
CUresult on_cuStreamDestroy(const V& real, CUstream s) {
  if (pool::Pool* pl = pool_ready()) {
    Status st = pl->stream_destroyed(s);
    if (!st) (void)to_cu(st, "cuStreamDestroy");
  }
  return real(s);
}

// Routing: answers through the real resolver, then swaps in our hook.
CUresult get_proc_address(const char* symbol, void** pfn, CUresult r);
template <class V>
CUresult on_cuGetProcAddress(const V& real, const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return get_proc_address(symbol, pfn, real(symbol, pfn, version, flags));
}
template <class V>
CUresult on_cuGetProcAddress_v2(const V& real, const char* symbol, void** pfn, int version, cuuint64_t flags,
                                CUdriverProcAddressQueryResult* status) {
  return get_proc_address(symbol, pfn, real(symbol, pfn, version, flags, status));
}

}  // namespace vstack::shim
