// Stream capture -> graph -> instantiate -> launch, graph APIs, capture misuse.
#include <cstring>
#include <vector>

#include "test_util.hpp"

using namespace fakecuda_test;

#undef cuGraphAddKernelNode
#undef cuGraphKernelNodeGetParams
extern "C" {
CUresult cuGraphAddKernelNode(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                              const CUDA_KERNEL_NODE_PARAMS_v1*);
CUresult cuGraphKernelNodeGetParams(CUgraphNode, CUDA_KERNEL_NODE_PARAMS_v1*);
CUresult cuGraphInstantiate_v2(CUgraphExec*, CUgraph, CUgraphNode*, char*, size_t);
CUresult cuStreamGetCaptureInfo_v2(CUstream, CUstreamCaptureStatus*, cuuint64_t*, CUgraph*,
                                   const CUgraphNode**, size_t*);
}

namespace {

// add(uint32_t* p, uint32_t v): *p += v
void add(const fakecuda_launch* l) {
  auto* p = fakecuda::arg<uint32_t*>(l, 0);
  *p += fakecuda::arg<uint32_t>(l, 1);
}

CUfunction add_function() {
  REQUIRE((fakecuda::register_kernel<uint32_t*, uint32_t>("add", add) == 0));
  CUmodule m = nullptr;
  CU_OK(cuModuleLoadData(&m, "x"));
  CUfunction f = nullptr;
  CU_OK(cuModuleGetFunction(&f, m, "add"));
  return f;
}

uint32_t read32(CUdeviceptr p) {
  uint32_t v = 0;
  CU_OK(cuMemcpyDtoH(&v, p, 4));
  return v;
}

std::vector<CUgraphNodeType> node_types(CUgraph g) {
  size_t n = 0;
  CU_OK(cuGraphGetNodes(g, nullptr, &n));
  std::vector<CUgraphNode> nodes(n + 2, reinterpret_cast<CUgraphNode>(1));
  size_t asked = n + 2;
  CU_OK(cuGraphGetNodes(g, nodes.data(), &asked));
  REQUIRE(asked == n);
  REQUIRE(nodes[n] == nullptr);  // the rest is cleared
  std::vector<CUgraphNodeType> types;
  for (size_t i = 0; i < n; ++i) {
    CUgraphNodeType t;
    CU_OK(cuGraphNodeGetType(nodes[i], &t));
    types.push_back(t);
  }
  return types;
}

}  // namespace

