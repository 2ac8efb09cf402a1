#include "traintime/core/gpu_aggregator.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "traintime/core/attribution.h"

namespace traintime::core {
namespace {

constexpr std::size_t kNameCacheSize = 4096;  // direct-mapped, by the name's address
constexpr unsigned kRkCacheBits = 10;         // (region, kernel) cache: 1024 entries
constexpr std::size_t kSpareBufs = 2;         // step buffers kept for reuse

inline std::size_t mix(uint64_t key) {
  return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 32);
}

constexpr std::size_t kComm = static_cast<std::size_t>(Category::kComm);
constexpr std::size_t kIo = static_cast<std::size_t>(Category::kIo);

constexpr std::array<std::string_view, 6> kCopyNames = {"", "HtoD", "DtoH", "DtoD", "PtoP",
                                                        "Other"};

std::string demangle(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int status = 0;
  char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string out = (status == 0 && d != nullptr) ? std::string(d) : name;
  std::free(d);
  return out;
}

void add_totals(StepTotals& into, const StepTotals& t) {
  into.gpu_busy_ns += t.gpu_busy_ns;
  into.compute_ns += t.compute_ns;
  into.comm_ns += t.comm_ns;
  into.comm_overlapped_ns += t.comm_overlapped_ns;
  into.exposed_comm_ns += t.exposed_comm_ns;
  into.io_ns += t.io_ns;
  into.idle_ns += t.idle_ns;
  into.gpu_sum_ns += t.gpu_sum_ns;
  into.compute_sum_ns += t.compute_sum_ns;
  into.comm_sum_ns += t.comm_sum_ns;
  into.io_sum_ns += t.io_sum_ns;
}

}  // namespace

GpuAggregator::GpuAggregator(AggregatorOptions options) : opt_(options) {
  names_ = {"", "(other kernels)"};
  name_nccl_ = {0, 0};
  name_op_ = {CommOp::kUnknown, CommOp::kUnknown};
  name_cache_.resize(kNameCacheSize);
  rk_cache_.resize(std::size_t{1} << kRkCacheBits);
  spare_bufs_.reserve(kSpareBufs);
}

GpuAggregator::EntrySpan* GpuAggregator::EntryTable::find_or_insert(uint64_t entry,
                                                                    const EntrySpan& init,
                                                                    bool& inserted) {
  if ((used_.size() + 1) * 2 > slots_.size()) grow();
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = mix(entry) & mask;; i = (i + 1) & mask) {
    Slot& s = slots_[i];
    if (s.key == entry) {
      inserted = false;
      return &s.span;
    }
    if (s.key == 0) {
      s.key = entry;
      s.span = init;
      used_.push_back(static_cast<uint32_t>(i));
      inserted = true;
      return &s.span;
    }
  }
}

void GpuAggregator::EntryTable::grow() {
  std::vector<Slot> bigger(slots_.size() * 2);
  const std::size_t mask = bigger.size() - 1;
  for (uint32_t& u : used_) {
    const Slot& s = slots_[u];
    std::size_t i = mix(s.key) & mask;
    while (bigger[i].key != 0) i = (i + 1) & mask;
    bigger[i] = s;
    u = static_cast<uint32_t>(i);
  }
  slots_.swap(bigger);
}

void GpuAggregator::EntryTable::clear() {
  for (uint32_t i : used_) slots_[i].key = 0;
  used_.clear();
}

uint32_t GpuAggregator::intern(std::string_view name, bool& nccl) {
  auto h = static_cast<std::size_t>((reinterpret_cast<uintptr_t>(name.data()) >> 3) ^
                                    (name.size() * 0x9e3779b1u)) &
           (kNameCacheSize - 1);
  NameCacheEntry& e = name_cache_[h];
  // CUPTI hands the same name pointer for every launch of a kernel; the compare guards against
  // an address reused for another name.
  if (e.ptr == name.data() && e.len == name.size() && e.id > kOtherKernels &&
      std::memcmp(names_[e.id].data(), name.data(), name.size()) == 0) {
    nccl = name_nccl_[e.id] != 0;
    return e.id;
  }
  std::string key(name);
  auto it = name_ids_.find(key);
  uint32_t id;
  if (it != name_ids_.end()) {
    id = it->second;
  } else if (names_.size() >= static_cast<std::size_t>(opt_.max_kernel_names) + 2) {
    ++names_over_cap_;
    nccl = is_nccl_kernel(name);  // attribution must not depend on the cap
    return kOtherKernels;
  } else {
    id = static_cast<uint32_t>(names_.size());
    names_.push_back(key);
    name_nccl_.push_back(is_nccl_kernel(name) ? 1 : 0);
    name_op_.push_back(comm_op_from_kernel_name(name));
    name_ids_.emplace(std::move(key), id);
  }
  e = {name.data(), name.size(), id};
  nccl = name_nccl_[id] != 0;
  return id;
}

