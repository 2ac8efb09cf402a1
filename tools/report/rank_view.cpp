// One rank's row of the per-rank table (RankView): its step time and breakdown per step, its
// throttled steps, its GPU health and memory.
#include "views.h"

#include <algorithm>

#include "traintime/nvml/gpu_health.h"

namespace traintime::report::views {
namespace {

// The breakdown per step of the rank's totals, and its shares of its own GPU step span.
void add_breakdown(RankView& v, const core::RankFile& f) {
  const core::StepTotals& t = f.steps.totals;
  const double n = steps_of(f);
  v.cpu_wall_p50_ms = ms(f.steps.wall_ns.p50_ns);
  v.compute_ms = ms(t.compute_ns) / n;
  v.exposed_comm_ms = ms(t.exposed_comm_ns) / n;
  v.comm_ms = ms(t.comm_ns) / n;
  v.gpu_busy_ms = ms(t.gpu_busy_ns) / n;
  v.io_other_ms = std::max(0.0, v.gpu_busy_ms - v.compute_ms - v.exposed_comm_ms);
  v.idle_ms = ms(t.idle_ns) / n;
  const double rank_span = static_cast<double>(t.gpu_busy_ns) + static_cast<double>(t.idle_ns);
  v.exposed_comm_pct = rank_span > 0 ? static_cast<double>(t.exposed_comm_ns) / rank_span * 100 : 0;
  v.idle_pct = rank_span > 0 ? static_cast<double>(t.idle_ns) / rank_span * 100 : 0;
  v.samples_per_s = f.steps.samples_per_s;
  v.tflops = f.steps.tflops;
  v.mfu = f.steps.mfu;
  v.hfu = f.steps.hfu;
  v.recompute_ms = ms(f.categories[core::Category::kRecompute].gpu_busy_ns) / n;
}

// Its steps (the job's step source) and, of those after warm-up with an NVML sample, the
// throttled ones (RankView::throttled_steps).
void add_steps_and_throttling(RankView& v, const core::RankFile& f, bool gpu) {
  std::vector<double> unthrottled_own;
  core::ClockEventReasons throttle_reasons;
  for (const core::Steps::Detail& d : f.steps.detail) {
    if (d.partial) continue;
    const double step = gpu ? ms(d.totals.gpu_busy_ns + d.totals.idle_ns) : ms(d.wall_ns);
    v.step_ms.emplace_back(d.index, step);
    if (d.wall_ns > 0) v.cpu_wall_ms.emplace_back(d.index, ms(d.wall_ns));
    if (d.index < f.steps.warmup || d.gpu_health.empty()) continue;
    core::ClockEventReasons seen;
    for (const core::StepHealth& h : d.gpu_health) seen |= h.clock_event_reasons;
    ++v.sampled_steps;
    if (seen.throttled()) {
      ++v.throttled_steps;
      throttle_reasons |= seen;
      v.throttled_step_ms += step;
    } else {
      v.other_step_ms += step;
      unthrottled_own.push_back(std::max(0.0, step - (gpu ? ms(d.totals.exposed_comm_ns) : 0.0)));
    }
  }
  if (v.throttled_steps > 0) v.throttled_step_ms /= static_cast<double>(v.throttled_steps);
  if (!unthrottled_own.empty()) v.other_step_ms /= static_cast<double>(unthrottled_own.size());
  v.unthrottled_own_ms = median(std::move(unthrottled_own));
  v.throttle_reasons = throttle_reasons.without(core::ClockEventReason::kGpuIdle);
}

// NVML's figures of its first device over the run, and CUPTI's peak of its own allocations.
void add_health_and_memory(RankView& v, const core::RankFile& f) {
  // The nvml module's data section, through its reader (nvml/gpu_health.h).
  const nvml::GpuHealth* health = nvml::gpu_health(f);
  const nvml::HealthDevice* first_device = health && !health->devices.empty() ? &health->devices.front() : nullptr;
  if (first_device) {
    const nvml::HealthFigures& h = first_device->run;
    v.sm_clock_mhz = h.sm_clock_mhz_median;
    v.sm_clock_min_mhz = h.sm_clock_mhz_min;
    v.power_w = h.power_w_median;
    v.power_limit_w = h.power_limit_w;
    v.temperature_max_c = h.temperature_c_max;
    v.clock_event_reasons = h.clock_event_reasons.without(core::ClockEventReason::kGpuIdle);
    v.memory_used_bytes = h.memory_used_bytes_max;
    v.memory_total_bytes = h.memory_total_bytes;
    v.mig = first_device->mig;
  }
  if (f.memory.present) {
    v.allocated_known = true;
    v.allocated_peak_bytes = f.memory.peak_bytes;
    // Beside NVML's figure, the same device's own peak.
    if (first_device)
      for (const core::DeviceMemory& d : f.memory.devices)
        if (d.cuda_device == first_device->cuda_device) v.allocated_peak_bytes = d.peak_bytes;
  }
}

}  // namespace

RankView rank_view(const RankInput& r, bool gpu) {
  const core::RankFile& f = r.data;
  RankView v;
  v.rank = f.rank;
  v.host = f.host;
  v.file = r.file;
  v.gpu_capture = core::gpu_capture_name(f.gpu_capture);
  v.gpu_capture_reason = f.gpu_capture_reason;
  v.steps = f.steps.count;
  v.step_p50_ms = rank_step_p50(f, gpu);
  v.device = f.device_name;
  v.dropped_records = f.dropped_records;
  v.top_cpu_ms = r.top_cpu_ms;
  add_breakdown(v, f);
  add_steps_and_throttling(v, f, gpu);
  add_health_and_memory(v, f);
  return v;
}

}  // namespace traintime::report::views
