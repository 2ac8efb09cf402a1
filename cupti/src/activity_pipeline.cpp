#include "traintime/cupti/cupti_format.h"
#include "activity_pipeline.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace traintime::cupti {

ActivityPipeline::ActivityPipeline(const CuptiLibrary& lib, const CorrelationTable& launches,
                                   const GraphNodeTable& graph_nodes,
                                   core::GpuAggregator& aggregator, NameOf name_of)
    : lib_(lib),
      launches_(launches),
      graph_nodes_(graph_nodes),
      aggregator_(aggregator),
      name_of_(std::move(name_of)) {}

void ActivityPipeline::join_rest(const core::GpuActivity& a, bool found, core::LaunchContext* ctx) {
  // lookup() writes every field of *ctx when it finds the context, and may leave a copy it
  // rejected there when it does not: a miss clears it here, so a hit costs no clearing first.
  if (a.graph_node_id != 0) {
    core::LaunchContext node;
    if (graph_nodes_.lookup(a.graph_node_id, &node)) {
      // A node captured with no region open and no NCCL call around it (PyTorch captures its
      // graphs in warm-up, before or outside the user's ranges) takes the replay's context:
      // DESIGN §4 rule 5's "failing that, the context of the graph launch".
      if (found && node.path == core::kNoPath && node.comm.op == core::CommOp::kNone) return;
      // Region (and NCCL call) from capture time; step and region entry from the replay.
      if (found) {
        node.step = ctx->step;
        node.entry = ctx->entry;
      }
      ++stats_.graph_node_context;
      *ctx = node;
      return;
    }
  }
  if (!found) {
    *ctx = core::LaunchContext{};
    ++stats_.missing_context;
  }
}

void ActivityPipeline::add_vmm(const std::vector<core::MemoryEvent>& events,
                               const std::vector<uint32_t>& event_calls, const std::vector<uint32_t>& calls) {
  for (const uint32_t id : calls) {
    if (!vmm_calls_.insert(id).second) continue;
    vmm_order_.push_back(id);
    if (vmm_order_.size() > kVmmCallsKept) {
      vmm_calls_.erase(vmm_order_.front());
      vmm_order_.pop_front();
    }
  }
  const bool feed = feed_ != nullptr && feed_->takes_memory();
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (!events[i].release) ++stats_.vmm_allocations;
    if (feed && i < event_calls.size()) {
      feed_->memory(events[i], event_calls[i]);
    } else {
      memory_.add(events[i]);
    }
  }
}

__attribute__((noinline)) void ActivityPipeline::memory_record(DecodedActivity& d) {
  if (!vmm_calls_.empty() && vmm_calls_.count(d.memory_correlation_id) != 0) {
    ++stats_.vmm_records;  // the ledger has this allocation already
    return;
  }
  core::LaunchContext ctx;
  // A call whose context is gone (made before capture, or overwritten) takes the last step seen.
  if (launches_.lookup(d.memory_correlation_id, &ctx)) {
    memory_step_ = ctx.step;
  } else {
    ++stats_.memory_missing_context;
  }
  d.memory.step = memory_step_;
  // Steps without a marker: the step feed gives the record its call's detected step.
  if (feed_ != nullptr && feed_->takes_memory()) return feed_->memory(d.memory, d.memory_correlation_id);
  memory_.add(d.memory);
}

__attribute__((noinline)) void ActivityPipeline::overhead_record(const DecodedActivity& d) {
  PipelineStats::Overhead& o = stats_.overhead[d.overhead_kind];
  ++o.records;
  o.ns += d.overhead_ns;
  if (free_overhead_data_ && d.overhead_data != nullptr) std::free(d.overhead_data);
}

std::string overhead_kind_name(uint32_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_OVERHEAD_UNKNOWN: return "unknown";
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER: return "driver compiler";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH: return "buffer flush";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION: return "instrumentation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE: return "resource";
    case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING: return "runtime triggered module loading";
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING: return "lazy function loading";
    case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL: return "command buffer full";
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST: return "activity buffer request";
    case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT: return "UVM activity init";
    default: return "kind " + std::to_string(kind);
  }
}

void ActivityPipeline::process(uint8_t* buffer, size_t valid_size) {
  ++stats_.buffers;
  // The activity goes to ingest where the decoder wrote it, and the context where the join
  // wrote it: a copy read back straight after narrower stores stalls on store forwarding at
  // every record.
  core::LaunchContext ctx;
  const DecodeCounts counts = decode_buffer(lib_, buffer, valid_size, [&](DecodedActivity& d) {
    join(d, &ctx);
    if (d.name_ptr)
      d.activity.name = name_of_ ? name_of_(d.name_ptr) : std::string_view(d.name_ptr);
    if (feed_ != nullptr) {
      feed_->ingest(d.activity, ctx, ctx.category);
    } else {
      aggregator_.ingest(d.activity, ctx, ctx.category);
    }
  }, MemorySink{[](void* self, DecodedActivity& d) { static_cast<ActivityPipeline*>(self)->memory_record(d); }, this},
     OverheadSink{[](void* self, DecodedActivity& d) { static_cast<ActivityPipeline*>(self)->overhead_record(d); }, this});
  stats_.activities += counts.activities;
  stats_.api_records += counts.api_records;
  stats_.no_timestamps += counts.no_timestamps;
  stats_.incomplete_buffers += counts.incomplete;
  if (feed_ != nullptr) feed_->settle();
}

void ActivityPipeline::count_into(core::Section& out) const {
  memory_.count_into(out);
  if (stats_.vmm_allocations != 0 || stats_.vmm_records != 0) {
    out.count(kCounters, Counter::memory_vmm_allocations, stats_.vmm_allocations);
    out.count(kCounters, Counter::memory_vmm_records, stats_.vmm_records);
  }
  out.count(kCounters, Counter::memory_missing_context, stats_.memory_missing_context);
  const uint64_t overwritten = launches_.overwritten();
  const uint64_t over = launches_.writers_peak() > launches_.max_writers()
                            ? launches_.writers_peak() - launches_.max_writers() : 0;
  if (overwritten > 0 || over > 0) {  // the table's figures, which its warnings state
    out.count(kCounters, Counter::launch_slots, launches_.capacity());
    out.count(kCounters, Counter::correlation_ids_per_1000_launches,
              static_cast<uint64_t>(launches_.ids_per_store() * 1000.0 + 0.5));
    out.count(kCounters, Counter::launch_flush_every, launches_.flush_every());
    out.count(kCounters, Counter::launching_threads_peak, launches_.writers_peak());
    out.count(kCounters, Counter::launching_threads_bound, launches_.max_writers());
  }
  // The cause named is the one the table saw (correlation_table.h): a record late while the
  // reader kept up came in a buffer CUPTI held back; one the reader met after its cursor left the
  // window, a reader that fell behind; either is likelier with more launching threads than the
  // table's bound (the window shorter in launches, no floor).
  out.count(kCounters, Counter::overwritten_late, launches_.overwritten_late());
  out.count(kCounters, Counter::overwritten, overwritten);
  out.count(kCounters, Counter::launching_threads_over_bound, over);
  out.count(kCounters, Counter::missing_context, stats_.missing_context);
  out.count(kCounters, Counter::no_timestamps, stats_.no_timestamps);
  out.count(kCounters, Counter::incomplete_buffers, stats_.incomplete_buffers);
  out.count(kCounters, Counter::store_collisions, launches_.store_collisions());
  out.count(kCounters, Counter::graph_nodes_refused, graph_nodes_.refused());
}

}  // namespace traintime::cupti
