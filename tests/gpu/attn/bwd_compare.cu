// Standalone check and timing of the backward kernels at head_dim 128, built without the rest
// of attn/ (the full library takes minutes to compile): launch_bwd (the wgmma kernel) against
// the mma.sync kernel (the reference checked by attn_gpu_test and test_attn_torch.py) on fresh
// random inputs, outputs poisoned with NaN, ragged shapes, Sq != Sk, GQA, both layouts, varlen,
// bf16 and fp16; then times both on the benchmark shapes (16k tokens, 16 heads).
// Built by meson as tests/attn/attn_bwd_compare; alone (seconds, while iterating on the kernel):
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -I. -Iinclude
//        tests/gpu/attn/bwd_compare.cu kernels/status.cpp -o bwd_compare
// Usage: bwd_compare [--no-time]. Exit status 0 only if every case passed.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <random>
#include <vector>

#include "attn/bwd_launch.cuh"
#include "tests/gpu/cuda_check.hpp"

using namespace vstack::attn;


constexpr int D = 128;

// lse of one (batch, head, query) per thread, fp32, causal aligned bottom-right.
template <typename T>
__global__ void lse_ref_kernel(BwdParams p) {
  const Shape& s = p.s;
  const int b = blockIdx.y;
  const SeqInfo si = seq_info(s, b);
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  const int i = idx / s.heads_q, h = idx % s.heads_q;
  if (i >= si.sq) return;
  const int hk = h / s.group;
  const T* q = static_cast<const T*>(p.q.ptr) + seq_offset(s, p.q, b, si.q0, h) + int64_t(i) * p.q.row_stride;
  const T* k = static_cast<const T*>(p.k.ptr) + seq_offset(s, p.k, b, si.k0, hk);
  const int jmax = s.causal ? min(si.sk, i + si.sk - si.sq + 1) : si.sk;
  float mx = -INFINITY, sum = 0.f;
  for (int j = 0; j < jmax; ++j) {
    float d = 0.f;
    for (int e = 0; e < D; ++e) d += to_float<T>(q[e]) * to_float<T>(k[int64_t(j) * p.k.row_stride + e]);
    d *= s.scale;
    const float nm = fmaxf(mx, d);
    sum = sum * expf(mx - nm) + expf(d - nm);
    mx = nm;
  }
  p.lse[lse_offset(s, p.lse_batch_stride, p.lse_head_stride, b, si.q0, h) + i] =
      jmax > 0 ? mx + logf(sum) : INFINITY;
}

template <typename T>
void launch_old(const BwdParams& p, bool causal) {
  constexpr BwdTile t = bwd_tile(D);
  const dim3 rgrid(ceil_div(int64_t(p.s.seqlen_q) * p.s.heads_q, 8), p.s.batch);
  bwd_prep_kernel<T, D><<<rgrid, 256>>>(p);
  auto kernel = causal ? bwd_kernel<T, D, true> : bwd_kernel<T, D, false>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, t.smem_bytes));
  kernel<<<dim3(ceil_div(p.s.seqlen_k, t.block_n), p.s.heads_kv, p.s.batch), t.warps * 32, t.smem_bytes>>>(p);
  bwd_dq_kernel<T, D><<<rgrid, 256>>>(p);
  CK(cudaGetLastError());
}

template <typename T>
void launch_new(const BwdParams& p, bool causal) {
  const vstack_status_t st = causal ? launch_bwd<T, D, true>(p, nullptr) : launch_bwd<T, D, false>(p, nullptr);
  if (st != VSTACK_OK) {
    std::fprintf(stderr, "launch_bwd: status %d\n", int(st));
    std::exit(2);
  }
  CK(cudaGetLastError());
}

struct Case {
  int B, Hq, Hkv, Sq, Sk;
  bool causal, bshd, varlen;
};

