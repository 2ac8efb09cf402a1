// The process's locks, the one order they are taken in, and how a terminating signal's write
// avoids waiting on any of them for ever. Every stop, flush and signal path names this file
// (Kineto writes the order next to each flush site; here it is written once and referenced).
//
// Threads. Application threads record (annotations, NVTX, NCCL wrappers, the launch and
// resource callbacks) and, rarely, take slow paths (a new thread, a new region path, a new
// communicator, a step). CUPTI's own threads, or a thread inside cuptiActivityFlushAll, run the
// buffer callbacks. traintime's own threads (support/threads.h: named tt-<what>, the
// application's asynchronous signals blocked): tt-cupti (the CUPTI adapter's processing thread:
// ingest, periodic flushes, live figures), tt-writer (the rank file on a terminating signal),
// tt-snapshot (TRAINTIME_SNAPSHOT_SEC, the Prometheus file), tt-hang (the always-current record
// and the hang watchdog), tt-nvml (the GPU health sampler).
//
// Lock order, outermost first. A lock is only ever taken while holding locks above it in this
// list, never one below it; the locks of one line are never held together.
//   1. preload Output::mu           activation, the rank-file claim, writing a rank file or the
//                                   always-current record. Never held while a module's summary
//                                   is taken (rank_file_output.cpp measures first, then locks).
//   2. preload Recorder::registry_mu creating the region registry.
//   3. cupti start_mu_              start-up and lazy start only.
//   4. cupti flush_mu_ | ClientMux::mu_   -> [CUPTI's internal locks] -> ActivityQueue::mu_,
//                                   BufferPool::mu_, ClientMux::out_mu_ (cuptiActivityFlushAll,
//                                   and a profiler client's CUPTI calls, deliver buffers
//                                   synchronously into the buffer callbacks). ClientMux::out_mu_
//                                   (the sharing client's open buffer; its request and complete
//                                   callbacks run under it) is taken inside mu_ at most, never
//                                   while calling CUPTI; the client's own flush calls CUPTI
//                                   before taking either.
//   5. cupti agg_mu_                the aggregator and the pipeline (no hook is called under it:
//                                   a region's category comes with the launch context, an NCCL
//                                   group's members are asked between two holds, steps and path
//                                   names before or after) -> VmmRecorder::mu_,
//                                   GraphNodeTable::mu_, FixtureRecorder::mu_.
//   4b. nvml State::timed_mu       the GPU health samples waiting for their detected step; the
//                                   hook that places them takes agg_mu_ (5), then State::mu (7).
//   6. nccl Registry::mutex         communicator registration -> CommCallTable::register_mutex_.
//   7. leaves (nothing is taken under them but the logger's): ClientMux::out_mu_ (and the
//      client's own buffer lock its callbacks take), RegionRegistry::mu_,
//      StepTracker::mu_ (the live record's step sink runs under it, lock-free),
//      CpuCollectives::mu_, cupti LivePublisher::mu_,
//      VmmRecorder::mu_ (alone in the VMM calls' callbacks), ActivityQueue::mu_,
//      BufferPool::mu_,
//      nvml State::mu and State::live_mu (never together), nvtx g_domains_mu and g_strings_mu,
//      support RealSymbol::mutex_, support threads.cpp's Accounting::mu (our threads' CPU
//      clocks: taken by a thread of ours as it starts and ends, and for self_cost.threads),
//      preload Live::print_mu, the snapshot and watchdog threads'
//      control mutexes (held only around their condition-variable waits), and every
//      LastPublished below.
//   8. support/log.cpp's mutex      innermost: anything may log while holding the locks above.
// Hooks given to the adapters are called with none of the adapter's locks held and take only
// leaves (launch context, steps completed and a group's members are lock-free).
//
// Terminating signals (preload/exit_hooks.cpp). The handler takes no lock at all; the rank
// file is written by tt-writer. The thread the signal stopped may hold any lock above, for ever
// (an abort() on tt-cupti in the middle of ingest holds agg_mu_), so the signal-time write waits
// for each lock until one Deadline at most and, for a lock it did not get, uses the figures
// that module last published (LastPublished) and says so: the counter summary_from_last_publish
// in that module's section, with its warning. Snapshots, the watchdog's refresh and the final
// write at a normal exit wait as long as it takes (Deadline::never()).
//
// Stopping (the exit order itself is the module interface's, preload/session.cpp): at a normal
// exit the sampler stops first, then CUPTI's forced flush and the processing thread's drain, then
// the final write under Output::mu; a fork child takes no lock of its parent's (every module
// starts clean there and the parent's lock-holding objects are leaked).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "traintime/core/section.h"

