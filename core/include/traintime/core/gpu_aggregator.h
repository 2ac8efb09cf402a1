// The attribution engine (DESIGN §4): turns every GPU activity plus its launch context into the
// GPU fields of the rank file — categories, per-step breakdown, regions, memcpy, comm — with
// memory bounded however long the run. Definitions and trade-offs: docs/attribution.md.
//
// Threading: one GpuAggregator is fed by one thread (the activity-processing thread); summary()
// and trace_json() are const and may run on that thread between ingests (guard with your own
// lock if another thread writes the rank file). No globals; no CUDA.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "traintime/core/activity.h"
#include "traintime/core/category.h"
#include "traintime/core/comm_stats.h"
#include "traintime/core/interval_union.h"
#include "traintime/core/live_metrics.h"
#include "traintime/core/rank_file.h"
#include "traintime/core/summaries.h"

namespace traintime::core {

struct AggregatorOptions {
  uint32_t warmup_steps = 2;       // copied into steps.warmup
  uint32_t step_detail = 64;       // steps.detail keeps the most recent N steps
  bool trace = false;              // TRAINTIME_TRACE=1: keep activities for trace_json()
  uint64_t trace_max_events = 1000000;
  std::size_t top_kernels = 10;    // per region, and for the whole rank (TRAINTIME_TOP_KERNELS)
  // Bounds of the open-step window (docs/attribution.md "Memory bound"): the oldest open step is
  // folded into the totals when more than max_open_records activities or max_open_steps steps
  // are held. A record of a step already folded is a late record.
  std::size_t max_open_records = std::size_t{1} << 18;
  uint32_t max_open_steps = 1024;
  uint32_t max_kernel_names = 1u << 16;      // distinct kernel names interned
  uint32_t max_region_kernels = 1u << 16;    // distinct (region, kernel) pairs with stats
  uint32_t recent_collectives = 256;         // ring per communicator
};

class GpuAggregator {
 public:
  explicit GpuAggregator(AggregatorOptions options = {});

  // Group kernels (LaunchContext::comm.group_id) are split across their group's members
  // (comm_stats.h), which live in the NCCL call table: another module's state, which the
  // aggregator never asks for. With split_groups(true), ingest() keeps each group kernel
  // pending; its owner takes them (take_pending_groups), looks their groups up without holding
  // the lock that guards the aggregator, and hands each back with its members
  // (add_group_kernel; null when the group fell out of the table's ring: the kernel then counts
  // for ctx.comm.op alone, and as a missed lookup). Off (the default), a group kernel counts
  // for ctx.comm.op alone at ingest.
  struct PendingGroupKernel {
    CommContext comm;
    uint64_t start_ns = 0;
    uint64_t end_ns = 0;
    uint64_t dur = 0;
  };
  void split_groups(bool on) {
    split_groups_ = on;
    if (on) pending_groups_.reserve(256);
  }
  // The pending group kernels, moved into *out (its old contents dropped, its capacity reused).
  void take_pending_groups(std::vector<PendingGroupKernel>* out) {
    out->clear();
    out->swap(pending_groups_);
  }
  void add_group_kernel(const PendingGroupKernel& k, const CommGroupRecord* group);

  // Every activity, in any order across streams, steps and buffers. region_category is the
  // category of ctx.path (ignored when ctx.path == kNoPath). No allocation in the steady state
  // except amortised vector growth; no string work for a kernel name seen before at the same
  // address.
  void ingest(const GpuActivity& a, const LaunchContext& ctx, Category region_category);
  void note_dropped(uint64_t n) { dropped_ += n; }

