#include "traintime/core/region_registry.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "traintime/core/category_rules.h"
#include "traintime/core/core_counters.h"

namespace traintime::core {

ThreadState::ThreadState(uint64_t index)
    : last_entry_(index << 40), child_table_(new ChildSlot[64]) {
  children_ = child_table_.get();
  child_mask_ = 63;
  no_path_.stats = reinterpret_cast<uintptr_t>(&sink_);
}

RegionRegistry::RegionRegistry(CategoryRules rules, uint64_t warmup_steps, uint32_t step_detail)
    : rules_(std::move(rules)), steps_(warmup_steps, step_detail) {
  // PathId 0 and NameId 0 are the "none" values: reserve slot 0 of both tables.
  names_.ensure(0);
  paths_.ensure(0);
}

ThreadState* RegionRegistry::thread_state() {
  std::lock_guard<std::mutex> lock(mu_);
  threads_.emplace_back(new ThreadState(threads_.size() + 1));
  ThreadState* ts = threads_.back().get();
  // on the thread it is for; the system call, since glibc's gettid() is from 2.30 and the wheel's
  // binaries run on 2.28
  ts->tid_ = static_cast<uint64_t>(::syscall(SYS_gettid));
  ts->constant_gen_.store(constant_gen_, std::memory_order_relaxed);
  const ThreadState* none = nullptr;
  first_thread_.compare_exchange_strong(none, ts, std::memory_order_release);
  return ts;
}

uint32_t RegionRegistry::constant_stamp(const ThreadState* ts, const char* name) const {
  // The generation before the question: an unload between the two leaves the slot untrusted.
  const uint32_t gen = ts->constant_gen_.load(std::memory_order_relaxed);
  const int saved = errno;
  const bool read_only = in_read_only_ != nullptr && in_read_only_(name);
  errno = saved;
  return read_only ? gen : 0;
}

void RegionRegistry::retrust(ThreadState* ts, ThreadState::NameSlot* s) const {
  s->constant = constant_stamp(ts, s->ptr);
}

void RegionRegistry::forget_constant_text() {
  std::lock_guard<std::mutex> lock(mu_);
  if (++constant_gen_ == 0) constant_gen_ = 1;  // 0 is "never trusted"
  for (const auto& t : threads_) t->constant_gen_.store(constant_gen_, std::memory_order_relaxed);
}

NameId RegionRegistry::register_name(std::string_view name, int category) {
  std::lock_guard<std::mutex> lock(mu_);
  return register_locked(name, category);
}

NameId RegionRegistry::register_locked(std::string_view name, int category) {
  if (name.empty()) return kNoName;
  if (category != kCategoryAuto &&
      (category < 0 || category > static_cast<int>(kLastRegionCategory))) {
    return kNoName;
  }
  std::string key;
  key.reserve(name.size() + 1);
  key.push_back(static_cast<char>(category + 1));
  key.append(name);
  auto it = name_index_.find(key);
  if (it != name_index_.end()) return it->second;
  const uint32_t id = name_count_.load(std::memory_order_relaxed) + 1;
  if (!names_.ensure(id)) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return kNoName;
  }
  NameEntry& e = names_[id];
  e.text.assign(name);
  e.category = category;
  e.step_marker = is_step_marker(name);
  const std::size_t bytes = name.size() + 1;  // with the NUL
  const std::size_t words = (bytes + 7) / 8;
  e.words.reset(new uint64_t[words + 1]());
  std::memcpy(e.words.get() + 1, name.data(), name.size());
  e.nwords = static_cast<uint16_t>(std::min<std::size_t>(words, 0xFFFF));
  unsigned char mask[8] = {};
  std::memset(mask, 0xFF, bytes - 8 * (words - 1));
  std::memcpy(e.words.get(), mask, 8);
  name_index_.emplace(std::move(key), id);
  name_count_.store(id, std::memory_order_release);
  return id;
}