uint32_t GpuAggregator::region_slot(PathId path, Category region_category) {
  if (path == kNoPath) return kNoSlot;
  if (path == last_path_) return last_slot_;
  auto [it, inserted] = slot_of_.try_emplace(path, static_cast<uint32_t>(regions_.size()));
  if (inserted) {
    RegionAcc r;
    r.path = path;
    r.category = region_category;
    regions_.push_back(r);
    acc_.regions.emplace_back();
  }
  last_path_ = path;
  last_slot_ = it->second;
  return last_slot_;
}

void GpuAggregator::ingest(const GpuActivity& a, const LaunchContext& ctx,
                           Category region_category) {
  const uint64_t start = a.start_ns;
  const uint64_t end = a.end_ns > a.start_ns ? a.end_ns : a.start_ns;
  const uint64_t dur = end - start;
  const bool is_kernel = a.kind == ActivityKind::kKernel;

  uint32_t name_id = kNoName;
  bool nccl = false;
  if (is_kernel && !a.name.empty()) name_id = intern(a.name, nccl);
  const Category cat = attribute(nccl, ctx, region_category);
  const auto ci = static_cast<std::size_t>(cat);
  cat_sum_[ci] += dur;
  ++cat_count_[ci];

  const uint32_t slot = region_slot(ctx.path, region_category);
  if (slot != kNoSlot) {
    RegionAcc& r = regions_[slot];
    r.sum += dur;
    r.cat_sum[ci] += dur;
    ++r.cat_count[ci];
    if (is_kernel) {
      ++r.kernels;
      const uint64_t key = (static_cast<uint64_t>(slot) << 32) | name_id;
      if (key != last_rk_key_) {
        RkCacheEntry& ce = rk_cache_[mix(key) & ((std::size_t{1} << kRkCacheBits) - 1)];
        if (ce.key == key) {
          last_rk_ = ce.acc;
        } else {
          auto it = region_kernels_.find(key);
          if (it == region_kernels_.end()) {
            uint64_t k = key;
            if (region_kernels_.size() >= opt_.max_region_kernels) {
              ++region_kernels_over_cap_;
              k = (static_cast<uint64_t>(slot) << 32) | kOtherKernels;
            }
            it = region_kernels_.try_emplace(k).first;
          }
          last_rk_ = &it->second;  // unordered_map nodes do not move on rehash
          // A key redirected to "(other kernels)" stays uncached: each of its records is
          // counted over the cap, as before the cache.
          if (it->first == key) ce = {key, last_rk_};
        }
        last_rk_key_ = key;
      }
      ++last_rk_->count;
      last_rk_->sum += dur;
    }
  }

  if (a.kind == ActivityKind::kMemcpy) {
    auto k = static_cast<std::size_t>(a.copy_kind);
    MemcpyStat& m = memcpy_[k < memcpy_.size() ? k : memcpy_.size() - 1];
    ++m.count;
    m.bytes += a.bytes;
    m.gpu_ns += dur;
  }
  if (cat == Category::kComm) ingest_comm(a, ctx, dur, name_id);

  if (opt_.trace) {
    if (trace_.size() < opt_.trace_max_events) {
      trace_.push_back({start, end, a.bytes, a.correlation_id, ctx.path, ctx.step,
                        name_id, a.device, a.stream, static_cast<uint8_t>(ci),
                        static_cast<uint8_t>(a.kind), static_cast<uint8_t>(a.copy_kind),
                        static_cast<uint8_t>(ctx.comm_op)});
    } else {
      ++trace_dropped_;
    }
  }

  any_activity_ = true;
  const uint64_t step = ctx.step;
  max_step_ = std::max(max_step_, step);
  const OpenRec rec{start, end, ctx.entry, a.device, slot, static_cast<uint8_t>(ci)};
  if (step != last_step_ || last_buf_ == nullptr) {
    if (step < folded_below_) {
      fold_late(rec, step);
      return;
    }
    auto [it, inserted] = open_.try_emplace(step);
    if (inserted && !spare_bufs_.empty()) {
      it->second = std::move(spare_bufs_.back());
      spare_bufs_.pop_back();
    }
    last_buf_ = &it->second;  // std::map nodes are stable
    last_step_ = step;
  }
  last_buf_->recs.push_back(rec);
  ++open_records_;
  if (open_records_ > opt_.max_open_records || open_.size() > opt_.max_open_steps)
    enforce_bounds();
}

