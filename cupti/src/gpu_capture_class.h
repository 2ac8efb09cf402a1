// GpuCapture, the live CUPTI adapter (DESIGN §2, §4), shared by the files that implement it, one
// concern each: capture_start.cpp (configure, start, lazy start, fork child),
// capture_subscription.cpp (subscription and its rollback), launch_callbacks.cpp (launch and
// resource callbacks, the hot path), buffer_callbacks.cpp (CUPTI's buffer requests and
// completions), processing_thread.cpp (ingest, periodic flushes, buffer sizing),
// live_publishing.cpp, device_name.cpp, capture_drain.cpp (flush, drain, shutdown and the
// fixture's end), capture_summary.cpp (summary, warnings, trace) and gpu_capture.cpp (the
// public entry points of traintime/cupti/gpu_capture.h). Private to traintime_cupti.
// GpuCapture is the facade of its parts, each a class with its own state and lock:
// Subscription (subscription.h), ActivityQueue and its thread (activity_queue.h), VmmRecorder
// (vmm_recorder.h) and LivePublisher (live_publisher.h); what joins them stays here.
// Lock order: core/lock_order.h (every lock of the process, this class's included).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "activity_pipeline.h"
#include "activity_queue.h"
#include "buffer_pool.h"
#include "callback_selection.h"
#include "capture_tuning.h"
#include "client_mux.h"
#include "correlation_table.h"
#include "cupti_library.h"
#include "fixture_recorder.h"
#include "graph_node_table.h"
#include "subscription.h"
#include "live_publisher.h"
#include "vmm_recorder.h"
#include "traintime/core/gpu_aggregator.h"
#include "traintime/core/lock_order.h"
#include "traintime/core/self_cost.h"
#include "traintime/cupti/gpu_capture.h"

namespace traintime::cupti {

enum class State : uint8_t {
  kIdle,         // nothing decided yet (no CUDA seen)
  kOff,          // TRAINTIME_CUPTI=0
  kUnavailable,  // CUPTI missing, unusable or refused
  kCapturing,
  kStopped,      // after the forced flush at exit / terminating signal
};

class GpuCapture final : private ActivityQueue::Consumer {
 public:
  static GpuCapture& get() {
    // Leaked on purpose: CUPTI may call back while static destructors run at exit.
    static GpuCapture* instance = new GpuCapture();
    return *instance;
  }

  void configure(const Hooks& hooks, const core::Config& config);
  void start(const char* trigger);
  void lazy_start() noexcept;
  core::GpuSummary summary(bool snapshot, const core::Deadline& deadline);
  void shutdown(const char* reason);
  bool flush_at_signal(const core::Deadline& deadline) noexcept;
  nlohmann::json trace_json();
  void on_fork_child() noexcept;
  void enable_live() noexcept { live_.enable(); }
  bool live_step(core::GpuStepFigures* out, uint64_t* late_records) { return live_.step(out, late_records); }
  bool live_detected_steps(core::StepCounters* totals, uint64_t* last_wall_ns) {
    return live_.detected_steps(totals, last_wall_ns);
  }
  bool clock_now(uint64_t* ns) noexcept;
  core::StepAt step_at(uint64_t ns, uint64_t* step) noexcept;
  std::string device_name();

  static void CUPTIAPI on_callback(void* self, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                   const void* data);
  // The adapter's rows' running totals (self_cost.pct's marks): lock-free.
  void cost_so_far(core::CostSoFar& c, uint64_t pair_ticks, bool calls) const noexcept;
  static void CUPTIAPI on_requested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CUPTIAPI on_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size,
                                    size_t valid_size);

 private:
  GpuCapture() = default;

  void current_context(core::LaunchContext* out) const noexcept {
    if (hooks_.launch_context)
      hooks_.launch_context(out);
    else
      *out = core::LaunchContext{};
  }
  // Marker step m's number in the aggregator and the memory tracker when a marker took over from
  // detected steps (core::StepFeed::marker_offset); under agg_mu_.
  uint64_t memory_offset() const { return step_feed_ ? step_feed_->marker_offset() : 0; }
  uint32_t steps_completed() const noexcept override {
    return hooks_.steps_completed ? hooks_.steps_completed() : 0;
  }
  std::string path_name(core::PathId p) const {
    return hooks_.path_name ? hooks_.path_name(p) : std::string();
  }