  // The GPU side of the rank file (core/summaries.h): categories, regions by PathId, step totals
  // and detail, partial_final_step, memcpy, comm GPU time per (communicator index, op), the
  // rings of recent collectives, dropped records and warnings. Open steps are folded into a
  // copy, so summary() can be called for snapshots mid-run. steps_completed = tt_step calls so
  // far: activities with step >= it form the partial step. capture/capture_reason are left to
  // the adapter.
  GpuSummary summary(uint64_t steps_completed) const;
  // The memory its containers hold (self_cost.memory "GPU aggregator"): the records of the steps
  // still open and the spare step buffers, the names, regions, kernels, communicators and the
  // per-step rows, by capacity (node-based maps at a nominal size per entry); and the most it
  // answered so far (the CUPTI adapter asks at every summary, so at every rank file).
  std::size_t held_bytes() const;
  std::size_t peak_held_bytes() const { return peak_held_; }

  // Live metrics (live_metrics.h): the figures of one step from what has been ingested so far,
  // open or already folded, without changing anything the summary reports. False when nothing
  // of the step can be told (it folded while TRAINTIME_STEP_DETAIL=0). Costs a sort and an
  // interval union of that step's records.
  bool step_figures(uint64_t step, GpuStepFigures* out);
  // The live metrics have published every step < `below`: records of those steps that arrive
  // from now on are counted by records_after_publish().
  void set_published_below(uint64_t below) { published_below_ = std::max(published_below_, below); }
  uint64_t records_after_publish() const { return after_publish_; }
  // The device of the first activity ingested; -1 before one.
  int first_device() const { return first_device_; }

  // TRAINTIME_TRACE=1 dump ("traintime-trace/1", docs/attribution.md "Trace dump").
  nlohmann::json trace_json(const std::function<std::string(PathId)>& path_name) const;

  // What the aggregator holds, for memory-bound checks.
  struct Footprint {
    std::size_t open_steps = 0;
    std::size_t open_records = 0;
    std::size_t regions = 0;
    std::size_t kernel_names = 0;
    std::size_t region_kernels = 0;
    std::size_t detail_steps = 0;
    std::size_t trace_events = 0;
  };
  Footprint footprint() const;
  uint64_t late_records() const { return acc_.late_records; }

  // A copy for a snapshot (core/step_feed.h: the activities detection has not placed yet go into
  // the copy, never into this one): every figure, the open steps' records included; the trace's
  // events stay behind. Costs the open-step window's bytes once.
  std::unique_ptr<GpuAggregator> clone() const;

 private:
  GpuAggregator(const GpuAggregator&) = default;  // clone(): the caches' pointers reset there
  GpuAggregator& operator=(const GpuAggregator&) = delete;
  static constexpr uint32_t kNoSlot = 0xffffffffu;
  // The slot of the (region, kernel) pairs of kernels launched with no region open: counted like
  // a region's, for the rank's own top_kernels only (no region row).
  static constexpr uint32_t kNoRegionSlot = 0xfffffffeu;
  static uint32_t pair_slot(uint32_t slot) { return slot == kNoSlot ? kNoRegionSlot : slot; }
  static constexpr uint32_t kNoName = 0;
  static constexpr uint32_t kOtherKernels = 1;  // name id once max_kernel_names is reached