void GpuAggregator::enforce_bounds() {
  while (!open_.empty() &&
         (open_records_ > opt_.max_open_records || open_.size() > opt_.max_open_steps)) {
    if (open_.size() > 1) {
      fold_oldest();
      continue;
    }
    // One step holds more than the whole budget (e.g. a program that never calls tt_step):
    // fold what it has as a segment and keep the step open for what follows.
    auto& [step, buf] = *open_.begin();
    open_records_ -= buf.recs.size();
    fold_records(buf.recs, buf.devices, step, acc_, scratch_, opt_.step_detail);
    buf.recs.clear();
    ++acc_.segmented_steps;
    break;  // the step stays open by design, even if max_open_steps is 0
  }
}

void GpuAggregator::fold_oldest() {
  auto it = open_.begin();
  const uint64_t step = it->first;
  StepBuf& buf = it->second;
  open_records_ -= buf.recs.size();
  fold_records(buf.recs, buf.devices, step, acc_, scratch_, opt_.step_detail);
  finish_step(buf.devices, step, acc_, opt_.step_detail);
  if (spare_bufs_.size() < kSpareBufs) {
    buf.recs.clear();
    buf.devices.clear();
    spare_bufs_.push_back(std::move(buf));
  }
  open_.erase(it);
  folded_below_ = std::max(folded_below_, step + 1);
  last_buf_ = nullptr;
  last_step_ = ~uint64_t{0};
}

GpuAggregator::DetailAcc* GpuAggregator::detail_for(Accum& acc, uint64_t step,
                                                   uint32_t step_detail) {
  if (step_detail == 0) return nullptr;
  auto it = acc.detail.find(step);
  if (it != acc.detail.end()) return &it->second;
  // The most recent step_detail steps by index are kept: an older step is not re-added.
  if (acc.detail.size() >= step_detail && step < acc.detail.begin()->first) return nullptr;
  it = acc.detail.emplace(step, DetailAcc{}).first;
  if (acc.detail.size() > step_detail) acc.detail.erase(acc.detail.begin());
  return &it->second;
}

