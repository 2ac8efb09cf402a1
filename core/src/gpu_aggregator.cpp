// The attribution engine's ingest path (DESIGN §4): region slots and raw sums per activity;
// the open-step window is in step_window.cpp, comm GPU time in comm_gpu.cpp, the summary in
// gpu_summary.cpp, the trace dump in aggregator_trace.cpp, kernel names in kernel_names.cpp.
#include "traintime/core/gpu_aggregator.h"

#include <algorithm>
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
  site_cache_.resize(kSiteCacheSize);
  spare_bufs_.reserve(kSpareBufs);
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
  if (region_kernels_.size() >= opt_.max_region_kernels) {
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

void GpuAggregator::ingest(const GpuActivity& a, const LaunchContext& ctx,
                           Category region_category) {
  const uint64_t start = a.start_ns;
  const uint64_t end = a.end_ns > a.start_ns ? a.end_ns : a.start_ns;
  const uint64_t dur = end - start;
  const bool is_kernel = a.kind == ActivityKind::kKernel;

  // A kernel launched again from the same region (the common case) is resolved by one probe of
  // the site cache: name id, region slot and (region, kernel) pair at once.
  uint32_t name_id = kNoName;
  bool nccl = false;
  uint32_t slot;
  uint32_t rk = 0;
  bool hit = false;
  SiteCacheEntry* site = nullptr;  // to fill after a miss
  if (is_kernel && !a.name.empty()) {
    site = &site_cache_[site_hash(a.name.data(), ctx.path)];
    if (site->ptr == a.name.data() && site->len == a.name.size() && site->path == ctx.path &&
        site->name_id > kOtherKernels &&
        same_chars(name_of(site->name_id).data(), a.name.data(), a.name.size())) {
      name_id = site->name_id;
      nccl = site->nccl != 0;
      slot = site->slot;
      rk = site->rk;
      hit = true;
      site = nullptr;
    } else {
      name_id = intern(a.name, nccl);
      slot = region_slot(ctx.path, region_category);
    }
  } else {
    slot = region_slot(ctx.path, region_category);
  }
  const Category cat = attribute(nccl, ctx, region_category);
  const auto ci = static_cast<std::size_t>(cat);
  cat_sum_[ci] += dur;
  ++cat_count_[ci];

  if (slot != kNoSlot) {
    RegionAcc& r = regions_[slot];
    r.sum += dur;
    r.cat_sum[ci] += dur;
    ++r.cat_count[ci];
    if (is_kernel) {
      ++r.kernels;
      const uint64_t key = (static_cast<uint64_t>(slot) << 32) | name_id;
      if (hit) {
        last_rk_ = rk;
        last_rk_key_ = key;
      } else if (key != last_rk_key_) {
        last_rk_ = region_kernel(key, slot);
        last_rk_key_ = key;
      }
      KernelAcc& k = region_kernels_[last_rk_];
      ++k.count;
      k.sum += dur;
    }
  }
  // Only what the full lookups found without a cap in the way is cached: a name or pair beyond
  // its cap keeps being counted record by record.
  if (site != nullptr && name_id > kOtherKernels &&
      (slot == kNoSlot || region_kernels_[last_rk_].key == last_rk_key_))
    *site = SiteCacheEntry{a.name.data(), static_cast<uint32_t>(a.name.size()), ctx.path,
                           name_id, slot, slot == kNoSlot ? 0 : last_rk_,
                           static_cast<uint8_t>(nccl)};

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
      trace_.push_back({start, end, a.bytes, a.correlation_id, ctx.path, ctx.step,
                        name_id, a.device, a.stream, static_cast<uint8_t>(ci),
                        static_cast<uint8_t>(a.kind), static_cast<uint8_t>(a.copy_kind),
                        static_cast<uint8_t>(ctx.comm.op)});
    } else {
      ++trace_dropped_;
    }
  }

  if (!any_activity_) first_device_ = static_cast<int>(a.device);
  any_activity_ = true;
  const uint64_t step = ctx.step;
  max_step_ = std::max(max_step_, step);
  if (published_below_ > step) ++after_publish_;
  if (step != last_step_ || last_buf_ == nullptr) {
    if (step < folded_below_) {
      fold_late(OpenRec{start, end, 0, a.device, slot, static_cast<uint8_t>(ci)}, ctx.entry, step);
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
  StepBuf& buf = *last_buf_;
  if (buf.entries.empty() || buf.entries.back() != ctx.entry) buf.entries.push_back(ctx.entry);
  // Written field by field in place: a record built on the stack and copied in would be read
  // back in 16-byte pieces straight after its narrower stores, a store-forwarding stall per record.
  if (!buf.recs.empty()) {
    const OpenRec& last = buf.recs.back();
    if (a.device != last.device ? a.device < last.device : start < last.start) buf.sorted = false;
  }
  OpenRec& rec = buf.recs.emplace_back();
  rec.start = start;
  rec.end = end;
  rec.entry = static_cast<uint32_t>(buf.entries.size() - 1);
  rec.device = a.device;
  rec.slot = slot;
  rec.cat = static_cast<uint8_t>(ci);
  ++open_records_;
  if (open_records_ > opt_.max_open_records || open_.size() > opt_.max_open_steps)
    enforce_bounds();
}

GpuAggregator::Footprint GpuAggregator::footprint() const {
  Footprint fp;
  fp.open_steps = open_.size();
  fp.open_records = open_records_;
  fp.regions = regions_.size();
  fp.kernel_names = name_end_.size();
  fp.region_kernels = region_kernels_.size();
  fp.detail_steps = acc_.detail.size();
  fp.trace_events = trace_.size();
  return fp;
}

}  // namespace traintime::core
