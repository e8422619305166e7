// Graph objects shared by graph.cpp (the graph API) and capture.cpp.
//
// Note [Linear graphs]
// Nodes are kept in insertion order. A node's dependencies must already be in
// the graph when it is added, so insertion order is a topological order, and
// an instantiated graph simply runs its nodes one after the other as a single
// op of the launch stream. Captured work becomes a chain: each captured node
// depends on the previous one of the same capture, whatever stream of the
// capture it came from (streams join a capture through captured events).
#pragma once

#include <unordered_set>

#include "internal.hpp"

struct CUgraphNode_st {
  CUgraph_st* graph = nullptr;
  fakecuda::Work work;
  std::vector<CUgraphNode_st*> deps;
  std::vector<void*> kernel_params;  // what KernelNodeGetParams hands out
};

struct CUgraph_st {
  std::vector<std::unique_ptr<CUgraphNode_st>> nodes;
};

struct CUgraphExec_st {
  std::vector<const CUgraphNode_st*> source;             // compared, never dereferenced
  std::shared_ptr<const std::vector<fakecuda::Work>> works;  // replaced, never mutated
};

namespace fakecuda {

struct Graphs {
  std::unordered_set<const CUgraph_st*> graphs;
  std::unordered_set<const CUgraphNode_st*> nodes;
  std::unordered_set<const CUgraphExec_st*> execs;
  std::vector<std::weak_ptr<Capture>> active;  // begun and not ended
  uint64_t next_capture_id = 1;
};

Graphs& graphs();  // LOCKING: driver lock
CUgraphNode_st* add_node(CUgraph_st* g, Work w, std::vector<CUgraphNode_st*> deps);
void destroy_graph(CUgraph g);  // LOCKING: driver lock

}  // namespace fakecuda