void GpuAggregator::fold_records(std::vector<OpenRec>& recs, std::vector<DeviceSpan>& devices,
                                 uint64_t step, Accum& acc, Scratch& sc, uint32_t step_detail) {
  if (recs.empty()) return;
  auto by_device_start = [](const OpenRec& a, const OpenRec& b) {
    return a.device != b.device ? a.device < b.device : a.start < b.start;
  };
  // Records of one device usually arrive in start order already; the check is cheaper than a sort.
  if (!std::is_sorted(recs.begin(), recs.end(), by_device_start))
    std::sort(recs.begin(), recs.end(), by_device_start);
  DetailAcc* detail = detail_for(acc, step, step_detail);
  const std::size_t nslots = acc.regions.size();
  if (sc.region.size() < nslots) {
    sc.region.resize(nslots);
    sc.region_cat.resize(nslots * kCategoryCount);
    sc.touched_flag.resize(nslots, 0);
  }
  sc.entries.clear();
  uint64_t last_entry = 0;
  EntrySpan* last_span = nullptr;

  std::size_t i = 0;
  const std::size_t n = recs.size();
  while (i < n) {
    const uint32_t dev = recs[i].device;
    std::array<Tracker, kCategoryCount> cat{};
    Tracker compute, comm_or_compute, all;
    StepTotals t;
    const uint64_t first = recs[i].start;
    uint64_t last = recs[i].end;
    for (; i < n && recs[i].device == dev; ++i) {
      const OpenRec& r = recs[i];
      const uint64_t d = r.end - r.start;
      last = std::max(last, r.end);
      cat[r.cat].add(r.start, r.end);
      all.add(r.start, r.end);
      t.gpu_sum_ns += d;
      if (is_compute(static_cast<Category>(r.cat))) {
        compute.add(r.start, r.end);
        comm_or_compute.add(r.start, r.end);
        t.compute_sum_ns += d;
      } else if (r.cat == kComm) {
        comm_or_compute.add(r.start, r.end);
        t.comm_sum_ns += d;
      } else {
        t.io_sum_ns += d;
      }
      if (r.slot == kNoSlot) continue;
      if (!sc.touched_flag[r.slot]) {
        sc.touched_flag[r.slot] = 1;
        sc.touched.push_back(r.slot);
      }
      sc.region[r.slot].add(r.start, r.end);
      sc.region_cat[r.slot * kCategoryCount + r.cat].add(r.start, r.end);
      if (r.entry == 0) continue;
      if (r.entry != last_entry || last_span == nullptr) {
        bool inserted = false;
        last_span = sc.entries.find_or_insert(r.entry, EntrySpan{r.slot, r.start, r.end}, inserted);
        last_entry = r.entry;
        if (inserted) continue;
      }
      last_span->first = std::min(last_span->first, r.start);
      last_span->last = std::max(last_span->last, r.end);
    }

    std::array<uint64_t, kCategoryCount> busy{};
    for (std::size_t c = 0; c < kCategoryCount; ++c) {
      busy[c] = cat[c].finish();
      acc.cat_busy[c] += busy[c];
      if (detail != nullptr) detail->cat_busy[c] += busy[c];
    }
    const uint64_t compute_ns = compute.finish();
    const uint64_t either_ns = comm_or_compute.finish();
    const uint64_t all_ns = all.finish();
    t.gpu_busy_ns = all_ns;
    t.compute_ns = compute_ns;
    t.comm_ns = busy[kComm];
    // |comm ∩ compute| = |comm| + |compute| − |comm ∪ compute|; |comm − compute| = |∪| − |compute|
    t.comm_overlapped_ns = busy[kComm] + compute_ns - either_ns;
    t.exposed_comm_ns = either_ns - compute_ns;
    t.io_ns = busy[kIo];
    add_totals(acc.totals, t);
    if (detail != nullptr) add_totals(detail->totals, t);

    for (uint32_t slot : sc.touched) {
      RegionFold& rf = acc.regions[slot];
      rf.busy += sc.region[slot].finish();
      for (std::size_t c = 0; c < kCategoryCount; ++c)
        rf.cat_busy[c] += sc.region_cat[slot * kCategoryCount + c].finish();
      sc.touched_flag[slot] = 0;
    }
    sc.touched.clear();

    auto d = std::find_if(devices.begin(), devices.end(),
                          [dev](const DeviceSpan& s) { return s.device == dev; });
    if (d == devices.end()) {
      devices.push_back({dev, first, last, all_ns});
    } else {
      d->first = std::min(d->first, first);
      d->last = std::max(d->last, last);
      d->busy += all_ns;
    }
  }
  sc.entries.for_each(
      [&acc](const EntrySpan& span) { acc.regions[span.slot].span += span.last - span.first; });
}

void GpuAggregator::finish_step(const std::vector<DeviceSpan>& devices, uint64_t step,
                                Accum& acc, uint32_t step_detail) {
  DetailAcc* detail = detail_for(acc, step, step_detail);
  for (const DeviceSpan& d : devices) {
    const uint64_t span = d.last - d.first;
    const uint64_t idle = span > d.busy ? span - d.busy : 0;
    acc.totals.idle_ns += idle;
    if (detail != nullptr) {
      detail->totals.idle_ns += idle;
      detail->span += span;
    }
  }
}

