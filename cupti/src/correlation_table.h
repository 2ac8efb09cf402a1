// Correlation id -> launch context, written on the application's launching thread inside the
// launch callback and read by the processing thread when the activity record arrives (DESIGN §4).
//
// Fixed size, lock-free, allocation-free after construction: slot = id & mask. A slot is claimed
// with one atomic exchange, filled with relaxed atomic words and published by storing its id with
// release; the reader validates the id before and after copying (a seqlock keyed by the id), so
// it never returns a torn or a foreign context. A newer launch landing on the same slot simply
// replaces the old entry: memory is bounded and nothing is ever pruned explicitly. A record whose
// entry was replaced before it arrived is counted (overwritten()) and reported as a warning.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "traintime/core/activity.h"

namespace traintime::cupti {

class CorrelationTable {
 public:
  // capacity is rounded up to a power of two.
  explicit CorrelationTable(uint32_t capacity);

  // Hot path: no lock, no allocation; errno untouched.
  void store(uint32_t correlation_id, const core::LaunchContext& ctx) noexcept;

  // True and *out filled when the entry for correlation_id is present.
  bool lookup(uint32_t correlation_id, core::LaunchContext* out) const noexcept;

  uint32_t capacity() const { return mask_ + 1; }
  // Lookups that failed because a later launch had taken the slot.
  uint64_t overwritten() const { return overwritten_.load(std::memory_order_relaxed); }
  // Stores skipped because another thread was writing the same slot at that instant.
  uint64_t store_collisions() const { return collisions_.load(std::memory_order_relaxed); }

 private:
  static constexpr uint32_t kEmpty = 0;           // correlation ids start at 1
  static constexpr uint32_t kBusy = 0xffffffffu;  // a writer is filling the slot
  struct Slot {  // 56 bytes; no cache-line padding: 2^18 slots must stay small
    std::atomic<uint32_t> tag{kEmpty};
    std::atomic<uint64_t> words[6] = {};
  };

  std::unique_ptr<Slot[]> slots_;
  uint32_t mask_;
  mutable std::atomic<uint64_t> overwritten_{0};
  std::atomic<uint64_t> collisions_{0};
};

}  // namespace traintime::cupti
