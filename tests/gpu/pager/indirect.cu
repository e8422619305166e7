// Test (b): kernels that reach memory ONLY through pointers stored in device
// memory -- a table of {src, dst} descriptors and a linked list whose nodes are
// scattered over other allocations -- never through their parameters. Run
// after pressure pushed those allocations off the GPU (so they live on a
// slower tier when the kernel runs), and again while other streams keep the
// pressure on (so a pager that moved a page under a running kernel would lose
// writes or read stale data). Sums, the list walk, and every byte written
// through the stored pointers are checked against host-computed values.
//
// Usage: indirect --pressure-mib P [--buffers 24] [--buffer-mib 64] [--reps 3]
//                 [--nodes 4096] [--seed 1]
// Exit status: 0 correct, 1 wrong results, 2 unexpected CUDA error, 64 usage.
#include <algorithm>
#include <chrono>
#include <vector>

#include "common.cuh"

using namespace pagertest;

namespace {

struct Node {
  Node* next;
  uint64_t value;
};

struct Desc {
  const uint32_t* src;  // words to sum (inside buffer i, first half)
  uint64_t src_words;
  uint32_t* dst;        // words to write (inside another buffer, second half)
  uint64_t dst_words;
  uint64_t dst_key;     // pattern the kernel writes into dst
};

// Lives in its own device allocation; only its address is a kernel parameter.
struct Table {
  Node* head;
  uint64_t ndesc;
  Desc desc[1];  // ndesc entries
};

constexpr int kThreads = 256;

__global__ void fill_kernel(uint32_t* p, uint64_t words, uint64_t key) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride) p[i] = pattern(key, i);
}

// Direct verification (pointer in the parameters).
__global__ void check_kernel(const uint32_t* p, uint64_t words, uint64_t key, ErrorSlot* err) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  unsigned long long wrong = 0, first = ~0ull;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride) {
    if (p[i] != pattern(key, i)) {
      ++wrong;
      first = min(first, (unsigned long long)i);
    }
  }
  if (wrong) {
    atomicAdd(&err->wrong, wrong);
    atomicMin(&err->first, first);
  }
}

// blockIdx.y = descriptor. Sums its src `inner` times (a long-running kernel),
// writes its dst. Only `t`, `sums` are parameters.
__global__ void gather_kernel(const Table* t, unsigned long long* sums, int inner) {
  const Desc d = t->desc[blockIdx.y];
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  const uint64_t t0 = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned long long s = 0;
  for (int r = 0; r < inner; ++r)
    for (uint64_t i = t0; i < d.src_words; i += stride) s += d.src[i];
  for (uint64_t i = t0; i < d.dst_words; i += stride) d.dst[i] = pattern(d.dst_key, i);
  atomicAdd(&sums[blockIdx.y], s);
}

// One thread walks the list from t->head: an order-sensitive checksum, and
// each node's value is incremented (writes through chased pointers).
__global__ void chain_kernel(const Table* t, unsigned long long* out) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  unsigned long long acc = 0, step = 0;
  for (Node* n = t->head; n != nullptr; n = n->next) {
    ++step;
    acc = acc * 1000003ull + n->value * step;
    n->value += 1;
  }
  out[0] = acc;
  out[1] = step;
}

int blocks_for(uint64_t words) { return int(std::min<uint64_t>((words + kThreads - 1) / kThreads, 1024)); }

}  // namespace