void GpuAggregator::fold_late(const OpenRec& r, uint64_t step) {
  // The step was already folded: count the record as an isolated interval (its overlap with the
  // folded work is unknown), so raw sums stay exact and union figures may overcount by at most
  // its duration. docs/attribution.md "Late records".
  ++acc_.late_records;
  const uint64_t d = r.end - r.start;
  acc_.cat_busy[r.cat] += d;
  StepTotals t;
  t.gpu_busy_ns = d;
  t.gpu_sum_ns = d;
  if (is_compute(static_cast<Category>(r.cat))) {
    t.compute_ns = t.compute_sum_ns = d;
  } else if (r.cat == kComm) {
    t.comm_ns = t.comm_sum_ns = t.exposed_comm_ns = d;
  } else {
    t.io_ns = t.io_sum_ns = d;
  }
  add_totals(acc_.totals, t);
  auto it = acc_.detail.find(step);
  if (it != acc_.detail.end()) {
    add_totals(it->second.totals, t);
    it->second.cat_busy[r.cat] += d;
  }
  if (r.slot != kNoSlot) {
    RegionFold& rf = acc_.regions[r.slot];
    rf.busy += d;
    rf.cat_busy[r.cat] += d;
    if (r.entry != 0) rf.span += d;
  }
}

GpuAggregator::CommRing& GpuAggregator::ring_for(uint32_t comm_id) {
  CommRing& ring = rings_[comm_id];
  if (ring.ring.empty()) ring.ring.resize(std::max<uint32_t>(opt_.recent_collectives, 1));
  return ring;
}

void GpuAggregator::add_comm_share(uint32_t comm_id, CommOp op, uint64_t seq, uint64_t bytes,
                                   uint64_t share, const GpuActivity& a, bool captured) {
  CommGpu& g = comm_gpu_[(static_cast<uint64_t>(comm_id) << 8) | static_cast<uint64_t>(op)];
  const uint32_t b = size_bucket(bytes);
  g.gpu_ns += share;
  ++g.kernels;
  g.bucket_gpu_ns[b] += share;
  if (captured) {
    ++g.captured_calls;
    g.captured_bytes += bytes;
    ++g.bucket_captured_calls[b];
    g.bucket_captured_bytes[b] += bytes;
  }
  if (comm_id == 0 || seq == 0) return;
  CommRing& ring = ring_for(comm_id);
  ring.ops_completed = std::max(ring.ops_completed, seq);
  RingEntry& e = ring.ring[seq % ring.ring.size()];
  const uint64_t end = std::max(a.end_ns, a.start_ns);
  if (e.seq == seq) {  // another kernel of the same collective (e.g. a group spanning streams)
    e.start = std::min(e.start, a.start_ns);
    e.end = std::max(e.end, end);
  } else if (seq > e.seq) {
    e = RingEntry{seq, op, bytes, a.start_ns, end};
  }
}

void GpuAggregator::ingest_comm(const GpuActivity& a, const LaunchContext& ctx, uint64_t dur,
                                uint32_t name_id) {
  if (ctx.comm_op == CommOp::kNone) {  // found by kernel name: no interposition
    CommOp op = name_id > kOtherKernels ? name_op_[name_id] : comm_op_from_kernel_name(a.name);
    CommGpu& g = comm_gpu_[kByNameKey | static_cast<uint64_t>(op)];
    g.gpu_ns += dur;
    ++g.kernels;
    return;
  }
  if (ctx.comm_group != 0 && comm_table_ != nullptr) {
    CommGroupRecord group;
    if (comm_table_->find_group(ctx.comm_group, group) && group.count > 0) {
      uint64_t total = 0;
      for (uint32_t i = 0; i < group.count; ++i) total += group.members[i].bytes;
      uint64_t given = 0;
      for (uint32_t i = 0; i < group.count; ++i) {
        const CommGroupMember& m = group.members[i];
        uint64_t share;
        if (i + 1 == group.count) {
          share = dur - given;  // the remainder, so the shares add up to the kernel exactly
        } else if (total > 0) {
          share = static_cast<uint64_t>(static_cast<unsigned __int128>(dur) * m.bytes / total);
        } else {
          share = dur / group.count;
        }
        given += share;
        add_comm_share(m.comm_id, m.op, m.seq, m.bytes, share, a, ctx.comm_captured);
      }
      return;
    }
    ++group_lookups_missed_;
  }
  add_comm_share(ctx.comm_id, ctx.comm_op, ctx.comm_seq, ctx.comm_bytes, dur, a,
                 ctx.comm_captured);
}

