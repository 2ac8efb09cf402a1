// CUDA graph node id -> the launch context open when the node was created (DESIGN §4 rule 5).
// Filled from the resource callbacks (GRAPHNODE_CREATED on the capturing thread, GRAPHNODE_CLONED
// when a graph is instantiated or cloned), read by the processing thread. Node creation is not a
// per-launch hot path, so a mutex is fine; the table is bounded and counts what it refuses.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "traintime/core/activity.h"

namespace traintime::cupti {

class GraphNodeTable {
 public:
  explicit GraphNodeTable(size_t max_nodes) : max_nodes_(max_nodes) {}

  void created(uint64_t node_id, const core::LaunchContext& ctx);
  // A clone (instantiation, cudaGraphClone) inherits the original node's context. `owner` is
  // the graph exec the clone belongs to (0 when CUPTI did not say), for forget_owner().
  void cloned(uint64_t node_id, uint64_t original_node_id, uint64_t owner = 0);
  // A graph exec is being destroyed (GRAPHEXEC_DESTROY_STARTING): its clones will never run
  // again, but records of its last replays may still sit in activity buffers, so they are only
  // retired — evicted, oldest first, when the table is full and a new node needs the room.
  // The originals stay: PyTorch destroys the source graph right after instantiation, before the
  // first replay, and later instantiations may clone them again.
  void forget_owner(uint64_t owner);
  size_t retired() const;
  bool lookup(uint64_t node_id, core::LaunchContext* out) const;
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }  // lock-free
  size_t size() const;
  // Its memory now (self_cost.memory): its maps' nodes at a nominal size each, the retired ids.
  size_t bytes() const;

 private:
  void put_locked(uint64_t node_id, const core::LaunchContext& ctx);

  const size_t max_nodes_;
  mutable std::mutex mu_;  // leaf lock: nothing is called while holding it
  std::unordered_map<uint64_t, core::LaunchContext> nodes_;
  std::unordered_multimap<uint64_t, uint64_t> clones_of_;  // owner -> clone node ids
  std::deque<uint64_t> retired_;  // clone ids of destroyed execs, in retirement order
  std::atomic<uint64_t> refused_{0};  // counted under mu_
};

}  // namespace traintime::cupti
