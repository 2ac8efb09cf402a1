// Region registry: names, interned region paths, per-thread nesting and per-path CPU time
// (DESIGN §3). Plain C++ with no globals: the preload owns one instance per process and passes
// clock readings in, so tests drive it with synthetic time. Pushes, pops and ranges take their
// readings in ticks (the preload's are the CPU's counter: DESIGN §9, nanoseconds only when a
// file is built), converted by the Timebase when rows are reported; step() takes nanoseconds.
// Without a Timebase ticks are nanoseconds.
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
#include <cstring>
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
#include "traintime/core/lock_order.h"
#include "traintime/core/rank_file.h"
#include "traintime/core/self_cost.h"
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
// relaxed loads by snapshots. 32 bytes, aligned: a push and a pop touch one cache line of them.
// Durations in ticks (see the top).
struct alignas(32) PathStats {
  static constexpr uint64_t kNoneClosed = ~uint64_t{0};  // min before the first close
  // Entries closed (a cross-thread range: started). A region still open is counted by the
  // snapshot from its thread's stack: the push stays off the counters, whose address is the end
  // of its longest dependent chain of loads.
  std::atomic<uint64_t> count{0};
  std::atomic<uint64_t> total{0};
  std::atomic<uint64_t> min{kNoneClosed};  // min/max over the entries that were popped
  std::atomic<uint64_t> max{0};
};

// How the registry's tick readings become nanoseconds (the preload: its clock's; unset, ticks
// are nanoseconds). Set before the first reading.
struct Timebase {
  uint64_t (*duration_ns)(uint64_t ticks) = nullptr;  // a duration in ticks
  uint64_t (*now_ns)() = nullptr;  // the clock now: the time of a step that a region's close ends
};

// Everything one thread records. Created by RegionRegistry::thread_state(); the caller keeps the
// pointer in its own thread-local storage.
class alignas(64) ThreadState {
 public:
  static constexpr int kMaxDepth = 128;

