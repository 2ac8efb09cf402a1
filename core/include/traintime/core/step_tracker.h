// Training steps from tt_step (DESIGN §3, §4): count, wall time per step, throughput.
//
// Wall time of step k is the time between tt_step call k-1 and tt_step call k. Step 0 has no
// previous call: it is measured from the origin, which the owner sets to the first recorded
// event of the process (the preload uses the first region push or range start; if tt_step is
// the very first call, the time the library was loaded). Statistics and throughput skip the
// first `warmup` steps (TRAINTIME_WARMUP_STEPS); counts and sums include every step. The wall
// times of the last `detail_steps` steps (TRAINTIME_STEP_DETAIL) are kept by index for
// steps.detail[].wall_ns.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "traintime/core/live_metrics.h"
#include "traintime/core/live_record.h"
#include "traintime/core/lock_order.h"
#include "traintime/core/rank_file.h"

namespace traintime::core {

class StepTracker {
 public:
  explicit StepTracker(uint64_t warmup = 2, uint32_t detail_steps = 64)
      : warmup_(warmup), detail_steps_(detail_steps) {}

  // Sets the origin of step 0 unless one is set already. Thread-safe, lock-free.
  void set_origin(uint64_t now_ns);

  // Records the end of a step. Thread-safe (steps are rare: one mutex, amortised allocation).
  void step(uint64_t now_ns, uint64_t samples, uint64_t tokens);

  // A framework allocator's figures of the step in progress (tt_api_v1.step_memory): kept with
  // its detail row (steps.detail[].memory.torch). Thread-safe; a later call in the step replaces.
  void set_torch_memory(const TorchMemory& m);

  // tt_step calls so far. Lock-free (read by the launch callback).
  uint32_t count() const { return count_.load(std::memory_order_relaxed); }

  // Fills count, warmup, wall_ns, samples, tokens and the throughput fields of a Steps value,
  // and one detail row {index, wall_ns} per kept step, oldest first (the rest of each detail row,
  // and the GPU totals, are the attribution engine's; build_rank_file joins them by index).
  Steps summary() const;
  // The same, false (and *out untouched) when the tracker's lock was not had before `deadline`
  // (a terminating signal's write, lock_order.h). `last_step_ns`, when given, gets the clock's
  // nanoseconds (set_origin's and step's clock) when the newest step ended; 0 before the first.
  bool summary(const Deadline& deadline, Steps* out, uint64_t* last_step_ns = nullptr) const;

  uint64_t warmup() const { return warmup_; }

  // For live metrics: cumulative counters (every step) and the last step's figures. One short
  // lock, no allocation.
  struct Live {
    StepCounters totals;
    uint64_t last_wall_ns = 0;
    uint64_t last_samples = 0;
    uint64_t last_tokens = 0;
  };
  Live live() const;

  // Where every step's cumulative counters also go as it ends (the preload's always-current
  // record, core/live_record.h). Called under the tracker's lock, so calls never overlap; it
  // must not lock, allocate or block. Null (the default) turns it off.
  using Sink = void (*)(const LiveSteps& steps) noexcept;
  void set_sink(Sink sink) { sink_.store(sink, std::memory_order_release); }

  // Wall times kept for percentiles: exact up to this many post-warm-up steps, a uniform
  // sample of them beyond (mean and max stay exact), so memory stays bounded on long runs.
  static constexpr std::size_t kMaxWallSamples = std::size_t{1} << 20;

 private:
  std::atomic<uint64_t> origin_ns_{0};
  std::atomic<bool> origin_set_{false};
  std::atomic<uint32_t> count_{0};
  std::atomic<Sink> sink_{nullptr};
  mutable std::mutex mu_;
  const uint64_t warmup_;
  uint64_t last_ns_ = 0;
  Live live_;  // every step's counters (samples, tokens: the rank file's totals) and the last
  uint64_t measured_ = 0;  // post-warm-up steps
  uint64_t measured_wall_ns_ = 0;
  uint64_t measured_samples_ = 0;
  uint64_t measured_tokens_ = 0;
  uint64_t min_wall_ns_ = 0;
  uint64_t max_wall_ns_ = 0;
  uint64_t rng_ = 0x2545F4914F6CDD1Dull;
  std::vector<uint64_t> walls_;  // post-warm-up, bounded by kMaxWallSamples
  const uint32_t detail_steps_;
  std::vector<uint64_t> recent_walls_;  // ring: wall of step i at i % detail_steps_ (last ones)
  TorchMemory torch_pending_;            // of the step in progress
  std::vector<TorchMemory> recent_torch_;  // ring beside recent_walls_
};

// Mean, min, max, p50 and p90 (nearest rank) of a set of durations.
DurationStats duration_stats(std::vector<uint64_t> values);

}  // namespace traintime::core
