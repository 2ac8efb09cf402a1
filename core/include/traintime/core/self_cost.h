// What traintime's own code costs on threads it did not start (rank file self_cost.callbacks,
// docs/schema.md "self_cost"). A hot path (annotation push/pop, the launch callbacks, the NCCL
// wrappers, NVTX) times one call in `every` between two readings of the process clock
// (core::process_clock().ticks(): the CPU's counter where it is trusted) and counts every call;
// its row's estimate is calls x the mean timed call, less the two readings' own cost, measured
// once per process (FastClock::pair_ticks). So the estimate costs a count and a predictable
// branch per call; the timed call pays two readings and a few relaxed adds.
//
// A timed call longer than kInterruptedNs was interrupted (the thread was preempted or paged
// out between the readings): it is left out of the mean and counted (`interrupted`), since a
// hot path's own work never takes that long and one such reading would weigh as `every` calls.
// Work that can take that long (a flush) is timed on every call instead (`every` 1, not an
// estimate).
//
// Each module keeps the sums of its own paths (CostSums: relaxed atomics, written by timed calls
// only, no lock, no allocation) and reports its rows through its section (core/section.h), so the
// rank file's rows are each module's own.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "traintime/core/fast_clock.h"
#include "traintime/core/rank_file.h"

namespace traintime::core {

// A timed call longer than this was interrupted (see the top).
inline constexpr uint64_t kInterruptedNs = 100'000;

// How often the hot paths time a call: one in kCostEvery (a power of two), first at the
// kCostPhase-th call of a thread (warm: its first calls take the slow paths that set it up),
// then every kCostEvery calls. Timing costs two clock readings (about 20 ns) and the adds: at one
// in 1024 calls that is a few hundredths of a nanosecond per call.
inline constexpr uint64_t kCostEvery = 1024;
inline constexpr uint64_t kCostPhase = 16;
// tt_step is timed about one step in kStepCostEvery, at random (each gap drawn from 1 to
// 2 x kStepCostEvery - 1): a fixed period could fall in step with work done every N steps (the
// console line of TRAINTIME_PRINT_EVERY) and weigh it N / kStepCostEvery times over.
inline constexpr uint64_t kStepCostEvery = 16;
// Whether the call-th call of a thread (1-based) is timed: kCostPhase, then every kCostEvery.
constexpr bool cost_timed(uint64_t call, uint64_t every = kCostEvery) {
  return (call & (every - 1)) == (kCostPhase & (every - 1));
}

// The sums of one path's timed calls. Written by the timed calls (any thread), read when a rank
// file is built or a step ends.
class CostSums {
 public:
  // One timed call: `ticks` between its first and last reading, made of `pairs` pairs of
  // readings (a launch's callbacks are timed one by one: one pair each), whose own cost the
  // estimate takes off. Longer than kInterruptedNs (in ticks, as the process clock converts
  // them now): counted as interrupted, left out.
  void add(uint64_t ticks, uint32_t pairs = 1) noexcept;
  void add(uint64_t ticks, uint32_t pairs, uint64_t interrupted_ticks) noexcept;
  void reset() noexcept;  // a fork child starts clean

  struct Totals {
    uint64_t samples = 0;      // timed calls kept
    uint64_t ticks = 0;        // their readings' differences, summed
    uint64_t pairs = 0;        // the pairs of readings they took
    // For the spread: the sum of (ticks - pairs x pair cost)^2 is made from these three when the
    // pair cost is known (the estimate).
    double ticks_squared = 0;  // sum of ticks^2
    double ticks_pairs = 0;    // sum of ticks x pairs
    double pairs_squared = 0;  // sum of pairs^2
    uint64_t interrupted = 0;  // timed calls left out
  };
  Totals totals() const noexcept;

  // The timed calls so far, as a step's mark keeps them (cheap: three loads): their count and
  // their own time (ticks less pairs x pair_ticks, at least 0).
  struct SoFar {
    uint64_t samples = 0;
    uint64_t own_ticks = 0;
  };
  SoFar so_far(uint64_t pair_ticks) const noexcept;