uint16_t to_bits(float f, bool bf16) {
  if (bf16) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u += 0x7FFF + ((u >> 16) & 1);
    return uint16_t(u >> 16);
  }
  const __half h = __float2half_rn(f);
  uint16_t r;
  std::memcpy(&r, &h, 2);
  return r;
}
float from_bits(uint16_t x, bool bf16) {
  if (bf16) {
    uint32_t u = uint32_t(x) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  __half h;
  std::memcpy(&h, &x, 2);
  return __half2float(h);
}

struct Bufs {
  void *q, *k, *v, *o, *dout, *dq, *dk, *dv;
  float *lse, *ws;
  int32_t *cuq, *cuk;
};

// Sets up p for case c; varlen: B sequences of lengths Sq - 37 * b (and Sk - 29 * b), [total, H, D].
template <typename T>
BwdParams make_params(const Case& c, Bufs& bf, std::mt19937& rng, size_t* nq, size_t* nk, bool fill) {
  std::vector<int32_t> cq{0}, ck{0};
  for (int b = 0; b < c.B; ++b) {
    cq.push_back(cq.back() + (c.varlen ? std::max(1, c.Sq - 37 * b) : c.Sq));
    ck.push_back(ck.back() + (c.varlen ? std::max(1, c.Sk - 29 * b) : c.Sk));
  }
  const int tq = cq.back(), tk = ck.back();
  *nq = size_t(tq) * c.Hq * D;
  *nk = size_t(tk) * c.Hkv * D;
  BwdParams p{};
  Shape& s = p.s;
  s.batch = c.B; s.heads_q = c.Hq; s.heads_kv = c.Hkv; s.seqlen_q = c.Sq; s.seqlen_k = c.Sk; s.head_dim = D;
  s.group = c.Hq / c.Hkv; s.total_q = tq; s.scale = 1.f / std::sqrt(float(D)); s.scale_log2 = s.scale * 1.4426950408889634f;
  s.causal = c.causal;
  auto alloc = [&](void** ptr, size_t n) { CK(cudaMalloc(ptr, n * 2)); };
  alloc(&bf.q, *nq); alloc(&bf.o, *nq); alloc(&bf.dout, *nq); alloc(&bf.dq, *nq);
  alloc(&bf.k, *nk); alloc(&bf.v, *nk); alloc(&bf.dk, *nk); alloc(&bf.dv, *nk);
  CK(cudaMalloc(&bf.lse, size_t(tq) * c.Hq * 4));
  CK(cudaMalloc(&bf.ws, size_t(tq) * c.Hq * (D + 2) * 4 + 8192));
  bf.cuq = bf.cuk = nullptr;
  if (c.varlen) {
    CK(cudaMalloc(&bf.cuq, cq.size() * 4));
    CK(cudaMalloc(&bf.cuk, ck.size() * 4));
    CK(cudaMemcpy(bf.cuq, cq.data(), cq.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(bf.cuk, ck.data(), ck.size() * 4, cudaMemcpyHostToDevice));
    s.cu_seqlens_q = bf.cuq;
    s.cu_seqlens_k = bf.cuk;
    s.seqlen_q = s.seqlen_k = 0;  // the longest: only the grid sizes use them
    for (int b = 0; b < c.B; ++b) { s.seqlen_q = std::max(s.seqlen_q, cq[b + 1] - cq[b]); s.seqlen_k = std::max(s.seqlen_k, ck[b + 1] - ck[b]); }
  }
  auto tens = [&](void* ptr, int H, int S) {
    Tensor t{ptr, 0, 0, 0};
    if (c.varlen || c.bshd) { t.row_stride = int64_t(H) * D; t.head_stride = D; t.batch_stride = int64_t(S) * H * D; }
    else { t.row_stride = D; t.head_stride = int64_t(S) * D; t.batch_stride = int64_t(H) * S * D; }
    return t;
  };
  p.q = tens(bf.q, c.Hq, c.Sq); p.o = tens(bf.o, c.Hq, c.Sq); p.dout = tens(bf.dout, c.Hq, c.Sq); p.dq = tens(bf.dq, c.Hq, c.Sq);
  p.k = tens(bf.k, c.Hkv, c.Sk); p.v = tens(bf.v, c.Hkv, c.Sk); p.dk = tens(bf.dk, c.Hkv, c.Sk); p.dv = tens(bf.dv, c.Hkv, c.Sk);
  p.lse = bf.lse;
  if (c.varlen) { p.lse_head_stride = tq; p.lse_batch_stride = 0; }
  else { p.lse_head_stride = c.Sq; p.lse_batch_stride = int64_t(c.Hq) * c.Sq; }
  p.dq_accum = bf.ws;
  p.dsum = bf.ws + ((size_t(tq) * c.Hq * D + 63) / 64) * 64;
  p.lse_log2 = p.dsum + ((size_t(tq) * c.Hq + 63) / 64) * 64;
  if (fill) {
    const bool bf16 = std::is_same_v<T, __nv_bfloat16>;
    std::normal_distribution<float> nd(0.f, 1.f);
    auto upload = [&](void* ptr, size_t n) {
      std::vector<uint16_t> h(n);
      for (auto& x : h) x = to_bits(nd(rng), bf16);
      CK(cudaMemcpy(ptr, h.data(), n * 2, cudaMemcpyHostToDevice));
    };
    upload(bf.q, *nq); upload(bf.k, *nk); upload(bf.v, *nk); upload(bf.o, *nq); upload(bf.dout, *nq);
    lse_ref_kernel<T><<<dim3(ceil_div(int64_t(s.seqlen_q) * c.Hq, 128), c.B), 128>>>(p);
    CK(cudaGetLastError());
  } else {
    CK(cudaMemset(bf.q, 0, *nq * 2)); CK(cudaMemset(bf.k, 0, *nk * 2)); CK(cudaMemset(bf.v, 0, *nk * 2));
    CK(cudaMemset(bf.o, 0, *nq * 2)); CK(cudaMemset(bf.dout, 0, *nq * 2));
    CK(cudaMemset(bf.lse, 0, size_t(tq) * c.Hq * 4));
  }
  return p;
}

void free_bufs(Bufs& b) {
  for (void* x : {b.q, b.k, b.v, b.o, b.dout, b.dq, b.dk, b.dv}) CK(cudaFree(x));
  CK(cudaFree(b.lse)); CK(cudaFree(b.ws));
  if (b.cuq) { CK(cudaFree(b.cuq)); CK(cudaFree(b.cuk)); }
}

template <typename T>
bool check(const Case& c, std::mt19937& rng) {
  const bool bf16 = std::is_same_v<T, __nv_bfloat16>;
  Bufs bf{};
  size_t nq, nk;
  BwdParams p = make_params<T>(c, bf, rng, &nq, &nk, true);
  auto download = [&](void* ptr, size_t n) {
    std::vector<uint16_t> h(n);
    CK(cudaMemcpy(h.data(), ptr, n * 2, cudaMemcpyDeviceToHost));
    std::vector<float> f(n);
    for (size_t i = 0; i < n; ++i) f[i] = from_bits(h[i], bf16);
    return f;
  };
  auto poison = [&]() {
    CK(cudaMemset(bf.dq, 0xFF, nq * 2)); CK(cudaMemset(bf.dk, 0xFF, nk * 2)); CK(cudaMemset(bf.dv, 0xFF, nk * 2));
  };
  poison();
  launch_old<T>(p, c.causal);
  CK(cudaDeviceSynchronize());
  auto rq = download(bf.dq, nq), rk = download(bf.dk, nk), rv = download(bf.dv, nk);
  poison();
  launch_new<T>(p, c.causal);
  CK(cudaDeviceSynchronize());
  auto nq_ = download(bf.dq, nq), nk_ = download(bf.dk, nk), nv_ = download(bf.dv, nk);
  free_bufs(bf);
  bool ok = true;
  char msg[256];
  int len = 0;
  struct Out {
    const char* name;
    const std::vector<float>* r;
    const std::vector<float>* n;
  };
  for (const Out& out : {Out{"dq", &rq, &nq_}, Out{"dk", &rk, &nk_}, Out{"dv", &rv, &nv_}}) {
    const char* name = out.name;
    const std::vector<float>* r = out.r;
    const std::vector<float>* n = out.n;
    double mx = 0, md = 0, sd = 0, sr = 0;
    bool finite = true;
    for (size_t i = 0; i < r->size(); ++i) {
      const double a = (*r)[i], b2 = (*n)[i];
      if (!std::isfinite(b2) || !std::isfinite(a)) finite = false;
      mx = std::max(mx, std::fabs(a));
      md = std::max(md, std::fabs(a - b2));
      sd += std::fabs(a - b2);
      sr += std::fabs(a);
    }
    // Both kernels round P and dS to T and sum in fp32 in different orders: a few ulps of T.
    const double tol = bf16 ? 2e-2 : 4e-3;
    const bool good = finite && md <= tol * mx && sd <= 0.1 * tol * sr + 1e-30;
    ok = ok && good;
    len += std::snprintf(msg + len, sizeof msg - len, " %s maxdiff/max %.2e mean %.2e%s", name, md / (mx + 1e-30),
                         sd / (sr + 1e-30), finite ? "" : " NONFINITE");
  }
  std::printf("%s %s B%d Hq%d Hkv%d Sq%d Sk%d%s%s%s:%s\n", ok ? "PASS" : "FAIL", bf16 ? "bf16" : "fp16", c.B, c.Hq,
              c.Hkv, c.Sq, c.Sk, c.causal ? " causal" : "", c.bshd ? " bshd" : "", c.varlen ? " varlen" : "", msg);
  return ok;
}

template <typename T>
void time_case(int S, bool causal) {
  std::mt19937 rng(1);
  const Case c{16384 / S, 16, 16, S, S, causal, false, false};
  Bufs bf{};
  size_t nq, nk;
  BwdParams p = make_params<T>(c, bf, rng, &nq, &nk, false);
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  const double flops = 2.5 * 4.0 * c.B * c.Hq * double(S) * S * D / (causal ? 2 : 1);
  float ms[2];
  for (int which = 0; which < 2; ++which) {
    auto run = [&] { which == 0 ? launch_old<T>(p, causal) : launch_new<T>(p, causal); };
    for (int i = 0; i < 3; ++i) run();
    const int reps = 10;
    CK(cudaEventRecord(a));
    for (int i = 0; i < reps; ++i) run();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    CK(cudaEventElapsedTime(&ms[which], a, b));
    ms[which] /= reps;
  }
  std::printf("| bwd hd128 %s | %5d | %s | mma.sync %.3f ms %.0f TFLOPS | wgmma %.3f ms %.0f TFLOPS |\n",
              std::is_same_v<T, __nv_bfloat16> ? "bf16" : "fp16", S, causal ? "causal" : "full  ", ms[0],
              flops / ms[0] / 1e9, ms[1], flops / ms[1] / 1e9);
  free_bufs(bf);
}

int main(int argc, char** argv) {
  const bool time = !(argc > 1 && std::strcmp(argv[1], "--no-time") == 0);
  std::mt19937 rng(12345);
  bool ok = true;
  const Case cases[] = {
      {2, 4, 4, 256, 256, false, false, false}, {2, 4, 4, 256, 256, true, false, false},
      {1, 3, 3, 197, 333, false, false, false}, {1, 3, 3, 197, 333, true, false, false},
      {1, 2, 2, 333, 197, true, true, false},   {2, 8, 2, 300, 517, true, false, false},
      {2, 8, 2, 300, 517, false, true, false},  {1, 6, 1, 1, 700, false, false, false},
      {1, 6, 1, 77, 77, true, false, false},    {3, 4, 2, 250, 400, true, false, true},
      {3, 4, 2, 250, 400, false, false, true},  {1, 1, 1, 1000, 1000, true, false, false},
  };
  for (const Case& c : cases) ok = check<__nv_bfloat16>(c, rng) && ok;
  for (int i : {1, 5, 9}) ok = check<__half>(cases[i], rng) && ok;
  if (time) {
    for (bool causal : {false, true})
      for (int S : {4096, 8192, 16384}) time_case<__nv_bfloat16>(S, causal);
  }
  std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
  return ok ? 0 : 1;
}
