// The summarising of NVML samples (nvml_sampler.h): per value counts, exact medians.
#include <algorithm>
#include <iterator>
#include <string>

#include "traintime/nvml/nvml_sampler.h"

namespace traintime::nvml {
namespace {

// The median of values given as {value: count} with `n` values in all: the middle one, or the
// mean of the two middle ones.
double median_of(const std::map<uint32_t, uint64_t>& counts, uint64_t n) {
  if (n == 0) return 0;
  const uint64_t lo = (n - 1) / 2, hi = n / 2;
  double a = 0, b = 0;
  uint64_t seen = 0;
  bool have_a = false;
  for (const auto& [value, count] : counts) {
    if (!have_a && lo < seen + count) {
      a = value;
      have_a = true;
    }
    if (hi < seen + count) {
      b = value;
      break;
    }
    seen += count;
  }
  return (a + b) / 2;
}

}  // namespace

void HealthAccumulator::add(const Sample& s) {
  sm_[s.sm_clock_mhz] += 1;
  mem_[s.mem_clock_mhz] += 1;
  power_dw_[(s.power_mw + 50) / 100] += 1;
  sm_min_ = samples_ == 0 ? s.sm_clock_mhz : std::min(sm_min_, s.sm_clock_mhz);
  temp_max_ = std::max(temp_max_, s.temperature_c);
  limit_mw_ = std::max(limit_mw_, s.power_limit_mw);
  // The link's lowest state seen; 0 (not read) never counts as lowest.
  if (s.pcie_gen && (!pcie_gen_ || s.pcie_gen < pcie_gen_)) pcie_gen_ = s.pcie_gen;
  if (s.pcie_width && (!pcie_width_ || s.pcie_width < pcie_width_)) pcie_width_ = s.pcie_width;
  reasons_ |= s.clock_event_reasons;
  used_max_ = std::max(used_max_, s.memory_used_bytes);
  total_ = std::max(total_, s.memory_total_bytes);
  ++samples_;
}

HealthFigures HealthAccumulator::figures() const {
  HealthFigures f;
  f.samples = samples_;
  f.sm_clock_mhz_median = median_of(sm_, samples_);
  f.sm_clock_mhz_min = sm_min_;
  f.mem_clock_mhz_median = median_of(mem_, samples_);
  f.power_w_median = median_of(power_dw_, samples_) / 10;
  f.power_limit_w = limit_mw_ / 1000.0;
  f.temperature_c_max = temp_max_;
  f.clock_event_reasons.bits = reasons_;
  f.pcie_gen_min = pcie_gen_;
  f.pcie_width_min = pcie_width_;
  f.memory_used_bytes_max = used_max_;
  f.memory_total_bytes = total_;
  return f;
}

void DeviceHealth::add_step(uint64_t step, const Sample& s) {
  if (!current_.empty() && step != current_step_) {
    finished_ = step_health(-1, current_.figures());
    finished_step_ = current_step_;
    have_finished_ = true;
    current_ = HealthAccumulator();
  }
  current_step_ = step;
  current_.add(s);
  if (keep_ == 0) return;
  steps_[step].add(s);
  while (steps_.size() > keep_) steps_.erase(steps_.begin());
}

void DeviceHealth::fill(HealthDevice* out) const {
  out->run = run_.figures();
  out->steps.clear();
  for (const auto& [index, acc] : steps_) {
    HealthDevice::Step st;
    st.index = index;
    st.figures = acc.figures();
    out->steps.push_back(std::move(st));
  }
}

bool DeviceHealth::last_finished(uint64_t* step, core::StepHealth* out) const {
  if (!have_finished_) return false;
  *step = finished_step_;
  *out = finished_;
  return true;
}

}  // namespace traintime::nvml
