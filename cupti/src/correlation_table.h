// Correlation id -> launch context, written on the application's launching thread inside the
// launch callback and read by the processing thread when the activity record arrives (DESIGN §4).
//
// Fixed size, lock-free, allocation-free after construction. Real CUPTI numbers every traced API
// call, so ids advance several times faster than launches, and by an amount the tool does not
// control: a table indexed by id & mask would let a burst of ids overwrite contexts whose records
// have not arrived. So the table is a hash keyed by id with kProbe slots per id, and a store
// takes an empty slot of its probe window, else the one holding the oldest launch (by the
// table's own launch count): a context is lost only after capacity() newer launches, whatever
// the id rate. The activity buffers are sized so their records arrive well before that
// (gpu_capture.cpp, kLaunchingThreads).
//
// A slot is claimed with a compare-exchange of its tag to kBusy, filled with release stores and
// published by storing the id with release; the reader validates the tag before and after
// copying (a seqlock keyed by the id), so it never returns a torn or a foreign context. A lookup
// that finds nothing for an id older than the newest stored is counted as overwritten() (its
// context was evicted, or never stored because a slot was contended) and reported.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "traintime/core/activity.h"

namespace traintime::cupti {

class CorrelationTable {
 public:
  static constexpr uint32_t kProbe = 4;

  // capacity is rounded up to a power of two (at least kProbe).
  explicit CorrelationTable(uint32_t capacity);

  // Hot path: no lock, no allocation; errno untouched.
  void store(uint32_t correlation_id, const core::LaunchContext& ctx) noexcept;

  // True and *out filled when the entry for correlation_id is present.
  bool lookup(uint32_t correlation_id, core::LaunchContext* out) const noexcept;

  uint32_t capacity() const { return mask_ + 1; }
  // Lookups that found no context for an id older than the newest stored.
  uint64_t overwritten() const { return overwritten_.load(std::memory_order_relaxed); }
  // Stores skipped because other threads were writing every slot of the probe window.
  uint64_t store_collisions() const { return collisions_.load(std::memory_order_relaxed); }
  // Correlation ids consumed per stored launch so far (1.0 until two launches were stored):
  // the ids from the first stored to the newest, counted across 32-bit wraps, per launch.
  double ids_per_store() const noexcept;
  // Launch contexts stored (launch callbacks seen), including those lost to collisions.
  uint64_t launches() const { return launches_.load(std::memory_order_relaxed); }

 private:
  static constexpr uint32_t kEmpty = 0;           // correlation ids start at 1
  static constexpr uint32_t kBusy = 0xffffffffu;  // a writer is filling the slot
  struct Slot {  // 64 bytes
    std::atomic<uint32_t> tag{kEmpty};
    std::atomic<uint64_t> launch{0};  // the table's launch count when stored: the eviction age
    std::atomic<uint64_t> words[6] = {};
  };

  uint32_t home(uint32_t id) const noexcept;

  std::unique_ptr<Slot[]> slots_;
  uint32_t mask_;
  std::atomic<uint64_t> launches_{0};
  mutable std::atomic<uint64_t> overwritten_{0};
  std::atomic<uint64_t> collisions_{0};
  std::atomic<uint64_t> newest_{kEmpty};  // highest id stored, unwrapped (its low 32 bits: the id)
  std::atomic<uint64_t> first_{kEmpty};   // first id stored (set once, after newest_)
};

}  // namespace traintime::cupti
