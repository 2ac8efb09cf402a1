// Live metrics (docs/metrics.md): the figures of the latest completed steps as a flat list of
// ("traintime/...", value) pairs — what tt_metrics()/traintime.metrics() return, what the
// Prometheus file and rank 0's console line show. Pure functions of their inputs: the preload
// gathers the inputs (the step tracker's last step, the GPU figures the CUPTI adapter published,
// the FLOPs and peak), these functions only compute and format.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "traintime/core/category.h"
#include "traintime/core/rank_file.h"

namespace traintime::core {

// The GPU figures of one completed step (docs/attribution.md definitions), as published once
// CUPTI had delivered its records.
struct GpuStepFigures {
  uint64_t step = 0;  // 0-based step index
  uint64_t span_ns = 0;
  uint64_t busy_ns = 0;
  uint64_t compute_ns = 0;
  uint64_t comm_ns = 0;
  uint64_t exposed_comm_ns = 0;
  uint64_t io_ns = 0;
  uint64_t idle_ns = 0;
  std::array<uint64_t, kCategoryCount> category_busy_ns{};
  // Device memory in use at its peak within the step, all devices (CUPTI's memory records,
  // core/memory_tracker.h); memory_valid false before any record.
  bool memory_valid = false;
  uint64_t memory_peak_bytes = 0;
};

// Cumulative step counters (every step, warm-up included).
struct StepCounters {
  uint64_t steps = 0;
  uint64_t wall_ns = 0;
  uint64_t samples = 0;
  uint64_t tokens = 0;
};

struct LiveInput {
  StepCounters totals;
  // The last completed step (valid when totals.steps > 0): index totals.steps - 1.
  uint64_t last_wall_ns = 0;
  uint64_t last_samples = 0;
  uint64_t last_tokens = 0;
  bool gpu_valid = false;
  GpuStepFigures gpu;
  uint64_t gpu_late_records = 0;  // records that arrived for a step already published
  double flops_per_step = 0;      // the model's FLOPs (set_flops / TRAINTIME_FLOPS_PER_TOKEN)
  double flops_per_token = 0;
  double peak_tflops = 0;         // of this rank's GPU at the training dtype; 0 = unknown
  // NVML's figures of the newest finished step that had samples (nvml::live_health): false when
  // NVML is off, unavailable or has not seen a step end.
  bool health_valid = false;
  uint64_t health_step = 0;
  StepHealth health;
  // traintime's own cost so far (self_cost.pct over the steps after warm-up that have ended):
  // false before one has.
  bool self_cost_valid = false;
  double self_cost_pct = 0;
};

struct LiveMetric {
  const char* name;  // static storage: "traintime/step_ms"
  double value;
  int32_t device = -1;  // the CUDA device the figure is of (the health_* ones), -1 for none
};

inline constexpr std::size_t kMaxLiveMetrics = 40;

// Fills up to `capacity` metrics into `out` (may be null when capacity is 0) and returns how
// many there are. Only figures that exist are listed: no step yet, nothing; no FLOPs, no
// tflops; no peak, no mfu; no recompute or forward time in the published GPU step, no hfu;
// no published GPU step, no gpu_*; no NVML figures, no health_*.
std::size_t live_metrics(const LiveInput& in, LiveMetric* out, std::size_t capacity);

// The FLOPs of `steps` steps holding `tokens` tokens (0 when neither figure is given).
double model_flops(double flops_per_step, double flops_per_token, uint64_t steps, uint64_t tokens);

// Hardware FLOPs utilisation from MFU: the forward FLOPs activation checkpointing re-runs are
// estimated from GPU time, as the model's forward FLOPs times recompute / forward GPU busy time,
// so HFU = MFU x (1 + recompute_ns / forward_ns). 0 (unknown) when mfu, recompute_ns or
// forward_ns is 0: without recompute the share is not known, and HFU is not claimed.
double hfu_from_mfu(double mfu, uint64_t recompute_ns, uint64_t forward_ns);

// One help line per metric name, for the Prometheus file and docs (empty for unknown names).
const char* live_metric_help(const char* name);
// Every name live_metrics() can produce with its help line, in its order (docs/metrics.md).
std::vector<std::pair<std::string, std::string>> live_metric_docs();

// Rank 0's console line for the steps between two counter readings (`interval` = now - then),
// with the GPU figures of the latest published step and the GPU health of the newest sampled
// one: "step 119 | 312.4 ms/step | ...". The logger prints it after its "traintime: " prefix.
std::string console_line(const StepCounters& interval, const LiveInput& now);

struct PrometheusLabels {
  std::string job;
  int64_t rank = 0;
  std::string host;
};

// The Prometheus text exposition format (version 0.0.4) of the metrics, each labelled with job,
// rank and host (and device, for a metric of one device), plus the cumulative counters
// (traintime_steps_total, ...).
std::string prometheus_text(const LiveMetric* metrics, std::size_t n, const StepCounters& totals,
                            const PrometheusLabels& labels);

}  // namespace traintime::core