NameId RegionRegistry::name_slow(ThreadState* ts, const char* name, int category) {
  if (!name) return kNoName;
  // The same text from another buffer: found by its hash, checked by content, no lock.
  uint64_t hash = 0xcbf29ce484222325ULL ^ static_cast<uint64_t>(category + 1);
  for (const char* c = name; *c != '\0'; ++c) hash = (hash ^ static_cast<unsigned char>(*c)) * 0x100000001b3ULL;
  hash |= 1;  // 0 marks an empty slot
  ThreadState::TextSlot& t = ts->texts_[hash & (ThreadState::kTextCacheSize - 1)];
  NameId id = kNoName;
  if (t.hash == hash && t.id != kNoName) {
    const NameEntry& e = names_[t.id];
    if (e.category == category && std::strcmp(e.text.c_str(), name) == 0) id = t.id;
  }
  if (id == kNoName) {
    const int saved = errno;  // the preload calls this from the application's threads
    locked_lookups_.fetch_add(1, std::memory_order_relaxed);
    id = register_name(name, category);
    errno = saved;
    if (id != kNoName) t = ThreadState::TextSlot{hash, id};
  }
  // A name that cannot be registered takes this path every time; so does one whose buffer
  // same_text cannot read a word at a time.
  if (id != kNoName) {
    const NameEntry& e = names_[id];
    ThreadState::NameSlot& s = ts->names_[name_slot(name, category)];
    s.ptr = name;
    s.words = e.words.get() + 1;
    s.id = id;
    s.child = 0;
    s.nwords = e.nwords;
    s.constant = constant_stamp(ts, name);
    s.category = static_cast<int16_t>(category);
  }
  return id;
}

bool RegionRegistry::close_entry(ThreadState* ts, uint64_t entry, uint64_t now) {
  int at = ts->depth();
  while (at > 0 && ts->stack_[at].entry != entry) --at;
  if (at == 0) {
    ts->unbalanced_pops_.store(ts->unbalanced_pops_.load(std::memory_order_relaxed) + 1,
                               std::memory_order_relaxed);
    return false;
  }
  if (at == ts->depth()) return pop(ts, now);
  const ThreadState::Frame f = ts->stack_[at];
  close_stats(f, now);
  for (int i = at; i < ts->depth(); ++i) {
    ThreadState::Frame& to = ts->stack_[i];
    const ThreadState::Frame& from = ts->stack_[i + 1];
    to.stats = from.stats;
    to.start = from.start;
    to.entry = from.entry;
    set_path(to, from.path);
    to.steps_at_push = from.steps_at_push;
  }
  // The low half; the innermost region is unchanged: current_path/current_entry stay.
  ts->depth_.store(ts->depth_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  if (f.stats & ThreadState::kStepMarker) return end_step_region(ts, f.steps_at_push, now);
  return false;
}

__attribute__((noinline)) bool RegionRegistry::end_step_region(ThreadState* ts, uint32_t steps_at_open,
                                                                uint64_t now) {
  if (steps_.count() != steps_at_open) return false;
  step(ts, timebase_.now_ns != nullptr ? timebase_.now_ns() : now, 0, 0);
  return true;
}

void RegionRegistry::push_overflow(ThreadState* ts) {
  ts->depth_.store(ts->depth_.load(std::memory_order_relaxed) + ThreadState::kOverflowOne,
                   std::memory_order_relaxed);
  ts->depth_overflows_.store(ts->depth_overflows_.load(std::memory_order_relaxed) + 1,
                             std::memory_order_relaxed);
}

void RegionRegistry::push_new(ThreadState* ts, NameId name, uint32_t* last, uint64_t now) {
  const uint64_t depth = ts->depth_.load(std::memory_order_relaxed);
  if (depth >= uint64_t{ThreadState::kMaxDepth}) return push_overflow(ts);
  const ThreadState::ChildSlot* slot = find_child(ts, ts->current_path(), name);
  if (slot != &ts->no_path_) *last = static_cast<uint32_t>(slot - ts->children_);
  open_frame(ts, *slot, depth, now);
}

void RegionRegistry::push_named(ThreadState* ts, const char* name, int category, uint64_t now) {
  push_id(ts, name_slow(ts, name, category), now);
}

void RegionRegistry::pop_without_frame(ThreadState* ts) {
  const uint64_t depth = ts->depth_.load(std::memory_order_relaxed);
  if (depth >= ThreadState::kOverflowOne) {
    ts->depth_.store(depth - ThreadState::kOverflowOne, std::memory_order_relaxed);
    return;
  }
  ts->unbalanced_pops_.store(ts->unbalanced_pops_.load(std::memory_order_relaxed) + 1,
                             std::memory_order_relaxed);
}

const ThreadState::ChildSlot* RegionRegistry::find_child(ThreadState* ts, PathId parent, NameId name) {
  const uint64_t key = child_key(parent, name);
  for (std::size_t i = child_hash(key, ts->child_mask_);; i = (i + 1) & ts->child_mask_) {
    const ThreadState::ChildSlot& s = ts->children_[i];
    if (s.key == key) return &s;
    if (s.key == 0) return child_slow(ts, parent, name);
  }
}

const ThreadState::ChildSlot* RegionRegistry::child_slow(ThreadState* ts, PathId parent, NameId name) {
  if (name == kNoName) return &ts->no_path_;
  // Called from push on the application's threads: allocation must not leak into errno.
  struct ErrnoGuard {
    int saved = errno;
    ~ErrnoGuard() { errno = saved; }
  } errno_guard;
  PathId path;
  bool marker;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Ids come from callers (Python passes integers): never index past the registered names.
    if (name > name_count_.load(std::memory_order_relaxed)) return &ts->no_path_;
    path = intern_path(parent, name);
    marker = names_[name].step_marker;
  }
  if (path == kNoPath) return &ts->no_path_;
  ts->stats_.ensure(path);
  // Grow at half load so probes stay short; only the owning thread reads this table.
  if ((ts->child_count_ + 1) * 2 > ts->child_mask_ + 1) {
    const std::size_t size = (ts->child_mask_ + 1) * 2;
    std::unique_ptr<ThreadState::ChildSlot[]> bigger(new ThreadState::ChildSlot[size]);
    for (std::size_t j = 0; j <= ts->child_mask_; ++j) {
      const ThreadState::ChildSlot& s = ts->children_[j];
      if (s.key == 0) continue;
      std::size_t i = child_hash(s.key, size - 1);
      while (bigger[i].key != 0) i = (i + 1) & (size - 1);
      bigger[i] = s;
    }
    ts->child_table_ = std::move(bigger);
    ts->children_ = ts->child_table_.get();
    ts->child_mask_ = size - 1;
    ts->child_slots_.store(size, std::memory_order_relaxed);
  }
  const uint64_t key = child_key(parent, name);
  std::size_t i = child_hash(key, ts->child_mask_);
  while (ts->children_[i].key != 0) i = (i + 1) & ts->child_mask_;
  ThreadState::ChildSlot& slot = ts->children_[i];
  slot.key = key;
  slot.stats = reinterpret_cast<uintptr_t>(&ts->stats_[path]) | (marker ? ThreadState::kStepMarker : 0);
  slot.child = path;
  ++ts->child_count_;
  return &slot;
}