  // One call of the annotation table by the owning thread (self_cost, core/self_cost.h):
  // counted, and true when it is one to time.
  bool count_call() {
    const uint64_t n = calls_.load(std::memory_order_relaxed) + 1;
    calls_.store(n, std::memory_order_relaxed);
    return cost_timed(n);
  }
  // One tt_step of the owning thread: counted, and true when it is one to time (kStepCostEvery).
  bool count_step() {
    steps_called_.store(steps_called_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (__builtin_expect(--step_cost_left_ != 0, 1)) return false;
    step_rng_ ^= step_rng_ << 13;  // xorshift32
    step_rng_ ^= step_rng_ >> 17;
    step_rng_ ^= step_rng_ << 5;
    step_cost_left_ = 1 + step_rng_ % (2 * kStepCostEvery - 1);
    return true;
  }

  PathId current_path() const { return current_path_.load(std::memory_order_relaxed); }
  uint64_t current_entry() const { return current_entry_.load(std::memory_order_relaxed); }
  int depth() const { return static_cast<int>(static_cast<uint32_t>(depth_.load(std::memory_order_relaxed))); }

 private:
  friend class RegionRegistry;

  // Frame::stats and ChildSlot::stats: the path's counters, tagged when the region's name marks
  // a step (RegionRegistry::push_id), so that neither push nor pop looks the name up.
  static constexpr uintptr_t kStepMarker = 1;
  // One open region, 32 bytes, aligned: never split across cache lines.
  struct alignas(32) Frame {
    uintptr_t stats;  // the path's PathStats (the thread's sink_ for a frame with no path), tagged
    uint64_t start;  // ticks
    uint64_t entry;
    PathId path;  // written with set_path: the snapshot reads it from other threads
    // Steps counted when a step marker opened: a region named "step" ends a step when it
    // closes, unless tt_step was called since it opened (the one rule for every API). Only
    // written and read for markers.
    uint32_t steps_at_push;
  };
  // (parent path, name) -> child path and its counters: open addressing, grown only on the slow
  // path.
  struct alignas(32) ChildSlot {
    uint64_t key = 0;     // (parent << 32 | name) + 1; 0 = empty
    uintptr_t stats = 0;  // tagged like Frame::stats
    PathId child = kNoPath;
  };
  // Pointer -> name id cache for tt_push(const char*); direct-mapped, content-checked against
  // the registered text (the registry's word copy, which never moves: same_text).
  struct alignas(32) NameSlot {
    static constexpr int16_t kEmpty = INT16_MIN;  // no caller's category: an empty slot never matches
    const char* ptr = nullptr;
    const uint64_t* words = nullptr;  // words[-1]: the bytes of the last word that are the text's
    NameId id = kNoName;
    // The children_ index the name was last pushed at (a name is mostly pushed under one
    // parent): push goes there without hashing, and the slot's key says whether it is right.
    // The table only grows, so an index from before a growth still lies inside it.
    uint32_t child = 0;
    uint16_t nwords = 0;
    int16_t category = kEmpty;
    // The thread's constant_gen_ when `ptr` was found in read-only memory (set_constant_text):
    // while the two are equal the text is not compared. 0: compared on every hit.
    uint32_t constant = 0;
  };
  static constexpr std::size_t kNameCacheSize = 256;
  // Text hash -> name id, consulted when the pointer cache misses (a Python string is a new
  // buffer on every call): a repeated name never takes the registry's lock.
  struct TextSlot {
    uint64_t hash = 0;
    NameId id = kNoName;
  };
  static constexpr std::size_t kTextCacheSize = 512;
  // Name id (its low bits) -> the children_ index it was last pushed at, as NameSlot::child.
  static constexpr std::size_t kIdMemoSize = 256;

  explicit ThreadState(uint64_t index);

  // What push and pop touch, in one cache line.
  // Open regions (frames stack_[1..depth()]) in the low half; in the high half, pushes beyond
  // kMaxDepth not on the stack (popped without recording): push and pop test both at once.
  // Written by the owner only; relaxed so that the snapshot may read it from another thread.
  std::atomic<uint64_t> depth_{0};
  static constexpr uint64_t kOverflowOne = uint64_t{1} << 32;
  uint64_t last_entry_;  // the latest entry id: the thread's index << 40 | its count of entries
  ChildSlot* children_;
  std::size_t child_mask_;
  std::atomic<PathId> current_path_{kNoPath};
  // The registry's generation of trusted read-only texts (NameSlot::constant); changed by
  // forget_constant_text from any thread. Never 0.
  std::atomic<uint32_t> constant_gen_{1};
  std::atomic<uint64_t> current_entry_{0};
  std::atomic<uint64_t> calls_{0};  // annotation table calls (count_call), single writer
  std::atomic<uint64_t> steps_called_{0};  // tt_step calls (count_step), single writer
  uint32_t step_cost_left_ = kStepCostEvery;  // count_step's countdown and its generator
  uint32_t step_rng_ = 0x9e3779b9u;
  // stack_[0] stands for "nothing open" (no path, entry 0): the frame under the top always
  // exists, so a pop restores current_path_/current_entry_ from it without a test.
  alignas(64) Frame stack_[kMaxDepth + 1] = {};

  uint64_t tid_ = 0;  // kernel thread id of the owner
  std::unique_ptr<ChildSlot[]> child_table_;  // children_ points into it
  std::size_t child_count_ = 0;
  // child_mask_ + 1, stored by the owner as the table grows: self_cost's memory row reads it from
  // the summarising thread (child_mask_ is the owner's alone).
  std::atomic<std::size_t> child_slots_{64};
  ChildSlot no_path_;  // what a name without a path (unregistrable) resolves to: the sink
  NameSlot names_[kNameCacheSize];
  TextSlot texts_[kTextCacheSize];
  uint32_t id_child_[kIdMemoSize] = {};

  PathStats sink_;  // counted into by frames with no path; never reported
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

  // Hot path: opens the region `name` under the innermost open region of `ts`. The (parent,
  // name) pair is found in the thread's own table, which hands over the path's counters and
  // whether it marks a step; the first meeting of a pair takes the slow path (the lock).
  // Every slow case leaves by a tail call, so the common one runs without a stack frame.
  void push_id(ThreadState* ts, NameId name, uint64_t now) {
    // The table slot the name was last pushed at, checked by its key; a miss (another parent,
    // or the name's first push), a full stack or pushes beyond it still open (the high half)
    // take push_new, which probes the table and remembers the slot.
    uint32_t& last = ts->id_child_[name & (ThreadState::kIdMemoSize - 1)];
    const uint64_t key = child_key(ts->current_path_.load(std::memory_order_relaxed), name);
    const ThreadState::ChildSlot& slot = ts->children_[last];
    const uint64_t depth = ts->depth_.load(std::memory_order_relaxed);
    if (__builtin_expect((slot.key != key) | (depth >= uint64_t{ThreadState::kMaxDepth}), 0))
      return push_new(ts, name, &last, now);
    open_frame(ts, slot, depth, now);
  }

  // Hot path: tt_push(const char*). A per-thread pointer cache avoids hashing the text and
  // remembers the table slot the name was last pushed at (as push_id's memo does); the content
  // check keeps a reused buffer holding new text from being misattributed (a literal in
  // read-only memory is trusted instead: set_constant_text). An unregistrable name comes back
  // as kNoName and still occupies a frame, so the caller's push/pop stay balanced.
  void push(ThreadState* ts, const char* name, int category, uint64_t now) {
    ThreadState::NameSlot* s = cached_name(ts, name, category);
    if (__builtin_expect(s == nullptr, 0)) return push_named(ts, name, category, now);
    const uint64_t key = child_key(ts->current_path_.load(std::memory_order_relaxed), s->id);
    const ThreadState::ChildSlot& slot = ts->children_[s->child];
    const uint64_t depth = ts->depth_.load(std::memory_order_relaxed);
    if (__builtin_expect((slot.key != key) | (depth >= uint64_t{ThreadState::kMaxDepth}), 0))
      return push_new(ts, s->id, &s->child, now);
    open_frame(ts, slot, depth, now);
  }

  // Hot path: closes the innermost region of `ts`; a pop with nothing open is counted. Returns
  // true when the region ended a step (a region named "step": the one rule below).
  bool pop(ThreadState* ts, uint64_t now) {
    // Nothing open (0 wraps to the top), or pushes beyond the stack to pop first (high half).
    const uint64_t depth = ts->depth_.load(std::memory_order_relaxed);
    if (__builtin_expect(depth - 1 >= uint64_t{ThreadState::kMaxDepth}, 0)) {
      pop_without_frame(ts);
      return false;
    }
    const ThreadState::Frame& f = ts->stack_[depth];  // the high half is 0 here
    const ThreadState::Frame& under = ts->stack_[depth - 1];
    ts->depth_.store(depth - 1, std::memory_order_relaxed);
    close_stats(f, now);
    ts->current_entry_.store(under.entry, std::memory_order_relaxed);
    ts->current_path_.store(under.path, std::memory_order_relaxed);
    if (__builtin_expect((f.stats & ThreadState::kStepMarker) != 0, 0))
      return end_step_region(ts, f.steps_at_push, now);
    return false;
  }

  // Closes the open region of `ts` whose entry id is `entry` (ts->current_entry() right after
  // its push), wherever it sits on the thread's stack: NVTX ranges of different domains
  // interleave, and a pop in one domain closes that domain's innermost range even when another
  // domain opened one after it. The regions above it stay open with the paths they were opened
  // with. An entry not on the stack is counted as an unbalanced pop. No lock, no allocation.
  // Returns true when the region ended a step.
  bool close_entry(ThreadState* ts, uint64_t entry, uint64_t now);

  // Cross-thread ranges (tt_range_start/end, NVTX start/end): a top-level path named after the
  // range. Lock-free: ranges live in a fixed ring; a range still open when its slot is reused
  // kRangeSlots starts later ends as "unknown". Returns 0 when the name cannot be registered.
  uint64_t range_start(ThreadState* ts, const char* name, uint64_t now,
                       int category = kCategoryAuto);
  uint64_t range_start_id(ThreadState* ts, NameId name, uint64_t now);
  // Returns true when the range ended a step.
  bool range_end(ThreadState* ts, uint64_t range_id, uint64_t now);

  // tt_step: records the step and makes `ts` the step thread (DESIGN §4 rule 2).
  void step(ThreadState* ts, uint64_t now_ns, uint64_t samples, uint64_t tokens);

  // The one rule for "step", whatever API opened the region (tt_push, traintime.region, NVTX
  // push/pop or start/end): a region named "step" (any case) that closes ends one step, unless
  // tt_step was called since it opened — then that call already counted the step.

  // Lock-free, allocation-free: attribution context for work launched now by the thread owning
  // `ts` (may be null for a thread that never opened a region). Path: the innermost region of
  // that thread, else the innermost region of the step thread, else kNoPath; category: the
  // path's (category_of).
  LaunchContext launch_context(const ThreadState* ts) const {
    LaunchContext ctx;
    CategoryMemo memo;
    launch_context(ts, &ctx, &memo);
    return ctx;
  }
  // The launching thread's memo of the last path launch_context() gave the category of: a
  // path's category never changes once interned, so the launches of one region (a layer's
  // kernels) take it from here, without a look-up. Starts as kNoPath's answer.
  struct CategoryMemo {
    PathId path = kNoPath;
    Category category = Category::kOther;
  };
  // The same, written field by field into *out (the launch callback's thread-local copy), the
  // category through the calling thread's *memo.
  void launch_context(const ThreadState* ts, LaunchContext* out, CategoryMemo* memo) const noexcept;

  // Lock-free. kOther for kNoPath or an unknown id. A path's category is fixed when the path is
  // interned, before its id is published, and never changes.
  Category category_of(PathId path) const noexcept;
  // "step/forward/layer3"; empty for kNoPath or an unknown id.
  std::string path_string(PathId path) const;
  // Number of interned paths (PathIds 1..path_count() are valid).
  uint32_t path_count() const { return path_count_.load(std::memory_order_acquire); }

  // One row per path that was entered, with count and CPU time summed over all threads.
  // When `ids` is not null it receives the PathId of each row (same order).
  std::vector<RegionRow> snapshot_rows(std::vector<PathId>* ids = nullptr) const;
  // The CPU side of the rank file: snapshot_rows() with their ids, every path's name, the step
  // summary, and the "annotations" section: counters for what the hot path counted instead of
  // failing (unbalanced pops, regions nested too deep, unknown range ends, names dropped on a
  // full table), each with its warning, and a note for a run with only warm-up steps.
  // A terminating signal's write gives a bounded `deadline` (lock_order.h): when the registry's
  // or the step tracker's lock is not had by then (the thread the signal stopped holds it), the
  // summary last handed out, with the counter summary_from_last_publish saying so.
  CpuSummary summary(const Deadline& deadline = Deadline::never()) const;
  uint64_t unbalanced_pops() const;
  uint64_t depth_overflows() const;
  uint64_t unknown_range_ends() const { return unknown_range_ends_.load(std::memory_order_relaxed); }
  // What the annotation calls cost (self_cost, core/self_cost.h): the preload times one in
  // kCostEvery of them (count_call) and each tt_step, adding here; the rows are in summary()'s
  // section, with the registry's own memory.
  CostSums& call_cost() const { return call_cost_; }
  CostSums& step_cost() const { return step_cost_; }
  // The annotation calls' time so far (the marks of self_cost.pct, lock-free); with `calls`, the
  // calls counted on every thread too (takes the registry's lock, waiting until `deadline`: not
  // at a step's mark); false when the lock was not had, the calls left 0.
  bool cost_so_far(CostSoFar& c, uint64_t pair_ticks, const Deadline* calls) const {
    c.at(SampledPath::kSteps) = step_cost_.so_far(pair_ticks);
    c.at(SampledPath::kAnnotations) = call_cost_.so_far(pair_ticks);
    return calls == nullptr || annotation_calls(*calls, &c.calls_at(SampledPath::kAnnotations),
                                                &c.calls_at(SampledPath::kSteps));
  }
  bool annotation_calls(const Deadline& deadline, uint64_t* calls, uint64_t* steps) const;

  // Name look-ups that had to take the registry's lock (a name new to the calling thread).
  uint64_t locked_name_lookups() const { return locked_lookups_.load(std::memory_order_relaxed); }
  // Registrations refused because a table was full.
  uint64_t dropped_names() const { return dropped_.load(std::memory_order_relaxed); }

  // How tick readings become nanoseconds; set before the first reading.
  void set_timebase(const Timebase& tb) { timebase_ = tb; }
  // Which name buffers may skip the text check of a pointer hit (tt_push, NVTX): `in_read_only`
  // tells whether a pointer lies in read-only memory of a loaded object, where a string
  // literal's text cannot change (support::in_read_only_segment). Asked once per pointer and
  // thread, on the slow path. Unset: every hit compares the text. Set before the first reading.
  void set_constant_text(bool (*in_read_only)(const void*)) { in_read_only_ = in_read_only; }
  // An object was unloaded: a trusted address may now hold another object's text. Every thread
  // compares texts again until its pointer cache refills. Any thread, any time.
  void forget_constant_text();

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
    // For same_text: the mask of the last word's bytes that belong to the text, then the text
    // with its NUL, zero-padded to whole words: nwords of them (clamped to 0xFFFF: such a name
    // never passes same_text's page test). NameSlot::words points at the text.
    std::unique_ptr<uint64_t[]> words;
    uint16_t nwords = 0;
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
    std::atomic<uint64_t> start{0};  // ticks
    std::atomic<bool> step_marker{false};
    std::atomic<uint32_t> steps_at_start{0};
  };

