// GpuCapture's live metrics: the processing thread decides the newest step whose records have
// all arrived and hands its figures to the live publisher (live_publisher.h), which the metrics
// thread reads. Lock order: core/lock_order.h (agg_mu_, then the publisher's leaf lock, never
// together).
#include <algorithm>
#include <cstdint>
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
  //
  // Steps without a marker (core/step_feed.h) have no count to tag buffers with. When detection
  // ends step k+1 it has seen records of step k+2, which the GPU ran after all of step k: step
  // k's records were written by then, into buffers handed out before that moment. So each time
  // more steps have ended, the pool's hand-out count is noted with them; step k is published
  // once every buffer handed out before the note of step k+1's end is back (ingested).
  const uint32_t limit = std::min(steps_completed(), pool_->min_outstanding_step());
  const uint64_t back_below = pool_->min_outstanding_handout();  // a leaf lock, before agg_mu_
  const uint64_t handed = pool_->handed_out();
  core::GpuStepFigures figures;
  bool detected = false;
  LivePublisher::DetectedLive counters;
  const int64_t published_step = live_.published_step();
  uint64_t memory_below = UINT64_MAX;  // detected steps: the first whose memory records may be out
  {
    std::lock_guard<std::mutex> agg(agg_mu_);
    const uint64_t ended = step_feed_ ? step_feed_->detected_ended() : 0;
    if (ended > 0) {
      const uint64_t whole = detected_whole(back_below, handed);
      if (whole < 2 || (published_step >= 0 && whole - 2 <= static_cast<uint64_t>(published_step))) return;
      detected = step_feed_->live_steps(whole - 2, &counters.totals.steps, &counters.totals.wall_ns,
                                        &counters.last_wall_ns);
      if (!detected) return;
      memory_below = step_feed_->memory_complete_below(whole);
    } else if (limit < 2) {
      return;
    }
    // A marker that took over from detected steps numbers its step m as marker_offset() + m.
    const uint64_t step = detected ? counters.totals.steps - 1
                                   : limit - 2 + (step_feed_ ? step_feed_->marker_offset() : 0);
    if (published_step >= 0 && step <= static_cast<uint64_t>(published_step)) return;
    if (!aggregator_->step_figures(step, &figures)) return;
    aggregator_->set_published_below(step + 1);
    take_vmm(true);
    // Device memory rows are keyed by the same steps (detected ones too: core/step_feed.h).
    figures.memory_valid = step < memory_below && pipeline_->memory().step_peak(step, &figures.memory_peak_bytes);
  }
  live_.publish(figures, counters, detected);
}

uint64_t GpuCapture::detected_whole(uint64_t back_below, uint64_t handed) {
  const uint64_t ended = step_feed_ ? step_feed_->detected_ended() : 0;
  if (ended == 0) return 0;
  if (detected_notes_.empty() || detected_notes_.back().ended < ended) {
    if (detected_notes_.size() == kDetectedNotes) detected_notes_.pop_front();
    detected_notes_.push_back({ended, handed});
  }
  uint64_t whole = 0;  // steps ended, as of the newest note whose buffers are all back
  while (!detected_notes_.empty() && detected_notes_.front().handed_out <= back_below) {
    whole = detected_notes_.front().ended;
    detected_notes_.pop_front();
  }
  if (whole > 0) detected_notes_.push_front({whole, 0});  // kept: it stays whole
  return whole;
}

uint64_t GpuCapture::memory_complete_below(uint64_t marker_complete, uint64_t back_below, uint64_t handed) {
  if (!step_feed_ || step_feed_->detected_ended() == 0) return marker_complete + memory_offset();
  // The records of a detected step's calls went into buffers handed out before the note of the
  // next step's end, as its GPU records did; the step feed hands them on once their step ended,
  // whatever order their buffers came in (StepFeed::memory_complete_below).
  return step_feed_->memory_complete_below(detected_whole(back_below, handed));
}


bool GpuCapture::clock_now(uint64_t* ns) noexcept {
  const State state = state_.load(std::memory_order_acquire);
  if (state != State::kCapturing || forked_.load(std::memory_order_relaxed)) return false;
  const CuptiApi& api = sub_.lib().api();
  return api.cuptiGetTimestamp != nullptr && api.cuptiGetTimestamp(ns) == CUPTI_SUCCESS;
}

core::StepAt GpuCapture::step_at(uint64_t ns, uint64_t* step) noexcept {
  const State state = state_.load(std::memory_order_acquire);
  if ((state != State::kCapturing && state != State::kStopped) || forked_.load(std::memory_order_relaxed))
    return core::StepAt::kMarker;
  std::lock_guard<std::mutex> agg(agg_mu_);
  return step_feed_ ? step_feed_->step_at(ns, step) : core::StepAt::kMarker;
}

}  // namespace traintime::cupti