  struct OpenRec {  // one activity of an open step: 32 bytes, two to a cache line
    uint64_t start;
    uint64_t end;
    // The fold groups consecutive records of equal entry, device, slot and category into runs,
    // comparing these four as two 64-bit words: no padding between or after them.
    uint32_t entry;  // position of its region entry in StepBuf::entries
    uint32_t device;
    uint32_t slot;
    uint32_t cat;
    OpenRec() = default;
    // All fields at once, so that emplace_back writes each once (no zeroing first).
    OpenRec(uint64_t start_ns, uint64_t end_ns, uint32_t entry_pos, uint32_t dev, uint32_t slot_,
            uint32_t category)
        : start(start_ns), end(end_ns), entry(entry_pos), device(dev), slot(slot_), cat(category) {}
  };
  // The order a step's records are folded in.
  static bool before(const OpenRec& a, const OpenRec& b) {
    return a.device != b.device ? a.device < b.device : a.start < b.start;
  }
  struct DeviceSpan {
    uint32_t device;
    uint64_t first;
    uint64_t last;
    uint64_t busy;  // union of everything, summed over segments
  };
  struct StepBuf {
    std::vector<OpenRec> recs;
    // Region entries of the records (a new element whenever a record's entry differs from the
    // last one's; repeats are merged when the step folds).
    std::vector<uint64_t> entries;
    bool sorted = true;               // recs are in before() order (they usually arrive so)
    std::vector<DeviceSpan> devices;  // across segments of a step folded in pieces
    void clear_records() {
      recs.clear();
      entries.clear();
      sorted = true;
    }
  };
  struct RegionFold {  // a region's figures, computed when steps fold
    uint64_t busy = 0;
    uint64_t span = 0;
    uint64_t sum = 0;
    std::array<uint64_t, kCategoryCount> cat_busy{};
    std::array<uint64_t, kCategoryCount> cat_sum{};
    std::array<uint64_t, kCategoryCount> cat_count{};
  };
  struct DetailAcc {
    uint64_t span = 0;
    bool partial = false;
    StepTotals totals;
    std::array<uint64_t, kCategoryCount> cat_busy{};
  };
  // A pointer into the detail map of the Accum that holds it: a copied Accum has a map of its
  // own, so a copy is empty; a move takes the nodes along, so it keeps the pointer.
  struct DetailMemo {
    uint64_t step = 0;
    DetailAcc* acc = nullptr;
    DetailMemo() = default;
    DetailMemo(const DetailMemo&) {}
    DetailMemo& operator=(const DetailMemo&) {
      acc = nullptr;
      return *this;
    }
    DetailMemo(DetailMemo&& o) noexcept : step(o.step), acc(o.acc) { o.acc = nullptr; }
    DetailMemo& operator=(DetailMemo&& o) noexcept {
      step = o.step;
      acc = o.acc;
      o.acc = nullptr;
      return *this;
    }
  };
  // Everything computed by folding steps; summary() folds the open steps into a copy.
  struct Accum {
    std::array<uint64_t, kCategoryCount> cat_busy{};
    std::array<uint64_t, kCategoryCount> cat_sum{};
    std::array<uint64_t, kCategoryCount> cat_count{};
    StepTotals totals;
    std::vector<RegionFold> regions;  // by slot
    std::map<uint64_t, DetailAcc> detail;
    uint64_t late_records = 0;
    uint64_t segmented_steps = 0;
    // detail_for's last answer (nodes of detail are stable until erased, and only detail_for
    // erases): a node of this Accum's own map, so a copy starts without one (DetailMemo).
    DetailMemo last_detail;
  };
  // Open-addressing index of dense ids (positions in a vector the caller owns) by a 32-bit
  // hash of their key: 4 bytes a slot (the id alone; the key is the caller's), linear probing,
  // grown at half load, so a key costs no allocation and 8 to 16 bytes (the node-based maps it
  // replaces allocated a node per key and chased a pointer per lookup). The caller says what
  // equal is and rehashes its keys when the index grows.
  class IdIndex {
   public:
    static constexpr uint32_t kNone = 0xffffffffu;
    // The id stored under hash h for which same(id) holds, else kNone.
    template <typename Same>
    uint32_t find(uint32_t h, Same&& same) const {
      const std::size_t mask = slots_.size() - 1;
      for (std::size_t i = h & mask;; i = (i + 1) & mask) {
        const uint32_t id = slots_[i];
        if (id == kNone || same(id)) return id;
      }
    }
    // Adds id under hash h (the caller checked that its key is not present); hash_of(id) gives
    // the hash of an id already in, for growing.
    template <typename HashOf>
    void insert(uint32_t h, uint32_t id, HashOf&& hash_of) {
      if ((count_ + 1) * 2 > slots_.size()) {
        std::vector<uint32_t> bigger(slots_.size() * 2, kNone);
        for (const uint32_t old : slots_)
          if (old != kNone) place(bigger, hash_of(old), old);
        slots_.swap(bigger);
      }
      place(slots_, h, id);
      ++count_;
    }