GpuSummary GpuAggregator::summary(uint64_t steps_completed) const {
  // Fold the open steps into a copy so that a snapshot leaves the live state untouched.
  Accum acc = acc_;
  Scratch sc;
  for (const auto& [step, buf] : open_) {
    std::vector<OpenRec> recs = buf.recs;
    std::vector<DeviceSpan> devices = buf.devices;
    fold_records(recs, devices, step, acc, sc, opt_.step_detail);
    finish_step(devices, step, acc, opt_.step_detail);
  }

  GpuSummary out;
  for (std::size_t c = 0; c < kCategoryCount; ++c)
    out.categories[c] = CategoryTotals{acc.cat_busy[c], cat_sum_[c], cat_count_[c]};

  out.totals = acc.totals;
  out.partial_final_step = any_activity_ && max_step_ >= steps_completed;
  for (const auto& [step, d] : acc.detail) {
    Steps::Detail row;
    row.index = step;
    row.span_ns = d.span;
    row.partial = step >= steps_completed;
    row.totals = d.totals;
    for (std::size_t c = 0; c < kCategoryCount; ++c)
      row.busy_ns_by_category[std::string(kCategoryNames[c])] = d.cat_busy[c];
    out.detail.push_back(std::move(row));
  }

  std::vector<std::vector<std::pair<uint32_t, KernelAcc>>> kernels_of(regions_.size());
  for (const auto& [key, k] : region_kernels_)
    kernels_of[key >> 32].emplace_back(static_cast<uint32_t>(key & 0xffffffffu), k);
  for (std::size_t slot = 0; slot < regions_.size(); ++slot) {
    const RegionAcc& r = regions_[slot];
    const RegionFold& rf = acc.regions[slot];
    GpuSummary::Region row;
    row.path = r.path;
    row.category = r.category;
    row.gpu_busy_ns = rf.busy;
    row.gpu_sum_ns = r.sum;
    row.gpu_span_ns = rf.span;
    row.kernels = r.kernels;
    for (std::size_t c = 0; c < kCategoryCount; ++c) {
      if (r.cat_count[c] == 0) continue;
      row.by_category[std::string(kCategoryNames[c])] = {rf.cat_busy[c], r.cat_sum[c],
                                                         r.cat_count[c]};
    }
    auto& ks = kernels_of[slot];
    std::sort(ks.begin(), ks.end(), [this](const auto& a, const auto& b) {
      if (a.second.sum != b.second.sum) return a.second.sum > b.second.sum;
      return names_[a.first] < names_[b.first];
    });
    for (std::size_t k = 0; k < ks.size() && k < opt_.top_kernels; ++k)
      row.top_kernels.push_back({demangle(names_[ks[k].first]), ks[k].second.count,
                                 ks[k].second.sum});
    out.regions.push_back(std::move(row));
  }

  for (std::size_t k = 1; k < memcpy_.size(); ++k) {
    const bool standard = k <= static_cast<std::size_t>(CopyKind::kPtoP);
    if (standard || memcpy_[k].count > 0) out.memcpy[std::string(kCopyNames[k])] = memcpy_[k];
  }

  // GPU time of NCCL work per (communicator, op), in key order (deterministic output).
  std::map<uint64_t, const CommGpu*> comm_sorted;
  for (const auto& [key, g] : comm_gpu_) comm_sorted.emplace(key, &g);
  for (const auto& [key, g] : comm_sorted) {
    GpuSummary::Comm c;
    c.op = static_cast<CommOp>(key & 0xff);
    const auto comm_id = static_cast<uint32_t>((key >> 8) & 0xffffffffu);
    c.comm_index = (key & kByNameKey) != 0 ? GpuSummary::kByName
                   : comm_id == 0          ? GpuSummary::kUnregistered
                                           : comm_id - 1;
    c.gpu_ns = g->gpu_ns;
    c.kernels = g->kernels;
    c.captured_calls = g->captured_calls;
    c.captured_bytes = g->captured_bytes;
    c.bucket_gpu_ns = g->bucket_gpu_ns;
    c.bucket_captured_calls = g->bucket_captured_calls;
    c.bucket_captured_bytes = g->bucket_captured_bytes;
    out.comm.push_back(c);
  }
  for (const auto& [comm_id, ring] : rings_) {
    GpuSummary::Ring r;
    r.comm_index = comm_id - 1;
    r.ops_completed = ring.ops_completed;
    for (const RingEntry& e : ring.ring) {
      if (e.seq == 0) continue;
      r.recent.push_back({e.seq, std::string(comm_op_name(e.op)), e.bytes, e.start, e.end});
    }
    std::sort(r.recent.begin(), r.recent.end(),
              [](const RecentCollective& a, const RecentCollective& b) { return a.seq < b.seq; });
    out.rings.push_back(std::move(r));
  }

  out.dropped_records = dropped_;
  auto warn = [&out](uint64_t n, const char* what) {
    if (n > 0) out.warnings.push_back(std::to_string(n) + " " + what);
  };
  warn(acc.late_records,
       "GPU records arrived after their step was folded; counted as isolated intervals "
       "(union figures may overcount by at most their duration)");
  warn(acc.segmented_steps,
       "times a step exceeded the open-record budget and was folded in segments "
       "(overlaps across a cut are counted twice)");
  warn(names_over_cap_, "kernel records beyond the kernel-name cap, listed as (other kernels)");
  warn(region_kernels_over_cap_,
       "kernel records beyond the per-region kernel cap, listed as (other kernels)");
  warn(group_lookups_missed_,
       "NCCL group kernels whose group members were no longer known; counted for the first op");
  warn(trace_dropped_, "activities beyond TRAINTIME_TRACE's event cap left out of the trace");
  return out;
}

