// GpuAggregator::summary: the GPU side of the rank file (core/summaries.h).
#include <algorithm>
#include <map>
#include <numeric>
#include <utility>

#include "aggregator_internal.h"
#include "traintime/core/core_counters.h"
#include "traintime/core/gpu_aggregator.h"

namespace traintime::core {

using namespace aggregator_detail;

namespace {

template <class T>
std::size_t vector_bytes(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}

}  // namespace

std::size_t GpuAggregator::held_bytes() const {
  // A node of a std::map or std::unordered_map: its value, two or three pointers and the
  // allocator's header, about this much beyond the value.
  constexpr std::size_t kNode = 48;
  std::size_t n = name_chars_.capacity() + vector_bytes(name_end_) + vector_bytes(name_nccl_) +
                  vector_bytes(name_op_) + name_index_.bytes() + vector_bytes(name_cache_) +
                  vector_bytes(site_cache_) + slot_of_.bytes() + vector_bytes(regions_) +
                  vector_bytes(region_kernels_) + region_kernel_index_.bytes() +
                  comm_gpu_.size() * (sizeof(CommGpu) + kNode) + vector_bytes(trace_) +
                  vector_bytes(acc_.regions) + acc_.detail.size() * (sizeof(DetailAcc) + kNode);
  for (const auto& [id, ring] : rings_) n += sizeof(ring) + kNode + vector_bytes(ring.ring);
  auto step_bytes = [](const StepBuf& b) {
    return sizeof(StepBuf) + vector_bytes(b.recs) + vector_bytes(b.entries) + vector_bytes(b.devices);
  };
  for (const OpenStep& o : open_) n += step_bytes(*o.buf);
  for (const std::unique_ptr<StepBuf>& b : spare_steps_) n += step_bytes(*b);
  for (const Scratch* s : {&scratch_, &peek_scratch_})
    n += vector_bytes(s->region) + vector_bytes(s->region_cat) + vector_bytes(s->touched_cats) +
         vector_bytes(s->touched) + vector_bytes(s->entry_at) + vector_bytes(s->sorted);
  peak_held_ = std::max(peak_held_, n);
  return n;
}

GpuSummary GpuAggregator::summary(uint64_t steps_completed) const {
  // Fold the open steps into a copy so that a snapshot leaves the live state untouched.
  Accum acc = acc_;
  Scratch sc;
  for (const OpenStep& o : open_) {
    std::vector<DeviceSpan> devices = o.buf->devices;
    fold_copy(*o.buf, devices, o.step, acc, sc, opt_.step_detail);
    finish_step(devices, o.step, acc, opt_.step_detail);
  }

  GpuSummary out;
  for (std::size_t c = 0; c < kCategoryCount; ++c)
    out.categories[c] = CategoryTotals{acc.cat_busy[c], acc.cat_sum[c], acc.cat_count[c]};

  out.totals = acc.totals;
  out.partial_final_step = any_activity_ && max_step_ >= steps_completed;
  for (const auto& [step, d] : acc.detail) {
    Steps::Detail row;
    row.index = step;
    row.span_ns = d.span;
    row.partial = step >= steps_completed;
    row.totals = d.totals;
    for (std::size_t c = 0; c < kCategoryCount; ++c)
      row.busy_ns_by_category.set(static_cast<Category>(c)) = d.cat_busy[c];
    out.detail.push_back(std::move(row));
  }

  // Positions in region_kernels_, grouped by region slot (a counting sort: 4 bytes a pair); the
  // pairs of kernels with no region open (kNoRegionSlot) go last, in a group of their own.
  const std::size_t groups = regions_.size() + 1;
  auto group_of = [&](const KernelAcc& k) {
    const auto slot = static_cast<uint32_t>(k.key >> 32);
    return slot == kNoRegionSlot ? regions_.size() : std::size_t{slot};
  };
  std::vector<uint32_t> first_of(groups + 1, 0);
  for (const KernelAcc& k : region_kernels_) ++first_of[group_of(k) + 1];
  for (std::size_t g = 0; g < groups; ++g) first_of[g + 1] += first_of[g];
  std::vector<uint32_t> by_slot(region_kernels_.size());
  {
    std::vector<uint32_t> next(first_of.begin(), first_of.end() - 1);
    for (uint32_t i = 0; i < region_kernels_.size(); ++i) by_slot[next[group_of(region_kernels_[i])]++] = i;
  }
  // The rank's own list: every pair's figures added up by kernel name, the largest first. The
  // pairs are walked in name order through 4 bytes each and only the top ones are kept (a heap
  // whose front ranks last), so a summary costs little beyond what the names themselves hold.
  {
    auto ranks_before = [this](const KernelAcc& x, const KernelAcc& y) {
      if (x.sum != y.sum) return x.sum > y.sum;
      return name_of(static_cast<uint32_t>(x.key)) < name_of(static_cast<uint32_t>(y.key));
    };
    auto name_id = [this](uint32_t pair) { return static_cast<uint32_t>(region_kernels_[pair].key); };
    std::vector<uint32_t> by_name(region_kernels_.size());
    std::iota(by_name.begin(), by_name.end(), 0u);
    std::sort(by_name.begin(), by_name.end(), [&](uint32_t a, uint32_t b) { return name_id(a) < name_id(b); });
    std::vector<KernelAcc> top;
    for (std::size_t i = 0; i < by_name.size();) {
      KernelAcc n{name_id(by_name[i]), 0, 0};
      for (; i < by_name.size() && name_id(by_name[i]) == n.key; ++i) {
        n.count += region_kernels_[by_name[i]].count;
        n.sum += region_kernels_[by_name[i]].sum;
      }
      if (n.count == 0) continue;
      if (top.size() < opt_.top_kernels) {
        top.push_back(n);
        std::push_heap(top.begin(), top.end(), ranks_before);
      } else if (!top.empty() && ranks_before(n, top.front())) {
        std::pop_heap(top.begin(), top.end(), ranks_before);
        top.back() = n;
        std::push_heap(top.begin(), top.end(), ranks_before);
      }
    }
    std::sort_heap(top.begin(), top.end(), ranks_before);
    for (const KernelAcc& k : top)
      out.top_kernels.push_back({demangle(name_of(static_cast<uint32_t>(k.key))), k.count, k.sum});
  }
  for (std::size_t slot = 0; slot < regions_.size(); ++slot) {
    const RegionAcc& r = regions_[slot];
    const RegionFold& rf = acc.regions[slot];
    GpuSummary::Region row;
    row.path = r.path;
    row.category = r.category;
    row.gpu_busy_ns = rf.busy;
    row.gpu_sum_ns = rf.sum;
    row.gpu_span_ns = rf.span;
    for (std::size_t c = 0; c < kCategoryCount; ++c) {
      if (rf.cat_count[c] == 0) continue;
      row.by_category.set(static_cast<Category>(c)) = {rf.cat_busy[c], rf.cat_sum[c], rf.cat_count[c]};
    }
    const auto ks = by_slot.begin() + first_of[slot];
    const auto ks_end = by_slot.begin() + first_of[slot + 1];
    // Every kernel of the region is counted in exactly one of its (region, kernel) pairs.
    for (auto k = ks; k != ks_end; ++k) row.kernels += region_kernels_[*k].count;
    const auto top = ks + std::min<std::ptrdiff_t>(ks_end - ks, opt_.top_kernels);
    std::partial_sort(ks, top, ks_end, [this](uint32_t a, uint32_t b) {
      const KernelAcc& x = region_kernels_[a];
      const KernelAcc& y = region_kernels_[b];
      if (x.sum != y.sum) return x.sum > y.sum;
      return name_of(static_cast<uint32_t>(x.key)) < name_of(static_cast<uint32_t>(y.key));
    });
    for (auto k = ks; k != top; ++k) {
      const KernelAcc& acc_k = region_kernels_[*k];
      row.top_kernels.push_back(
          {demangle(name_of(static_cast<uint32_t>(acc_k.key))), acc_k.count, acc_k.sum});
    }
    out.regions.push_back(std::move(row));
  }

  for (std::size_t k = 1; k < memcpy_.size(); ++k) {
    const bool standard = k <= static_cast<std::size_t>(CopyKind::kPtoP);
    if (standard || memcpy_[k].count > 0) out.memcpy[static_cast<CopyKind>(k)] = memcpy_[k];
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
    c.time = *g;
    out.comm.push_back(c);
  }
  for (const auto& [comm_id, ring] : rings_) {
    GpuSummary::Ring r;
    r.comm_index = comm_id - 1;
    r.ops_completed = ring.ops_completed;
    for (const RingEntry& e : ring.ring) {
      if (e.seq == 0) continue;
      r.recent.push_back({e.seq, e.op, e.bytes, e.start, e.end});
    }
    std::sort(r.recent.begin(), r.recent.end(),
              [](const RecentCollective& a, const RecentCollective& b) { return a.seq < b.seq; });
    out.rings.push_back(std::move(r));
  }

  out.dropped_records = dropped_;
  // Each counter, its warning from its table (core_counters.h).
  using C = GpuCounter;
  out.section.count(kGpuCounters, C::late_records, acc.late_records);
  out.section.count(kGpuCounters, C::segmented_steps, acc.segmented_steps);
  out.section.count(kGpuCounters, C::kernel_names_over_cap, names_over_cap_);
  out.section.count(kGpuCounters, C::region_kernels_over_cap, region_kernels_over_cap_);
  out.section.count(kGpuCounters, C::group_lookups_missed, group_lookups_missed_);
  out.section.count(kGpuCounters, C::trace_events_dropped, trace_dropped_);
  return out;
}

}  // namespace traintime::core