   private:
    static void place(std::vector<uint32_t>& slots, uint32_t h, uint32_t id) {
      const std::size_t mask = slots.size() - 1;
      std::size_t i = h & mask;
      while (slots[i] != kNone) i = (i + 1) & mask;
      slots[i] = id;
    }
    std::vector<uint32_t> slots_ = std::vector<uint32_t>(16, kNone);
    std::size_t count_ = 0;

   public:
    std::size_t bytes() const { return slots_.capacity() * sizeof(uint32_t); }
  };
  struct EntrySpan {
    uint32_t slot;
    uint64_t first;
    uint64_t last;
  };
  // Region entry -> span of its records within one fold. Open addressing in vectors kept
  // between folds: a node-based map allocated one node per entry on every step.
  class EntryTable {
   public:
    // The span of `entry` (non-zero), and whether it was just created (then holding `init`).
    // The pointer is valid until the next insert.
    EntrySpan* find_or_insert(uint64_t entry, const EntrySpan& init, bool& inserted);
    template <typename F>
    void for_each(F&& f) const {
      for (uint32_t i : used_) f(slots_[i].span);
    }
    void clear();

   private:
    struct Slot {
      uint64_t key = 0;  // 0: empty (entry 0 means "no entry" and is never stored)
      EntrySpan span{};
    };
    void grow();
    std::vector<Slot> slots_ = std::vector<Slot>(256);
    std::vector<uint32_t> used_;  // occupied slot indices, for clear() and for_each()
  };
  struct RegionLane {  // one region's records of one category within a fold
    IntervalUnion busy;
    uint64_t sum = 0;
    uint64_t count = 0;
  };
  struct Scratch {  // reused between folds so the steady state does not allocate
    std::vector<IntervalUnion> region;    // by slot
    std::vector<RegionLane> region_cat;   // by slot * kCategoryCount + category
    std::vector<uint8_t> touched_cats;  // by slot: bit c set when category c has a record
    std::vector<uint32_t> touched;      // slots with a non-zero touched_cats
    std::vector<EntrySpan> entry_at;  // by position in StepBuf::entries (slot kNoSlot: none)
    EntryTable entries;               // by entry, when a step's entries are not all distinct
    std::vector<OpenRec> sorted;  // fold_copy's sorted copy of a buffer out of order
  };

  struct RegionAcc {  // its figures are counted when steps fold, its kernels by pair
    PathId path = kNoPath;
    Category category = Category::kOther;
  };
  struct KernelAcc {  // one (region, kernel) pair
    uint64_t key = 0;  // slot << 32 | name id
    uint64_t count = 0;
    uint64_t sum = 0;
  };
  using CommGpu = CommGpuTime;  // per (comm_id, op)
  struct RingEntry {
    uint64_t seq = 0;
    CommOp op = CommOp::kNone;
    uint64_t bytes = 0;
    uint64_t start = 0;
    uint64_t end = 0;
  };
  struct CommRing {
    uint64_t ops_completed = 0;
    std::vector<RingEntry> ring;
  };
  struct NameCacheEntry {
    const char* ptr = nullptr;
    std::size_t len = 0;
    uint32_t id = kNoName;
  };
  // Two-way set-associative by (name address, region path): what a kernel launched from a region
  // resolves to, valid while the name at that address is the same (checked on every hit against
  // the interned characters, found by offset without a second lookup). 32 bytes, a set is one
  // cache line; the most recently filled way is way 0.
  struct SiteCacheEntry {
    const char* ptr = nullptr;
    uint32_t len = 0;
    PathId path = kNoPath;
    uint32_t name_id = kNoName;  // > kOtherKernels when filled
    uint32_t name_at = 0;        // offset of the name's characters in name_chars_
    uint32_t slot = kNoSlot;
    uint32_t rk_nccl = 0;        // position in region_kernels_ (its pair_slot's pair) << 1 | nccl
  };
  struct alignas(64) SiteSet {
    SiteCacheEntry way[2];
  };
  static_assert(sizeof(SiteCacheEntry) == 32);
  const SiteCacheEntry* find_site(const SiteSet& set, std::string_view name, PathId path) const;
  static constexpr std::size_t kSiteSets = 512;
  static std::size_t site_set(const char* name, PathId path) {
    const uint64_t key = reinterpret_cast<uintptr_t>(name) ^ (uint64_t{path} << 48);
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 55);  // 9 bits: 512 sets
  }
  struct TraceEvent {
    uint64_t start, end, bytes, correlation;
    PathId path;
    uint32_t step, name, device, stream;
    uint8_t cat, kind, copy, comm_op;
  };

