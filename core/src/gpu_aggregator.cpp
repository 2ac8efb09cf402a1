// The attribution engine's ingest path (DESIGN §4): region slots and raw sums per activity;
// the open-step window is in step_window.cpp, comm GPU time in comm_gpu.cpp, the summary in
// gpu_summary.cpp, the trace dump in aggregator_trace.cpp, kernel names in kernel_names.cpp.
#include "traintime/core/gpu_aggregator.h"

#include <algorithm>
#include <iterator>
#include <string_view>
#include <utility>

#include "aggregator_internal.h"
#include "traintime/core/attribution.h"

namespace traintime::core {

using namespace aggregator_detail;

GpuAggregator::GpuAggregator(AggregatorOptions options) : opt_(options) {
  constexpr std::string_view kOther = "(other kernels)";  // name id 1; id 0 is ""
  name_chars_.assign(kOther.begin(), kOther.end());
  name_end_ = {0, static_cast<uint32_t>(kOther.size())};
  name_nccl_ = {0, 0};
  name_op_ = {CommOp::kUnknown, CommOp::kUnknown};
  name_cache_.resize(kNameCacheSize);
  site_cache_.resize(kSiteSets);
  spare_steps_.reserve(kSpareBufs);
}

std::unique_ptr<GpuAggregator> GpuAggregator::clone() const {
  std::unique_ptr<GpuAggregator> copy(new GpuAggregator(*this));
  // The caches point into this aggregator's containers: the copy finds its own again.
  copy->last_buf_ = nullptr;
  copy->last_step_ = ~uint64_t{0};
  copy->fast_room_ = 0;
  copy->last_comm_key_ = 0;
  copy->last_comm_gpu_ = nullptr;
  copy->last_ring_id_ = 0;
  copy->last_ring_ = nullptr;
  copy->trace_.clear();
  copy->trace_.shrink_to_fit();
  copy->opt_.trace = false;
  return copy;
}

uint32_t GpuAggregator::region_slot_lookup(PathId path, Category region_category) {
  auto hash = [](PathId p) { return static_cast<uint32_t>(mix(p)); };
  uint32_t slot = slot_of_.find(hash(path), [&](uint32_t s) { return regions_[s].path == path; });
  if (slot == IdIndex::kNone) {
    slot = static_cast<uint32_t>(regions_.size());
    RegionAcc r;
    r.path = path;
    r.category = region_category;
    regions_.push_back(r);
    acc_.regions.emplace_back();
    slot_of_.insert(hash(path), slot, [&](uint32_t s) { return hash(regions_[s].path); });
  }
  last_path_ = path;
  last_slot_ = slot;
  return slot;
}

uint32_t GpuAggregator::region_kernel(uint64_t key, uint32_t slot) {
  auto hash = [](uint64_t k) { return static_cast<uint32_t>(mix(k)); };
  auto find = [&](uint64_t k) {
    return region_kernel_index_.find(hash(k),
                                     [&](uint32_t i) { return region_kernels_[i].key == k; });
  };
  uint32_t at = find(key);
  if (at != IdIndex::kNone) return at;
  uint64_t k = key;
  // Room stays for every slot's "(other kernels)" pair (the regions' and the no-region one), so
  // the pairs never outnumber max_region_kernels and its index never outgrows the cap's size.
  if (region_kernels_.size() + regions_.size() + 1 >= opt_.max_region_kernels) {
    ++region_kernels_over_cap_;
    k = (static_cast<uint64_t>(slot) << 32) | kOtherKernels;
    at = find(k);
    if (at != IdIndex::kNone) return at;
  }
  at = static_cast<uint32_t>(region_kernels_.size());
  region_kernels_.push_back(KernelAcc{k, 0, 0});
  region_kernel_index_.insert(hash(k), at,
                              [&](uint32_t i) { return hash(region_kernels_[i].key); });
  return at;
}

inline const GpuAggregator::SiteCacheEntry* GpuAggregator::find_site(const SiteSet& set,
                                                                     std::string_view name,
                                                                     PathId path) const {
  for (const SiteCacheEntry& e : set.way)
    if (e.ptr == name.data() && e.len == name.size() && e.path == path &&
        e.name_id > kOtherKernels &&
        same_chars(name_chars_.data() + e.name_at, name.data(), name.size()))
      return &e;
  return nullptr;
}

// A kernel met for the first time from this region (or evicted from the site cache): the full
// lookups, and the cache filled with what they found. Out of line, as every rare path of ingest:
// the common record then needs fewer registers saved and restored.
__attribute__((noinline)) GpuAggregator::SiteCacheEntry GpuAggregator::resolve_site(
    const GpuActivity& a, const LaunchContext& ctx, Category region_category, SiteSet* set) {
  SiteCacheEntry e;
  bool nccl = false;
  e.name_id = intern(a.name, nccl);
  e.slot = region_slot(ctx.path, region_category);
  // Kernels with no region open have pairs too (kNoRegionSlot): the rank's own top_kernels.
  const uint32_t ps = pair_slot(e.slot);
  const uint64_t key = (static_cast<uint64_t>(ps) << 32) | e.name_id;
  const uint32_t rk = region_kernel(key, ps);
  const bool rk_exact = region_kernels_[rk].key == key;  // false: the pair was over its cap
  e.rk_nccl = rk << 1 | (nccl ? 1u : 0u);
  // Only what the full lookups found without a cap in the way is cached: a name or pair beyond
  // its cap keeps being counted record by record.
  if (e.name_id > kOtherKernels && rk_exact && rk < (1u << 31)) {
    e.ptr = a.name.data();
    e.len = static_cast<uint32_t>(a.name.size());
    e.path = ctx.path;
    e.name_at = name_end_[e.name_id - 1];
    set->way[1] = set->way[0];
    set->way[0] = e;
  }
  return e;
}

std::deque<GpuAggregator::OpenStep>::iterator GpuAggregator::find_open(uint64_t step) {
  const auto it = std::lower_bound(open_.begin(), open_.end(), step,
                                   [](const OpenStep& o, uint64_t s) { return o.step < s; });
  return it != open_.end() && it->step == step ? it : open_.end();
}

__attribute__((noinline)) GpuAggregator::StepBuf* GpuAggregator::open_step(uint64_t step,
                                                                          uint32_t device) {
  if (!any_activity_) first_device_ = static_cast<int>(device);
  any_activity_ = true;
  max_step_ = std::max(max_step_, step);
  if (step < folded_below_) return nullptr;
  // A step past every open one (the usual new step) is not searched for and goes at the end.
  const bool newest = open_.empty() || open_.back().step < step;
  auto it = newest ? open_.end() : find_open(step);
  if (it == open_.end()) {
    std::unique_ptr<StepBuf> buf;
    if (spare_steps_.empty()) {
      buf = std::make_unique<StepBuf>();
    } else {  // a folded step's buffers, emptied with their capacity kept
      buf = std::move(spare_steps_.back());
      spare_steps_.pop_back();
    }
    if (newest) {
      open_.push_back(OpenStep{step, std::move(buf)});
      it = std::prev(open_.end());
      ++open_steps_;
    } else {
      const auto at = std::lower_bound(open_.begin(), open_.end(), step,
                                       [](const OpenStep& o, uint64_t s) { return o.step < s; });
      it = open_.insert(at, OpenStep{step, std::move(buf)});
      ++open_steps_;
    }
  }
  last_buf_ = it->buf.get();  // on the heap: stays where it is while the deque changes
  last_step_ = step;
  return last_buf_;
}

void GpuAggregator::ingest_other(const GpuActivity& a, const LaunchContext& ctx, uint64_t dur,
                                 Category cat, uint32_t name_id) {
  if (a.kind == ActivityKind::kMemcpy) {
    auto k = static_cast<std::size_t>(a.copy_kind);
    MemcpyStat& m = memcpy_[k < memcpy_.size() ? k : memcpy_.size() - 1];
    m.count += a.copies;  // a batched memcpy record counts every copy it stands for
    m.bytes += a.bytes;
    m.gpu_ns += dur;
  }
  if (cat == Category::kComm) ingest_comm(a, ctx, dur, name_id);
  if (opt_.trace) {
    if (trace_.size() < opt_.trace_max_events) {
      trace_.push_back({a.start_ns, a.start_ns + dur, a.bytes, a.correlation_id, ctx.path, ctx.step,
                        name_id, a.device, a.stream, static_cast<uint8_t>(cat),
                        static_cast<uint8_t>(a.kind), static_cast<uint8_t>(a.copy_kind),
                        static_cast<uint8_t>(ctx.comm.op)});
    } else {
      ++trace_dropped_;
    }
  }
}

// Each common record adds one record to last_buf_ and must leave open_records_ within its bound
// (enforce_bounds is not on that path). The entry it may add is checked where it is added: a
// step enters a region a dozen times and runs hundreds of kernels, so counting every record as
// a possible new entry sent one record in six to ingest_full to count the room again.
inline void GpuAggregator::refresh_room() {
  const StepBuf* buf = last_buf_;
  std::size_t room = 0;
  if (buf != nullptr && !opt_.trace && open_steps_ <= opt_.max_open_steps &&
      open_records_ < opt_.max_open_records) {
    room = opt_.max_open_records - open_records_;
    room = std::min(room, buf->recs.capacity() - buf->recs.size());
  }
  fast_room_ = room;
}

// The common record — a kernel launched again from a site the cache knows, for the step the last
// record went to, neither comm nor traced, with room in the step's buffers and the window — in a
// function that calls nothing, so it saves and restores few registers. Every check comes before
// the first change; anything else goes whole to ingest_full, which computes the same for it.
void GpuAggregator::ingest(const GpuActivity& a, const LaunchContext& ctx,
                           Category region_category) {
  // fast_room_ > 0 also says last_buf_ is set and tracing is off.
  if (fast_room_ == 0 || a.kind != ActivityKind::kKernel || a.name.empty() ||
      ctx.step != last_step_)
    return ingest_full(a, ctx, region_category);
  const SiteCacheEntry* e = find_site(site_cache_[site_set(a.name.data(), ctx.path)], a.name,
                                      ctx.path);
  if (e == nullptr || attribute((e->rk_nccl & 1) != 0, ctx, region_category) == Category::kComm)
    return ingest_full(a, ctx, region_category);
  StepBuf* const buf = last_buf_;
  const bool new_entry = buf->entries.empty() || buf->entries.back() != ctx.entry;
  if (new_entry && buf->entries.size() == buf->entries.capacity())
    return ingest_full(a, ctx, region_category);
  --fast_room_;

  const Category cat = attribute((e->rk_nccl & 1) != 0, ctx, region_category);
  const uint64_t start = a.start_ns;
  const uint64_t end = a.end_ns > a.start_ns ? a.end_ns : a.start_ns;
  const uint32_t slot = e->slot;
  KernelAcc& k = region_kernels_[e->rk_nccl >> 1];
  ++k.count;
  k.sum += end - start;
  if (published_below_ > ctx.step) ++after_publish_;
  // The room checked above, said again where the vectors grow: the compiler then drops their
  // reallocation (a call) from this path.
  if (new_entry) {
    if (buf->entries.size() == buf->entries.capacity()) __builtin_unreachable();
    buf->entries.push_back(ctx.entry);
  }
  if (!buf->recs.empty()) {
    const OpenRec& last = buf->recs.back();
    if (a.device != last.device ? a.device < last.device : start < last.start) buf->sorted = false;
  }
  const auto entry = static_cast<uint32_t>(buf->entries.size() - 1);
  if (buf->recs.size() == buf->recs.capacity()) __builtin_unreachable();
  buf->recs.emplace_back(start, end, entry, a.device, slot, static_cast<uint32_t>(cat));
  ++open_records_;
}

__attribute__((noinline)) void GpuAggregator::ingest_full(const GpuActivity& a,
                                                          const LaunchContext& ctx,
                                                          Category region_category) {
  const uint64_t start = a.start_ns;
  const uint64_t end = a.end_ns > a.start_ns ? a.end_ns : a.start_ns;
  const uint64_t dur = end - start;
  const bool is_kernel = a.kind == ActivityKind::kKernel;

  // A kernel launched again from the same region (the common case) is resolved by one probe of
  // the site cache: name id, region slot and (region, kernel) pair at once.
  uint32_t name_id = kNoName;
  uint32_t slot;
  uint32_t rk_nccl = 0;
  if (is_kernel && !a.name.empty()) {
    SiteSet* set = &site_cache_[site_set(a.name.data(), ctx.path)];
    const SiteCacheEntry* e = find_site(*set, a.name, ctx.path);
    const SiteCacheEntry found = e != nullptr ? *e : resolve_site(a, ctx, region_category, set);
    name_id = found.name_id;
    slot = found.slot;
    rk_nccl = found.rk_nccl;
  } else {
    slot = region_slot(ctx.path, region_category);
    if (is_kernel)  // a kernel without a name: its region's nameless pair
      rk_nccl = region_kernel(static_cast<uint64_t>(pair_slot(slot)) << 32 | kNoName, pair_slot(slot)) << 1;
  }
  const Category cat = attribute((rk_nccl & 1) != 0, ctx, region_category);
  const auto ci = static_cast<std::size_t>(cat);
  // Sums by category and region are counted when the record's step folds (it reads them anyway).
  if (is_kernel) {
    KernelAcc& k = region_kernels_[rk_nccl >> 1];
    ++k.count;
    k.sum += dur;
  }
  if (!is_kernel || cat == Category::kComm || opt_.trace) ingest_other(a, ctx, dur, cat, name_id);

  const uint64_t step = ctx.step;
  if (published_below_ > step) ++after_publish_;
  StepBuf* buf = last_buf_;
  if (step != last_step_ || buf == nullptr) {
    buf = open_step(step, a.device);
    if (buf == nullptr) {
      fold_late(OpenRec{start, end, 0, a.device, slot, static_cast<uint8_t>(ci)}, ctx.entry, step);
      refresh_room();
      return;
    }
  }
  if (buf->entries.empty() || buf->entries.back() != ctx.entry) buf->entries.push_back(ctx.entry);
  if (!buf->recs.empty()) {
    const OpenRec& last = buf->recs.back();
    if (a.device != last.device ? a.device < last.device : start < last.start) buf->sorted = false;
  }
  buf->recs.emplace_back(start, end, static_cast<uint32_t>(buf->entries.size() - 1), a.device,
                         slot, static_cast<uint32_t>(ci));
  ++open_records_;
  if (open_records_ > opt_.max_open_records || open_steps_ > opt_.max_open_steps)
    enforce_bounds();
  refresh_room();
}


GpuAggregator::Footprint GpuAggregator::footprint() const {
  Footprint fp;
  fp.open_steps = open_steps_;
  fp.open_records = open_records_;
  fp.regions = regions_.size();
  fp.kernel_names = name_end_.size();
  fp.region_kernels = region_kernels_.size();
  fp.detail_steps = acc_.detail.size();
  fp.trace_events = trace_.size();
  return fp;
}

}  // namespace traintime::core
