// SIMULATION: what sim_train knows about each piece of GPU work it launches. A label travels
// with the work through the simulated driver (simgpuSetLabel) and comes back with the executed
// timeline, so the truth is computed from sim_train's own schedule, not from traintime.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace sim_train {

// Same order and spelling as the rank file's categories (DESIGN §4).
enum class Cat : uint8_t { kForward = 0, kBackward, kOptimizer, kComm, kIo, kOther, kRecompute, kUnattributed };
inline constexpr int kCatCount = 8;
inline const char* cat_name(Cat c) {
  static const char* names[] = {"forward", "backward", "optimizer", "comm", "io", "other", "recompute", "unattributed"};
  return names[static_cast<int>(c)];
}

// Paths and NCCL operations interned to small ids (id 0: no path).
class Interner {
 public:
  Interner() { names_.emplace_back(); }
  uint32_t id(const std::string& s) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = ids_.find(s);
    if (it != ids_.end()) return it->second;
    const auto id = static_cast<uint32_t>(names_.size());
    names_.push_back(s);
    ids_.emplace(s, id);
    return id;
  }
  std::string name(uint32_t id) const {
    std::lock_guard<std::mutex> lock(mu_);
    return id < names_.size() ? names_[id] : std::string();
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> ids_;
};

// label bits: [0,8) category, [8,32) path or comm-op id, [32,64) step index.
inline uint64_t make_label(Cat c, uint32_t id, uint64_t step) {
  return static_cast<uint64_t>(c) | (static_cast<uint64_t>(id & 0xFFFFFFu) << 8) | (step << 32);
}
inline Cat label_cat(uint64_t l) { return static_cast<Cat>(l & 0xFF); }
inline uint32_t label_id(uint64_t l) { return static_cast<uint32_t>((l >> 8) & 0xFFFFFFu); }
inline uint64_t label_step(uint64_t l) { return l >> 32; }

}  // namespace sim_train