PathId RegionRegistry::intern_path(PathId parent, NameId name) {
  const uint64_t key = child_key(parent, name);
  auto it = path_index_.find(key);
  if (it != path_index_.end()) return it->second;
  const uint32_t id = path_count_.load(std::memory_order_relaxed) + 1;
  if (id > kMaxPaths || !paths_.ensure(id)) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return kNoPath;
  }
  const NameEntry& n = names_[name];
  const Category parent_category = parent == kNoPath ? Category::kOther : paths_[parent].category;
  Category category;
  if (n.category != kCategoryAuto) {
    category = static_cast<Category>(n.category);
  } else if (is_step_marker(n.text)) {
    category = parent_category;  // "step" marks a step; it never takes a rule's category
  } else if (auto matched = rules_.match(n.text)) {
    category = *matched;
  } else {
    category = parent_category;
  }
  PathNode& node = paths_[id];
  node.parent = parent;
  node.name = name;
  node.category = category;
  node.path = parent == kNoPath ? n.text : paths_[parent].path + "/" + n.text;
  path_index_.emplace(key, id);
  path_count_.store(id, std::memory_order_release);
  return id;
}

uint64_t RegionRegistry::range_start(ThreadState* ts, const char* name, uint64_t now,
                                     int category) {
  return range_start_id(ts, name_for_pointer(ts, name, category), now);
}

