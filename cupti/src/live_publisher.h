// The live publisher, one part of GpuCapture (gpu_capture_class.h): the newest step whose
// records have all arrived, as the processing thread published it (GpuCapture::publish_live,
// live_publishing.cpp, decides which step that is), read by the metrics thread
// (TRAINTIME_METRICS: cupti::live_step, cupti::live_detected_steps).
// Lock order: core/lock_order.h (mu_ is a leaf, never held with agg_mu_).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "traintime/core/gpu_aggregator.h"
#include "traintime/core/step_feed.h"

namespace traintime::cupti {

class LivePublisher {
 public:
  // Detected steps' counters as of the published step (core::StepFeed::live_steps).
  struct DetectedLive {
    core::StepCounters totals;
    uint64_t last_wall_ns = 0;
  };

  void enable() noexcept { on_.store(true, std::memory_order_relaxed); }
  bool enabled() const noexcept { return on_.load(std::memory_order_relaxed); }
  // The step last published (-1: none yet). Processing thread only.
  int64_t published_step() const { return published_step_; }
  // Processing thread: `figures` become the published step; `counters` the detected steps' as
  // of it when `detected`.
  void publish(const core::GpuStepFigures& figures, const DetectedLive& counters, bool detected);
  // Records that arrived after their step was published (GpuAggregator::records_after_publish),
  // set by the processing thread after each buffer.
  void set_late(uint64_t records) noexcept { late_.store(records, std::memory_order_relaxed); }

  // The metrics thread's reads (gpu_capture.h live_step, live_detected_steps).
  bool step(core::GpuStepFigures* out, uint64_t* late_records);
  bool detected_steps(core::StepCounters* totals, uint64_t* last_wall_ns);

 private:
  std::atomic<bool> on_{false};
  std::mutex mu_;  // leaf: the published figures (written by the processing thread only)
  bool valid_ = false;
  core::GpuStepFigures figures_;
  DetectedLive detected_;
  bool detected_valid_ = false;
  int64_t published_step_ = -1;  // the step figures_ holds; the processing thread's own
  std::atomic<uint64_t> late_{0};
};

}  // namespace traintime::cupti
