// The open-step window (docs/attribution.md "Memory bound"): activities are held per step until
// the step folds into the totals — union-based busy figures per category, region and step —
// when the window's record or step budget is exceeded, or into a copy at summary time.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <iterator>
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
  while (open_steps_ > 0 &&
         (open_records_ > opt_.max_open_records || open_steps_ > opt_.max_open_steps)) {
    if (open_steps_ > 1) {
      fold_oldest();
      continue;
    }
    // One step holds more than the whole budget (e.g. a program that never calls tt_step):
    // fold what it has as a segment and keep the step open for what follows.
    const uint64_t step = open_.front().step;
    StepBuf& buf = *open_.front().buf;
    open_records_ -= buf.recs.size();
    fold_records(buf, buf.devices, step, acc_, scratch_, opt_.step_detail);
    buf.clear_records();
    ++acc_.segmented_steps;
    break;  // the step stays open by design, even if max_open_steps is 0
  }
}

void GpuAggregator::fold_oldest() {
  const uint64_t step = open_.front().step;
  StepBuf& buf = *open_.front().buf;
  open_records_ -= buf.recs.size();
  fold_records(buf, buf.devices, step, acc_, scratch_, opt_.step_detail);
  finish_step(buf.devices, step, acc_, opt_.step_detail);
  if (spare_steps_.size() < kSpareBufs) {
    buf.clear_records();
    buf.devices.clear();
    spare_steps_.push_back(std::move(open_.front().buf));
  }
  open_.pop_front();
  --open_steps_;
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
  // Steps usually fold in order: a step past the last row is new, and goes at the end.
  const bool newest = acc.detail.empty() || std::prev(acc.detail.end())->first < step;
  auto it = newest ? acc.detail.end() : acc.detail.find(step);
  if (it == acc.detail.end()) {
    // The most recent step_detail steps by index are kept: an older step is not re-added.
    if (acc.detail.size() >= step_detail) {
      if (step < acc.detail.begin()->first) return nullptr;
      // The oldest row's node is reused for the new one: a full window allocates nothing.
      auto node = acc.detail.extract(acc.detail.begin());
      node.key() = step;
      node.mapped() = DetailAcc{};
      it = acc.detail.insert(newest ? acc.detail.end() : acc.detail.lower_bound(step),
                             std::move(node));
    } else {
      it = acc.detail.emplace_hint(newest ? acc.detail.end() : acc.detail.lower_bound(step), step,
                                   DetailAcc{});
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
  fold_sorted(buf.recs.data(), buf.recs.size(), buf.entries.data(), buf.entries.size(), devices,
              step, acc, sc, step_detail);
}

void GpuAggregator::fold_copy(const StepBuf& buf, std::vector<DeviceSpan>& devices,
                              uint64_t step, Accum& acc, Scratch& sc, uint32_t step_detail) {
  const OpenRec* recs = buf.recs.data();
  if (!buf.sorted) {
    sc.sorted.assign(buf.recs.begin(), buf.recs.end());
    std::sort(sc.sorted.begin(), sc.sorted.end(), before);
    recs = sc.sorted.data();
  }
  fold_sorted(recs, buf.recs.size(), buf.entries.data(), buf.entries.size(), devices, step, acc,
              sc, step_detail);
}

void GpuAggregator::fold_sorted(const OpenRec* recs, std::size_t n, const uint64_t* entries,
                                std::size_t n_entries, std::vector<DeviceSpan>& devices,
                                uint64_t step, Accum& acc, Scratch& sc, uint32_t step_detail) {
  static_assert(offsetof(OpenRec, device) == offsetof(OpenRec, entry) + 4 &&
                    offsetof(OpenRec, slot) == offsetof(OpenRec, entry) + 8 &&
                    offsetof(OpenRec, cat) == offsetof(OpenRec, entry) + 12 &&
                    sizeof(OpenRec) == offsetof(OpenRec, entry) + 16,
                "run_key reads entry, device, slot and category as two padding-free words");
  // A run: consecutive records (in fold order) of one region entry, device, region slot and
  // category. Its records enter the same per-category and per-region unions, so the fold sweeps
  // a run on its own, in registers, and adds the result to those unions once per run.
  struct Run {
    std::size_t begin, end;  // recs[begin, end)
    uint64_t first;          // the first record's start: the lowest, records being in start order
    IntervalUnion busy;      // the run's own union; its reach is the run's last end
    uint64_t sum;            // raw sum of the run's durations
  };
  // The run into the union u: in one step when the run begins after everything u holds (records
  // of one category on one stream, the common case), else record by record. Either way the same
  // result as adding every record in fold order.
  auto add_run = [recs](IntervalUnion& u, const Run& run) {
    if (u.add_after(run.first, run.busy.reach(), run.busy.total())) return;
    for (std::size_t k = run.begin; k < run.end; ++k) u.add(recs[k].start, recs[k].end);
  };
  // entry, device, slot and category of a record as two words, for the run test.
  auto run_key = [](const OpenRec& r, uint64_t key[2]) {
    std::memcpy(key, reinterpret_cast<const char*>(&r) + offsetof(OpenRec, entry),
                2 * sizeof(uint64_t));
  };
  if (n == 0) return;
  DetailAcc* detail = detail_for(acc, step, step_detail);
  const std::size_t nslots = acc.regions.size();
  if (sc.region.size() < nslots) {
    sc.region.resize(nslots);
    sc.region_cat.resize(nslots * kCategoryCount);
    sc.touched_cats.resize(nslots, 0);
  }
  // Each region entry's span: its records' lowest start and highest end, first by position in
  // entries (a step usually holds each entry at one position), then merged by entry.
  sc.entry_at.assign(n_entries, EntrySpan{kNoSlot, ~uint64_t{0}, 0});
  EntrySpan* const entry_at = sc.entry_at.data();
  // Raw pointers for the loop: read through the vectors, each index reloads their bounds.
  IntervalUnion* const region = sc.region.data();
  RegionLane* const region_cat = sc.region_cat.data();
  uint8_t* const touched_cats = sc.touched_cats.data();

  std::size_t i = 0;
  while (i < n) {
    const uint32_t dev = recs[i].device;
    // Per category: the union and the raw sum of its records on this device.
    std::array<RegionLane, kCategoryCount> cat{};
    IntervalUnion compute, comm_or_compute, all;
    const uint64_t first = recs[i].start;

    // A run's figures go where each of its records would have gone.
    auto finish_run = [&](const Run& run) {
      const OpenRec& h = recs[run.begin];
      const uint64_t count = run.end - run.begin;
      RegionLane& lane = cat[h.cat];
      add_run(all, run);
      add_run(lane.busy, run);
      lane.sum += run.sum;
      lane.count += count;
      const uint64_t class_bits = kClassOf >> (4 * h.cat);
      if (class_bits & 1) add_run(compute, run);
      if (class_bits & 2) add_run(comm_or_compute, run);
      if (h.slot == kNoSlot) return;
      uint8_t& cats = touched_cats[h.slot];
      if (cats == 0) sc.touched.push_back(h.slot);
      cats |= static_cast<uint8_t>(1u << h.cat);
      add_run(region[h.slot], run);
      RegionLane& rl = region_cat[h.slot * kCategoryCount + h.cat];
      add_run(rl.busy, run);
      rl.sum += run.sum;
      rl.count += count;
      EntrySpan& span = entry_at[h.entry];
      span.slot = h.slot;
      span.first = std::min(span.first, run.first);
      span.last = std::max(span.last, run.busy.reach());
    };

    for (;;) {  // the device's runs
      uint64_t key[2];
      run_key(recs[i], key);
      Run run{i, i, recs[i].start, IntervalUnion{}, 0};
      for (;;) {  // the run's records: two sweeps in registers
        const OpenRec& r = recs[i];
        run.busy.add(r.start, r.end);
        run.sum += r.end - r.start;
        if (++i == n) break;
        uint64_t next[2];
        run_key(recs[i], next);
        if (((next[0] ^ key[0]) | (next[1] ^ key[1])) != 0) break;
      }
      run.end = i;
      finish_run(run);
      if (i == n || recs[i].device != dev) break;
    }
    const uint64_t last = all.reach();  // the highest end: ends are never below starts

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
  // Entries are numbered as regions are entered, so positions in increasing entry order hold
  // each entry once, and their spans are final; else (an entry at two positions, when records of
  // two regions interleave) they are merged by entry first.
  bool distinct = true;
  uint64_t prev = 0;
  for (std::size_t p = 0; p < n_entries && distinct; ++p) {
    if (entry_at[p].slot == kNoSlot || entries[p] == 0) continue;
    distinct = entries[p] > prev;
    prev = entries[p];
  }
  if (distinct) {
    for (std::size_t p = 0; p < n_entries; ++p) {
      const EntrySpan& span = entry_at[p];
      if (span.slot != kNoSlot && entries[p] != 0)
        acc.regions[span.slot].span += span.last - span.first;
    }
    return;
  }
  sc.entries.clear();
  for (std::size_t p = 0; p < n_entries; ++p) {
    const EntrySpan& span = entry_at[p];
    if (span.slot == kNoSlot || entries[p] == 0) continue;
    bool inserted = false;
    EntrySpan* merged = sc.entries.find_or_insert(entries[p], span, inserted);
    if (inserted) continue;
    merged->first = std::min(merged->first, span.first);
    merged->last = std::max(merged->last, span.last);
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
  const auto open = find_open(step);
  if (open != open_.end()) {
    std::vector<DeviceSpan> devices = open->buf->devices;
    fold_copy(*open->buf, devices, step, tmp, peek_scratch_, 1);
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
