#include "shim/scan.hpp"

#include <cstring>
#include <memory>
#include <shared_mutex>
#include <unordered_map>

#include "base/log.hpp"
#include "shim/real.hpp"

namespace vstack::shim {

namespace {

struct Cache {
  std::shared_mutex mu;  // leaf lock, taken before (never inside) the pool lock
  std::unordered_map<CUfunction, std::unique_ptr<ParamLayout>> map;
};

Cache& cache() {
  static Cache* c = new Cache;
  return *c;
}

ParamLayout query(CUfunction f) {
  const Real& r = real();
  ParamLayout l;
  size_t off = 0, size = 0;
  // cudart 13 passes CUkernel handles as CUfunction: cuFuncGetParamInfo fails on those.
  bool as_kernel = !r.cuFuncGetParamInfo || r.cuFuncGetParamInfo(f, 0, &off, &size) != CUDA_SUCCESS;
  if (as_kernel) {
    if (!r.cuKernelGetParamInfo) return l;
    CUresult e = r.cuKernelGetParamInfo(reinterpret_cast<CUkernel>(f), 0, &off, &size);
    if (e != CUDA_SUCCESS) {
      // A kernel without parameters answers INVALID_VALUE for index 0 too, so
      // only a distinct failure of both paths means "unknown".
      if (e == CUDA_ERROR_INVALID_VALUE) l.known = true;
      return l;
    }
  }
  for (size_t i = 0;; ++i) {
    CUresult e = as_kernel ? r.cuKernelGetParamInfo(reinterpret_cast<CUkernel>(f), i, &off, &size)
                           : r.cuFuncGetParamInfo(f, i, &off, &size);
    if (e != CUDA_SUCCESS) break;
    l.size.push_back(static_cast<uint32_t>(size));
  }
  l.known = true;
  return l;
}

template <class Word>
void for_each_word(const ParamLayout& l, void** params, void** extra, Word&& word) {
  if (params && l.known) {
    for (size_t i = 0; i < l.size.size(); ++i) {
      const auto* p = static_cast<const unsigned char*>(params[i]);
      if (p) word(p, l.size[i]);
    }
  }
  if (extra) {
    const void* buf = nullptr;
    size_t bytes = 0;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = extra[i + 1];
      else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) std::memcpy(&bytes, extra[i + 1], sizeof(bytes));
    }
    if (buf && bytes) word(static_cast<const unsigned char*>(buf), bytes);
  }
}

}  // namespace

const ParamLayout& layout_of(CUfunction f) {
  Cache& c = cache();
  {
    std::shared_lock g(c.mu);
    auto it = c.map.find(f);
    if (it != c.map.end()) return *it->second;
  }
  auto l = std::make_unique<ParamLayout>(query(f));
  if (!l->known) {
    const char* name = nullptr;
    if (real().cuFuncGetName) real().cuFuncGetName(&name, f);
    log::warn("kernel {}: parameter layout unknown; its pointer parameters are not scanned", name ? name : "?");
  }
  std::unique_lock g(c.mu);
  auto [it, inserted] = c.map.emplace(f, std::move(l));
  return *it->second;
}

void scan_launch(const pool::Pool& pool, const ParamLayout& l, void** params, void** extra, pool::RefSet& out) {
  for_each_word(l, params, extra, [&](const unsigned char* p, size_t n) { pool.scan_words(p, n, out); });
}

void collect_words(const ParamLayout& l, void** params, void** extra, std::vector<uint64_t>& out) {
  for_each_word(l, params, extra, [&](const unsigned char* p, size_t n) {
    for (size_t i = 0; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      out.push_back(w);
    }
  });
}

}  // namespace vstack::shim
