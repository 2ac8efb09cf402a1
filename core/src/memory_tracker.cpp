// Device memory per step from CUPTI's memory records: include/traintime/core/memory_tracker.h.
#include "traintime/core/memory_tracker.h"

#include <algorithm>

#include "traintime/core/core_counters.h"
#include <iterator>
#include <string>

namespace traintime::core {

uint64_t* AddressMap::find(uint64_t address) {
  if (address == 0) return has_zero_ ? &zero_bytes_ : nullptr;
  if (slots_.empty()) return nullptr;
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = home(address);; i = (i + 1) & mask) {
    if (slots_[i].address == address) return &slots_[i].bytes;
    if (slots_[i].address == 0) return nullptr;
  }
}

std::pair<uint64_t*, bool> AddressMap::insert(uint64_t address, uint64_t bytes) {
  if (address == 0) {
    const bool inserted = !has_zero_;
    if (inserted) zero_bytes_ = bytes;
    has_zero_ = true;
    return {&zero_bytes_, inserted};
  }
  if ((size_ + 1) * 2 > slots_.size()) grow();  // at most half full: probes stay short
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = home(address);; i = (i + 1) & mask) {
    Slot& s = slots_[i];
    if (s.address == address) return {&s.bytes, false};
    if (s.address == 0) {
      s = {address, bytes};
      ++size_;
      return {&s.bytes, true};
    }
  }
}

void AddressMap::erase(uint64_t address) {
  if (address == 0) {
    has_zero_ = false;
    return;
  }
  if (slots_.empty()) return;
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = home(address);
  while (slots_[i].address != address) {
    if (slots_[i].address == 0) return;
    i = (i + 1) & mask;
  }
  // Backward shift: every later entry of the probe run that may move into the hole does, so
  // that no lookup meets an empty slot before its entry.
  for (std::size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
    if (slots_[j].address == 0) break;
    const std::size_t h = home(slots_[j].address);
    // The entry at j may fill the hole at i when its home is not in (i, j], cyclically.
    const bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
    if (stays) continue;
    slots_[i] = slots_[j];
    i = j;
  }
  slots_[i] = Slot{};
  --size_;
}

void AddressMap::grow() {
  std::vector<Slot> old;
  old.swap(slots_);
  slots_.resize(old.empty() ? 64 : old.size() * 2);
  const std::size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.address == 0) continue;
    std::size_t i = home(s.address);
    while (slots_[i].address != 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

void MemoryTracker::settle(uint64_t below) {
  // Stable: records of one timestamp keep their buffer order (one thread's calls). Usually they
  // are in order already (one thread's buffer): no sort then. The records held by the last
  // settle are sorted already: only the ones added since are sorted, then merged with them.
  const auto earlier = [](const MemoryEvent& a, const MemoryEvent& b) { return a.timestamp_ns < b.timestamp_ns; };
  const auto added = pending_.begin() + static_cast<std::ptrdiff_t>(std::min(held_, pending_.size()));
  if (!std::is_sorted(added, pending_.end(), earlier)) std::stable_sort(added, pending_.end(), earlier);
  if (added != pending_.begin() && added != pending_.end() && earlier(*added, *std::prev(added)))
    std::inplace_merge(pending_.begin(), added, pending_.end(), earlier);
  // The held ones keep their (sorted) order at the front.
  std::size_t kept = 0;
  for (const MemoryEvent& e : pending_) {
    if (e.step < below)
      apply(e);
    else
      pending_[kept++] = e;
  }
  pending_.resize(kept);
  held_ = kept;
  // The next settle once as many records came as are held (at least kMaxPending): the held ones
  // are looked at again by each settle, so this keeps that work to a few per record.
  settle_at_ = kept + std::max(kMaxPending, kept);
}

void MemoryTracker::settle_when_full() {
  settle(complete_below_);
  if (pending_.size() >= kMaxHeld) settle(UINT64_MAX);
}

MemoryTracker::Row& MemoryTracker::row_for(uint64_t step) {
  // A record of a step already left (a late buffer) counts in the current step: figures only
  // move forward.
  if (seen_ && step < step_) step = step_;
  if (cached_row_ != nullptr && cached_step_ == step) return *cached_row_;
  cached_rd_ = nullptr;  // of the row before
  auto it = rows_.find(step);
  if (it != rows_.end()) {
    cached_step_ = step;
    cached_row_ = &it->second;
    return it->second;
  }
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
  cached_step_ = step;
  cached_row_ = &it->second;
  return it->second;
}

void MemoryTracker::apply(const MemoryEvent& e) {
  ++records_;
  Row& row = row_for(e.step);
  if (cached_dev_ == nullptr || cached_device_ != e.device) {
    cached_device_ = e.device;
    cached_dev_ = &devices_[e.device];
    cached_rd_ = nullptr;
  }
  Device& d = *cached_dev_;
  AddressMap& live = e.handle ? d.handles : d.live;
  if (e.release) {
    const uint64_t* held = live.find(e.address);
    if (held == nullptr) {  // allocated before capture started, or its record was lost
      ++unknown_frees_;
      return;
    }
    d.in_use -= *held;
    in_use_ -= *held;
    live.erase(e.address);
  } else {
    auto [held, inserted] = live.insert(e.address, e.bytes);
    if (!inserted) {  // the release of the previous allocation there was lost
      ++reused_addresses_;
      d.in_use -= *held;
      in_use_ -= *held;
      *held = e.bytes;
    }
    d.in_use += e.bytes;
    in_use_ += e.bytes;
  }
  d.peak = std::max(d.peak, d.in_use);
  peak_ = std::max(peak_, in_use_);
  if (cached_rd_ == nullptr) cached_rd_ = &row.devices[e.device];
  DeviceMemory& rd = *cached_rd_;
  rd.cuda_device = static_cast<int32_t>(e.device);
  rd.peak_bytes = std::max(rd.peak_bytes, d.in_use);
  rd.in_use_bytes = d.in_use;
  row.peak = std::max(row.peak, in_use_);
  row.in_use = in_use_;
}

bool MemoryTracker::step_peak(uint64_t step, uint64_t* peak) {
  settle(step + 1);
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

MemorySummary MemoryTracker::summary(bool final) {
  settle(final ? UINT64_MAX : complete_below_);
  MemorySummary out;
  if (!final) out.complete_below = complete_below_;
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
    if (indexes[i] >= complete_below) break;
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
  out.count(kMemoryCounters, MemoryCounter::memory_records, records_);
  out.count(kMemoryCounters, MemoryCounter::memory_unknown_frees, unknown_frees_);
  out.count(kMemoryCounters, MemoryCounter::memory_reused_addresses, reused_addresses_);
}

}  // namespace traintime::core
