// Device memory in use per step from CUPTI's memory records (docs/schema.md "memory"): every
// allocation adds its bytes at its address, every release takes away what that address held,
// per device. Each record belongs to the step of the API call that made it (its launch
// context's step, as GPU records are attributed, DESIGN §4); a step's peak is the most in use
// after any of its records, or what it started with, and its in-use figure what it ended with.
//
// Records reach the tracker in buffer order, which is not the order of the calls (per-thread
// buffers are delivered in any order), and the VMM ledger's events (vmm_ledger.h) come at once,
// ahead of the records of the same moment: they are held and applied in timestamp order. Before
// the end, only the records of complete steps (set_complete_below: no buffer that could hold one
// of theirs is still out) are applied, since figures only move forward: a record applied after a
// later step's would count in that later step. PyTorch's caching allocator calls cudaMalloc
// seldom, but its cudaMallocAsync backend allocates and frees every tensor through the driver:
// a record or two per kernel, so a record's way through the tracker allocates nothing and looks
// nothing up in a tree when it is of the step and the device of the record before
// (scripts/bench.sh measures it).
#pragma once

#include <cstdint>
#include <map>
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
  // `address` is a VMM allocation's handle (traintime/core/vmm_ledger.h), not a device address:
  // the two are kept apart, so neither can take the other's place.
  bool handle = false;
};

// The tracker's figures: the run's, and one row per step that had records (or was carried),
// ascending index. A step without a row has the in-use figures of the nearest earlier row, with
// its peak equal to them (rows_for() fills those in).
// Live allocations of one device, address -> bytes: open addressing with linear probing and
// deletion by backward shift, so an allocation and its release allocate nothing once the table
// has grown to the most blocks live at once.
class AddressMap {
 public:
  // The bytes at `address`, or null.
  uint64_t* find(uint64_t address);
  // Inserts (address, bytes); returns the slot's bytes and whether it was new (not: the slot
  // holds the old bytes, unchanged).
  std::pair<uint64_t*, bool> insert(uint64_t address, uint64_t bytes);
  void erase(uint64_t address);  // no-op when absent
  std::size_t size() const { return size_ + (has_zero_ ? 1 : 0); }

 private:
  struct Slot {
    uint64_t address = 0;  // 0: empty (address 0 itself is kept aside)
    uint64_t bytes = 0;
  };
  std::size_t home(uint64_t address) const {
    return static_cast<std::size_t>((address * 0x9E3779B97F4A7C15ull) >> 32) & (slots_.size() - 1);
  }
  void grow();
  std::vector<Slot> slots_;
  std::size_t size_ = 0;
  bool has_zero_ = false;
  uint64_t zero_bytes_ = 0;
};

struct MemorySummary {
  MemoryFigures run;
  // Steps from here on were still open (a summary before the end): they have no figures.
  uint64_t complete_below = UINT64_MAX;
  std::vector<std::pair<uint64_t, MemoryFigures>> steps;
  // Each step's figures for the given ascending step indexes: a step without records carries
  // the in-use figures of the last earlier one (its peak = what is in use); steps before the
  // first record, and those from complete_below on, get nothing (present false).
  std::vector<MemoryFigures> rows_for(const std::vector<uint64_t>& indexes) const;
};

class MemoryTracker {
 public:
  // keep_steps: step rows kept (TRAINTIME_STEP_DETAIL); older ones fold into a baseline.
  explicit MemoryTracker(uint32_t keep_steps = 64) : keep_steps_(keep_steps ? keep_steps : 1) {}
  // Not copied: it keeps pointers into its own maps.
  MemoryTracker(const MemoryTracker&) = delete;
  MemoryTracker& operator=(const MemoryTracker&) = delete;

  // One record (the caller serialises calls with summary()).
  void add(const MemoryEvent& e) {
    pending_.push_back(e);
    if (pending_.size() >= settle_at_) settle_when_full();
  }

  // Steps below `step` can get no more records: the caller knows no buffer handed out while
  // they were open is still out, and their calls have returned. Never moves back.
  void set_complete_below(uint64_t step) {
    if (step > complete_below_) complete_below_ = step;
  }

  // Applies the held records, oldest first, and returns the figures so far. `final`: the end,
  // every record is in (all are applied); else only those of complete steps, and the figures
  // stop there (MemorySummary::complete_below).
  MemorySummary summary(bool final = true);

  // Counters into the GPU section (modules.cupti.counters): memory_records, and
  // memory_unknown_frees / memory_reused_addresses with a warning when non-zero.
  void count_into(Section& out) const;

  // The peak in use within `step`, all devices together (live metrics), after applying the held
  // records of it and the steps before it (the caller asks only for a complete step): a step
  // without records holds what the one before it left. False before the first record, or for a
  // step older than the rows kept.
  bool step_peak(uint64_t step, uint64_t* peak);

  // Records applied so far (summary() and step_peak() apply the held ones first).
  uint64_t records() const { return records_; }

  static constexpr std::size_t kMaxPending = 4096;
  // Held records of open steps beyond this are applied anyway (memory stays bounded when steps
  // are long: their figures may then count a late record in a later step).
  static constexpr std::size_t kMaxHeld = std::size_t{1} << 16;

 private:
  struct Device {
    AddressMap live;     // address -> bytes
    AddressMap handles;  // VMM handle -> bytes (MemoryEvent::handle)
    uint64_t in_use = 0;
    uint64_t peak = 0;  // the run's
  };
  struct Row {
    uint64_t peak = 0, in_use = 0;
    std::map<uint32_t, DeviceMemory> devices;
  };
  // Applies the held records of steps below `below`, in timestamp order; keeps the others.
  void settle(uint64_t below);
  void settle_when_full();
  void apply(const MemoryEvent& e);
  Row& row_for(uint64_t step);
  MemoryFigures figures(const Row& r) const;

  const uint32_t keep_steps_;
  std::vector<MemoryEvent> pending_;
  std::map<uint32_t, Device> devices_;
  uint64_t in_use_ = 0, peak_ = 0;  // all devices
  std::map<uint64_t, Row> rows_;    // by step; the oldest past keep_steps_ are erased
  uint64_t step_ = 0;               // the step records go to (never moves back)
  uint64_t complete_below_ = 0;     // set_complete_below
  std::size_t settle_at_ = kMaxPending;  // held records that make add() settle (settle())
  std::size_t held_ = 0;  // records the last settle left held: sorted, at the front of pending_
  bool seen_ = false;
  uint64_t records_ = 0, unknown_frees_ = 0, reused_addresses_ = 0;
  // The row, the device and the row's device figures of the last record applied: the next
  // record is usually of the same step and device. Map nodes do not move; a row is erased only
  // for a newer one, which then becomes the cached one.
  uint64_t cached_step_ = 0;
  Row* cached_row_ = nullptr;
  uint32_t cached_device_ = 0;
  Device* cached_dev_ = nullptr;
  DeviceMemory* cached_rd_ = nullptr;  // cached_row_->devices[cached_device_]
};

}  // namespace traintime::core
