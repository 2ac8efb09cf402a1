#include "graph_node_table.h"

namespace traintime::cupti {

void GraphNodeTable::put_locked(uint64_t node_id, const core::LaunchContext& ctx) {
  auto it = nodes_.find(node_id);
  if (it != nodes_.end()) {
    it->second = ctx;
    return;
  }
  // Full: make room from the clones of destroyed execs first (their replays are over).
  while (nodes_.size() >= max_nodes_ && !retired_.empty()) {
    nodes_.erase(retired_.front());
    retired_.pop_front();
  }
  if (nodes_.size() < max_nodes_) {
    nodes_.emplace(node_id, ctx);
  } else {
    refused_.fetch_add(1, std::memory_order_relaxed);
  }
}

void GraphNodeTable::created(uint64_t node_id, const core::LaunchContext& ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  put_locked(node_id, ctx);
}

void GraphNodeTable::cloned(uint64_t node_id, uint64_t original_node_id, uint64_t owner) {
  std::lock_guard<std::mutex> lock(mu_);
  auto original = nodes_.find(original_node_id);
  if (original == nodes_.end()) return;
  const core::LaunchContext ctx = original->second;  // copy: put_locked may rehash
  put_locked(node_id, ctx);
  if (owner != 0) clones_of_.emplace(owner, node_id);
}

void GraphNodeTable::forget_owner(uint64_t owner) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [first, last] = clones_of_.equal_range(owner);
  for (auto it = first; it != last; ++it) retired_.push_back(it->second);
  clones_of_.erase(first, last);
}

size_t GraphNodeTable::retired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return retired_.size();
}

bool GraphNodeTable::lookup(uint64_t node_id, core::LaunchContext* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return false;
  *out = it->second;
  return true;
}

size_t GraphNodeTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return nodes_.size();
}

size_t GraphNodeTable::bytes() const {
  constexpr size_t kNode = 48;  // a hash map node's pointers and header beyond its value
  std::lock_guard<std::mutex> lock(mu_);
  return nodes_.size() * (sizeof(uint64_t) + sizeof(core::LaunchContext) + kNode) +
         clones_of_.size() * (2 * sizeof(uint64_t) + kNode) + retired_.size() * sizeof(uint64_t);
}

}  // namespace traintime::cupti
