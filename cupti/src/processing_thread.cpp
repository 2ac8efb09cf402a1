// GpuCapture's processing thread's work, as the activity queue (activity_queue.h) calls it:
// ingests a completed buffer, flushes, hands on the step feed's activities at the end, and
// sizes buffers to the run's records per step.
// Lock order: core/lock_order.h.
#include <algorithm>
#include <mutex>

#include "gpu_capture_class.h"

namespace traintime::cupti {

void GpuCapture::flush(bool forced) {
  if (forced)
    flush(true, false);
  else
    flush(false, true);
}

void GpuCapture::finish() {
  finish_steps();
  // Detected steps all ended now: the exit's metrics (the Prometheus file) show them.
  if (live_.enabled()) publish_live();
}

void GpuCapture::ingest(const ActivityQueue::Completed& item) {
  if (recorder_) recorder_->on_buffer(item.buffer, item.valid_size);
  // Steps whose memory records are all in (this buffer is still out): asked before agg_mu_.
  const uint64_t memory_complete = complete_steps();
  const uint64_t back_below = pool_->min_outstanding_handout();  // leaf locks, before agg_mu_
  const uint64_t handed = pool_->handed_out();
  uint64_t detected = 0;
  {
    std::lock_guard<std::mutex> agg(agg_mu_);
    transfer_dropped();
    take_vmm(true);  // the ids of VMM calls before the buffer that may hold their records
    pipeline_->memory().set_complete_below(memory_complete_below(memory_complete, back_below, handed));
    const uint64_t before = pipeline_->stats().activities + pipeline_->stats().api_records;
    pipeline_->free_overhead_data(!item.client_overhead);
    pipeline_->process(item.buffer, item.valid_size);
    records_seen_ += pipeline_->stats().activities + pipeline_->stats().api_records - before;
    uint64_t overhead_ns = 0;
    for (const auto& [kind, o] : pipeline_->stats().overhead) overhead_ns += o.ns;
    overhead_ns_.store(overhead_ns, std::memory_order_relaxed);
    live_.set_late(aggregator_->records_after_publish());
    aggregator_->take_pending_groups(&pending_groups_);
    if (step_feed_) detected = step_feed_->detected_ended();
  }
  if (!pending_groups_.empty()) split_group_kernels();
  note_detected_steps(detected);
  if (const uint32_t steps = steps_completed()) {
    const bool live = live_.enabled();
    const uint64_t per_step = records_seen_ / steps + 1;
    const uint64_t fits = pool_->buffer_bytes() / sizeof(CUpti_ActivityAPI);
    max_records_.store(std::clamp(per_step * (live ? kLiveStepsPerBuffer : kStepsPerBuffer),
                                  std::min(live ? kLiveMinRecordsPerBuffer : kMinRecordsPerBuffer, fits),
                                  fits),
                       std::memory_order_relaxed);
  }
  pool_->release(item.buffer);
  if (!device_resolved_) resolve_device_name();
  if (live_.enabled()) publish_live();
}

void GpuCapture::finish_steps() {
  if (!step_feed_) return;
  uint64_t detected = 0;
  {
    std::lock_guard<std::mutex> agg(agg_mu_);
    step_feed_->finish();
    aggregator_->take_pending_groups(&pending_groups_);
    detected = step_feed_->detected_ended();
  }
  if (!pending_groups_.empty()) split_group_kernels();
  note_detected_steps(detected);
}

void GpuCapture::note_detected_steps(uint64_t ended) noexcept {
  if (ended <= detected_noted_) return;
  detected_noted_ = ended;
  if (hooks_.on_detected_steps) hooks_.on_detected_steps(ended);
}

void GpuCapture::split_group_kernels() {
  // Before the buffer counts as done (busy_), so a snapshot's drain waits for the split too.
  // Lock order: core/lock_order.h (the hook with nothing held, then agg_mu_).
  group_members_.resize(pending_groups_.size());
  for (size_t i = 0; i < pending_groups_.size(); ++i) {
    if (hooks_.comm_group == nullptr ||
        !hooks_.comm_group(pending_groups_[i].comm.group_id, &group_members_[i]))
      group_members_[i].count = 0;
  }
  std::lock_guard<std::mutex> agg(agg_mu_);
  for (size_t i = 0; i < pending_groups_.size(); ++i)
    aggregator_->add_group_kernel(pending_groups_[i],
                                  group_members_[i].count > 0 ? &group_members_[i] : nullptr);
  pending_groups_.clear();
}

uint64_t GpuCapture::complete_steps() {
  // A call's memory record goes into a buffer handed out in its step or before: once none of
  // those is out, the step's records have all been ingested.
  return std::min<uint64_t>(steps_completed(), pool_->min_outstanding_step());
}

void GpuCapture::transfer_dropped() {
  const uint64_t n = dropped_pending_.exchange(0, std::memory_order_relaxed);
  if (n) aggregator_->note_dropped(n);
}

}  // namespace traintime::cupti