  uint32_t intern(std::string_view name, bool& nccl);
  uint32_t region_slot(PathId path, Category region_category) {
    if (path == kNoPath) return kNoSlot;
    if (path == last_path_) return last_slot_;
    return region_slot_lookup(path, region_category);
  }
  uint32_t region_slot_lookup(PathId path, Category region_category);
  // Position in region_kernels_ of key (slot << 32 | name id), added if new; beyond
  // max_region_kernels a new key is counted and goes to the slot's "(other kernels)" pair.
  uint32_t region_kernel(uint64_t key, uint32_t slot);
  // Everything ingest() does, for any record; ingest() itself handles the common one.
  void ingest_full(const GpuActivity& a, const LaunchContext& ctx, Category region_category);
  void refresh_room();
  SiteCacheEntry resolve_site(const GpuActivity& a, const LaunchContext& ctx,
                              Category region_category, SiteSet* set);
  StepBuf* open_step(uint64_t step, uint32_t device);  // nullptr: the step is already folded
  void ingest_other(const GpuActivity& a, const LaunchContext& ctx, uint64_t dur, Category cat,
                    uint32_t name_id);
  void ingest_comm(const GpuActivity& a, const LaunchContext& ctx, uint64_t dur, uint32_t name_id);
  CommRing& ring_for(uint32_t comm_id);
  CommGpu& comm_gpu_for(uint64_t key);
  void add_comm_share(uint32_t comm_id, CommOp op, uint64_t seq, uint64_t bytes, uint64_t share,
                      const GpuActivity& a, bool captured);
  void enforce_bounds();
  void fold_oldest();
  void fold_late(const OpenRec& r, uint64_t entry, uint64_t step);

  // Folds the records of buf (sorted in place first if they are not in before() order) into
  // acc; the step's per-device spans accumulate in devices.
  static void fold_records(StepBuf& buf, std::vector<DeviceSpan>& devices, uint64_t step,
                           Accum& acc, Scratch& scratch, uint32_t step_detail);
  // The same for a buffer that must stay as it is: sorted into scratch.sorted if need be.
  static void fold_copy(const StepBuf& buf, std::vector<DeviceSpan>& devices, uint64_t step,
                        Accum& acc, Scratch& scratch, uint32_t step_detail);
  static void fold_sorted(const OpenRec* recs, std::size_t n, const uint64_t* entries,
                          std::size_t n_entries, std::vector<DeviceSpan>& devices,
                          uint64_t step, Accum& acc, Scratch& scratch, uint32_t step_detail);
  // Closes a step: idle and span from the per-device spans of all its segments.
  static void finish_step(const std::vector<DeviceSpan>& devices, uint64_t step, Accum& acc,
                          uint32_t step_detail);
  static DetailAcc* detail_for(Accum& acc, uint64_t step, uint32_t step_detail);

  AggregatorOptions opt_;
  bool split_groups_ = false;
  std::vector<PendingGroupKernel> pending_groups_;  // ingested, not yet split (split_groups)

  std::array<MemcpyStat, 6> memcpy_{};  // by CopyKind
  uint64_t dropped_ = 0;
  uint64_t max_step_ = 0;
  bool any_activity_ = false;

  // Interned kernel names: the characters of all of them back to back in one arena, each name
  // id's end offset, and an index by hash (kernel_names.cpp). Ids 0 and 1 are "" and
  // "(other kernels)" and are not in the index.
  std::string_view name_of(uint32_t id) const {
    const uint32_t begin = id == 0 ? 0 : name_end_[id - 1];
    return {name_chars_.data() + begin, name_end_[id] - begin};
  }
  std::vector<char> name_chars_;
  std::vector<uint32_t> name_end_;        // by name id
  std::vector<uint8_t> name_nccl_;        // is_nccl_kernel per name id
  std::vector<CommOp> name_op_;           // comm_op_from_kernel_name per name id
  IdIndex name_index_;
  std::vector<NameCacheEntry> name_cache_;
  std::vector<SiteSet> site_cache_;
  uint64_t names_over_cap_ = 0;

