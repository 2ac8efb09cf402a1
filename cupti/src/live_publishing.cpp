// GpuCapture's live metrics: the processing thread publishes the newest step whose records have
// all arrived; the metrics thread reads it. Lock order: core/lock_order.h (agg_mu_, then the
// leaf live_mu_, never together).
#include <algorithm>
#include <mutex>

#include "gpu_capture_class.h"

namespace traintime::cupti {

void GpuCapture::publish_live() {
  // Records of step k are in buffers handed out before step k+1 ended (a launch's record goes
  // to the buffer current on its thread; one more step of slack covers work still running when
  // the next step ends). So once every buffer handed out with fewer than k+2 steps completed has
  // been ingested, and k+2 steps are complete (no such buffer can be handed out any more), the
  // step's figures are final — except for work still running two steps later, which
  // records_after_publish() counts.
  const uint32_t limit = std::min(steps_completed(), pool_->min_outstanding_step());
  if (limit < 2) return;
  const uint64_t step = limit - 2;
  {
    std::lock_guard<std::mutex> lock(live_mu_);
    if (live_valid_ && step <= live_figures_.step) return;
  }
  core::GpuStepFigures figures;
  {
    std::lock_guard<std::mutex> agg(agg_mu_);
    if (!aggregator_->step_figures(step, &figures)) return;
    aggregator_->set_published_below(step + 1);
    take_vmm(true);
    figures.memory_valid = pipeline_->memory().step_peak(step, &figures.memory_peak_bytes);
  }
  std::lock_guard<std::mutex> lock(live_mu_);
  live_figures_ = figures;
  live_valid_ = true;
}

void GpuCapture::enable_live() noexcept { live_.store(true, std::memory_order_relaxed); }

bool GpuCapture::live_step(core::GpuStepFigures* out, uint64_t* late_records) {
  *late_records = live_late_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(live_mu_);
  if (live_valid_) *out = live_figures_;
  return live_valid_;
}

}  // namespace traintime::cupti
