// GpuCapture's summary: the GPU section of the rank file (state, reason, capture statistics) and
// its warnings, and the trace timeline. Lock order: core/lock_order.h (a snapshot flushes and
// drains before taking agg_mu_; a terminating signal's write waits for agg_mu_ until its
// deadline, then uses what the last summary published).
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "traintime/core/core_counters.h"
#include "traintime/cupti/cupti_format.h"
#include "traintime/support/log.h"
#include "client_mux.h"
#include "gpu_capture_class.h"

namespace traintime::cupti {

core::GpuSummary GpuCapture::summary(bool snapshot, const core::Deadline& deadline) {
  core::GpuSummary out;
  // TRAINTIME_STEPS=off holds without GPU capture too: the markers end no step.
  out.steps_off = core::steps_mode_named(config_.steps) == core::StepsMode::kOff;
  const State state = state_.load(std::memory_order_acquire);
  if (forked_.load(std::memory_order_relaxed) && state != State::kIdle) {
    out.capture_reason =
        "forked from a process that captured the GPU; CUPTI state is not inherited";
    return out;
  }
  switch (state) {
    case State::kIdle:
      out.capture_reason = "no GPU activity was captured in this process";
      return out;
    case State::kOff:
      out.capture_reason = reason_;
      return out;
    case State::kUnavailable:
      out.capture = core::GpuCapture::kUnavailable;
      out.capture_reason = reason_;
      return out;
    case State::kCapturing:
      if (snapshot) {
        // Mid-run: complete buffers only (normal flush), then wait for them to be ingested.
        // Lock order: core/lock_order.h (nothing held here; agg_mu_ is taken after).
        flush(false, false);
        queue_.drain();
      }
      break;
    case State::kStopped:
      break;
  }
  const uint32_t steps = steps_completed();  // a hook: asked before agg_mu_ is taken
  // The pool's lock is a leaf the signal stopped thread may hold: a signal-time summary keeps
  // the steps the processing thread last knew complete (it sets them before every buffer).
  const bool bounded = deadline.bounded();
  const uint64_t memory_complete = bounded ? 0 : complete_steps();
  const uint64_t back_below = bounded ? 0 : pool_->min_outstanding_handout();  // leaf locks, before agg_mu_
  const uint64_t handed = bounded ? 0 : pool_->handed_out();
  std::unique_lock<std::mutex> agg(agg_mu_, std::defer_lock);
  if (!core::lock_until(agg, deadline)) {
    // The processing thread (or a snapshot) holds it, stopped by the terminating signal.
    const auto last = published_.get(deadline);
    if (last.figures) {
      out = *last.figures;
    } else {
      out.capture = core::GpuCapture::kUnavailable;
      out.capture_reason = "the GPU figures could not be read at the terminating signal, and none "
                           "had been published before it";
    }
    out.records_complete = false;
    core::count_last_publish<core::GpuSummary>(out.section, core::kGpuCounters, last);
    return out;
  }
  transfer_dropped();
  // At the end every activity the step feed still holds is handed on (the step in progress):
  // the processing thread did it when it stopped; after a terminating signal it is done here,
  // where no hook may run, so group kernels count for their first member's op alone.
  const bool final = state == State::kStopped || signal_flushed_.load(std::memory_order_acquire);
  if (step_feed_ && final && step_feed_->held() > 0) {
    step_feed_->finish();
    std::vector<core::GpuAggregator::PendingGroupKernel> groups;
    aggregator_->take_pending_groups(&groups);
    for (const auto& k : groups) aggregator_->add_group_kernel(k, nullptr);
  }
  const uint64_t steps_done = step_feed_ ? step_feed_->steps_completed(steps) : steps;
  if (step_feed_ && !final && step_feed_->held() > 0) {
    // Mid-run, detection still holds activities (the warm-up before a lock, the step in
    // progress): a copy takes them, so this file, which may be the last one a SIGKILL leaves,
    // counts everything recorded. Group kernels of the copy count for their first member's op.
    const std::unique_ptr<core::GpuAggregator> copy = aggregator_->clone();
    step_feed_->snapshot_into(*copy);
    std::vector<core::GpuAggregator::PendingGroupKernel> groups;
    copy->take_pending_groups(&groups);
    for (const auto& k : groups) copy->add_group_kernel(k, nullptr);
    out = copy->summary(steps_done);
  } else {
    out = aggregator_->summary(steps_done);
  }
  if (step_feed_) {
    step_feed_->describe(steps, &out);
    // At the end an anchor that matched no launch surely names nothing this job runs: one line
    // in the file, and once on stderr at exit (a signal's write is no place to log).
    if (const uint64_t read = final ? step_feed_->unanchored_launches() : 0) {
      const std::string line =
          "TRAINTIME_STEP_ANCHOR=" + config_.step_anchor + " matched none of the " + std::to_string(read) +
          " launches, so no step was found: set it to part of the name of a kernel that runs once per "
          "step (or a NCCL op: AllReduce, AllGather, ...), or unset it to let traintime find the period";
      out.section.note(line);
      if (state == State::kStopped) support::warn_once("step_anchor", "{}", line);
    }
  }
  // While capturing, CUPTI may still hold records it has not delivered (a snapshot flushes
  // complete buffers only; a terminating signal's forced flush may not have finished in time).
  out.records_complete = state == State::kStopped || signal_flushed_.load(std::memory_order_acquire);
  out.capture = core::GpuCapture::kCupti;
  out.device_name = device_name();
  out.capture_reason = sub_.lib().describe() + ", started " + trigger_;
  if (!sub_.lib().explicit_note().empty()) out.capture_reason += "; " + sub_.lib().explicit_note();
  if (const std::string shared = ClientMux::get().describe(); !shared.empty())
    out.capture_reason += "; " + shared;
  if (!sub_.refused_callbacks().empty()) out.section.note(sub_.refused_callbacks());
  if (!sub_.static_cupti().empty())
    out.section.note(sub_.static_cupti() + " contains a statically linked CUPTI that traintime cannot "
                     "share: a profiler using it in this process may disturb GPU capture");
  const PipelineStats& ps = pipeline_->stats();
  core::CaptureStats& cs = out.capture_stats;
  cs.present = true;
  cs.buffers = ps.buffers;
  cs.records = ps.activities;
  cs.launch_callbacks = launches_->launches();
  cs.correlation_ids_per_callback = launches_->ids_per_store();
  cs.joined = ps.joined_runtime + ps.joined_correlation;
  cs.graph_node_context = ps.graph_node_context;
  cs.missing_context = ps.missing_context;
  cs.overwritten = launches_->overwritten();
  take_vmm(false);
  // Without CUPTI's memory records, VMM memory alone would pass for all of it: no figures.
  // Before the end, the steps still open have no memory figures yet (memory_tracker.h).
  if (!bounded) pipeline_->memory().set_complete_below(memory_complete_below(memory_complete, back_below, handed));
  if (!sub_.memory_refused()) out.memory = pipeline_->memory().summary(state == State::kStopped);
  if (sub_.memory_refused())
    out.section.note("CUPTI refused device memory records (CUPTI_ACTIVITY_KIND_MEMORY2): the rank file "
                     "has no memory figures");
  pipeline_->count_into(out.section);
  out.section.count(kCounters, Counter::dropped_records, out.dropped_records);
  const uint64_t refused = pool_->refused();
  if (refused > 0) {  // the pool's size, which its warning states
    out.section.count(kCounters, Counter::buffer_count, config_.buffer_count);
    out.section.count(kCounters, Counter::buffer_kib, pool_->buffer_bytes() >> 10);
  }
  out.section.count(kCounters, Counter::buffer_requests_refused, refused);
  add_cost_rows(out);
  agg.unlock();
  published_.publish(out);
  return out;
}

void GpuCapture::add_cost_rows(core::GpuSummary& out) {
  core::Section& s = out.section;
  s.cost(core::cost_row("launch callbacks", launches_->launches(), core::kCostEvery, launch_cost_));
  const core::CostSums::Totals buffers = buffer_cost_.totals();
  s.cost(core::cost_row("buffer callbacks", buffers.samples, 1, buffer_cost_));
  const core::CostSums::Totals flushes = flush_cost_.totals();
  s.cost(core::cost_row("flushes", flushes.samples, 1, flush_cost_));
  // CUPTI's own: its overhead records, as it timed them.
  for (const auto& [kind, o] : pipeline_->stats().overhead)
    s.cost(core::exact_row("CUPTI overhead: " + overhead_kind_name(kind), o.records, o.ns));
  s.own_memory("activity buffers", uint64_t{pool_->allocated()} * pool_->buffer_bytes() + pool_->scratch_bytes());
  s.own_memory("correlation table", launches_->bytes());
  s.own_memory("graph node table", graph_nodes_->bytes());
  aggregator_->held_bytes();
  s.own_memory("GPU aggregator", aggregator_->peak_held_bytes());
}

void GpuCapture::cost_so_far(core::CostSoFar& c, uint64_t pair_ticks, bool calls) const noexcept {
  c.ticks += buffer_cost_.so_far(pair_ticks).own_ticks + flush_cost_.so_far(pair_ticks).own_ticks;
  c.ns += overhead_ns_.load(std::memory_order_relaxed);
  c.at(core::SampledPath::kLaunches) = launch_cost_.so_far(pair_ticks);
  // The table is there once a capture started (its state published after it); before, no
  // launch was counted or timed.
  const State state = state_.load(std::memory_order_acquire);
  if (calls && (state == State::kCapturing || state == State::kStopped))
    c.calls_at(core::SampledPath::kLaunches) = launches_->launches();
}

nlohmann::json GpuCapture::trace_json() {
  const State state = state_.load(std::memory_order_acquire);
  if (forked_.load(std::memory_order_relaxed) ||
      (state != State::kCapturing && state != State::kStopped))
    return nullptr;
  nlohmann::json trace;
  {
    std::lock_guard<std::mutex> agg(agg_mu_);
    trace = aggregator_->trace_json([](core::PathId) { return std::string(); });
  }
  // The paths' names from the path_name hook, asked with no lock held (core/lock_order.h).
  for (auto& [id, name] : trace["paths"].items())
    name = path_name(static_cast<core::PathId>(std::stoul(id)));
  return trace;
}

}  // namespace traintime::cupti
