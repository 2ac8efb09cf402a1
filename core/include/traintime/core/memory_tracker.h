// Device memory in use per step from CUPTI's memory records (docs/schema.md "memory"): every
// allocation adds its bytes at its address, every release takes away what that address held,
// per device. Each record belongs to the step of the API call that made it (its launch
// context's step, as GPU records are attributed, DESIGN §4); a step's peak is the most in use
// after any of its records, or what it started with, and its in-use figure what it ended with.
//
// Records reach the tracker in buffer order, which is not the order of the calls (per-thread
// buffers are delivered in any order): they are held and applied in timestamp order when a
// summary is asked for, or when many are held. Memory records are rare (PyTorch's caching
// allocator calls cudaMalloc seldom), so the tracker favours simplicity over speed.
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "traintime/core/rank_file.h"
#include "traintime/core/section.h"

namespace traintime::core {

struct MemoryEvent {
  uint64_t timestamp_ns = 0;
  uint64_t address = 0;
  uint64_t bytes = 0;    // an allocation's size (a release's is taken from its allocation)
  uint64_t step = 0;     // step markers before the call (its launch context)
  uint32_t device = 0;   // CUDA ordinal
  bool release = false;
};

// The tracker's figures: the run's, and one row per step that had records (or was carried),
// ascending index. A step without a row has the in-use figures of the nearest earlier row, with
// its peak equal to them (rows_for() fills those in).
struct MemorySummary {
  MemoryFigures run;
  std::vector<std::pair<uint64_t, MemoryFigures>> steps;
  // Each step's figures for the given ascending step indexes: a step without records carries
  // the in-use figures of the last earlier one (its peak = what is in use); steps before the
  // first record get nothing (present false).
  std::vector<MemoryFigures> rows_for(const std::vector<uint64_t>& indexes) const;
};

class MemoryTracker {
 public:
  // keep_steps: step rows kept (TRAINTIME_STEP_DETAIL); older ones fold into a baseline.
  explicit MemoryTracker(uint32_t keep_steps = 64) : keep_steps_(keep_steps ? keep_steps : 1) {}

  // One record (the caller serialises calls with summary()).
  void add(const MemoryEvent& e) {
    pending_.push_back(e);
    if (pending_.size() >= kMaxPending) settle();
  }

  // Applies the held records, oldest first, and returns the figures so far.
  MemorySummary summary();

  // Counters into the GPU section (modules.cupti.counters): memory_records, and
  // memory_unknown_frees / memory_reused_addresses with a warning when non-zero.
  void count_into(Section& out) const;

  // The peak in use within `step`, all devices together (live metrics), after applying the held
  // records: a step without records holds what the one before it left. False before the first
  // record, or for a step older than the rows kept.
  bool step_peak(uint64_t step, uint64_t* peak);

  static constexpr std::size_t kMaxPending = 4096;

 private:
  struct Device {
    std::unordered_map<uint64_t, uint64_t> live;  // address -> bytes
    uint64_t in_use = 0;
    uint64_t peak = 0;  // the run's
  };
  struct Row {
    uint64_t peak = 0, in_use = 0;
    std::map<uint32_t, DeviceMemory> devices;
  };
  void settle();
  void apply(const MemoryEvent& e);
  Row& row_for(uint64_t step);
  MemoryFigures figures(const Row& r) const;

  const uint32_t keep_steps_;
  std::vector<MemoryEvent> pending_;
  std::map<uint32_t, Device> devices_;
  uint64_t in_use_ = 0, peak_ = 0;  // all devices
  std::map<uint64_t, Row> rows_;    // by step; the oldest past keep_steps_ are erased
  uint64_t step_ = 0;               // the step records go to (never moves back)
  bool seen_ = false;
  uint64_t records_ = 0, unknown_frees_ = 0, reused_addresses_ = 0;
};

}  // namespace traintime::core