  static uint64_t child_key(PathId parent, NameId name) {
    return ((static_cast<uint64_t>(parent) << 32) | name) + 1;
  }
  static std::size_t child_hash(uint64_t key, std::size_t mask) {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 40) & mask;
  }
  static std::size_t name_slot(const char* name, int category) {
    // Categories share the cache: the slot remembers the category its id was registered with.
    const auto bits = reinterpret_cast<uintptr_t>(name);
    return ((bits >> 3) ^ (bits >> 11) ^ static_cast<unsigned>(category + 1)) &
           (ThreadState::kNameCacheSize - 1);
  }
  // The pointer cache's slot of `name` when it holds this pointer and its text still matches:
  // read-only text is trusted without a look (NameSlot::constant), any other is compared.
  ThreadState::NameSlot* cached_name(ThreadState* ts, const char* name, int category) const {
    ThreadState::NameSlot& s = ts->names_[name_slot(name, category)];
    if (__builtin_expect(s.ptr != name || s.category != category, 0)) return nullptr;
    if (__builtin_expect(s.constant == ts->constant_gen_.load(std::memory_order_relaxed), 1)) return &s;
    if (!same_text(name, s)) return nullptr;
    // Trusted before an unload: asked again, once (out of line).
    if (__builtin_expect(s.constant != 0, 0)) retrust(ts, &s);
    return &s;
  }
  void retrust(ThreadState* ts, ThreadState::NameSlot* s) const;
  // NameSlot::constant for `name`: the thread's generation when it lies in read-only memory.
  uint32_t constant_stamp(const ThreadState* ts, const char* name) const;
  NameId name_for_pointer(ThreadState* ts, const char* name, int category) {
    const ThreadState::NameSlot* s = cached_name(ts, name, category);
    return s ? s->id : name_slow(ts, name, category);
  }
  static PathStats& stats_of(uintptr_t tagged) {
    return *reinterpret_cast<PathStats*>(tagged & ~ThreadState::kStepMarker);
  }
  // A frame's region closes: counted, and its time recorded.
  static void close_stats(const ThreadState::Frame& f, uint64_t now) {
    PathStats& s = stats_of(f.stats);
    s.count.store(s.count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    record(s, __builtin_expect(now >= f.start, 1) ? now - f.start : 0);
  }
  static void record(PathStats& s, uint64_t ticks) {
    s.total.store(s.total.load(std::memory_order_relaxed) + ticks, std::memory_order_relaxed);
    const uint64_t mn = s.min.load(std::memory_order_relaxed);
    const uint64_t mx = s.max.load(std::memory_order_relaxed);
    // Stored only when they move (seldom, once a path has been entered a few times): stores are
    // much of what a pop costs on a core that retires one store a cycle.
    if (__builtin_expect(ticks < mn, 0)) s.min.store(ticks, std::memory_order_relaxed);
    if (__builtin_expect(ticks > mx, 0)) s.max.store(ticks, std::memory_order_relaxed);
  }

  // Whether the NUL-terminated `s` is the text of `slot`, compared a word at a time (a name of
  // 8 to 15 characters is two loads and compares, no call). Every word read from `s` lies in the
  // page of its first byte, which is mapped, so reading past its NUL (the last word's masked
  // bytes, or the next word after a shorter text) cannot fault; when the words would reach into
  // the next page the answer is false and the slow path compares with strcmp. Those bytes may
  // lie outside `s`'s object: the sanitizers are told not to check these reads.
#if defined(__clang__)
  __attribute__((no_sanitize("address", "hwaddress", "thread", "memory")))
#else
  __attribute__((no_sanitize_address, no_sanitize("thread")))
#endif
  static bool same_text(const char* s, const ThreadState::NameSlot& slot) {
    constexpr uintptr_t kPage = 4096;  // the smallest page size of x86-64 and aarch64
    const uint32_t n = slot.nwords;
    if ((reinterpret_cast<uintptr_t>(s) & (kPage - 1)) + 8 * uintptr_t{n} > kPage) return false;
    // The compiler is not to reason about the object `s` points into (its bounds are not ours).
    asm("" : "+r"(s));
    const uint64_t* words = slot.words;
    uint64_t w;
    std::memcpy(&w, s + 8 * (n - 1), 8);
    if (((w ^ words[n - 1]) & words[-1]) != 0) return false;  // the last word, masked
    if (n == 1) return true;
    std::memcpy(&w, s, 8);
    if (w != words[0]) return false;
    // The words between: only names of 17 characters or more have any.
    for (uint32_t i = 1; i + 1 < n; ++i) {
      std::memcpy(&w, s + 8 * i, 8);
      if (w != words[i]) return false;
    }
    return true;
  }

  // Out of line: pop reaches it by a tail call and keeps nothing in callee-saved registers.
  bool end_step_region(ThreadState* ts, uint32_t steps_at_open, uint64_t now);
  // The push of a frame for the path in `slot` (push_id's table or the slow path's).
  // `open`: the regions open now (the high half is 0: the caller tested it).
  void open_frame(ThreadState* ts, const ThreadState::ChildSlot& slot, uint64_t open, uint64_t now) {
    const uint64_t depth = open + 1;
    const uintptr_t stats = slot.stats;
    const PathId path = slot.child;
    const uint64_t entry = ++ts->last_entry_;
    ThreadState::Frame& f = ts->stack_[depth];
    f.stats = stats;
    f.start = now;
    f.entry = entry;
    set_path(f, path);
    if (__builtin_expect((stats & ThreadState::kStepMarker) != 0, 0)) f.steps_at_push = steps_.count();
    ts->depth_.store(depth, std::memory_order_relaxed);
    ts->current_entry_.store(entry, std::memory_order_relaxed);
    ts->current_path_.store(path, std::memory_order_relaxed);
  }
  static void set_path(ThreadState::Frame& f, PathId path) { __atomic_store_n(&f.path, path, __ATOMIC_RELAXED); }
  // category_of(path), kept in *memo once the path is published here (launch_context's miss).
  Category remember_category(PathId path, CategoryMemo* memo) const noexcept;
  // The slow paths of push_id and pop (out of line).
  static void push_overflow(ThreadState* ts);
  // A push whose remembered children_ index (*last) was not the pair's: probes, and remembers.
  void push_new(ThreadState* ts, NameId name, uint32_t* last, uint64_t now);
  void push_named(ThreadState* ts, const char* name, int category, uint64_t now);  // push's miss
  static void pop_without_frame(ThreadState* ts);
  // The slot of (parent, name) in the thread's table: probed on, else made (child_slow).
  const ThreadState::ChildSlot* find_child(ThreadState* ts, PathId parent, NameId name);
  const ThreadState::ChildSlot* child_slow(ThreadState* ts, PathId parent, NameId name);
  PathId intern_path(PathId parent, NameId name);  // needs mu_
  // Every thread's state (they live as long as the registry), false when mu_ was not had before
  // `deadline`.
  bool threads_until(const Deadline& deadline, std::vector<const ThreadState*>* out) const;
  std::vector<RegionRow> rows_of(const std::vector<const ThreadState*>& threads,
                                 std::vector<PathId>* ids) const;
  template <class Counter>
  static uint64_t sum_over(const std::vector<const ThreadState*>& threads, Counter counter);
  // summary()'s figures, false when a lock was not had before `deadline`.
  bool summary_until(const Deadline& deadline, CpuSummary* out) const;
  NameId register_locked(std::string_view name, int category);  // needs mu_
  // The name and path tables' memory (self_cost.memory), read lock-free from what is published.
  std::size_t names_bytes() const;
  NameId name_slow(ThreadState* ts, const char* name, int category);

  CategoryRules rules_;
  mutable std::mutex mu_;  // a leaf (lock_order.h)
  mutable LastPublished<CpuSummary> published_;  // what summary() last handed out
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
  mutable CostSums call_cost_;  // written by timed calls of any thread (relaxed atomics)
  mutable CostSums step_cost_;
  Timebase timebase_;
  bool (*in_read_only_)(const void*) = nullptr;
  uint32_t constant_gen_ = 1;  // under mu_: the generation new threads start with
};

}  // namespace traintime::core
