#include "traintime/core/region_registry.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "traintime/core/category_rules.h"

namespace traintime::core {

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
  ts->tid_ = static_cast<uint64_t>(::gettid());  // on the thread it is for
  const ThreadState* none = nullptr;
  first_thread_.compare_exchange_strong(none, ts, std::memory_order_release);
  return ts;
}

NameId RegionRegistry::register_name(std::string_view name, int category) {
  std::lock_guard<std::mutex> lock(mu_);
  return register_locked(name, category);
}

NameId RegionRegistry::register_locked(std::string_view name, int category) {
  if (name.empty()) return kNoName;
  if (category != kCategoryAuto &&
      (category < 0 || category > static_cast<int>(Category::kOther))) {
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
  names_[id].text.assign(name);
  names_[id].category = category;
  names_[id].step_marker = is_step_marker(name);
  name_index_.emplace(std::move(key), id);
  name_count_.store(id, std::memory_order_release);
  return id;
}

NameId RegionRegistry::name_for_pointer(ThreadState* ts, const char* name, int category) {
  if (!name) return kNoName;
  // Categories share the cache: the slot remembers the id, and the id its category.
  const auto bits = reinterpret_cast<uintptr_t>(name);
  const std::size_t slot =
      static_cast<std::size_t>(((bits >> 3) ^ (bits >> 11) ^ static_cast<unsigned>(category + 1)) &
                               (ThreadState::kNameCacheSize - 1));
  ThreadState::NameSlot& s = ts->names_[slot];
  if (s.ptr == name && s.id != kNoName) {
    const NameEntry& e = names_[s.id];
    if (e.category == category && std::strcmp(e.text.c_str(), name) == 0) return s.id;
  }
  // The same text from another buffer: found by its hash, checked by content, no lock.
  uint64_t hash = 0xcbf29ce484222325ULL ^ static_cast<uint64_t>(category + 1);
  for (const char* c = name; *c != '\0'; ++c) hash = (hash ^ static_cast<unsigned char>(*c)) * 0x100000001b3ULL;
  hash |= 1;  // 0 marks an empty slot
  ThreadState::TextSlot& t = ts->texts_[hash & (ThreadState::kTextCacheSize - 1)];
  if (t.hash == hash && t.id != kNoName) {
    const NameEntry& e = names_[t.id];
    if (e.category == category && std::strcmp(e.text.c_str(), name) == 0) {
      s.ptr = name;
      s.id = t.id;
      return t.id;
    }
  }
  const int saved = errno;  // the preload calls this from the application's threads
  locked_lookups_.fetch_add(1, std::memory_order_relaxed);
  const NameId id = register_name(name, category);
  errno = saved;
  s.ptr = name;
  s.id = id;
  if (id != kNoName) t = ThreadState::TextSlot{hash, id};
  return id;
}

void RegionRegistry::close_entry(ThreadState* ts, uint64_t entry, uint64_t now_ns) {
  int at = ts->depth_ - 1;
  while (at >= 0 && ts->stack_[at].entry != entry) --at;
  if (at < 0) {
    ts->unbalanced_pops_.store(ts->unbalanced_pops_.load(std::memory_order_relaxed) + 1,
                               std::memory_order_relaxed);
    return;
  }
  if (at == ts->depth_ - 1) {
    pop(ts, now_ns);
    return;
  }
  const ThreadState::Frame f = ts->stack_[at];
  if (f.path != kNoPath) record(ts, f.path, now_ns >= f.start_ns ? now_ns - f.start_ns : 0);
  for (int i = at; i + 1 < ts->depth_; ++i) ts->stack_[i] = ts->stack_[i + 1];
  --ts->depth_;  // the innermost region is unchanged: current_path/current_entry stay
  if (f.step_marker) end_step_region(ts, f.steps_at_push, now_ns);
}

void RegionRegistry::push(ThreadState* ts, const char* name, int category, uint64_t now_ns) {
  // An unregistrable name comes back as kNoName and still occupies a frame, so the caller's
  // push/pop stay balanced.
  push_id(ts, name_for_pointer(ts, name, category), now_ns);
}

PathId RegionRegistry::child_slow(ThreadState* ts, PathId parent, NameId name) {
  if (name == kNoName) return kNoPath;
  // Called from push on the application's threads: allocation must not leak into errno.
  struct ErrnoGuard {
    int saved = errno;
    ~ErrnoGuard() { errno = saved; }
  } errno_guard;
  PathId path;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Ids come from callers (Python passes integers): never index past the registered names.
    if (name > name_count_.load(std::memory_order_relaxed)) return kNoPath;
    path = intern_path(parent, name);
  }
  if (path == kNoPath) return kNoPath;
  ts->stats_.ensure(path);
  // Grow at half load so probes stay short; only the owning thread reads this table.
  if ((ts->child_count_ + 1) * 2 > ts->children_.size()) {
    std::vector<ThreadState::ChildSlot> bigger(ts->children_.size() * 2);
    const std::size_t mask = bigger.size() - 1;
    for (const auto& s : ts->children_) {
      if (s.key == 0) continue;
      std::size_t i = child_hash(s.key, mask);
      while (bigger[i].key != 0) i = (i + 1) & mask;
      bigger[i] = s;
    }
    ts->children_.swap(bigger);
  }
  const uint64_t key = child_key(parent, name);
  const std::size_t mask = ts->children_.size() - 1;
  std::size_t i = child_hash(key, mask);
  while (ts->children_[i].key != 0) i = (i + 1) & mask;
  ts->children_[i] = ThreadState::ChildSlot{key, path};
  ++ts->child_count_;
  return path;
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

uint64_t RegionRegistry::range_start(ThreadState* ts, const char* name, uint64_t now_ns,
                                     int category) {
  return range_start_id(ts, name_for_pointer(ts, name, category), now_ns);
}

uint64_t RegionRegistry::range_start_id(ThreadState* ts, NameId name, uint64_t now_ns) {
  if (name == kNoName) return 0;
  PathId path = lookup_child(ts, kNoPath, name);
  if (path == kNoPath) path = child_slow(ts, kNoPath, name);
  if (path == kNoPath) return 0;
  PathStats& s = ts->stats_[path];
  s.count.store(s.count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  const uint64_t id = next_range_.fetch_add(1, std::memory_order_relaxed) + 1;
  RangeSlot& slot = ranges_[id % kRangeSlots];
  // Invalidate first so a concurrent end of the slot's previous range cannot pair with our
  // start time; then publish path and start before the id that makes them valid.
  slot.id.store(0, std::memory_order_relaxed);
  slot.path.store(path, std::memory_order_relaxed);
  slot.start_ns.store(now_ns, std::memory_order_relaxed);
  const bool marker = names_[name].step_marker;
  slot.step_marker.store(marker, std::memory_order_relaxed);
  slot.steps_at_start.store(marker ? steps_.count() : 0, std::memory_order_relaxed);
  slot.id.store(id, std::memory_order_release);
  return id;
}

void RegionRegistry::range_end(ThreadState* ts, uint64_t range_id, uint64_t now_ns) {
  if (range_id == 0) {
    unknown_range_ends_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  RangeSlot& slot = ranges_[range_id % kRangeSlots];
  if (slot.id.load(std::memory_order_acquire) != range_id) {
    unknown_range_ends_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const PathId path = slot.path.load(std::memory_order_relaxed);
  const uint64_t start = slot.start_ns.load(std::memory_order_relaxed);
  const bool marker = slot.step_marker.load(std::memory_order_relaxed);
  const uint32_t steps_at_start = slot.steps_at_start.load(std::memory_order_relaxed);
  uint64_t expected = range_id;
  // Claim the slot: of two ends of one id (or an end racing a reuse) only one records.
  if (!slot.id.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) {
    unknown_range_ends_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const int saved = errno;
  ts->stats_.ensure(path);  // only the owning thread allocates its stats chunks
  errno = saved;
  record(ts, path, now_ns >= start ? now_ns - start : 0);
  if (marker) end_step_region(ts, steps_at_start, now_ns);
}

void RegionRegistry::step(ThreadState* ts, uint64_t now_ns, uint64_t samples, uint64_t tokens) {
  step_thread_.store(ts, std::memory_order_release);
  steps_.step(now_ns, samples, tokens);
}

LaunchContext RegionRegistry::launch_context(const ThreadState* ts) const {
  LaunchContext ctx;
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
  return ctx;
}

Category RegionRegistry::category_of(PathId path) const {
  if (path == kNoPath || path > path_count()) return Category::kOther;
  return paths_[path].category;
}

std::string RegionRegistry::path_string(PathId path) const {
  if (path == kNoPath || path > path_count()) return {};
  return paths_[path].path;
}

std::vector<RegionRow> RegionRegistry::snapshot_rows(std::vector<PathId>* ids) const {
  std::vector<const ThreadState*> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& t : threads_) threads.push_back(t.get());
  }
  const uint32_t n = path_count();
  struct Sum {
    uint64_t count = 0, total = 0, min = 0, max = 0, closed = 0;
  };
  std::vector<Sum> sums(n + 1);
  for (const ThreadState* t : threads) {
    for (uint32_t p = 1; p <= n; ++p) {
      const PathStats* s = t->stats_.find(p);
      if (!s) {
        p |= static_cast<uint32_t>(decltype(t->stats_)::kChunkSize - 1);  // skip the whole chunk
        continue;
      }
      const uint64_t count = s->count.load(std::memory_order_relaxed);
      const uint64_t closed = s->closed.load(std::memory_order_relaxed);
      Sum& sum = sums[p];
      sum.count += count;
      if (closed == 0) continue;
      const uint64_t mn = s->min_ns.load(std::memory_order_relaxed);
      const uint64_t mx = s->max_ns.load(std::memory_order_relaxed);
      sum.total += s->total_ns.load(std::memory_order_relaxed);
      sum.min = sum.closed == 0 ? mn : std::min(sum.min, mn);
      sum.max = std::max(sum.max, mx);
      sum.closed += closed;
    }
  }
  std::vector<RegionRow> rows;
  if (ids) ids->clear();
  for (uint32_t p = 1; p <= n; ++p) {
    const Sum& sum = sums[p];
    if (sum.count == 0 && sum.closed == 0) continue;
    RegionRow row;
    row.path = paths_[p].path;
    row.category = paths_[p].category;
    row.count = sum.count;
    row.cpu_ns = sum.total;
    row.cpu_min_ns = sum.min;
    row.cpu_max_ns = sum.max;
    rows.push_back(std::move(row));
    if (ids) ids->push_back(p);
  }
  return rows;
}

uint64_t RegionRegistry::unbalanced_pops() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (const auto& t : threads_) n += t->unbalanced_pops_.load(std::memory_order_relaxed);
  return n;
}

uint64_t RegionRegistry::depth_overflows() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (const auto& t : threads_) n += t->depth_overflows_.load(std::memory_order_relaxed);
  return n;
}

CpuSummary RegionRegistry::summary() const {
  CpuSummary out;
  out.regions = snapshot_rows(&out.region_ids);
  const uint32_t n = path_count();
  out.path_names.resize(std::size_t{n} + 1);
  for (uint32_t p = 1; p <= n; ++p) out.path_names[p] = path_string(p);
  out.steps = steps_.summary();
  out.unbalanced_pops = unbalanced_pops();
  // What each thread is inside (hang forensics): the open regions are the prefixes of the
  // innermost one's path, which was made from them. Read from the atomic the owner publishes,
  // never from its stack: the writer may run while the owner is stopped anywhere.
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& t : threads_) {
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
  }
  auto warn = [&out](uint64_t count, const std::string& what) {
    if (count > 0) out.warnings.push_back(std::to_string(count) + what);
  };
  warn(out.unbalanced_pops, " tt_pop() call(s) with no open region on their thread were ignored");
  warn(depth_overflows(), " region(s) nested deeper than " + std::to_string(ThreadState::kMaxDepth) +
                              " were not timed");
  warn(unknown_range_ends(), " tt_range_end() call(s) named no open range (unknown or ended twice)");
  warn(dropped_names(), " region name(s) or path(s) were dropped: table full");
  if (out.steps.count > 0 && out.steps.count <= out.steps.warmup)
    out.warnings.push_back("only " + std::to_string(out.steps.count) +
                           " step(s), all within TRAINTIME_WARMUP_STEPS=" +
                           std::to_string(out.steps.warmup) + ": no step statistics");
  return out;
}

}  // namespace traintime::core
