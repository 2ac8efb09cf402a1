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
                               const std::vector<uint32_t>& calls) {
  for (const uint32_t id : calls) {
    if (!vmm_calls_.insert(id).second) continue;
    vmm_order_.push_back(id);
    if (vmm_order_.size() > kVmmCallsKept) {
      vmm_calls_.erase(vmm_order_.front());
      vmm_order_.pop_front();
    }
  }
  for (const core::MemoryEvent& e : events) {
    if (!e.release) ++stats_.vmm_allocations;
    memory_.add(e);
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
    out.count("memory_vmm_allocations", stats_.vmm_allocations);
    out.count("memory_vmm_records", stats_.vmm_records);
  }
  out.count("memory_missing_context", stats_.memory_missing_context, [](uint64_t n) {
    return std::to_string(n) + " device memory records had no launch context: counted in the step of "
           "the record before them";
  });
  out.count("missing_context", stats_.missing_context, [this](uint64_t n) {
    return std::to_string(n) + " GPU activities had no launch context (counted as unattributed); " +
           std::to_string(launches_.overwritten()) +
           " of them because later launches reused their correlation slot before the record arrived";
  });
  // The cause named is the one the table saw (correlation_table.h): a record late while the
  // reader kept up came in a buffer CUPTI held back; one the reader met after its cursor left the
  // window, a reader that fell behind; either is likelier with more launching threads than the
  // table's bound (the window shorter in launches, no floor).
  out.count("overwritten", launches_.overwritten(), [this](uint64_t n) {
    char rate[32];
    std::snprintf(rate, sizeof rate, "%.1f", launches_.ids_per_store());
    const uint64_t late = launches_.overwritten_late();
    std::string why;
    if (late > 0)
      why = std::to_string(late) + " came in buffers that reached traintime late while it kept up with the "
            "launches (CUPTI hands a thread's partly filled buffer over only at a flush, asked for at least every " +
            std::to_string(launches_.flush_every()) + " launches)";
    if (late < n)
      why += (why.empty() ? "" : "; ") + std::to_string(n - late) +
             " arrived after the processing thread had fallen behind the launches";
    if (launches_.writers_peak() > launches_.max_writers())
      why += "; " + std::to_string(launches_.writers_peak()) + " threads launched at once, more than the " +
             std::to_string(launches_.max_writers()) + " the table is sized for";
    return std::to_string(n) + " activity record(s) arrived after " + std::to_string(launches_.capacity()) +
           " newer launches had taken their launch context's place (correlation ids: " + rate +
           " per launch): " + why;
  });
  out.count("overwritten_late", launches_.overwritten_late());
  const uint64_t over = launches_.writers_peak() > launches_.max_writers()
                            ? launches_.writers_peak() - launches_.max_writers() : 0;
  out.count("launching_threads_over_bound", over, [this](uint64_t n) {
    return std::to_string(launches_.writers_peak()) + " threads held launch-context chunks at once, " +
           std::to_string(n) + " more than the " + std::to_string(launches_.max_writers()) +
           " the table is sized for (each holds up to " + std::to_string(launches_.capacity() / (2 * launches_.max_writers())) +
           " of its " + std::to_string(launches_.capacity()) +
           " slots ahead): records were joined without the table's loss shortcut, and its window was "
           "shorter in launches";
  });
  out.count("no_timestamps", stats_.no_timestamps, [](uint64_t n) {
    return std::to_string(n) + " GPU activity records carried no timestamps and were skipped";
  });
  out.count("incomplete_buffers", stats_.incomplete_buffers, [](uint64_t n) {
    return std::to_string(n) +
           " activity buffers ended in an incomplete record (work still running at the forced flush)";
  });
  out.count("store_collisions", launches_.store_collisions(), [](uint64_t n) {
    return std::to_string(n) +
           " launch contexts were not stored because two launches raced for one slot";
  });
  out.count("graph_nodes_refused", graph_nodes_.refused(), [](uint64_t n) {
    return std::to_string(n) +
           " CUDA graph nodes exceeded the node table; their kernels use the graph launch's region";
  });
}

}  // namespace traintime::cupti
