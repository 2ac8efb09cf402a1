// The open-step window (docs/attribution.md "Memory bound"): activities are held per step until
// the step folds into the totals — union-based busy figures per category, region and step —
// when the window's record or step budget is exceeded, or into a copy at summary time.
#include <algorithm>
#include <utility>

#include "aggregator_internal.h"
#include "traintime/core/gpu_aggregator.h"

namespace traintime::core {

using namespace aggregator_detail;

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
    fold_records(buf, buf.devices, step, acc_, scratch_, opt_.step_detail);
    buf.clear_records();
    ++acc_.segmented_steps;
    break;  // the step stays open by design, even if max_open_steps is 0
  }
}

void GpuAggregator::fold_oldest() {
  auto it = open_.begin();
  const uint64_t step = it->first;
  StepBuf& buf = it->second;
  open_records_ -= buf.recs.size();
  fold_records(buf, buf.devices, step, acc_, scratch_, opt_.step_detail);
  finish_step(buf.devices, step, acc_, opt_.step_detail);
  OpenSteps::node_type node = open_.extract(it);
  if (spare_steps_.size() < kSpareBufs) {
    buf.clear_records();
    buf.devices.clear();
    spare_steps_.push_back(std::move(node));
  }
  folded_below_ = std::max(folded_below_, step + 1);
  if (last_step_ == step) {  // the step records were going to: its buffer is gone
    last_buf_ = nullptr;
    last_step_ = ~uint64_t{0};
  }
}

GpuAggregator::DetailAcc* GpuAggregator::detail_for(Accum& acc, uint64_t step,
                                                   uint32_t step_detail) {
  if (step_detail == 0) return nullptr;
  // A step is looked up twice when it folds (its records, then its idle time): the second time
  // is the last one found.
  if (acc.last_detail.acc != nullptr && acc.last_detail.step == step) return acc.last_detail.acc;
  auto it = acc.detail.find(step);
  if (it == acc.detail.end()) {
    // The most recent step_detail steps by index are kept: an older step is not re-added.
    if (acc.detail.size() >= step_detail) {
      if (step < acc.detail.begin()->first) return nullptr;
      // The oldest row's node is reused for the new one: a full window allocates nothing.
      auto node = acc.detail.extract(acc.detail.begin());
      node.key() = step;
      node.mapped() = DetailAcc{};
      it = acc.detail.insert(std::move(node)).position;
    } else {
      it = acc.detail.emplace(step, DetailAcc{}).first;
    }
  }
  acc.last_detail.step = step;
  acc.last_detail.acc = &it->second;
  return acc.last_detail.acc;
}

void GpuAggregator::fold_records(StepBuf& buf, std::vector<DeviceSpan>& devices, uint64_t step,
                                 Accum& acc, Scratch& sc, uint32_t step_detail) {
  // Records of one device usually arrive in start order already (ingest keeps the flag).
  if (!buf.sorted) {
    std::sort(buf.recs.begin(), buf.recs.end(), before);
    buf.sorted = true;
  }
  fold_sorted(buf.recs.data(), buf.recs.size(), buf.entries.data(), devices, step, acc, sc,
              step_detail);
}

void GpuAggregator::fold_copy(const StepBuf& buf, std::vector<DeviceSpan>& devices,
                              uint64_t step, Accum& acc, Scratch& sc, uint32_t step_detail) {
  const OpenRec* recs = buf.recs.data();
  if (!buf.sorted) {
    sc.sorted.assign(buf.recs.begin(), buf.recs.end());
    std::sort(sc.sorted.begin(), sc.sorted.end(), before);
    recs = sc.sorted.data();
  }
  fold_sorted(recs, buf.recs.size(), buf.entries.data(), devices, step, acc, sc, step_detail);
}

