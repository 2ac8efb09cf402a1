#include "graph_node_table.h"

namespace traintime::cupti {

void GraphNodeTable::put_locked(uint64_t node_id, const core::LaunchContext& ctx) {
  auto it = nodes_.find(node_id);
  if (it != nodes_.end()) {
    it->second = ctx;
  } else if (nodes_.size() < max_nodes_) {
    nodes_.emplace(node_id, ctx);
  } else {
    ++refused_;
  }
}

void GraphNodeTable::created(uint64_t node_id, const core::LaunchContext& ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  put_locked(node_id, ctx);
}

void GraphNodeTable::cloned(uint64_t node_id, uint64_t original_node_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto original = nodes_.find(original_node_id);
  if (original == nodes_.end()) return;
  const core::LaunchContext ctx = original->second;  // copy: put_locked may rehash
  put_locked(node_id, ctx);
}

bool GraphNodeTable::lookup(uint64_t node_id, core::LaunchContext* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return false;
  *out = it->second;
  return true;
}

uint64_t GraphNodeTable::refused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

size_t GraphNodeTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return nodes_.size();
}

}  // namespace traintime::cupti
