// The attribution engine's ingest path (DESIGN §4): region slots and raw sums per activity;
// the open-step window is in step_window.cpp, comm GPU time in comm_gpu.cpp, the summary in
// gpu_summary.cpp, the trace dump in aggregator_trace.cpp, kernel names in kernel_names.cpp.
#include "traintime/core/gpu_aggregator.h"

#include <algorithm>
#include <utility>

#include "aggregator_internal.h"
#include "traintime/core/attribution.h"

namespace traintime::core {

using namespace aggregator_detail;

GpuAggregator::GpuAggregator(AggregatorOptions options) : opt_(options) {
  names_ = {"", "(other kernels)"};
  name_nccl_ = {0, 0};
  name_op_ = {CommOp::kUnknown, CommOp::kUnknown};
  name_cache_.resize(kNameCacheSize);
  rk_cache_.resize(std::size_t{1} << kRkCacheBits);
  spare_bufs_.reserve(kSpareBufs);
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