  IdIndex slot_of_;                 // PathId -> slot in regions_
  std::vector<RegionAcc> regions_;
  PathId last_path_ = kNoPath;
  uint32_t last_slot_ = kNoSlot;

  std::vector<KernelAcc> region_kernels_;  // in order of first appearance
  IdIndex region_kernel_index_;            // key -> position in region_kernels_
  uint64_t region_kernels_over_cap_ = 0;

  // key: comm_id << 8 | op, with kByNameKey set for kernels found by name (no interposition)
  static constexpr uint64_t kByNameKey = uint64_t{1} << 63;
  std::unordered_map<uint64_t, CommGpu> comm_gpu_;
  std::map<uint32_t, CommRing> rings_;              // by comm_id (≥ 1)
  uint64_t last_comm_key_ = 0;  // comm_gpu_for's and ring_for's last answers
  CommGpu* last_comm_gpu_ = nullptr;
  uint32_t last_ring_id_ = 0;
  CommRing* last_ring_ = nullptr;
  uint64_t group_lookups_missed_ = 0;

  // The open steps in step order. Steps open at the back and fold from the front, so a deque
  // does both in constant time (a std::map rebalanced its tree twice a step); an older step
  // opened late is inserted in place. Buffers live on the heap, so last_buf_ stays valid.
  struct OpenStep {
    uint64_t step;
    std::unique_ptr<StepBuf> buf;
    OpenStep(uint64_t s, std::unique_ptr<StepBuf> b) : step(s), buf(std::move(b)) {}
    OpenStep(OpenStep&&) noexcept = default;
    OpenStep& operator=(OpenStep&&) noexcept = default;
    OpenStep(const OpenStep& o) : step(o.step), buf(std::make_unique<StepBuf>(*o.buf)) {}  // clone()
    OpenStep& operator=(const OpenStep&) = delete;
  };
  std::deque<OpenStep> open_;
  std::size_t open_steps_ = 0;  // open_.size(), which a deque computes from four pointers
  // The open step of this index, else open_.end().
  std::deque<OpenStep>::iterator find_open(uint64_t step);
  // Buffers of folded steps, kept (emptied, capacity intact) for the next steps: a new step
  // neither allocates nor regrows its record vector from nothing.
  struct Spares : std::vector<std::unique_ptr<StepBuf>> {
    Spares() = default;
    Spares(Spares&&) noexcept = default;
    Spares& operator=(Spares&&) noexcept = default;
    Spares(const Spares&) : std::vector<std::unique_ptr<StepBuf>>() {}  // clone(): none spare
    Spares& operator=(const Spares&) = delete;
  };
  Spares spare_steps_;
  std::size_t open_records_ = 0;
  uint64_t folded_below_ = 0;  // steps < this are folded; their records are late
  uint64_t last_step_ = ~uint64_t{0};
  StepBuf* last_buf_ = nullptr;
  // Records ingest()'s common path may still add to last_buf_ without growing its record vector
  // or passing the window's bounds (a new entry checks its own vector's room); set by
  // refresh_room() at the end of ingest_full, which every other change to the window goes
  // through. 0: every record takes ingest_full.
  std::size_t fast_room_ = 0;
  Accum acc_;
  Scratch scratch_;

  int first_device_ = -1;
  uint64_t published_below_ = 0;  // live metrics: steps below this were published
  uint64_t after_publish_ = 0;
  Scratch peek_scratch_;  // step_figures()

  std::vector<TraceEvent> trace_;
  uint64_t trace_dropped_ = 0;
  mutable std::size_t peak_held_ = 0;  // held_bytes()'s largest answer
};

}  // namespace traintime::core