int main(int argc, char** argv) {
  uint64_t pressure_mib = 0, nbuf = 24, buf_mib = 64, reps = 3, nnodes = 4096, seed = 1;
  if (!arg_u64(argc, argv, "--pressure-mib", &pressure_mib) || pressure_mib == 0) {
    std::fprintf(stderr,
                 "usage: %s --pressure-mib P [--buffers 24] [--buffer-mib 64] [--reps 3] [--nodes 4096] [--seed 1]\n",
                 argv[0]);
    return 64;
  }
  arg_u64(argc, argv, "--buffers", &nbuf);
  arg_u64(argc, argv, "--buffer-mib", &buf_mib);
  arg_u64(argc, argv, "--reps", &reps);
  arg_u64(argc, argv, "--nodes", &nnodes);
  arg_u64(argc, argv, "--seed", &seed);
  if (nbuf < 2 || buf_mib < 4 || nnodes == 0 || nnodes > nbuf * 65536) {
    std::fprintf(stderr, "bad --buffers/--buffer-mib/--nodes\n");
    return 64;
  }
  Rng rng(seed);
  const uint64_t buf_bytes = buf_mib * kMiB, buf_words = buf_bytes / 4;
  const uint64_t half_words = buf_words / 2;
  const uint64_t node_area = 1 * kMiB;                       // last MiB of each buffer holds list nodes
  const uint64_t node_first_word = (buf_bytes - node_area) / 4;
  const uint64_t slots_per_buf = node_area / sizeof(Node);
  int failures = 0;
  auto t_start = std::chrono::steady_clock::now();

  cudaStream_t sa, sb;
  CK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));

  // --- buffers, filled through direct pointers -----------------------------
  std::vector<uint32_t*> buf(nbuf);
  for (uint64_t i = 0; i < nbuf; ++i) {
    CK(cudaMalloc(reinterpret_cast<void**>(&buf[i]), buf_bytes));
    fill_kernel<<<blocks_for(buf_words), kThreads>>>(buf[i], buf_words, make_key(i, 0));
    CK_LAUNCH();
  }
  // Host model of every buffer: word w of buffer i is model(i, w).
  // Descriptors: src in the first half of buffer i, dst in the second half
  // (below the node area) of buffer perm[i].
  std::vector<uint64_t> perm(nbuf);
  for (uint64_t i = 0; i < nbuf; ++i) perm[i] = (i + nbuf / 2 + 1) % nbuf;
  std::vector<Desc> desc(nbuf);
  std::vector<uint64_t> src_off(nbuf), dst_off(nbuf);
  for (uint64_t i = 0; i < nbuf; ++i) {
    src_off[i] = rng.below(half_words / 4);
    desc[i].src = buf[i] + src_off[i];
    desc[i].src_words = half_words / 2 + rng.below(half_words / 4);
    const uint64_t dst_space = node_first_word - half_words;
    dst_off[i] = half_words + rng.below(dst_space / 4);
    desc[i].dst = buf[perm[i]] + dst_off[i];
    desc[i].dst_words = dst_space / 2 + rng.below(dst_space / 4);
    desc[i].dst_key = 0;  // set per launch
  }
  // Linked list: nodes at distinct random (buffer, slot), value random.
  std::vector<std::pair<uint64_t, uint64_t>> where(nnodes);
  {
    std::vector<uint64_t> all(nbuf * slots_per_buf);
    for (uint64_t k = 0; k < all.size(); ++k) all[k] = k;
    for (uint64_t k = 0; k < nnodes; ++k) std::swap(all[k], all[k + rng.below(all.size() - k)]);
    for (uint64_t k = 0; k < nnodes; ++k) where[k] = {all[k] / slots_per_buf, all[k] % slots_per_buf};
  }
  std::vector<uint64_t> values(nnodes);
  for (auto& v : values) v = rng.next() >> 20;
  auto node_ptr = [&](uint64_t k) {
    return reinterpret_cast<Node*>(reinterpret_cast<uint8_t*>(buf[where[k].first]) + (buf_bytes - node_area) +
                                   where[k].second * sizeof(Node));
  };
  // The node area of every buffer: pattern, with nodes written over it.
  std::vector<std::vector<uint32_t>> node_img(nbuf, std::vector<uint32_t>(node_area / 4));
  for (uint64_t i = 0; i < nbuf; ++i)
    for (uint64_t w = 0; w < node_area / 4; ++w) node_img[i][w] = pattern(make_key(i, 0), node_first_word + w);
  auto write_node_img = [&](uint64_t k, uint64_t value) {
    Node n{k + 1 < nnodes ? node_ptr(k + 1) : nullptr, value};
    std::memcpy(reinterpret_cast<uint8_t*>(node_img[where[k].first].data()) + where[k].second * sizeof(Node), &n,
                sizeof n);
  };
  for (uint64_t k = 0; k < nnodes; ++k) write_node_img(k, values[k]);
  CK(cudaDeviceSynchronize());
  for (uint64_t i = 0; i < nbuf; ++i)
    CK(cudaMemcpy(reinterpret_cast<uint8_t*>(buf[i]) + (buf_bytes - node_area), node_img[i].data(), node_area,
                  cudaMemcpyHostToDevice));

  // --- the table and the result arrays (the only kernel parameters) --------
  const size_t table_bytes = sizeof(Table) + (nbuf - 1) * sizeof(Desc);
  std::vector<uint8_t> table_img(table_bytes);
  Table* d_table = nullptr;
  CK(cudaMalloc(reinterpret_cast<void**>(&d_table), table_bytes));
  unsigned long long* d_sums = nullptr;
  CK(cudaMalloc(reinterpret_cast<void**>(&d_sums), (nbuf + 2) * sizeof(unsigned long long)));
  ErrorSlot* d_err = nullptr;
  CK(cudaMalloc(reinterpret_cast<void**>(&d_err), sizeof(ErrorSlot)));
  auto upload_table = [&](uint64_t gen) {
    Table* t = reinterpret_cast<Table*>(table_img.data());
    t->head = node_ptr(0);
    t->ndesc = nbuf;
    for (uint64_t i = 0; i < nbuf; ++i) {
      desc[i].dst_key = make_key(1000 + i, gen);
      t->desc[i] = desc[i];
    }
    CK(cudaMemcpy(d_table, table_img.data(), table_bytes, cudaMemcpyHostToDevice));
  };

  // Expected sums (host): sum of the src words, times `inner`.
  std::vector<unsigned long long> src_sum(nbuf, 0);
  for (uint64_t i = 0; i < nbuf; ++i)
    for (uint64_t w = 0; w < desc[i].src_words; ++w) src_sum[i] += pattern(make_key(i, 0), src_off[i] + w);

  // --- pressure: allocations written and read again, to push the buffers down
  const uint64_t pchunk = 64 * kMiB, pwords = pchunk / 4;
  std::vector<uint32_t*> pres((pressure_mib * kMiB + pchunk - 1) / pchunk);
  for (auto& p : pres) CK(cudaMalloc(reinterpret_cast<void**>(&p), pchunk));
  uint64_t pgen = 0;
  auto pressure = [&](cudaStream_t s) {
    ++pgen;
    for (uint64_t k = 0; k < pres.size(); ++k) {
      fill_kernel<<<blocks_for(pwords), kThreads, 0, s>>>(pres[k], pwords, make_key(5000 + k, pgen));
      CK_LAUNCH();
    }
  };
  auto reset_err = [&] {
    ErrorSlot e{0, ~0ull};
    CK(cudaMemcpy(d_err, &e, sizeof e, cudaMemcpyHostToDevice));
  };
  auto read_err = [&](const char* what) {
    ErrorSlot e;
    CK(cudaMemcpy(&e, d_err, sizeof e, cudaMemcpyDeviceToHost));
    if (e.wrong) {
      std::fprintf(stderr, "MISMATCH %s: %llu wrong words, first at word %llu\n", what, e.wrong, e.first);
      ++failures;
    }
    reset_err();
  };
  reset_err();
  pressure(sa);
  pressure(sa);
  CK(cudaStreamSynchronize(sa));

  const int inner = 4;
  uint64_t gen = 0;
  for (uint64_t rep = 0; rep < reps; ++rep) {
    for (int phase = 0; phase < 2; ++phase) {
      ++gen;
      upload_table(gen);
      CK(cudaMemset(d_sums, 0, (nbuf + 2) * sizeof(unsigned long long)));
      if (phase == 1) {
        // Bring the buffers back up with direct kernels, then use them only
        // indirectly while stream B evicts: a page moved under the indirect
        // kernel would lose its writes.
        for (uint64_t i = 0; i < nbuf; ++i) {
          check_kernel<<<blocks_for(half_words), kThreads, 0, sa>>>(buf[i], half_words, make_key(i, 0), d_err);
          CK_LAUNCH();
        }
      }
      gather_kernel<<<dim3(64, unsigned(nbuf)), kThreads, 0, sa>>>(d_table, d_sums, inner);
      CK_LAUNCH();
      chain_kernel<<<1, 32, 0, sa>>>(d_table, d_sums + nbuf);
      CK_LAUNCH();
      if (phase == 1) pressure(sb);
      CK(cudaDeviceSynchronize());
      read_err("direct check of the src halves");

      std::vector<unsigned long long> h(nbuf + 2);
      CK(cudaMemcpy(h.data(), d_sums, h.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
      uint64_t bad = 0;
      for (uint64_t i = 0; i < nbuf; ++i) {
        if (h[i] != src_sum[i] * inner) {
          if (bad++ < 4)
            std::fprintf(stderr, "MISMATCH rep %lu phase %d: descriptor %lu sum %llu, expected %llu\n",
                         (unsigned long)rep, phase, (unsigned long)i, h[i], src_sum[i] * inner);
        }
      }
      unsigned long long acc = 0;
      for (uint64_t k = 0; k < nnodes; ++k) {
        acc = acc * 1000003ull + values[k] * (k + 1);
        values[k] += 1;
        write_node_img(k, values[k]);
      }
      if (h[nbuf] != acc || h[nbuf + 1] != nnodes) {
        std::fprintf(stderr, "MISMATCH rep %lu phase %d: list walk %llu over %llu nodes, expected %llu over %lu\n",
                     (unsigned long)rep, phase, h[nbuf], h[nbuf + 1], acc, (unsigned long)nnodes);
        ++bad;
      }
      // What was written through the stored dst pointers, checked directly.
      for (uint64_t i = 0; i < nbuf; ++i) {
        check_kernel<<<blocks_for(desc[i].dst_words), kThreads, 0, sa>>>(desc[i].dst, desc[i].dst_words,
                                                                          desc[i].dst_key, d_err);
        CK_LAUNCH();
      }
      for (uint64_t k = 0; k < pres.size(); ++k) {
        check_kernel<<<blocks_for(pwords), kThreads, 0, sa>>>(pres[k], pwords, make_key(5000 + k, pgen), d_err);
        CK_LAUNCH();
      }
      CK(cudaStreamSynchronize(sa));
      read_err("writes through stored pointers / pressure buffers");
      if (bad) ++failures;
      std::printf("rep %lu %-28s sums %s, list walk %s\n", (unsigned long)rep,
                  phase ? "(indirect under pressure)" : "(after pressure)", bad ? "WRONG" : "ok", bad ? "?" : "ok");
      std::fflush(stdout);
      pressure(sa);
      CK(cudaStreamSynchronize(sa));
    }
  }

  // --- every byte of every buffer, copied back to the host -----------------
  // Model: pattern(key(i,0)) everywhere, the last dst write of the descriptor
  // targeting buffer i over its dst range, the node image over the node area.
  uint64_t wrong_bufs = 0;
  std::vector<uint32_t> host(buf_words);
  for (uint64_t i = 0; i < nbuf; ++i) {
    CK(cudaMemcpy(host.data(), buf[i], buf_bytes, cudaMemcpyDeviceToHost));
    uint64_t j = 0;  // the descriptor whose dst lies in buffer i
    for (uint64_t k = 0; k < nbuf; ++k)
      if (perm[k] == i) j = k;
    uint64_t wrong = 0, first = ~0ull;
    for (uint64_t w = 0; w < buf_words; ++w) {
      uint32_t want;
      if (w >= node_first_word)
        want = node_img[i][w - node_first_word];
      else if (w >= dst_off[j] && w < dst_off[j] + desc[j].dst_words)
        want = pattern(desc[j].dst_key, w - dst_off[j]);
      else
        want = pattern(make_key(i, 0), w);
      if (host[w] != want) {
        ++wrong;
        first = std::min(first, w);
      }
    }
    if (wrong) {
      ++wrong_bufs;
      std::fprintf(stderr, "MISMATCH final: buffer %lu: %lu wrong words, first at word %lu\n", (unsigned long)i,
                   (unsigned long)wrong, (unsigned long)first);
    }
  }
  if (wrong_bufs) ++failures;
  std::printf("final: %lu buffers of %lu MiB copied back and compared: %lu wrong\n", (unsigned long)nbuf,
              (unsigned long)buf_mib, (unsigned long)wrong_bufs);

  for (auto p : pres) CK(cudaFree(p));
  for (auto p : buf) CK(cudaFree(p));
  CK(cudaFree(d_table));
  CK(cudaFree(d_sums));
  CK(cudaFree(d_err));
  CK(cudaStreamDestroy(sa));
  CK(cudaStreamDestroy(sb));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  std::printf("indirect: %lu buffers x %lu MiB reached only through stored pointers, %lu MiB of pressure, %lu reps in "
              "%.1f s: %s\n",
              (unsigned long)nbuf, (unsigned long)buf_mib, (unsigned long)(pres.size() * 64), (unsigned long)reps, s,
              failures ? "FAILED" : "all results correct");
  return failures ? 1 : 0;
}