nlohmann::json GpuAggregator::trace_json(const std::function<std::string(PathId)>& path_name) const {
  using nlohmann::json;
  json j;
  j["format"] = "traintime-trace/1";
  j["events_kept"] = trace_.size();
  j["events_dropped"] = trace_dropped_;
  j["truncated"] = trace_dropped_ > 0;
  j["late_records"] = acc_.late_records;
  json cats = json::array();
  for (auto n : kCategoryNames) cats.push_back(std::string(n));
  j["categories"] = cats;
  j["kinds"] = {"kernel", "memcpy", "memset"};
  json copies = json::array();
  for (auto n : kCopyNames) copies.push_back(n.empty() ? std::string("none") : std::string(n));
  j["copy_kinds"] = copies;
  json ops = json::array();
  for (std::size_t o = 0; o < kCommOpCount; ++o) {
    auto n = comm_op_name(static_cast<CommOp>(o));
    ops.push_back(n.empty() ? std::string("none") : std::string(n));
  }
  j["comm_ops"] = ops;
  j["names"] = names_;
  json paths = json::object();
  json events = json::array();
  for (const TraceEvent& e : trace_) {
    if (e.path != kNoPath) {
      std::string key = std::to_string(e.path);
      if (!paths.contains(key)) paths[key] = path_name(e.path);
    }
    events.push_back({e.start, e.end, e.device, e.stream, e.cat, e.path, e.step, e.kind, e.name,
                      e.bytes, e.correlation, e.copy, e.comm_op});
  }
  j["paths"] = paths;
  j["columns"] = {"start_ns", "end_ns",  "device", "stream", "category", "path",      "step",
                  "kind",     "name",    "bytes",  "correlation_id", "copy_kind", "comm_op"};
  j["events"] = std::move(events);
  return j;
}

GpuAggregator::Footprint GpuAggregator::footprint() const {
  Footprint fp;
  fp.open_steps = open_.size();
  fp.open_records = open_records_;
  fp.regions = regions_.size();
  fp.kernel_names = names_.size();
  fp.region_kernels = region_kernels_.size();
  fp.detail_steps = acc_.detail.size();
  fp.trace_events = trace_.size();
  return fp;
}

}  // namespace traintime::core