TEST_CASE("captured work becomes a graph and runs only when launched", "[graphs]") {
  use_device();
  CUfunction f = add_function();
  CUdeviceptr d = 0, e = 0;
  CU_OK(cuMemAlloc(&d, 4));
  CU_OK(cuMemAlloc(&e, 4));
  CU_OK(cuMemsetD32(d, 1000, 1));
  CU_OK(cuMemsetD32(e, 0xdddddddd, 1));

  CUstream s = nullptr;
  CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  REQUIRE(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_ERROR_ILLEGAL_STATE);
  CU_OK(cuMemsetD32Async(d, 5, 1, s));
  uint32_t v = 7;
  void* params[] = {&d, &v};
  CU_OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr));
  v = 1000000;  // captured at launch time
  CU_OK(cuMemcpyDtoDAsync(e, d, 4, s));

  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  CU_OK(cuStreamIsCapturing(s, &st));
  REQUIRE(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  cuuint64_t id = 0;
  CUgraph during = nullptr;
  const CUgraphNode* deps = nullptr;
  size_t ndeps = 0;
  CU_OK(cuStreamGetCaptureInfo_v2(s, &st, &id, &during, &deps, &ndeps));
  REQUIRE(id != 0);
  REQUIRE(during != nullptr);
  REQUIRE(ndeps == 1);
  CUgraph g = nullptr;
  CU_OK(cuStreamEndCapture(s, &g));
  REQUIRE(g == during);
  CU_OK(cuStreamIsCapturing(s, &st));
  REQUIRE(st == CU_STREAM_CAPTURE_STATUS_NONE);
  CU_OK(cuStreamSynchronize(s));
  REQUIRE(read32(d) == 1000);  // nothing ran
  REQUIRE(read32(e) == 0xdddddddd);

  REQUIRE(node_types(g) == std::vector<CUgraphNodeType>{CU_GRAPH_NODE_TYPE_MEMSET,
                                                        CU_GRAPH_NODE_TYPE_KERNEL,
                                                        CU_GRAPH_NODE_TYPE_MEMCPY});
  size_t n = 3;
  CUgraphNode nodes[3];
  CU_OK(cuGraphGetNodes(g, nodes, &n));
  CUDA_KERNEL_NODE_PARAMS kp{};
  CU_OK(cuGraphKernelNodeGetParams_v2(nodes[1], &kp));
  REQUIRE(kp.func == f);
  REQUIRE(*static_cast<uint32_t*>(kp.kernelParams[1]) == 7);
  REQUIRE(*static_cast<CUdeviceptr*>(kp.kernelParams[0]) == d);

  // What the shim reads back from captured copy and set nodes.
  CUDA_MEMCPY3D cp{};
  CU_OK(cuGraphMemcpyNodeGetParams(nodes[2], &cp));
  REQUIRE(cp.srcMemoryType == CU_MEMORYTYPE_DEVICE);
  REQUIRE(cp.dstMemoryType == CU_MEMORYTYPE_DEVICE);
  REQUIRE(cp.srcDevice == d);
  REQUIRE(cp.dstDevice == e);
  REQUIRE(cp.WidthInBytes == 4);
  REQUIRE(cp.Height == 1);
  REQUIRE(cp.Depth == 1);
  CUDA_MEMSET_NODE_PARAMS ms{};
  CU_OK(cuGraphMemsetNodeGetParams(nodes[0], &ms));
  REQUIRE(ms.dst == d);
  REQUIRE(ms.value == 5);
  REQUIRE(ms.elementSize == 4);
  REQUIRE(ms.width == 1);
  REQUIRE(ms.height == 1);
  REQUIRE(cuGraphMemsetNodeGetParams(nodes[1], &ms) == CUDA_ERROR_INVALID_VALUE);
  CUgraph child = nullptr;
  REQUIRE(cuGraphChildGraphNodeGetGraph(nodes[1], &child) == CUDA_ERROR_INVALID_VALUE);

  CUgraphExec x = nullptr;
  CU_OK(cuGraphInstantiate(&x, g, 0));
  CU_OK(cuGraphLaunch(x, s));
  CU_OK(cuStreamSynchronize(s));
  REQUIRE(read32(d) == 12);
  REQUIRE(read32(e) == 12);
  CUgraphNodeParams np{};
  np.type = CU_GRAPH_NODE_TYPE_MEMSET;
  np.memset.dst = d;
  np.memset.value = 50;
  np.memset.elementSize = 4;
  np.memset.width = 1;
  np.memset.height = 1;
  CU_OK(cuGraphExecNodeSetParams(x, nodes[0], &np));
  CU_OK(cuGraphLaunch(x, s));
  CU_OK(cuStreamSynchronize(s));
  REQUIRE(read32(e) == 57);
  REQUIRE(cuGraphExecNodeSetParams(x, nodes[1], &np) == CUDA_ERROR_INVALID_VALUE);  // not a memset
  np.memset.value = 5;
  CU_OK(cuGraphExecNodeSetParams(x, nodes[0], &np));
  CU_OK(cuGraphLaunch(x, s));  // the memset resets, so the same again
  CU_OK(cuStreamSynchronize(s));
  REQUIRE(read32(e) == 12);

  // New kernel parameters for later launches only.
  Gate& gate = new_gate();
  CU_OK(cuLaunchHostFunc(s, Gate::wait_fn, &gate));
  CU_OK(cuGraphLaunch(x, s));  // queued with v = 7
  uint32_t v2 = 100;
  void* params2[] = {&d, &v2};
  kp.kernelParams = params2;
  CU_OK(cuGraphExecKernelNodeSetParams(x, nodes[1], &kp));
  CU_OK(cuGraphLaunch(x, s));  // v = 100
  CU_OK(cuMemcpyDtoDAsync(d, e, 4, s));
  gate.open();
  CU_OK(cuStreamSynchronize(s));
  REQUIRE(read32(e) == 105);
  REQUIRE(cuGraphExecKernelNodeSetParams(x, nodes[0], &kp) == CUDA_ERROR_INVALID_VALUE);

  // Update from a graph of another shape fails; from the same shape it works.
  CUgraph other = nullptr;
  CU_OK(cuGraphCreate(&other, 0));
  CUgraphExecUpdateResultInfo info{};
  REQUIRE(cuGraphExecUpdate(x, other, &info) == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  REQUIRE(info.result == CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
  CU_OK(cuGraphExecUpdate(x, g, &info));  // back to v = 7
  REQUIRE(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS);
  CU_OK(cuGraphLaunch(x, s));
  CU_OK(cuStreamSynchronize(s));
  REQUIRE(read32(e) == 12);

  CU_OK(cuGraphExecDestroy(x));
  CU_OK(cuGraphDestroy(other));
  CU_OK(cuGraphDestroy(g));
  REQUIRE(cuGraphLaunch(x, s) == CUDA_ERROR_INVALID_VALUE);
  CU_OK(cuMemFree(d));
  CU_OK(cuMemFree(e));
  CU_OK(cuStreamDestroy(s));
}

TEST_CASE("capture across streams through events (fork and join)", "[graphs]") {
  use_device();
  CUfunction f = add_function();
  CUdeviceptr d = 0;
  CU_OK(cuMemAlloc(&d, 4));
  CU_OK(cuMemsetD32(d, 0, 1));
  CUstream a = nullptr, b = nullptr;
  CU_OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  CU_OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUevent fork = nullptr, join = nullptr;
  CU_OK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
  CU_OK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
  uint32_t one = 1, ten = 10;
  void* p1[] = {&d, &one};
  void* p10[] = {&d, &ten};

  CU_OK(cuStreamBeginCapture_v2_ptsz(a, CU_STREAM_CAPTURE_MODE_RELAXED));
  CU_OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, a, p1, nullptr));
  CU_OK(cuEventRecord(fork, a));
  CU_OK(cuStreamWaitEvent(b, fork, 0));
  CUstreamCaptureStatus st;
  CU_OK(cuStreamIsCapturing(b, &st));
  REQUIRE(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CU_OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, b, p10, nullptr));
  CU_OK(cuEventRecord(join, b));
  CU_OK(cuStreamWaitEvent(a, join, 0));
  REQUIRE(cuStreamEndCapture(b, nullptr) == CUDA_ERROR_INVALID_VALUE);
  CUgraph bad = nullptr;
  REQUIRE(cuStreamEndCapture(b, &bad) == CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
  CUgraph g = nullptr;
  CU_OK(cuStreamEndCapture_ptsz(a, &g));
  CU_OK(cuStreamIsCapturing(b, &st));
  REQUIRE(st == CU_STREAM_CAPTURE_STATUS_NONE);
  REQUIRE(node_types(g).size() == 2);

  CUgraphExec x = nullptr;
  CUDA_GRAPH_INSTANTIATE_PARAMS ip{};
  ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
  ip.hUploadStream = b;
  CU_OK(cuGraphInstantiateWithParams(&x, g, &ip));
  REQUIRE(ip.result_out == CUDA_GRAPH_INSTANTIATE_SUCCESS);
  CU_OK(cuGraphUpload(x, b));
  CU_OK(cuGraphLaunch_ptsz(x, nullptr));  // the per-thread stream
  CU_OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
  CU_OK(cuGraphLaunch(x, b));
  CU_OK(cuStreamSynchronize(b));
  REQUIRE(read32(d) == 22);
  CU_OK(cuGraphExecDestroy(x));
  CU_OK(cuGraphDestroy(g));
  CU_OK(cuEventDestroy(fork));
  CU_OK(cuEventDestroy(join));
  CU_OK(cuStreamDestroy(a));
  CU_OK(cuStreamDestroy(b));
  CU_OK(cuMemFree(d));
}