uint64_t RegionRegistry::range_start_id(ThreadState* ts, NameId name, uint64_t now) {
  if (name == kNoName) return 0;
  const uint64_t key = child_key(kNoPath, name);
  const ThreadState::ChildSlot* c = &ts->children_[child_hash(key, ts->child_mask_)];
  if (c->key != key) c = find_child(ts, kNoPath, name);
  const PathId path = c->child;
  if (path == kNoPath) return 0;
  PathStats& s = stats_of(c->stats);
  s.count.store(s.count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  const uint64_t id = next_range_.fetch_add(1, std::memory_order_relaxed) + 1;
  RangeSlot& slot = ranges_[id % kRangeSlots];
  // Invalidate first so a concurrent end of the slot's previous range cannot pair with our
  // start time; then publish path and start before the id that makes them valid.
  slot.id.store(0, std::memory_order_relaxed);
  slot.path.store(path, std::memory_order_relaxed);
  slot.start.store(now, std::memory_order_relaxed);
  const bool marker = (c->stats & ThreadState::kStepMarker) != 0;
  slot.step_marker.store(marker, std::memory_order_relaxed);
  slot.steps_at_start.store(marker ? steps_.count() : 0, std::memory_order_relaxed);
  slot.id.store(id, std::memory_order_release);
  return id;
}

bool RegionRegistry::range_end(ThreadState* ts, uint64_t range_id, uint64_t now) {
  if (range_id == 0) {
    unknown_range_ends_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  RangeSlot& slot = ranges_[range_id % kRangeSlots];
  if (slot.id.load(std::memory_order_acquire) != range_id) {
    unknown_range_ends_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  const PathId path = slot.path.load(std::memory_order_relaxed);
  const uint64_t start = slot.start.load(std::memory_order_relaxed);
  const bool marker = slot.step_marker.load(std::memory_order_relaxed);
  const uint32_t steps_at_start = slot.steps_at_start.load(std::memory_order_relaxed);
  uint64_t expected = range_id;
  // Claim the slot: of two ends of one id (or an end racing a reuse) only one records.
  if (!slot.id.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) {
    unknown_range_ends_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  const int saved = errno;
  ts->stats_.ensure(path);  // only the owning thread allocates its stats chunks
  errno = saved;
  record(ts->stats_[path], now >= start ? now - start : 0);
  return marker && end_step_region(ts, steps_at_start, now);
}

void RegionRegistry::step(ThreadState* ts, uint64_t now_ns, uint64_t samples, uint64_t tokens) {
  step_thread_.store(ts, std::memory_order_release);
  steps_.step(now_ns, samples, tokens);
}

void RegionRegistry::launch_context(const ThreadState* ts, LaunchContext* out,
                                    CategoryMemo* memo) const noexcept {
  LaunchContext& ctx = *out;
  ctx.path = kNoPath;
  ctx.entry = 0;
  ctx.comm = CommContext{};
  ctx.step = steps_.count();
  if (ts) {
    ctx.path = ts->current_path();
    ctx.entry = ts->current_entry();
  }
  if (ctx.path == kNoPath) {
    // Rule 2 of DESIGN §4: a thread with nothing open (an autograd worker) takes the training
    // thread's innermost region. Before the first tt_step the training thread is the first
    // thread that recorded anything.
    const ThreadState* main = step_thread_.load(std::memory_order_acquire);
    if (!main) main = first_thread_.load(std::memory_order_acquire);
    if (main && main != ts) {
      ctx.path = main->current_path();
      ctx.entry = main->current_entry();
    }
  }
  if (ctx.path == kNoPath) ctx.entry = 0;
  ctx.category = ctx.path == memo->path ? memo->category : remember_category(ctx.path, memo);
}

__attribute__((noinline)) Category RegionRegistry::remember_category(PathId path,
                                                                     CategoryMemo* memo) const noexcept {
  // The record is ingested with this category (nothing is looked up at ingest): a path's
  // category is set before the path is published and never changes, so this is the answer a
  // look-up at ingest would give. A path not yet published to this thread (a step thread's
  // path read before its publication reached this core) is answered as unknown, as category_of
  // answers it, and not remembered.
  if (path != kNoPath && path > path_count()) return Category::kOther;
  memo->path = path;
  memo->category = category_of(path);
  return memo->category;
}

Category RegionRegistry::category_of(PathId path) const noexcept {
  if (path == kNoPath || path > path_count()) return Category::kOther;
  return paths_[path].category;
}

std::string RegionRegistry::path_string(PathId path) const {
  if (path == kNoPath || path > path_count()) return {};
  return paths_[path].path;
}

bool RegionRegistry::threads_until(const Deadline& deadline,
                                   std::vector<const ThreadState*>* out) const {
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  if (!lock_until(lock, deadline)) return false;
  out->clear();
  for (const auto& t : threads_) out->push_back(t.get());
  return true;
}

std::vector<RegionRow> RegionRegistry::snapshot_rows(std::vector<PathId>* ids) const {
  std::vector<const ThreadState*> threads;
  threads_until(Deadline::never(), &threads);
  return rows_of(threads, ids);
}

std::vector<RegionRow> RegionRegistry::rows_of(const std::vector<const ThreadState*>& threads,
                                               std::vector<PathId>* ids) const {
  const uint32_t n = path_count();
  struct Sum {
    uint64_t count = 0, total = 0, min = PathStats::kNoneClosed, max = 0;
  };
  std::vector<Sum> sums(n + 1);
  for (const ThreadState* t : threads) {
    for (uint32_t p = 1; p <= n; ++p) {
      const PathStats* s = t->stats_.find(p);
      if (!s) {
        p |= static_cast<uint32_t>(decltype(t->stats_)::kChunkSize - 1);  // skip the whole chunk
        continue;
      }
      Sum& sum = sums[p];
      sum.count += s->count.load(std::memory_order_relaxed);
      const uint64_t mn = s->min.load(std::memory_order_relaxed);
      if (mn == PathStats::kNoneClosed) continue;  // never closed on this thread
      sum.total += s->total.load(std::memory_order_relaxed);
      sum.min = std::min(sum.min, mn);
      sum.max = std::max(sum.max, s->max.load(std::memory_order_relaxed));
    }
    // The regions open on this thread were entered: count them (PathStats::count counts closes).
    // Read while the owner may push and pop: a region that opens or closes meanwhile may be
    // counted or not, as a snapshot taken a moment earlier or later would.
    const auto open = static_cast<uint32_t>(t->depth_.load(std::memory_order_relaxed));
    for (uint32_t d = 1; d <= std::min<uint32_t>(open, ThreadState::kMaxDepth); ++d) {
      const PathId p = __atomic_load_n(&t->stack_[d].path, __ATOMIC_RELAXED);
      if (p != kNoPath && p <= n) ++sums[p].count;
    }
  }
  auto ns = [this](uint64_t ticks) {
    return timebase_.duration_ns != nullptr ? timebase_.duration_ns(ticks) : ticks;
  };
  std::vector<RegionRow> rows;
  if (ids) ids->clear();
  for (uint32_t p = 1; p <= n; ++p) {
    const Sum& sum = sums[p];
    const bool closed = sum.min != PathStats::kNoneClosed;
    if (sum.count == 0 && !closed) continue;
    RegionRow row;
    row.path = paths_[p].path;
    row.category = paths_[p].category;
    row.count = sum.count;
    row.cpu_ns = ns(sum.total);
    row.cpu_min_ns = closed ? ns(sum.min) : 0;
    row.cpu_max_ns = ns(sum.max);
    rows.push_back(std::move(row));
    if (ids) ids->push_back(p);
  }
  return rows;
}

// The sum over `threads` of one of a ThreadState's problem counters.
template <class Counter>
uint64_t RegionRegistry::sum_over(const std::vector<const ThreadState*>& threads, Counter counter) {
  uint64_t n = 0;
  for (const ThreadState* t : threads) n += (t->*counter).load(std::memory_order_relaxed);
  return n;
}

bool RegionRegistry::annotation_calls(const Deadline& deadline, uint64_t* calls, uint64_t* steps) const {
  std::vector<const ThreadState*> threads;
  if (!threads_until(deadline, &threads)) return false;
  *calls = sum_over(threads, &ThreadState::calls_);
  *steps = sum_over(threads, &ThreadState::steps_called_);
  return true;
}

uint64_t RegionRegistry::unbalanced_pops() const {
  std::vector<const ThreadState*> threads;
  threads_until(Deadline::never(), &threads);
  return sum_over(threads, &ThreadState::unbalanced_pops_);
}

uint64_t RegionRegistry::depth_overflows() const {
  std::vector<const ThreadState*> threads;
  threads_until(Deadline::never(), &threads);
  return sum_over(threads, &ThreadState::depth_overflows_);
}

std::size_t RegionRegistry::names_bytes() const {
  // Each table's chunks, each entry's heap text, and the two index maps' nodes (about 64 bytes
  // an entry with its key).
  constexpr std::size_t kIndexEntry = 64;
  std::size_t n = names_.allocated_bytes() + paths_.allocated_bytes();
  const uint32_t names = name_count_.load(std::memory_order_acquire);
  for (uint32_t i = 1; i <= names; ++i)
    if (const NameEntry* e = names_.find(i)) n += e->text.capacity() + 8 * std::size_t{e->nwords} + 8 + kIndexEntry;
  const uint32_t paths = path_count();
  for (uint32_t p = 1; p <= paths; ++p)
    if (const PathNode* node = paths_.find(p)) n += node->path.capacity() + kIndexEntry;
  return n;
}

CpuSummary RegionRegistry::summary(const Deadline& deadline) const {
  CpuSummary out;
  if (summary_until(deadline, &out)) {
    published_.publish(out);
    return out;
  }
  // A terminating signal's write, and a lock held by the thread the signal stopped.
  const auto last = published_.get(deadline);
  out = last.figures ? *last.figures : CpuSummary{};
  count_last_publish<CpuSummary>(out.section, kAnnotationCounters, last);
  return out;
}

bool RegionRegistry::summary_until(const Deadline& deadline, CpuSummary* summary) const {
  // The thread list once, under mu_ (a leaf, lock_order.h); the states themselves live as long
  // as the registry and are read lock-free.
  std::vector<const ThreadState*> threads;
  CpuSummary out;
  if (!threads_until(deadline, &threads) ||
      !steps_.summary(deadline, &out.steps, &out.last_step_clock_ns))
    return false;
  out.regions = rows_of(threads, &out.region_ids);
  const uint32_t n = path_count();
  out.path_names.resize(std::size_t{n} + 1);
  for (uint32_t p = 1; p <= n; ++p) out.path_names[p] = path_string(p);
  out.unbalanced_pops = sum_over(threads, &ThreadState::unbalanced_pops_);
  // What each thread is inside (hang forensics): the open regions are the prefixes of the
  // innermost one's path, which was made from them. Read from the atomic the owner publishes,
  // never from its stack: the writer may run while the owner is stopped anywhere.
  for (const ThreadState* t : threads) {
    ThreadSnapshot row;
    row.tid = t->tid_;
    row.step = out.steps.count;
    const std::string path = path_string(t->current_path());
    for (std::size_t at = path.find('/'); !path.empty(); at = path.find('/', at + 1)) {
      row.open_regions.push_back(path.substr(0, at));
      if (at == std::string::npos) break;
    }
    out.threads.push_back(std::move(row));
  }
  // Each counter, its warning from its table (core_counters.h).
  using C = AnnotationCounter;
  out.section.count(kAnnotationCounters, C::unbalanced_pops, out.unbalanced_pops);
  out.section.count(kAnnotationCounters, C::depth_overflows, sum_over(threads, &ThreadState::depth_overflows_));
  out.section.count(kAnnotationCounters, C::unknown_range_ends, unknown_range_ends());
  out.section.count(kAnnotationCounters, C::dropped_names, dropped_names());
  // What the annotations themselves cost: the calls (one in kCostEvery timed), tt_step (about
  // one in kStepCostEvery timed, at random), and the registry's own memory.
  out.section.cost(cost_row("annotations", sum_over(threads, &ThreadState::calls_), kCostEvery, call_cost_));
  out.section.cost(cost_row("steps", sum_over(threads, &ThreadState::steps_called_), kStepCostEvery, step_cost_));
  std::size_t thread_bytes = 0;
  for (const ThreadState* t : threads)
    thread_bytes += sizeof(ThreadState) + t->child_slots_.load(std::memory_order_relaxed) * sizeof(ThreadState::ChildSlot) +
                    t->stats_.allocated_bytes();
  out.section.own_memory("thread states", thread_bytes);
  out.section.own_memory("names and paths", names_bytes());
  if (out.steps.count > 0 && out.steps.count <= out.steps.warmup)
    out.section.note("only " + std::to_string(out.steps.count) +
                     " step(s), all within TRAINTIME_WARMUP_STEPS=" +
                     std::to_string(out.steps.warmup) + ": no step statistics");
  *summary = std::move(out);
  return true;
}

}  // namespace traintime::core
