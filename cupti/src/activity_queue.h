// The activity queue and its thread, one part of GpuCapture (gpu_capture_class.h): CUPTI's
// completed buffers, queued by on_completed in completion order, and the processing thread
// (tt-cupti) that ingests them one at a time, flushes periodically (every kFlushPeriod, every
// few steps, or when asked: a context going away, the launch window moved a quarter since the
// last flush), runs a terminating signal's forced flush, and lets a snapshot or the exit wait
// until what was delivered is ingested. What a flush, an ingest or the end does is the
// consumer's (GpuCapture); the queue decides when.
// Lock order: core/lock_order.h (mu_ is a leaf, taken inside a flush by on_completed; the
// consumer is called with it released).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "traintime/core/lock_order.h"

namespace traintime::cupti {

class ActivityQueue {
 public:
  struct Completed {
    uint8_t* buffer;
    size_t valid_size;
    bool client_overhead;  // a profiler sharing CUPTI got its overhead records (ClientMux)
  };

  // What the processing thread does; called with no lock of the queue held.
  class Consumer {
   public:
    virtual uint32_t steps_completed() const = 0;
    virtual bool live() = 0;  // live figures asked for (flush every few steps, publish when idle)
    // A normal flush that gives way to one already running (try_only), or a forced one.
    virtual void flush(bool forced) = 0;
    virtual void publish_live() = 0;
    // Every buffer is in and the thread stops: the step feed's held activities handed on.
    virtual void finish() = 0;
    // One buffer, dequeued; it counts as not yet ingested (drain waits) until this returns.
    virtual void ingest(const Completed& item) = 0;

   protected:
    ~Consumer() = default;
  };

  // Room for `capacity` buffers (the pool's count: on_completed never allocates), and the
  // processing thread started (tt-cupti: it never takes the application's asynchronous
  // signals, support/threads.h).
  void start(size_t capacity, Consumer& consumer);
  // A completed buffer (on_completed, possibly inside a flush holding flush_mu_).
  void push(const Completed& item);
  // Asks the processing thread for a normal flush (from an application thread); errno kept.
  void ask_flush() noexcept;
  // Waits (kDrainTimeout at most) until every queued buffer is ingested; false on timeout.
  bool drain();
  // A terminating signal's forced flush, run by the processing thread, and its buffers' ingest,
  // waited for until `deadline` (the queue's lock too: the thread the signal stopped may hold
  // it); true when all was ingested in time.
  bool force(const core::Deadline& deadline);
  // The processing thread ends after ingesting what is queued (Consumer::finish); joined.
  void stop();

 private:
  void run(Consumer& consumer);  // the processing thread

  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable drained_cv_;
  std::vector<Completed> queue_;  // FIFO: buffers are ingested in completion order
  bool busy_ = false;             // the processing thread holds a dequeued buffer
  bool stop_ = false;
  bool flush_requested_ = false;
  // Forced flushes asked of the processing thread at a terminating signal, and the last one it
  // did (force); under mu_.
  uint64_t forced_asked_ = 0;
  uint64_t forced_done_ = 0;
  std::thread thread_;
};

}  // namespace traintime::cupti
