#include "reference.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

namespace vstack::attn::ref {

float round_to(Round r, float x) {
  switch (r) {
    case Round::exact: return x;
    case Round::fp16: return static_cast<float>(static_cast<_Float16>(x));
    case Round::bf16: {
      if (std::isnan(x)) return x;
      uint32_t u;
      std::memcpy(&u, &x, 4);
      u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
      u &= 0xffff0000u;
      float y;
      std::memcpy(&y, &u, 4);
      return y;
    }
  }
  return x;
}

namespace {

// Runs fn(b, hkv) for every (batch, key/value head) on all cores: the work items write
// disjoint parts of the outputs (all query heads of one group).
template <typename F>
void parallel_groups(const Problem& pr, F fn) {
  const int n = pr.batch * pr.heads_kv;
  const int workers = std::max(1, std::min<int>(n, int(std::thread::hardware_concurrency())));
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      for (int x = w; x < n; x += workers) fn(x / pr.heads_kv, x % pr.heads_kv);
    });
  for (auto& t : pool) t.join();
}

// Softmax row of one query: p[j] over visible keys, and its lse. Scores rounded like torch's
// (q k^T) output, then scaled (torch math scales q first; the difference is within the rounding).
struct Row {
  std::vector<double> p;
  double lse;
};

Row softmax_row(const Problem& pr, const std::vector<float>& q, const std::vector<float>& k, int b, int h, int i,
                Round r) {
  const int hk = h / (pr.heads_q / pr.heads_kv);
  const int sk = pr.sk(b);
  Row row{std::vector<double>(sk, 0.0), std::numeric_limits<double>::infinity()};
  double mx = -std::numeric_limits<double>::infinity();
  std::vector<double> s(sk, 0.0);
  for (int j = 0; j < sk; ++j) {
    if (!pr.visible(b, i, j)) continue;
    double acc = 0.0;
    for (int d = 0; d < pr.head_dim; ++d) acc += double(q[pr.q_index(b, h, i, d)]) * k[pr.kv_index(b, hk, j, d)];
    s[j] = double(round_to(r, float(acc * pr.scale)));
    mx = std::max(mx, s[j]);
  }
  if (mx == -std::numeric_limits<double>::infinity()) return row;  // no visible key
  double sum = 0.0;
  for (int j = 0; j < sk; ++j)
    if (pr.visible(b, i, j)) sum += std::exp(s[j] - mx);
  for (int j = 0; j < sk; ++j)
    if (pr.visible(b, i, j)) row.p[j] = double(round_to(r, float(std::exp(s[j] - mx) / sum)));
  row.lse = mx + std::log(sum);
  return row;
}

}  // namespace

Forward forward(const Problem& pr, const std::vector<float>& q, const std::vector<float>& k,
                const std::vector<float>& v, Round r) {
  Forward f{std::vector<float>(pr.q_elems(), 0.f),
            std::vector<float>(size_t(pr.batch) * pr.heads_q * pr.seqlen_q, 0.f)};
  const int g = pr.heads_q / pr.heads_kv;
  parallel_groups(pr, [&](int b, int hk) {
    for (int h = hk * g; h < (hk + 1) * g; ++h)
      for (int i = 0; i < pr.sq(b); ++i) {
        const Row row = softmax_row(pr, q, k, b, h, i, r);
        f.lse[pr.lse_index(b, h, i)] = float(row.lse);
        for (int d = 0; d < pr.head_dim; ++d) {
          double acc = 0.0;
          for (int j = 0; j < pr.sk(b); ++j) acc += row.p[j] * v[pr.kv_index(b, h / g, j, d)];
          f.o[pr.q_index(b, h, i, d)] = round_to(r, float(acc));
        }
      }
  });
  return f;
}

Backward backward(const Problem& pr, const std::vector<float>& q, const std::vector<float>& k,
                  const std::vector<float>& v, const std::vector<float>& dout, Round r) {
  Backward g{std::vector<float>(pr.q_elems(), 0.f), std::vector<float>(pr.kv_elems(), 0.f),
             std::vector<float>(pr.kv_elems(), 0.f)};
  const int grp = pr.heads_q / pr.heads_kv;
  const int D = pr.head_dim;
  std::vector<double> dk(pr.kv_elems(), 0.0), dv(pr.kv_elems(), 0.0);
  parallel_groups(pr, [&](int b, int hk) {
    for (int h = hk * grp; h < (hk + 1) * grp; ++h) {
      const int sq = pr.sq(b), sk = pr.sk(b);
      // Per head: P [sq][sk], dP = dO V^T, dS = P (dP - rowsum(dP * P)).
      std::vector<std::vector<double>> P(sq), dS(sq);
      for (int i = 0; i < sq; ++i) {
        P[i] = softmax_row(pr, q, k, b, h, i, r).p;
        std::vector<double> dP(sk, 0.0);
        double dot = 0.0;
        for (int j = 0; j < sk; ++j) {
          double acc = 0.0;
          for (int d = 0; d < D; ++d) acc += double(dout[pr.q_index(b, h, i, d)]) * v[pr.kv_index(b, hk, j, d)];
          dP[j] = double(round_to(r, float(acc)));
          dot += dP[j] * P[i][j];
        }
        dS[i].assign(sk, 0.0);
        for (int j = 0; j < sk; ++j) dS[i][j] = double(round_to(r, float(P[i][j] * (dP[j] - dot))));
      }
      for (int i = 0; i < sq; ++i)
        for (int d = 0; d < D; ++d) {
          double acc = 0.0;
          for (int j = 0; j < sk; ++j) acc += dS[i][j] * k[pr.kv_index(b, hk, j, d)];
          g.dq[pr.q_index(b, h, i, d)] = round_to(r, float(acc * pr.scale));
        }
      // Per query head contributions to dK, dV (torch computes them per head, then sums the group).
      for (int j = 0; j < sk; ++j)
        for (int d = 0; d < D; ++d) {
          double adk = 0.0, adv = 0.0;
          for (int i = 0; i < sq; ++i) {
            adk += dS[i][j] * q[pr.q_index(b, h, i, d)];
            adv += P[i][j] * dout[pr.q_index(b, h, i, d)];
          }
          dk[pr.kv_index(b, hk, j, d)] += double(round_to(r, float(adk * pr.scale)));
          dv[pr.kv_index(b, hk, j, d)] += double(round_to(r, float(adv)));
        }
    }
  });
  for (size_t x = 0; x < dk.size(); ++x) {
    g.dk[x] = round_to(r, float(dk[x]));
    g.dv[x] = round_to(r, float(dv[x]));
  }
  return g;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return std::numeric_limits<double>::infinity();
    if (std::isinf(a[i]) || std::isinf(b[i])) {
      if (a[i] != b[i]) return std::numeric_limits<double>::infinity();
      continue;
    }
    m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
  }
  return m;
}

bool within_rule(double err_kernel, double err_lowp, double atol) { return err_kernel <= 2.0 * err_lowp + atol; }

}  // namespace vstack::attn::ref
