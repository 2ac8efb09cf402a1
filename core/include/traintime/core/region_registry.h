// Region registry: names, interned region paths, per-thread nesting and per-path CPU time
// (DESIGN §3). Plain C++ with no globals: the preload owns one instance per process and passes
// clock readings in, so tests drive it with synthetic time.
//
// Threading. Every recording thread gets a ThreadState (thread_state()), owned by the registry
// and never freed before the registry, so the data of exited threads survives until the rank
// file is written. push_id()/pop() touch only the caller's ThreadState: no lock, no allocation,
// no string work. The first time a thread meets a (parent, name) pair it takes the slow path
// under the registry mutex. snapshot(), category_of(), path_string() and launch_context() may
// run on any thread while others record: counters are single-writer relaxed atomics and the
// path table is a chunked array that never moves, published through an atomic node count.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "traintime/core/activity.h"
#include "traintime/core/category.h"
#include "traintime/core/category_rules.h"
#include "traintime/core/chunked_array.h"
#include "traintime/core/rank_file.h"
#include "traintime/core/step_tracker.h"
#include "traintime/core/summaries.h"

namespace traintime::core {

// Id of a registered (name, explicit category) pair; 0 means "not registered".
using NameId = uint32_t;
inline constexpr NameId kNoName = 0;

// Category argument meaning "derive it from the name rules" (TT_CATEGORY_AUTO).
inline constexpr int kCategoryAuto = -1;

class RegionRegistry;

// Counters of one path as seen by one thread. Single writer (the owning thread), read with
// relaxed loads by snapshots.
struct PathStats {
  std::atomic<uint64_t> count{0};  // entries (counted at push, so open regions show up)
  std::atomic<uint64_t> total_ns{0};
  std::atomic<uint64_t> min_ns{0};
  std::atomic<uint64_t> max_ns{0};
  std::atomic<uint64_t> closed{0};  // entries that were popped (min/max cover these)
};

// Everything one thread records. Created by RegionRegistry::thread_state(); the caller keeps the
// pointer in its own thread-local storage.
class ThreadState {
 public:
  static constexpr int kMaxDepth = 128;

  PathId current_path() const { return current_path_.load(std::memory_order_relaxed); }
  uint64_t current_entry() const { return current_entry_.load(std::memory_order_relaxed); }
  int depth() const { return depth_; }

 private:
  friend class RegionRegistry;

  struct Frame {
    PathId path;
    uint64_t start_ns;
    uint64_t entry;
    // A region named "step" ends a step when it closes, unless tt_step was called since it
    // opened (the one rule for every API: RegionRegistry::push_id).
    bool step_marker;
    uint32_t steps_at_push;
  };
  // (parent path, name) -> child path: open addressing, grown only on the slow path.
  struct ChildSlot {
    uint64_t key = 0;  // (parent << 32 | name) + 1; 0 = empty
    PathId child = kNoPath;
  };
  // Pointer -> name id cache for tt_push(const char*); direct-mapped, content-checked.
  struct NameSlot {
    const char* ptr = nullptr;
    NameId id = kNoName;
  };
  static constexpr std::size_t kNameCacheSize = 256;
  // Text hash -> name id, consulted when the pointer cache misses (a Python string is a new
  // buffer on every call): a repeated name never takes the registry's lock.
  struct TextSlot {
    uint64_t hash = 0;
    NameId id = kNoName;
  };
  static constexpr std::size_t kTextCacheSize = 512;

  explicit ThreadState(uint64_t index) : entry_base_(index << 40) {}

  uint64_t tid_ = 0;  // kernel thread id of the owner
  Frame stack_[kMaxDepth];
  int depth_ = 0;
  int overflow_ = 0;  // pushes beyond kMaxDepth not on the stack (popped without recording)
  uint64_t entries_ = 0;
  const uint64_t entry_base_;
  std::atomic<PathId> current_path_{kNoPath};
  std::atomic<uint64_t> current_entry_{0};

  std::vector<ChildSlot> children_ = std::vector<ChildSlot>(64);
  std::size_t child_count_ = 0;
  NameSlot names_[kNameCacheSize];
  TextSlot texts_[kTextCacheSize];

  ChunkedArray<PathStats, 10, 4096> stats_;
  std::atomic<uint64_t> unbalanced_pops_{0};
  std::atomic<uint64_t> depth_overflows_{0};
};

class RegionRegistry {
 public:
  // warmup_steps: TRAINTIME_WARMUP_STEPS; step_detail: TRAINTIME_STEP_DETAIL (StepTracker).
  explicit RegionRegistry(CategoryRules rules = CategoryRules::defaults(), uint64_t warmup_steps = 2,
                          uint32_t step_detail = 64);
  RegionRegistry(const RegionRegistry&) = delete;
  RegionRegistry& operator=(const RegionRegistry&) = delete;

  // A new ThreadState for the calling thread (slow path; call once per thread).
  ThreadState* thread_state();

