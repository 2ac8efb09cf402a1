// The activity queue and its processing thread (activity_queue.h): when to ingest, flush and
// stop. Lock order: core/lock_order.h.
#include "activity_queue.h"

#include <cerrno>
#include <chrono>

#include "capture_tuning.h"
#include "traintime/support/threads.h"

namespace traintime::cupti {

void ActivityQueue::start(size_t capacity, Consumer& consumer) {
  queue_.reserve(capacity);
  thread_ = support::start_thread(support::OwnThread::kCupti, [this, &consumer] { run(consumer); });
}

void ActivityQueue::run(Consumer& consumer) {
  auto next_flush = std::chrono::steady_clock::now() + kFlushPeriod;
  uint32_t flushed_at_step = consumer.steps_completed();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait_for(lock, kPoll, [&] {
      return !queue_.empty() || stop_ || flush_requested_ || forced_asked_ != forced_done_;
    });
    if (flush_requested_ && !stop_) {
      // Asked for (a context's teardown, or the launch window moved a quarter since the last
      // flush: correlation_table.h), so at once, before the buffers queued: while they are
      // ingested the launching threads go on, and a rarely launching thread's buffer, held by
      // CUPTI until a flush, must arrive before its contexts leave the window.
      flush_requested_ = false;
      flushed_at_step = consumer.steps_completed();
      lock.unlock();
      consumer.flush(false);  // lock order (core/lock_order.h): as the periodic flush below
      lock.lock();
      next_flush = std::chrono::steady_clock::now() + kFlushPeriod;
      continue;
    }
    if (queue_.empty()) {
      if (stop_) {
        // Every buffer is in: the activities the step feed still holds are the step in
        // progress. Handed on here, so their group kernels are split like any other.
        lock.unlock();
        consumer.finish();
        lock.lock();
        break;
      }
      if (forced_asked_ != forced_done_) {
        // A terminating signal's write waits for this (force), bounded: delivered buffers come
        // back through on_completed into the queue, ingested next.
        const uint64_t asked = forced_asked_;
        lock.unlock();
        consumer.flush(true);  // lock order (core/lock_order.h): as the periodic flush below
        lock.lock();
        forced_done_ = asked;
        if (queue_.empty() && !busy_) drained_cv_.notify_all();
        continue;
      }
      const uint32_t step = consumer.steps_completed();
      const bool live = consumer.live();
      if (live) {
        lock.unlock();
        consumer.publish_live();
        lock.lock();
        if (!queue_.empty() || stop_) continue;
      }
      if (std::chrono::steady_clock::now() >= next_flush ||
          step - flushed_at_step >= (live ? kLiveFlushSteps : kFlushSteps)) {
        flushed_at_step = step;
        lock.unlock();
        // Lock order (core/lock_order.h): flush_mu_ -> CUPTI -> mu_ (on_completed); mu_
        // released here.
        consumer.flush(false);
        lock.lock();
        next_flush = std::chrono::steady_clock::now() + kFlushPeriod;
      }
      continue;
    }
    const Completed item = queue_.front();
    queue_.erase(queue_.begin());
    busy_ = true;
    lock.unlock();
    consumer.ingest(item);
    lock.lock();
    busy_ = false;
    if (queue_.empty()) drained_cv_.notify_all();
  }
  busy_ = false;
  drained_cv_.notify_all();
}

void ActivityQueue::push(const Completed& item) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(item);  // ≤ capacity entries: reserved at start
  }
  cv_.notify_one();
}

void ActivityQueue::ask_flush() noexcept {
  // Lock order (core/lock_order.h): mu_, a leaf, held for the flag only, so the processing
  // thread cannot miss the wakeup between its check and its wait.
  const int saved_errno = errno;
  {
    std::lock_guard<std::mutex> lock(mu_);
    flush_requested_ = true;
  }
  cv_.notify_one();
  errno = saved_errno;
}

bool ActivityQueue::drain() {
  // Lock order (core/lock_order.h): mu_ only; the processing thread releases it while
  // ingesting.
  std::unique_lock<std::mutex> lock(mu_);
  return drained_cv_.wait_for(lock, kDrainTimeout,
                              [&] { return (queue_.empty() && !busy_) || !thread_.joinable(); });
}

bool ActivityQueue::force(const core::Deadline& deadline) {
  // Lock order (core/lock_order.h): mu_ alone, waited for until the deadline (the thread the
  // signal stopped may hold it); the flush itself runs on the processing thread.
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  if (!core::lock_until(lock, deadline)) return false;
  const uint64_t asked = ++forced_asked_;
  cv_.notify_one();
  return drained_cv_.wait_until(lock, deadline.at(), [&] {
    return forced_done_ >= asked && queue_.empty() && !busy_;
  });
}

void ActivityQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

}  // namespace traintime::cupti
