// The live publisher (live_publisher.h). Lock order: core/lock_order.h (mu_, a leaf).
#include "live_publisher.h"

namespace traintime::cupti {

void LivePublisher::publish(const core::GpuStepFigures& figures, const DetectedLive& counters, bool detected) {
  published_step_ = static_cast<int64_t>(figures.step);
  std::lock_guard<std::mutex> lock(mu_);
  figures_ = figures;
  valid_ = true;
  detected_ = counters;
  detected_valid_ = detected;
}

bool LivePublisher::detected_steps(core::StepCounters* totals, uint64_t* last_wall_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!detected_valid_) return false;
  *totals = detected_.totals;
  *last_wall_ns = detected_.last_wall_ns;
  return true;
}

bool LivePublisher::step(core::GpuStepFigures* out, uint64_t* late_records) {
  *late_records = late_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  if (valid_) *out = figures_;
  return valid_;
}

}  // namespace traintime::cupti