void GpuAggregator::fold_sorted(const OpenRec* recs, std::size_t n, const uint64_t* entries,
                                std::vector<DeviceSpan>& devices, uint64_t step, Accum& acc,
                                Scratch& sc, uint32_t step_detail) {
  if (n == 0) return;
  DetailAcc* detail = detail_for(acc, step, step_detail);
  const std::size_t nslots = acc.regions.size();
  if (sc.region.size() < nslots) {
    sc.region.resize(nslots);
    sc.region_cat.resize(nslots * kCategoryCount);
    sc.touched_cats.resize(nslots, 0);
  }
  sc.entries.clear();
  uint32_t last_entry = ~uint32_t{0};  // position in entries
  EntrySpan* last_span = nullptr;
  // Raw pointers for the loop: read through the vectors, each index reloads their bounds.
  IntervalUnion* const region = sc.region.data();
  RegionLane* const region_cat = sc.region_cat.data();
  uint8_t* const touched_cats = sc.touched_cats.data();

  std::size_t i = 0;
  while (i < n) {
    const uint32_t dev = recs[i].device;
    // Per category: the union and the raw sum of its records on this device.
    struct Lane {
      IntervalUnion busy;
      uint64_t sum = 0;
      uint64_t count = 0;
    };
    std::array<Lane, kCategoryCount> cat{};
    IntervalUnion compute, comm_or_compute, all;
    const uint64_t first = recs[i].start;
    uint64_t last = recs[i].end;
    for (; i < n && recs[i].device == dev; ++i) {
      const OpenRec& r = recs[i];
      last = std::max(last, r.end);
      Lane& lane = cat[r.cat];
      lane.busy.add(r.start, r.end);
      lane.sum += r.end - r.start;
      ++lane.count;
      all.add(r.start, r.end);
      // Compute, and comm or compute, without a branch on the category (random on a GPU running
      // both): a record outside the set adds the empty [start, start), which counts nothing and
      // leaves later intervals' figures as they were (they start there or later).
      const uint64_t class_bits = kClassOf >> (4 * r.cat);
      compute.add(r.start, class_bits & 1 ? r.end : r.start);
      comm_or_compute.add(r.start, class_bits & 2 ? r.end : r.start);
      if (r.slot == kNoSlot) continue;
      uint8_t& cats = touched_cats[r.slot];
      if (cats == 0) sc.touched.push_back(r.slot);
      cats |= static_cast<uint8_t>(1u << r.cat);
      region[r.slot].add(r.start, r.end);
      RegionLane& rl = region_cat[r.slot * kCategoryCount + r.cat];
      rl.busy.add(r.start, r.end);
      rl.sum += r.end - r.start;
      ++rl.count;
      if (r.entry != last_entry) {
        last_entry = r.entry;
        last_span = nullptr;
        if (entries[r.entry] != 0) {
          bool inserted = false;
          last_span = sc.entries.find_or_insert(entries[r.entry],
                                                EntrySpan{r.slot, r.start, r.end}, inserted);
          if (inserted) continue;
        }
      }
      if (last_span == nullptr) continue;
      last_span->first = std::min(last_span->first, r.start);
      last_span->last = std::max(last_span->last, r.end);
    }

    StepTotals t;
    std::array<uint64_t, kCategoryCount> busy{};
    for (std::size_t c = 0; c < kCategoryCount; ++c) {
      busy[c] = cat[c].busy.finish();
      acc.cat_busy[c] += busy[c];
      if (detail != nullptr) detail->cat_busy[c] += busy[c];
      acc.cat_sum[c] += cat[c].sum;
      acc.cat_count[c] += cat[c].count;
      t.gpu_sum_ns += cat[c].sum;
      if (is_compute(static_cast<Category>(c))) t.compute_sum_ns += cat[c].sum;
    }
    t.comm_sum_ns = cat[kComm].sum;
    t.io_sum_ns = cat[kIo].sum;
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

    // Only the categories a region's records had: most regions see one or two of the eight.
    for (uint32_t slot : sc.touched) {
      RegionFold& rf = acc.regions[slot];
      rf.busy += region[slot].finish();
      for (unsigned cats = touched_cats[slot]; cats != 0; cats &= cats - 1) {
        const auto c = static_cast<std::size_t>(__builtin_ctz(cats));
        RegionLane& rl = region_cat[slot * kCategoryCount + c];
        rf.cat_busy[c] += rl.busy.finish();
        rf.sum += rl.sum;
        rf.cat_sum[c] += rl.sum;
        rf.cat_count[c] += rl.count;
        rl = RegionLane{};
      }
      touched_cats[slot] = 0;
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

void GpuAggregator::fold_late(const OpenRec& r, uint64_t entry, uint64_t step) {
  // The step was already folded: count the record as an isolated interval (its overlap with the
  // folded work is unknown), so raw sums stay exact and union figures may overcount by at most
  // its duration. docs/attribution.md "Late records".
  ++acc_.late_records;
  const uint64_t d = r.end - r.start;
  acc_.cat_busy[r.cat] += d;
  acc_.cat_sum[r.cat] += d;
  ++acc_.cat_count[r.cat];
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
    rf.sum += d;
    rf.cat_busy[r.cat] += d;
    rf.cat_sum[r.cat] += d;
    ++rf.cat_count[r.cat];
    if (entry != 0) rf.span += d;
  }
}

bool GpuAggregator::step_figures(uint64_t step, GpuStepFigures* out) {
  // Folded into a scratch Accum as summary() folds open steps into a copy: a step folded in
  // segments (its detail so far, its devices' spans in the open buffer) comes out whole.
  Accum tmp;
  tmp.regions.resize(acc_.regions.size());
  const auto folded = acc_.detail.find(step);
  if (folded != acc_.detail.end()) tmp.detail.emplace(step, folded->second);
  const auto open = open_.find(step);
  if (open != open_.end()) {
    std::vector<DeviceSpan> devices = open->second.devices;
    fold_copy(open->second, devices, step, tmp, peek_scratch_, 1);
    finish_step(devices, step, tmp, 1);
  } else if (folded == acc_.detail.end() && step < folded_below_) {
    return false;  // folded with no detail row kept
  }
  *out = GpuStepFigures{};
  out->step = step;
  const auto d = tmp.detail.find(step);
  if (d == tmp.detail.end()) return true;  // no GPU work in this step
  const DetailAcc& acc = d->second;
  out->span_ns = acc.span;
  out->busy_ns = acc.totals.gpu_busy_ns;
  out->compute_ns = acc.totals.compute_ns;
  out->comm_ns = acc.totals.comm_ns;
  out->exposed_comm_ns = acc.totals.exposed_comm_ns;
  out->io_ns = acc.totals.io_ns;
  out->idle_ns = acc.totals.idle_ns;
  out->category_busy_ns = acc.cat_busy;
  return true;
}

}  // namespace traintime::core
