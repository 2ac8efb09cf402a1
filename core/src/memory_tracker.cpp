// Device memory per step from CUPTI's memory records: include/traintime/core/memory_tracker.h.
#include "traintime/core/memory_tracker.h"

#include <algorithm>
#include <iterator>
#include <string>

namespace traintime::core {

void MemoryTracker::settle() {
  // Stable: records of one timestamp keep their buffer order (one thread's calls).
  std::stable_sort(pending_.begin(), pending_.end(),
                   [](const MemoryEvent& a, const MemoryEvent& b) { return a.timestamp_ns < b.timestamp_ns; });
  for (const MemoryEvent& e : pending_) apply(e);
  pending_.clear();
}

MemoryTracker::Row& MemoryTracker::row_for(uint64_t step) {
  // A record of a step already left (a late buffer) counts in the current step: figures only
  // move forward.
  if (seen_ && step < step_) step = step_;
  auto it = rows_.find(step);
  if (it != rows_.end()) return it->second;
  // A new step starts with what is in use.
  Row r;
  r.peak = r.in_use = in_use_;
  for (const auto& [device, d] : devices_) r.devices[device] = {static_cast<int32_t>(device), d.in_use, d.in_use};
  it = rows_.emplace(step, std::move(r)).first;
  step_ = step;
  seen_ = true;
  // Keep the last keep_steps_ rows: the oldest is no longer needed once a later row exists,
  // since a later row starts from the state it ended with.
  while (rows_.size() > keep_steps_) rows_.erase(rows_.begin());
  return it->second;
}

void MemoryTracker::apply(const MemoryEvent& e) {
  ++records_;
  Row& row = row_for(e.step);
  Device& d = devices_[e.device];
  if (e.release) {
    const auto it = d.live.find(e.address);
    if (it == d.live.end()) {  // allocated before capture started, or its record was lost
      ++unknown_frees_;
      return;
    }
    d.in_use -= it->second;
    in_use_ -= it->second;
    d.live.erase(it);
  } else {
    auto [it, inserted] = d.live.try_emplace(e.address, e.bytes);
    if (!inserted) {  // the release of the previous allocation there was lost
      ++reused_addresses_;
      d.in_use -= it->second;
      in_use_ -= it->second;
      it->second = e.bytes;
    }
    d.in_use += e.bytes;
    in_use_ += e.bytes;
  }
  d.peak = std::max(d.peak, d.in_use);
  peak_ = std::max(peak_, in_use_);
  DeviceMemory& rd = row.devices[e.device];
  rd.cuda_device = static_cast<int32_t>(e.device);
  rd.peak_bytes = std::max(rd.peak_bytes, d.in_use);
  rd.in_use_bytes = d.in_use;
  row.peak = std::max(row.peak, in_use_);
  row.in_use = in_use_;
}

bool MemoryTracker::step_peak(uint64_t step, uint64_t* peak) {
  settle();
  auto it = rows_.upper_bound(step);
  if (it == rows_.begin()) return false;
  --it;
  *peak = it->first == step ? it->second.peak : it->second.in_use;
  return true;
}

MemoryFigures MemoryTracker::figures(const Row& r) const {
  MemoryFigures f;
  f.present = true;
  f.peak_bytes = r.peak;
  f.in_use_bytes = r.in_use;
  for (const auto& [device, d] : r.devices) f.devices.push_back(d);
  return f;
}

MemorySummary MemoryTracker::summary() {
  settle();
  MemorySummary out;
  if (!seen_) return out;
  out.run.present = true;
  out.run.peak_bytes = peak_;
  out.run.in_use_bytes = in_use_;
  for (const auto& [device, d] : devices_)
    out.run.devices.push_back({static_cast<int32_t>(device), d.peak, d.in_use});
  for (const auto& [step, row] : rows_) out.steps.emplace_back(step, figures(row));
  return out;
}

std::vector<MemoryFigures> MemorySummary::rows_for(const std::vector<uint64_t>& indexes) const {
  std::vector<MemoryFigures> out(indexes.size());
  auto row = steps.begin();
  const MemoryFigures* last = nullptr;
  for (std::size_t i = 0; i < indexes.size(); ++i) {
    while (row != steps.end() && row->first <= indexes[i]) last = &(row++)->second;
    if (last == nullptr) continue;
    if (std::prev(row)->first == indexes[i]) {
      out[i] = *last;
      continue;
    }
    // No record in this step: it holds what the last step with records ended with.
    MemoryFigures& f = out[i];
    f.present = true;
    f.peak_bytes = f.in_use_bytes = last->in_use_bytes;
    for (DeviceMemory d : last->devices) {
      d.peak_bytes = d.in_use_bytes;
      f.devices.push_back(d);
    }
  }
  return out;
}

void MemoryTracker::count_into(Section& out) const {
  out.count("memory_records", records_);
  out.count("memory_unknown_frees", unknown_frees_, [](uint64_t n) {
    return std::to_string(n) + " device memory releases were of addresses with no allocation record "
           "(allocated before GPU capture started, or the record was dropped): memory in use may be off";
  });
  out.count("memory_reused_addresses", reused_addresses_, [](uint64_t n) {
    return std::to_string(n) + " device memory allocations reused an address whose release record "
           "was missing: memory in use may be off";
  });
}

}  // namespace traintime::core
