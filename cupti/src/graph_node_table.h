// CUDA graph node id -> the launch context open when the node was created (DESIGN §4 rule 5).
// Filled from the resource callbacks (GRAPHNODE_CREATED on the capturing thread, GRAPHNODE_CLONED
// when a graph is instantiated or cloned), read by the processing thread. Node creation is not a
// per-launch hot path, so a mutex is fine; the table is bounded and counts what it refuses.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "traintime/core/activity.h"

namespace traintime::cupti {

class GraphNodeTable {
 public:
  explicit GraphNodeTable(size_t max_nodes) : max_nodes_(max_nodes) {}

  void created(uint64_t node_id, const core::LaunchContext& ctx);
  // A clone (instantiation, cudaGraphClone) inherits the original node's context.
  void cloned(uint64_t node_id, uint64_t original_node_id);
  bool lookup(uint64_t node_id, core::LaunchContext* out) const;
  uint64_t refused() const;
  size_t size() const;

 private:
  void put_locked(uint64_t node_id, const core::LaunchContext& ctx);

  const size_t max_nodes_;
  mutable std::mutex mu_;  // leaf lock: nothing is called while holding it
  std::unordered_map<uint64_t, core::LaunchContext> nodes_;
  uint64_t refused_ = 0;
};

}  // namespace traintime::cupti