 private:
  std::atomic<uint64_t> samples_{0};
  std::atomic<uint64_t> ticks_{0};
  std::atomic<uint64_t> pairs_{0};
  std::atomic<uint64_t> interrupted_{0};
  std::atomic<double> ticks_squared_{0};
  std::atomic<double> ticks_pairs_{0};
  std::atomic<double> pairs_squared_{0};
};

// The calls of a path whose module keeps no count of its own (the NCCL wrappers, the NVTX
// handlers), counted per thread: each thread's counter is made at its first call (the module
// keeps the pointer in its thread-local state) and linked into the path's list, never freed, so
// a thread's count outlives it (one small node per thread that ever called, as the region
// registry keeps each recording thread's state). No lock: the list only grows, by a
// compare-and-swap.
class ThreadCalls {
 public:
  struct Counter {
    std::atomic<uint64_t> calls{0};  // single writer: its thread
    Counter* next = nullptr;
    // The owning thread's call: counted; true when it is one to time (cost_timed).
    bool count(uint64_t every) noexcept {
      const uint64_t n = calls.load(std::memory_order_relaxed) + 1;
      calls.store(n, std::memory_order_relaxed);
      return cost_timed(n, every);
    }
  };
  ThreadCalls() = default;
  ThreadCalls(const ThreadCalls&) = delete;
  ThreadCalls& operator=(const ThreadCalls&) = delete;

  // The calling thread's new counter, linked; nullptr when no memory could be had.
  Counter* join() noexcept;
  // Every thread's calls so far.
  uint64_t total() const noexcept;
  // A fork child: the parent's counts are the parent's (their nodes are unlinked from the count
  // but kept, reachable from a list of their own: a thread may still hold its node). The module
  // forgets the forking thread's pointer itself.
  void forget() noexcept;

 private:
  std::atomic<Counter*> head_{nullptr};
  std::atomic<Counter*> retired_{nullptr};
};

// A path's row: calls x the mean timed call (each less its pairs' cost), in ns; spread_ns the
// standard error of that estimate (calls x the timed calls' standard deviation / sqrt(samples);
// with one sample, the estimate itself). A path with calls but no timed call is not measured
// (measured false: the rank file says n/a). every 1: each call was timed, not an estimate.
// Pure: `pair_ticks` and `ns_per_tick` are given (tests), or taken from the process clock.
CallbackCost cost_row(std::string_view what, uint64_t calls, uint64_t every, const CostSums::Totals& t,
                      uint64_t pair_ticks, double ns_per_tick);
CallbackCost cost_row(std::string_view what, uint64_t calls, uint64_t every, const CostSums& sums);
// A row of work timed in full on every call (`every` 1, not an estimate), in ns.
CallbackCost exact_row(std::string_view what, uint64_t calls, uint64_t ns);

// The paths timed one call in kCostEvery, each kept apart by the marks of self_cost.pct (the
// Python hooks' rows are the preload's, kept by slot).
enum class SampledPath : uint8_t { kAnnotations, kLaunches, kNccl, kNvtx, kSteps };
inline constexpr std::size_t kSampledPaths = 5;

// The callbacks' time so far: what a step's mark keeps, to share the callbacks' time out over
// the measured steps (self_cost.pct). Paths timed on every call: their sums (ticks of the process
// clock, and nanoseconds for rows measured in them: CUPTI's overhead records). Sampled paths:
// their timed calls so far (CostSums::SoFar), and, when asked for (not at a step's mark: a count
// can take a lock), their calls.
struct CostSoFar {
  uint64_t ticks = 0;
  uint64_t ns = 0;
  CostSums::SoFar timed[kSampledPaths];
  uint64_t calls[kSampledPaths] = {};
  CostSums::SoFar& at(SampledPath p) { return timed[static_cast<std::size_t>(p)]; }
  uint64_t& calls_at(SampledPath p) { return calls[static_cast<std::size_t>(p)]; }
};

// A sampled path's time between two marks, by the rows' one estimator (cost_row: calls x the
// mean timed call): its calls now x the own time of the timed calls made between the marks /
// all its timed calls now. So a window's figure never exceeds the row's (the calls between the
// marks are counted by the timed calls that fell between them, which the systematic sampling
// makes exact to one per thread). 0 with no timed call.
uint64_t window_ticks(uint64_t calls, uint64_t samples, uint64_t own_from, uint64_t own_to);

}  // namespace traintime::core
