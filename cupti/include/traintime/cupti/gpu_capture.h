// GPU capture (CUPTI) as the preload sees it (DESIGN §2, §4). The adapter depends on core/ (and
// the support library's logging) only: what it needs from the process comes in through Hooks,
// as plain function pointers, its settings as the one core::Config; what it measured goes out
// as a core::GpuSummary. It never writes
// a file of the rank's output itself.
//
// Start: the preload calls configure() once at start-up, then start() from the driver's
// InitializeInjection (CUDA_INJECTION64_PATH points at libtraintime.so), or lazy_start_point()
// wherever capture may start lazily when another tool owns that variable (every tt_step, every
// new NCCL communicator): it subscribes once libcuda.so.1 is loaded in the process (kernels
// launched before that moment are not seen, and gpu_capture_reason says so). Once capture is
// decided either way, lazy_start_point() costs one relaxed load.
//
// TRAINTIME_CUPTI=0 (Config::cupti == false) turns capture off. A libcupti that cannot be
// found, lacks a function, has a record layout this build does not know, or refuses the
// subscription (another profiler holds it) leaves CPU regions and NCCL untouched and makes the
// summary say gpu_capture "unavailable" with the reason.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "traintime/core/activity.h"
#include "traintime/core/category.h"
#include "traintime/core/comm_stats.h"
#include "traintime/core/config.h"
#include "traintime/core/live_metrics.h"
#include "traintime/core/lock_order.h"
#include "traintime/core/module.h"
#include "traintime/core/self_cost.h"
#include "traintime/core/summaries.h"

namespace traintime::cupti {

// What the adapter is given: the root's ModuleHost (core/module.h), which says what each pointer
// answers; the adapter keeps its copy (launch_context, pending_comm_call, comm_calls_waiting,
// steps_completed, on_first_gpu_launch, path_name, comm_group, on_capture_begin, capture_watch,
// on_detected_steps).
using Hooks = core::ModuleHost;

// Once, before any start: the hooks and the configuration (TRAINTIME_CUPTI, _CUPTI_LIB,
// _BUFFER_MB, _BUFFER_COUNT, _WARMUP_STEPS, _STEP_DETAIL, _TRACE, _TRACE_MAX_EVENTS,
// _RECORD_FIXTURE are read). Not thread-safe against start().
void configure(const Hooks& hooks, const core::Config& config);

// Subscribes now, unless capture was already decided or configure() never ran. `trigger` says
// how it started, for gpu_capture_reason. Thread-safe; errno untouched.
void start(const char* trigger) noexcept;

// Lazy start point (see above). errno untouched.
void lazy_start_point() noexcept;

// What was captured so far. snapshot == true (mid-run): complete buffers are flushed and
// ingested first; snapshot == false while capturing (a terminating signal): no CUPTI call at
// all. records_complete is true only after shutdown(): the final figures. capture "none" when capture never
// started (no CUDA in this process). A terminating signal's write gives a bounded `deadline`
// (core/lock_order.h): when the aggregator's lock is not had by then (the signal stopped the
// processing thread in the middle of ingest, or a snapshot holding it), the summary last handed
// out, with records_complete false and the counter summary_from_last_publish saying so.
core::GpuSummary summary(bool snapshot, const core::Deadline& deadline = core::Deadline::never());

// A terminating signal, before its summary: asks the processing thread for a forced flush and
// waits, until `deadline` at most, for what it delivers to be ingested. True when all of it was
// (the summary then holds every record CUPTI had, and says records_complete); false when the
// deadline passed first: the thread the signal stopped may be the processing thread itself, or
// hold a lock CUPTI's flush needs. Never flushes on the calling thread, so a blocked flush cannot
// keep the rank file from being written.
bool flush_at_signal(const core::Deadline& deadline) noexcept;

// Exit or terminating signal: forced flush, everything delivered ingested, capture stopped.
// Idempotent; never runs in a fork child.
void shutdown(const char* reason);

// Live metrics: from now on the processing thread publishes the GPU figures of each step whose
// records have all arrived, and keeps activity buffers small enough for that to happen within a
// few steps. Idempotent; cheap.
void enable_live_metrics() noexcept;
// The latest published step's figures (false when none yet) and the records that arrived for
// steps already published. A short leaf lock; never waits on CUPTI.
bool live_step(core::GpuStepFigures* out, uint64_t* late_records);
// When steps are detected (no marker, core/step_feed.h): the step counters as of the published
// step, which stand in for the step tracker's (false otherwise). A short leaf lock.
bool live_detected_steps(core::StepCounters* totals, uint64_t* last_wall_ns);
// The CUDA name of the device the first record ran on ("" until one arrived).
std::string device_name();
// CUPTI's clock now, the GPU activity records' clock (false when capture is not running).
bool clock_now(uint64_t* ns) noexcept;
// The step at time `ns` of that clock when steps are detected (core::StepFeed::step_at);
// kMarker when they are not (or no capture ran). Takes the aggregator's lock: never under a
// lock that ingest may wait on.
core::StepAt step_at(uint64_t ns, uint64_t* step) noexcept;

// TRAINTIME_TRACE=1 timeline ("traintime-trace/1", docs/attribution.md "Trace dump"); null when
// no capture ran.
nlohmann::json trace_json();

// In a fork child: capture state belongs to the parent; nothing is flushed or processed, and
// the summary says so.
void on_fork_child() noexcept;

// The adapter's self_cost rows so far, added into `c` (lock-free): what the marks of
// self_cost.pct read as steps end; with `calls`, the launches counted too (not at a step's mark).
// `pair_ticks`: the cost of a pair of clock readings (FastClock::pair_ticks).
void cost_so_far(core::CostSoFar& c, uint64_t pair_ticks, bool calls) noexcept;

}  // namespace traintime::cupti
