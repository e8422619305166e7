// Executing work on the host: kernels call their registered function, copies
// and sets touch the (host) addresses directly, so a bad address faults.
#include <cstring>

#include "internal.hpp"

namespace fakecuda {

size_t KernelDesc::buffer_size() const {
  size_t end = 0;
  for (size_t i = 0; i < offsets.size(); ++i) end = std::max(end, offsets[i] + sizes[i]);
  return end;
}

namespace {

void run_kernel(const KernelWork& k) {
  const KernelDesc& d = *k.desc;
  std::vector<const void*> params(d.offsets.size());
  for (size_t i = 0; i < params.size(); ++i) params[i] = k.params.data() + d.offsets[i];
  fakecuda_launch l{};
  l.grid = k.grid;
  l.block = k.block;
  l.shared_mem_bytes = k.shared_mem;
  l.stream = k.stream;
  l.num_params = params.size();
  l.params = params.data();
  l.param_buffer = k.params.data();
  l.param_buffer_size = k.params.size();
  l.user = d.user;
  d.fn(&l);
}

void run_copy(const CopyWork& c) {
  if (c.height == 1 && c.depth == 1) {
    std::memmove(c.dst, c.src, c.width);
    return;
  }
  for (size_t z = 0; z < c.depth; ++z)
    for (size_t y = 0; y < c.height; ++y)
      std::memmove(c.dst + (z * c.dst_height + y) * c.dst_pitch,
                   c.src + (z * c.src_height + y) * c.src_pitch, c.width);
}

void run_set(const SetWork& s) {
  for (size_t y = 0; y < s.height; ++y) {
    unsigned char* row = s.dst + y * s.pitch;
    switch (s.element) {
      case 1: std::memset(row, static_cast<int>(s.value & 0xff), s.width); break;
      case 2: {
        auto v = static_cast<uint16_t>(s.value);
        for (size_t x = 0; x < s.width; ++x) std::memcpy(row + 2 * x, &v, 2);
        break;
      }
      default: {
        uint32_t v = s.value;
        for (size_t x = 0; x < s.width; ++x) std::memcpy(row + 4 * x, &v, 4);
      }
    }
  }
}

struct Executor {
  void operator()(const EmptyWork&) const {}
  void operator()(const KernelWork& k) const { run_kernel(k); }
  void operator()(const CopyWork& c) const { run_copy(c); }
  void operator()(const SetWork& s) const { run_set(s); }
  void operator()(const HostWork& h) const { h.fn(h.data); }
};

struct TypeOf {
  CUgraphNodeType operator()(const EmptyWork&) const { return CU_GRAPH_NODE_TYPE_EMPTY; }
  CUgraphNodeType operator()(const KernelWork&) const { return CU_GRAPH_NODE_TYPE_KERNEL; }
  CUgraphNodeType operator()(const CopyWork&) const { return CU_GRAPH_NODE_TYPE_MEMCPY; }
  CUgraphNodeType operator()(const SetWork&) const { return CU_GRAPH_NODE_TYPE_MEMSET; }
  CUgraphNodeType operator()(const HostWork&) const { return CU_GRAPH_NODE_TYPE_HOST; }
};

}  // namespace

void execute(const Work& w) { std::visit(Executor{}, w); }

CUgraphNodeType node_type(const Work& w) { return std::visit(TypeOf{}, w); }

}  // namespace fakecuda
