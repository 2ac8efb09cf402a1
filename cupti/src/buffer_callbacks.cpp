// GpuCapture's buffer callbacks: CUPTI asks for a buffer (from the pool, sized by the processing
// thread) and hands a completed one back (queued for the processing thread, or returned to
// another client sharing CUPTI). Lock order: core/lock_order.h (on_completed takes the activity
// queue's lock, possibly inside a flush holding flush_mu_).
#include <mutex>

#include "activity_decoder.h"
#include "client_mux.h"
#include "gpu_capture_class.h"

namespace traintime::cupti {
namespace {

thread_local uint64_t t_buffer_ticks __attribute__((tls_model("initial-exec"))) = 0;

// Times one buffer callback in full (self_cost "buffer callbacks": a few a second at most).
class BufferCallbackCost {
 public:
  explicit BufferCallbackCost(core::CostSums& sums) : sums_(sums), t0_(core::process_clock().ticks()) {}
  ~BufferCallbackCost() {
    const uint64_t d = core::process_clock().ticks() - t0_;
    t_buffer_ticks += d;
    sums_.add(d, 1, ~uint64_t{0});
  }
  BufferCallbackCost(const BufferCallbackCost&) = delete;
  BufferCallbackCost& operator=(const BufferCallbackCost&) = delete;

 private:
  core::CostSums& sums_;
  uint64_t t0_;
};

}  // namespace

uint64_t& GpuCapture::buffer_ticks_here() noexcept { return t_buffer_ticks; }

void CUPTIAPI GpuCapture::on_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  GpuCapture& self = get();
  const BufferCallbackCost cost(self.buffer_cost_);
  *max_records = self.max_records_.load(std::memory_order_relaxed);
  uint8_t* b = self.capturing_.load(std::memory_order_acquire)
                   ? self.pool_->acquire(self.steps_completed())
                   : nullptr;
  size_t bytes = self.pool_->buffer_bytes();
  if (!b && self.sub_.lib().version() < 27) {
    // Releases before API 27 can crash when refused a buffer: give a scratch one, whose
    // records on_completed counts as dropped.
    b = self.pool_->acquire_scratch();
    bytes = BufferPool::kScratchBytes;
  }
  *buffer = b;
  *size = b ? bytes : 0;  // no buffer: CUPTI drops and counts the records
}

void CUPTIAPI GpuCapture::on_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size,
                                       size_t valid_size) {
  GpuCapture& self = get();
  const BufferCallbackCost cost(self.buffer_cost_);
  // Another CUPTI client's buffer goes back to it; its records in ours are copied to it.
  if (buffer && ClientMux::get().on_completed(buffer, size, valid_size,
                                              self.pool_ && self.pool_->owns(buffer)))
    return;
  size_t dropped = 0;
  if (TRAINTIME_CUPTI_CALL(self.sub_.lib(), cuptiActivityGetNumDroppedRecords, ctx, stream, &dropped) ==
      CUPTI_SUCCESS)
    self.dropped_pending_.fetch_add(dropped, std::memory_order_relaxed);
  if (!buffer) return;
  if (self.pool_->is_scratch(buffer)) {
    const DecodeCounts counts =
        decode_buffer(self.sub_.lib(), buffer, valid_size, [](const DecodedActivity&) {});
    self.dropped_pending_.fetch_add(counts.activities + counts.no_timestamps,
                                    std::memory_order_relaxed);
    self.pool_->release_scratch(buffer);
    return;
  }
  if (valid_size == 0 || self.state_.load(std::memory_order_acquire) != State::kCapturing) {
    self.pool_->release(buffer);
    return;
  }
  // Whether a profiler sharing CUPTI was given copies of its overhead records (their additional
  // data is then the profiler's to free).
  self.queue_.push({buffer, valid_size, ClientMux::get().client_takes(CUPTI_ACTIVITY_KIND_OVERHEAD)});
}

}  // namespace traintime::cupti