TEST_CASE("capture misuse invalidates the capture or is refused", "[graphs]") {
  use_device();
  CUstream s = nullptr, blocking = nullptr;
  CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CU_OK(cuStreamCreate(&blocking, 0));
  CUgraph g = reinterpret_cast<CUgraph>(1);
  REQUIRE(cuStreamBeginCapture(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL) ==
          CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  REQUIRE(cuStreamEndCapture(s, &g) == CUDA_ERROR_ILLEGAL_STATE);

  CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  REQUIRE(cuStreamSynchronize(s) == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUstreamCaptureStatus st;
  CU_OK(cuStreamIsCapturing(s, &st));
  REQUIRE(st == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  REQUIRE(cuMemsetD8Async(0, 0, 0, s) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  REQUIRE(cuStreamEndCapture(s, &g) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  REQUIRE(g == nullptr);

  // Legacy-stream work while a blocking stream captures.
  CU_OK(cuStreamBeginCapture(blocking, CU_STREAM_CAPTURE_MODE_RELAXED));
  CUdeviceptr d = 0;
  CU_OK(cuMemAlloc(&d, 4));
  REQUIRE(cuStreamIsCapturing(nullptr, &st) == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
  CU_OK(cuStreamIsCapturing(blocking, &st));
  REQUIRE(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);  // a query does not invalidate
  REQUIRE(cuMemsetD32Async(d, 1, 1, nullptr) == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
  REQUIRE(cuStreamEndCapture(blocking, &g) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CU_OK(cuMemsetD32Async(d, 1, 1, nullptr));  // fine again
  CU_OK(cuStreamSynchronize(nullptr));
  CU_OK(cuMemFree(d));

  // Capture modes: unsafe calls during a GLOBAL capture fail and invalidate it,
  // a RELAXED thread may make them, another thread in GLOBAL mode may not.
  CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  REQUIRE(cuMemAlloc(&d, 16) == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CU_OK(cuStreamIsCapturing(s, &st));
  REQUIRE(st == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  REQUIRE(cuStreamEndCapture(s, &g) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUresult other = CUDA_SUCCESS;
  std::thread t([&] {
    CUdeviceptr q = 0;
    other = try_use_device(0) ? cuMemAlloc(&q, 16) : CUDA_ERROR_UNKNOWN;
  });
  t.join();
  REQUIRE(other == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  REQUIRE(cuStreamEndCapture(s, &g) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
  CU_OK(cuMemAlloc(&d, 16));
  CU_OK(cuMemFree(d));
  CU_OK(cuStreamEndCapture(s, &g));
  CU_OK(cuGraphDestroy(g));

  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  CU_OK(cuThreadExchangeStreamCaptureMode(&mode));
  REQUIRE(mode == CU_STREAM_CAPTURE_MODE_GLOBAL);
  CU_OK(cuThreadExchangeStreamCaptureMode(&mode));
  REQUIRE(mode == CU_STREAM_CAPTURE_MODE_RELAXED);
  CU_OK(cuStreamDestroy(s));
  CU_OK(cuStreamDestroy(blocking));
}

TEST_CASE("graphs built by hand, with the older entry points too", "[graphs]") {
  use_device();
  CUfunction f = add_function();
  CUdeviceptr d = 0, e = 0;
  CU_OK(cuMemAlloc(&d, 64));
  CU_OK(cuMemAlloc(&e, 64));
  CU_OK(cuMemsetD8(e, 0xff, 64));
  CUgraph g = nullptr;
  CU_OK(cuGraphCreate(&g, 0));
  REQUIRE(cuGraphCreate(&g, 1) == CUDA_ERROR_INVALID_VALUE);

  CUDA_MEMSET_NODE_PARAMS ms{};
  ms.dst = d;
  ms.elementSize = 4;
  ms.value = 3;
  ms.width = 16;
  ms.height = 1;
  CUgraphNode nset = nullptr, nk = nullptr, nk1 = nullptr, ncopy = nullptr;
  CU_OK(cuGraphAddMemsetNode(&nset, g, nullptr, 0, &ms, nullptr));
  uint32_t v = 4;
  void* params[] = {&d, &v};
  CUDA_KERNEL_NODE_PARAMS kp{};
  kp.func = f;
  kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1;
  kp.blockDimX = kp.blockDimY = kp.blockDimZ = 1;
  kp.kernelParams = params;
  CU_OK(cuGraphAddKernelNode_v2(&nk, g, &nset, 1, &kp));
  CUDA_KERNEL_NODE_PARAMS_v1 kp1{};
  kp1.func = f;
  kp1.gridDimX = kp1.gridDimY = kp1.gridDimZ = 1;
  kp1.blockDimX = kp1.blockDimY = kp1.blockDimZ = 1;
  uint32_t w = 20;
  void* params1[] = {&d, &w};
  kp1.kernelParams = params1;
  CU_OK(cuGraphAddKernelNode(&nk1, g, &nk, 1, &kp1));
  CUDA_KERNEL_NODE_PARAMS_v1 got1{};
  CU_OK(cuGraphKernelNodeGetParams(nk1, &got1));
  REQUIRE(*static_cast<uint32_t*>(got1.kernelParams[1]) == 20);
  CUDA_MEMCPY3D cp{};
  cp.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  cp.srcDevice = d;
  cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  cp.dstDevice = e;
  cp.WidthInBytes = 8;
  cp.Height = 1;
  cp.Depth = 1;
  CU_OK(cuGraphAddMemcpyNode(&ncopy, g, &nk1, 1, &cp, nullptr));
  CUgraph g2 = nullptr;
  CU_OK(cuGraphCreate(&g2, 0));
  CUgraphNode foreign = nullptr;
  REQUIRE(cuGraphAddMemsetNode(&foreign, g2, &nset, 1, &ms, nullptr) == CUDA_ERROR_INVALID_VALUE);

  CUgraphExec x = nullptr;
  CUgraphNode err = reinterpret_cast<CUgraphNode>(1);
  char log[16] = "junk";
  CU_OK(cuGraphInstantiate_v2(&x, g, &err, log, sizeof log));
  REQUIRE(err == nullptr);
  CU_OK(cuGraphLaunch(x, nullptr));
  CU_OK(cuStreamSynchronize(nullptr));
  uint32_t out[16];
  CU_OK(cuMemcpyDtoH(out, e, 64));
  REQUIRE(out[0] == 27);  // 3 + 4 + 20
  REQUIRE(out[1] == 3);
  REQUIRE(out[2] == 0xffffffffu);  // only 8 bytes copied
  CU_OK(cuGraphExecDestroy(x));
  CU_OK(cuGraphDestroy(g));
  CU_OK(cuGraphDestroy(g2));
  CU_OK(cuMemFree(d));
  CU_OK(cuMemFree(e));
}

TEST_CASE("capture into an existing graph after given nodes", "[graphs]") {
  use_device();
  CUfunction f = add_function();
  CUdeviceptr d = 0;
  CU_OK(cuMemAlloc(&d, 4));
  CU_OK(cuMemsetD32(d, 77, 1));
  CUgraph g = nullptr;
  CU_OK(cuGraphCreate(&g, 0));
  CUDA_MEMSET_NODE_PARAMS ms{};
  ms.dst = d;
  ms.elementSize = 4;
  ms.value = 1;
  ms.width = 1;
  ms.height = 1;
  CUgraphNode set = nullptr;
  CU_OK(cuGraphAddMemsetNode(&set, g, nullptr, 0, &ms, nullptr));
  CUstream s = nullptr;
  CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CU_OK(cuStreamBeginCaptureToGraph(s, g, &set, nullptr, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUstreamCaptureStatus st;
  cuuint64_t id = 0;
  CUgraph during = nullptr;
  const CUgraphNode* deps = nullptr;
  size_t n = 0;
  CU_OK(cuStreamGetCaptureInfo(s, &st, &id, &during, &deps, nullptr, &n));
  REQUIRE(during == g);
  REQUIRE(n == 1);
  REQUIRE(deps[0] == set);
  uint32_t v = 41;
  void* params[] = {&d, &v};
  CU_OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr));
  CUgraph out = nullptr;
  CU_OK(cuStreamEndCapture(s, &out));
  REQUIRE(out == g);
  REQUIRE(node_types(g) ==
          std::vector<CUgraphNodeType>{CU_GRAPH_NODE_TYPE_MEMSET, CU_GRAPH_NODE_TYPE_KERNEL});
  CUgraphExec x = nullptr;
  CU_OK(cuGraphInstantiate(&x, g, 0));
  CU_OK(cuGraphLaunch(x, s));
  CU_OK(cuStreamSynchronize(s));
  REQUIRE(read32(d) == 42);
  CU_OK(cuGraphExecDestroy(x));
  CU_OK(cuGraphDestroy(g));
  CU_OK(cuStreamDestroy(s));
  CU_OK(cuMemFree(d));
}
