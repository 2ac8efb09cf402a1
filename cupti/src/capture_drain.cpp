// GpuCapture's flush, drain and shutdown: normal and forced flushes, waiting for the processing
// thread to ingest what they delivered, and the exit path that stops capture, gives CUPTI back to
// a sharing profiler and finishes a recorded fixture. Lock order: core/lock_order.h.
#include <mutex>
#include <string>

#include "client_mux.h"
#include "gpu_capture_class.h"
#include "traintime/support/log.h"

namespace traintime::cupti {

void GpuCapture::flush(bool forced, bool try_only) {
  // Lock order (core/lock_order.h): flush_mu_ -> CUPTI internal -> the queue's lock (taken inside
  // on_completed). The caller holds neither the queue's lock nor agg_mu_.
  std::unique_lock<std::mutex> lock(flush_mu_, std::defer_lock);
  if (try_only) {
    if (!lock.try_lock()) return;
  } else {
    lock.lock();
  }
  TRAINTIME_CUPTI_CALL(sub_.lib(), cuptiActivityFlushAll, forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
  if (launches_) launches_->flushed();  // the next flush by launch count: a quarter window on
}

bool GpuCapture::flush_at_signal(const core::Deadline& deadline) noexcept {
  if (forked_.load(std::memory_order_relaxed) ||
      state_.load(std::memory_order_acquire) != State::kCapturing)
    return false;
  // Lock order (core/lock_order.h): the queue's lock alone, waited for until the deadline.
  const bool done = queue_.force(deadline);
  if (done) signal_flushed_.store(true, std::memory_order_release);
  return done;
}

void GpuCapture::shutdown(const char* reason) {
  if (forked_.load(std::memory_order_relaxed)) return;  // never flush inherited CUPTI state
  if (state_.load(std::memory_order_acquire) != State::kCapturing) return;
  // Forced flush: exit or terminating signal only (DESIGN §2). Lock order: core/lock_order.h,
  // as in flush(). Timed with the wait for its records' ingest (self_cost "flushes": the exit's
  // flush runs on the application's thread).
  const uint64_t buffers = buffer_ticks_here();
  const uint64_t t0 = core::process_clock().ticks();
  flush(true, false);
  if (!queue_.drain()) support::log_warn("GPU activity processing did not finish within 10 s at exit");
  const uint64_t d = core::process_clock().ticks() - t0;
  const uint64_t nested = buffer_ticks_here() - buffers;
  flush_cost_.add(d > nested ? d - nested : 0, 1, ~uint64_t{0});
  capturing_.store(false, std::memory_order_release);
  watch_captures(false);
  state_.store(State::kStopped, std::memory_order_release);
  queue_.stop();
  ClientMux::get().detach(sub_.handle());  // a profiler still running in the process gets CUPTI back
  if (recorder_) {
    // The hooks (steps, path names) are asked with no lock held (core/lock_order.h): the
    // aggregator's figures are copied under agg_mu_ and the fixture written after.
    const uint32_t steps = steps_completed();
    PipelineStats stats;
    core::GpuSummary gpu;
    {
      std::lock_guard<std::mutex> agg(agg_mu_);
      stats = pipeline_->stats();
      gpu = aggregator_->summary(steps);
    }
    auto name = [this](core::PathId p) { return path_name(p); };
    recorder_->finish(steps, stats, name, reason);
    recorder_->write_live_result(gpu_rank_file(gpu, steps, name));
  }
}

}  // namespace traintime::cupti