  // `sees_every_capture`: started from cuInit (InitializeInjection), so before any stream
  // capture could begin; a lazy start may come after one.
  void start(const char* trigger, bool sees_every_capture);
  void watch_captures(bool on) noexcept {
    if (hooks_.capture_watch) hooks_.capture_watch(on);
  }
  bool start_capture(std::string* reason);
  // After another client switched the whole RUNTIME or DRIVER kind off: the per-launch API
  // records (correlation ids) on again.
  void restore_api_records() noexcept { sub_.restore_api_records(); }
  // start_capture threw part way: what it switched on is switched off again.
  void abandon_start() noexcept;
  void give_up(const std::string& reason);
  // Inline, defined in launch_callbacks.cpp (its only caller is on_callback there): the launch
  // path is one function; its rare branches are out of line (on_api_control, after_launch,
  // take_pending_comm_call, on_resource) so that it saves and restores fewer registers.
  inline void on_api(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                     const CUpti_CallbackData* cb);
  // on_callback's own work (inline), and the same after the virtual subscriber's callback (out of
  // line: without a subscriber, on_callback makes no call before its own work).
  void own_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);
  void shared_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);
  // What the adapter's own code costs on threads traintime did not start (self_cost,
  // core/self_cost.h). One launch in kCostEvery is timed: every callback on its thread from the
  // middle of one launch to the middle of the next (launch_cost_edge opens the window at a
  // launch's begin; timed_callback times each of its callbacks around the same own_callback
  // call as every callback's, and closes it at the next launch's begin).
  void timed_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);
  void launch_cost_edge() noexcept;
  // A flush on an application thread, timed in full into flush_cost_ (its buffer callbacks are
  // buffer_cost_'s; a launch window leaves both out).
  void timed_flush(bool forced, bool try_only);
  // This thread's buffer callbacks' time so far (ticks), so a flush or a launch window can take
  // out the buffer callbacks it ran.
  static uint64_t& buffer_ticks_here() noexcept;
  // The adapter's rows of self_cost, into out.section. Under agg_mu_.
  void add_cost_rows(core::GpuSummary& out);
  // A launch's entry callbacks (half of its four), reached by a tail call: the exit callbacks
  // then run without saving a register.
  void on_api_enter(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* cb,
                    ApiRole role);
  // The outermost call of a launch: its context, claimed in the table (out of line: the nested
  // calls' path saves no register for it).
  void on_launch_begin(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* cb,
                       ApiRole role);
  // A nested call's id in a slot of its own, under the launch's context (rare: out of line).
  void store_alone(uint32_t correlation_id);
  // At a thread's first launch: its chunk of the correlation table is given back when it exits.
  void watch_thread_exit() noexcept;
  // An allocation is not GPU work: the first launch, and the fixture's launches, are launches.
  bool after_launch_due(ApiRole role) const {
    return (!recorded_.load(std::memory_order_relaxed) || recorder_) && role != ApiRole::kMemory;
  }
  // A context teardown (flush at its exit), a stream capture's begin or a VMM call.
  void on_api_control(ApiRole role, const CUpti_CallbackData* cb);
  // A VMM call (is_vmm_role): its correlation id at entry, what it did at a successful exit, into
  // the VMM recorder (errno kept).
  void on_vmm(ApiRole role, const CUpti_CallbackData* cb);
  void vmm_call(ApiRole role, const CUpti_CallbackData* cb);  // on_vmm's work
  // VmmRecorder::take into the pipeline (the caller holds agg_mu_).
  void take_vmm(bool wait) { vmm_.take(*pipeline_, wait); }
  // The steps below this one have all their memory records in (MemoryTracker::set_complete_below).
  // Asks the steps_completed hook: not under agg_mu_.
  uint64_t complete_steps();
  // Detected steps (no marker): notes how many have ended with the pool's hand-out count
  // `handed`, and returns how many had ended as of the newest note whose buffers are all back
  // (below `back_below`): positions up to that - 2 have all their records in (publish_live
  // says why). Caller holds agg_mu_; both counts read from the pool before it.
  uint64_t detected_whole(uint64_t back_below, uint64_t handed);
  // What set_complete_below gets: `marker_complete` (complete_steps()) in marker steps; with
  // detected steps, the number after the newest detected step whose records are all in.
  // Caller holds agg_mu_.
  uint64_t memory_complete_below(uint64_t marker_complete, uint64_t back_below, uint64_t handed);
  // The first launch's one-time work, and the fixture recorder.
  void after_launch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* cb);
  // Resource callbacks (rare), errno kept.
  void on_resource(CUpti_CallbackId cbid, const CUpti_ResourceData* rd);
  void on_resource_event(CUpti_CallbackId cbid, const CUpti_ResourceData* rd);
  // Asks the processing thread for a normal flush (from an application thread: a context's
  // teardown, or the correlation table's window moved a quarter since the last flush); errno kept.
  void ask_flush() noexcept;
  // An NCCL kernel launched with no NCCL call on its thread while calls wait for their kernels:
  // ctx's comm fields from the call waiting on its stream (rare: out of line).
  void take_pending_comm_call(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                              const CUpti_CallbackData* cb, core::LaunchContext* ctx);
  // The activity queue's consumer (processing_thread.cpp), on the processing thread.
  bool live() override { return live_.enabled(); }
  void flush(bool forced) override;  // normal (try_only) or forced
  void publish_live() override;
  void finish() override;
  void ingest(const ActivityQueue::Completed& item) override;
  // Normal (complete buffers only) or forced flush; try_only skips when another flush runs.
  void flush(bool forced, bool try_only);
  void transfer_dropped();  // caller holds agg_mu_
  // The group kernels the last buffer left pending: their groups' members asked of
  // Hooks::comm_group with no lock held, then the kernels split under agg_mu_.
  void split_group_kernels();
  // The processing thread's last act: the step feed's held activities into the aggregator.
  void finish_steps();
  // Hooks::on_detected_steps when `ended` (read under agg_mu_) grew; called with no lock held.
  void note_detected_steps(uint64_t ended) noexcept;
  // Processing thread: publishes the newest step whose records have all arrived (live metrics),
  // publish_live above.
  // Processing thread, once: the CUDA name of the device of the first record.
  void resolve_device_name();

  ClientMux& mux_ = ClientMux::get();  // one load on the hot path, not a call
  Hooks hooks_;
  core::Config config_;
  bool configured_ = false;
  std::mutex start_mu_;
  std::atomic<State> state_{State::kIdle};
  std::atomic<bool> capturing_{false};  // hot-path switch for the callbacks
  std::atomic<bool> lazy_pending_{true};
  std::atomic<unsigned long long> lazy_probed_at_adds_{~0ULL};  // loader adds at the last probe
  std::atomic<bool> recorded_{false};
  std::atomic<bool> forked_{false};
  std::string reason_;        // gpu_capture_reason (written under start_mu_ before publication)
  std::string trigger_;

  Subscription sub_;  // the library, the subscriber and what it switched on (set up under start_mu_)
  std::unique_ptr<CorrelationTable> launches_;
  std::unique_ptr<GraphNodeTable> graph_nodes_;
  std::unique_ptr<BufferPool> pool_;
  std::unique_ptr<FixtureRecorder> recorder_;

  std::mutex agg_mu_;
  std::unique_ptr<core::GpuAggregator> aggregator_;
  std::unique_ptr<ActivityPipeline> pipeline_;
  // Steps without a marker (TRAINTIME_STEPS auto or off); null with TRAINTIME_STEPS=marker.
  // Guarded by agg_mu_, as the aggregator it feeds.
  std::unique_ptr<core::StepFeed> step_feed_;
  // What summary() last handed out (a snapshot, the watchdog's refresh): a terminating signal's
  // write that cannot take agg_mu_ uses it.
  core::LastPublished<core::GpuSummary> published_;

  VmmRecorder vmm_;  // VMM calls (application threads, rare): its leaf lock, after agg_mu_

  std::mutex flush_mu_;
  ActivityQueue queue_;  // completed buffers and the processing thread; its leaf lock
  std::atomic<bool> signal_flushed_{false};  // a signal's forced flush was all ingested
  std::atomic<uint64_t> dropped_pending_{0};
  std::atomic<size_t> max_records_{kMinRecordsPerBuffer};  // per buffer, see kStepsPerBuffer
  uint64_t records_seen_ = 0;  // processing thread only
  std::vector<core::GpuAggregator::PendingGroupKernel> pending_groups_;  // processing thread only
  std::vector<core::CommGroupRecord> group_members_;  // processing thread only, by pending kernel

  core::CostSums launch_cost_;  // one launch in kCostEvery
  core::CostSums buffer_cost_;  // every buffer request and completion
  core::CostSums flush_cost_;   // every flush on an application thread
  std::atomic<uint64_t> overhead_ns_{0};  // CUPTI's overhead records so far (processing thread)

  LivePublisher live_;  // the live step figures (TRAINTIME_METRICS); its leaf lock
  // Detected steps: how many had ended when the pool had handed out so many buffers (agg_mu_).
  struct DetectedNote {
    uint64_t ended;
    uint64_t handed_out;
  };
  static constexpr std::size_t kDetectedNotes = 64;
  std::deque<DetectedNote> detected_notes_;
  bool device_resolved_ = false;  // processing thread only
  uint64_t detected_noted_ = 0;   // processing thread only: note_detected_steps' last count
  // Written once by the processing thread, then published by device_named_: read lock-free
  // (a signal-time summary takes no lock for it).
  std::string device_name_;
  std::atomic<bool> device_named_{false};
};

}  // namespace traintime::cupti