namespace traintime::core {

// How long a signal-time path may wait for a lock: never() waits as long as it takes (every
// path but a terminating signal's write); after(d) until d from now.
class Deadline {
 public:
  using Clock = std::chrono::steady_clock;
  static Deadline never() { return Deadline(); }
  static Deadline after(Clock::duration wait) { return Deadline(Clock::now() + wait); }
  bool bounded() const { return bounded_; }
  bool passed() const { return bounded_ && Clock::now() >= at_; }
  Clock::time_point at() const { return bounded_ ? at_ : Clock::time_point::max(); }

 private:
  Deadline() = default;
  explicit Deadline(Clock::time_point at) : at_(at), bounded_(true) {}
  Clock::time_point at_{};
  bool bounded_ = false;
};

// Locks `lock`'s mutex, waiting until `deadline` at most; false (not locked) when it passed.
// The mutexes stay plain std::mutex (their fast path is one compare-and-swap, on hot-path
// adjacent code too): a bounded wait polls try_lock, which only a terminating signal's write does.
template <class Mutex>
bool lock_until(std::unique_lock<Mutex>& lock, const Deadline& deadline) {
  if (!deadline.bounded()) {
    lock.lock();
    return true;
  }
  for (;;) {
    if (lock.try_lock()) return true;
    if (deadline.passed()) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// What a module last handed out for a rank file (a snapshot, the watchdog's refresh of the
// always-current record), kept for a signal-time write that cannot take the module's lock. Its
// own mutex is a leaf held for a pointer copy only.
template <class T>
class LastPublished {
 public:
  struct Value {
    std::shared_ptr<const T> figures;  // null: nothing published yet
    Deadline::Clock::time_point at{};  // when it was published
  };

  void publish(const T& figures) {
    Value fresh{std::make_shared<const T>(figures), Deadline::Clock::now()};
    std::lock_guard<std::mutex> lock(mu_);
    std::swap(value_, fresh);  // the old figures are freed after the lock is released
  }

  // The last published figures (figures null when none was published, or when even this leaf
  // lock was not had before `deadline`).
  Value get(const Deadline& deadline) const {
    std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
    if (!lock_until(lock, deadline)) return {};
    return value_;
  }

 private:
  mutable std::mutex mu_;
  Value value_;
};

// A signal-time summary that used its module's LastPublished figures (`last`, possibly none)
// says so in the module's section: the counter summary_from_last_publish (1) with
// last_publish_missing and last_publish_age_ms, and the warning `table`'s message for it makes
// (core_counters.h TRAINTIME_LAST_PUBLISH_COUNTERS: it names the figures and how old they are).
template <class T, std::size_t N>
void count_last_publish(Section& section, const CounterSpec (&table)[N],
                        const typename LastPublished<T>::Value& last) {
  const auto age_ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                Deadline::Clock::now() - last.at)
                                                .count());
  const bool published = last.figures != nullptr;
  section.count("last_publish_missing", published ? 0 : 1);
  section.count("last_publish_age_ms", published ? age_ms : 0);
  for (const CounterSpec& s : table)
    if (s.key == "summary_from_last_publish") section.count(s, 1);
}

}  // namespace traintime::core
