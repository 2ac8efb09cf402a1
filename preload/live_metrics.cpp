// Live metrics (docs/metrics.md): tt_set_flops and tt_metrics, rank 0's console line
// (TRAINTIME_PRINT_EVERY) and the Prometheus file (TRAINTIME_PROMETHEUS_FILE). The figures come
// from the step tracker (CPU side, exact at once) and from the GPU figures the CUPTI adapter
// publishes once a step's records have all arrived (cupti::live_step), and from the NVML figures
// the sampler publishes when it sees a step end (nvml::live_health); core/live_metrics.h
// computes and formats them. Nothing here waits on the GPU or on CUPTI.
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <mutex>
#include <string>

#include "session.h"
#include "traintime/core/live_metrics.h"
#include "traintime/core/peak_flops.h"
#include "traintime/core/rank_file_json.h"
#include "traintime/cupti/gpu_capture.h"
#include "traintime/nvml/nvml_sampler.h"
#include "traintime/support/log.h"

namespace traintime::preload {
namespace {

// Under TRAINTIME_STEPS=off (steps_off) only the samples and tokens the markers reported.
core::LiveInput gather(Session& s) {
  core::LiveInput in;
  const bool off = steps_off(s);
  if (const core::RegionRegistry* r = s.recorder.registry.load(std::memory_order_acquire)) {
    const core::StepTracker::Live l = r->steps().live();
    in.totals.samples = l.totals.samples;
    in.totals.tokens = l.totals.tokens;
    if (!off) {
      in.totals = l.totals;
      in.last_wall_ns = l.last_wall_ns;
      in.last_samples = l.last_samples;
      in.last_tokens = l.last_tokens;
    }
  }
  if (off) return in;
  in.gpu_valid = cupti::live_step(&in.gpu, &in.gpu_late_records);
  // No marker: the detected steps' counters, as of the GPU step published with them.
  if (in.totals.steps == 0 && cupti::live_detected_steps(&in.totals, &in.last_wall_ns)) {
    in.last_samples = 0;
    in.last_tokens = 0;
  }
  in.health_valid = nvml::live_health(&in.health_step, &in.health);
  in.self_cost_valid = live_self_cost_pct(&in.self_cost_pct);
  in.flops_per_step = s.live.flops_per_step.load(std::memory_order_relaxed);
  in.flops_per_token = s.live.flops_per_token.load(std::memory_order_relaxed);
  // The device's name is known once its first record arrived; resolving is a table scan.
  in.peak_tflops =
      core::resolve_peak(s.identity.config.peak_tflops, cupti::device_name(), s.identity.config.dtype)
          .tflops;
  return in;
}

// The Prometheus file for this process: '%r' becomes the rank (zero-padded like rank files).
std::string prometheus_path(Session& s) {
  std::string path = s.identity.config.prometheus_file;
  const std::size_t at = path.find("%r");
  if (at != std::string::npos) {
    int64_t rank = 0, world = 1;
    effective_rank(s, &rank, &world);
    char text[32];
    std::snprintf(text, sizeof text, "%05" PRId64, rank);
    path.replace(at, 2, text);
  }
  return path;
}

}  // namespace

void enable_live_outputs(Session& s) {
  const core::Config& c = s.identity.config;
  if (c.print_every > 0 || !c.prometheus_file.empty()) cupti::enable_live_metrics();
}

void set_flops(double flops_per_step, double flops_per_token) noexcept {
  Session* s = session();
  if (!s) return;
  // NaN, infinities and negatives mean "not given".
  auto clean = [](double v) { return v > 0 && v < 1e300 ? v : 0.0; };
  s->live.flops_per_step.store(clean(flops_per_step), std::memory_order_relaxed);
  s->live.flops_per_token.store(clean(flops_per_token), std::memory_order_relaxed);
}

uint32_t metrics(tt_metric* out, uint32_t capacity) noexcept {
  Session* s = session();
  if (!s) return 0;
  const int saved = errno;
  uint32_t n = 0;
  try {
    cupti::enable_live_metrics();  // from the first call on, GPU figures are published
    core::LiveMetric m[core::kMaxLiveMetrics];
    const std::size_t total = core::live_metrics(gather(*s), m, core::kMaxLiveMetrics);
    n = static_cast<uint32_t>(total);
    for (uint32_t i = 0; out != nullptr && i < capacity && i < n; ++i) out[i] = {m[i].name, m[i].value};
  } catch (...) {
    n = 0;  // out of memory in the name lookup: no metrics this time
  }
  errno = saved;
  return n;
}

void after_step() noexcept {
  Session* s = g_session.load(std::memory_order_acquire);
  if (!s) return;
  const core::RegionRegistry* r = s->recorder.registry.load(std::memory_order_acquire);
  if (r) mark_step_cost(r->steps().count());
  const uint32_t every = s->identity.config.print_every;
  if (every == 0 || s->identity.forked_child) return;
  if (!r || r->steps().count() % every != 0 || steps_off(*s)) return;
  int64_t rank = 0, world = 1;
  effective_rank(*s, &rank, &world);
  if (rank != 0) return;
  const int saved = errno;
  try {
    const core::LiveInput now = gather(*s);
    core::StepCounters interval;
    {
      std::lock_guard<std::mutex> lock(s->live.print_mu);
      const core::StepCounters& then = s->live.printed;
      if (now.totals.steps <= then.steps) {
        errno = saved;
        return;  // printed for this step already (two threads ending steps)
      }
      interval = {now.totals.steps - then.steps, now.totals.wall_ns - then.wall_ns,
                  now.totals.samples - then.samples, now.totals.tokens - then.tokens};
      s->live.printed = now.totals;
    }
    support::notice("{}", core::console_line(interval, now));
  } catch (...) {
  }
  errno = saved;
}

void write_prometheus(Session& s) {
  if (s.identity.config.prometheus_file.empty()) return;
  try {
    const core::LiveInput in = gather(s);
    core::LiveMetric m[core::kMaxLiveMetrics];
    const std::size_t n = std::min(core::live_metrics(in, m, core::kMaxLiveMetrics),
                                   core::kMaxLiveMetrics);
    core::PrometheusLabels labels;
    labels.job = s.identity.job_id;
    int64_t world = 1;
    effective_rank(s, &labels.rank, &world);
    labels.host = host_name();
    const std::string path = prometheus_path(s);
    std::string error;
    const std::string text = core::prometheus_text(m, n, in.totals, labels);
    if (!core::write_text_file(path, text, &error, core::WriteMode::kReplace))
      support::warn_once("prometheus-file", "cannot write TRAINTIME_PROMETHEUS_FILE: {}", error);
    else
      note_written(text.size());
  } catch (...) {
  }
}

}  // namespace traintime::preload