  // Registers (name, category) once and returns its id; the same pair always gets the same id.
  // category is a Category value or kCategoryAuto. Returns kNoName for null/empty names, an
  // invalid category or a full table.
  NameId register_name(std::string_view name, int category);

  // Hot path: opens the region `name` under the innermost open region of `ts`.
  void push_id(ThreadState* ts, NameId name, uint64_t now_ns) {
    PathId parent = ts->depth_ > 0 ? ts->stack_[ts->depth_ - 1].path : kNoPath;
    if (ts->overflow_ > 0 || ts->depth_ == ThreadState::kMaxDepth) {
      ++ts->overflow_;
      ts->depth_overflows_.store(ts->depth_overflows_.load(std::memory_order_relaxed) + 1,
                                 std::memory_order_relaxed);
      return;
    }
    PathId path = lookup_child(ts, parent, name);
    if (path == kNoPath) path = child_slow(ts, parent, name);
    uint64_t entry = ts->entry_base_ | ++ts->entries_;
    const bool marker = path != kNoPath && names_[name].step_marker;
    ts->stack_[ts->depth_++] = ThreadState::Frame{path, now_ns, entry, marker, marker ? steps_.count() : 0};
    if (path != kNoPath) {
      PathStats& s = ts->stats_[path];
      s.count.store(s.count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    ts->current_entry_.store(entry, std::memory_order_relaxed);
    ts->current_path_.store(path, std::memory_order_relaxed);
  }

  // Hot path: tt_push(const char*). A per-thread pointer cache avoids hashing the text; the
  // content check keeps a reused buffer holding new text from being misattributed.
  void push(ThreadState* ts, const char* name, int category, uint64_t now_ns);

  // Hot path: closes the innermost region of `ts`; a pop with nothing open is counted.
  void pop(ThreadState* ts, uint64_t now_ns) {
    if (ts->overflow_ > 0) {
      --ts->overflow_;
      return;
    }
    if (ts->depth_ == 0) {
      ts->unbalanced_pops_.store(ts->unbalanced_pops_.load(std::memory_order_relaxed) + 1,
                                 std::memory_order_relaxed);
      return;
    }
    const ThreadState::Frame f = ts->stack_[--ts->depth_];
    if (f.path != kNoPath) record(ts, f.path, now_ns >= f.start_ns ? now_ns - f.start_ns : 0);
    if (f.step_marker) end_step_region(ts, f.steps_at_push, now_ns);
    if (ts->depth_ > 0) {
      const ThreadState::Frame& top = ts->stack_[ts->depth_ - 1];
      ts->current_entry_.store(top.entry, std::memory_order_relaxed);
      ts->current_path_.store(top.path, std::memory_order_relaxed);
    } else {
      ts->current_entry_.store(0, std::memory_order_relaxed);
      ts->current_path_.store(kNoPath, std::memory_order_relaxed);
    }
  }

  // Closes the open region of `ts` whose entry id is `entry` (ts->current_entry() right after
  // its push), wherever it sits on the thread's stack: NVTX ranges of different domains
  // interleave, and a pop in one domain closes that domain's innermost range even when another
  // domain opened one after it. The regions above it stay open with the paths they were opened
  // with. An entry not on the stack is counted as an unbalanced pop. No lock, no allocation.
  void close_entry(ThreadState* ts, uint64_t entry, uint64_t now_ns);

  // Cross-thread ranges (tt_range_start/end, NVTX start/end): a top-level path named after the
  // range. Lock-free: ranges live in a fixed ring; a range still open when its slot is reused
  // kRangeSlots starts later ends as "unknown". Returns 0 when the name cannot be registered.
  uint64_t range_start(ThreadState* ts, const char* name, uint64_t now_ns,
                       int category = kCategoryAuto);
  uint64_t range_start_id(ThreadState* ts, NameId name, uint64_t now_ns);
  void range_end(ThreadState* ts, uint64_t range_id, uint64_t now_ns);

  // tt_step: records the step and makes `ts` the step thread (DESIGN §4 rule 2).
  void step(ThreadState* ts, uint64_t now_ns, uint64_t samples, uint64_t tokens);

  // The one rule for "step", whatever API opened the region (tt_push, traintime.region, NVTX
  // push/pop or start/end): a region named "step" (any case) that closes ends one step, unless
  // tt_step was called since it opened — then that call already counted the step.

  // Lock-free, allocation-free: attribution context for work launched now by the thread owning
  // `ts` (may be null for a thread that never opened a region). Path: the innermost region of
  // that thread, else the innermost region of the step thread, else kNoPath.
  LaunchContext launch_context(const ThreadState* ts) const;

  // Lock-free. kOther for kNoPath or an unknown id.
  Category category_of(PathId path) const;
  // "step/forward/layer3"; empty for kNoPath or an unknown id.
  std::string path_string(PathId path) const;
  // Number of interned paths (PathIds 1..path_count() are valid).
  uint32_t path_count() const { return path_count_.load(std::memory_order_acquire); }

  // One row per path that was entered, with count and CPU time summed over all threads.
  // When `ids` is not null it receives the PathId of each row (same order).
  std::vector<RegionRow> snapshot_rows(std::vector<PathId>* ids = nullptr) const;
  // The CPU side of the rank file: snapshot_rows() with their ids, every path's name, the step
  // summary, and warnings for what the hot path counted instead of failing (unbalanced pops,
  // regions nested too deep, unknown range ends, names dropped on a full table, a run with
  // only warm-up steps).
  CpuSummary summary() const;
  uint64_t unbalanced_pops() const;
  uint64_t depth_overflows() const;
  uint64_t unknown_range_ends() const { return unknown_range_ends_.load(std::memory_order_relaxed); }
  // Name look-ups that had to take the registry's lock (a name new to the calling thread).
  uint64_t locked_name_lookups() const { return locked_lookups_.load(std::memory_order_relaxed); }
  // Registrations refused because a table was full.
  uint64_t dropped_names() const { return dropped_.load(std::memory_order_relaxed); }

  StepTracker& steps() { return steps_; }
  const StepTracker& steps() const { return steps_; }

  // Capacity limits (fixed so readers never see memory move).
  static constexpr std::size_t kMaxPaths = (std::size_t{1} << 10) * 4096 - 1;
  static constexpr std::size_t kRangeSlots = 4096;

 private:
  struct NameEntry {
    std::string text;
    int category = kCategoryAuto;
    bool step_marker = false;  // is_step_marker(text)
  };
  struct PathNode {
    PathId parent = kNoPath;
    NameId name = kNoName;
    Category category = Category::kOther;
    std::string path;
  };
  struct RangeSlot {
    std::atomic<uint64_t> id{0};
    std::atomic<PathId> path{kNoPath};
    std::atomic<uint64_t> start_ns{0};
    std::atomic<bool> step_marker{false};
    std::atomic<uint32_t> steps_at_start{0};
  };

  static uint64_t child_key(PathId parent, NameId name) {
    return ((static_cast<uint64_t>(parent) << 32) | name) + 1;
  }
  static std::size_t child_hash(uint64_t key, std::size_t mask) {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 40) & mask;
  }
  static PathId lookup_child(const ThreadState* ts, PathId parent, NameId name) {
    const uint64_t key = child_key(parent, name);
    const std::size_t mask = ts->children_.size() - 1;
    for (std::size_t i = child_hash(key, mask);; i = (i + 1) & mask) {
      const ThreadState::ChildSlot& s = ts->children_[i];
      if (s.key == key) return s.child;
      if (s.key == 0) return kNoPath;
    }
  }
  static void record(ThreadState* ts, PathId path, uint64_t ns) {
    PathStats& s = ts->stats_[path];
    const uint64_t closed = s.closed.load(std::memory_order_relaxed);
    s.total_ns.store(s.total_ns.load(std::memory_order_relaxed) + ns, std::memory_order_relaxed);
    if (closed == 0 || ns < s.min_ns.load(std::memory_order_relaxed))
      s.min_ns.store(ns, std::memory_order_relaxed);
    if (ns > s.max_ns.load(std::memory_order_relaxed)) s.max_ns.store(ns, std::memory_order_relaxed);
    s.closed.store(closed + 1, std::memory_order_relaxed);
  }

  void end_step_region(ThreadState* ts, uint32_t steps_at_open, uint64_t now_ns) {
    if (steps_.count() == steps_at_open) step(ts, now_ns, 0, 0);
  }
  PathId child_slow(ThreadState* ts, PathId parent, NameId name);
  PathId intern_path(PathId parent, NameId name);  // needs mu_
  NameId register_locked(std::string_view name, int category);  // needs mu_
  NameId name_for_pointer(ThreadState* ts, const char* name, int category);

  CategoryRules rules_;
  mutable std::mutex mu_;
  // Names: read lock-free by the content check; written under mu_.
  ChunkedArray<NameEntry, 10, 1024> names_;
  std::atomic<uint32_t> name_count_{0};
  std::unordered_map<std::string, NameId> name_index_;  // key: category byte + text
  // Paths: read lock-free (category_of); written under mu_.
  ChunkedArray<PathNode, 10, 4096> paths_;
  std::atomic<uint32_t> path_count_{0};
  std::unordered_map<uint64_t, PathId> path_index_;  // child_key -> path
  std::deque<std::unique_ptr<ThreadState>> threads_;
  std::atomic<const ThreadState*> step_thread_{nullptr};
  std::atomic<const ThreadState*> first_thread_{nullptr};

  std::unique_ptr<RangeSlot[]> ranges_{new RangeSlot[kRangeSlots]};
  std::atomic<uint64_t> next_range_{0};
  std::atomic<uint64_t> unknown_range_ends_{0};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> locked_lookups_{0};

  StepTracker steps_;
};

}  // namespace traintime::core
