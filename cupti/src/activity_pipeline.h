// One activity buffer -> decoded records -> launch context joined -> GpuAggregator::ingest.
// The processing thread of a live capture and the fixture replay both run this class, so the
// replay exercises the same decode and join as production.
//
// Join (DESIGN §4): memcpy records join on their runtime correlation id first, then on their
// (driver) correlation id; kernels and memsets on their correlation id. A record of a CUDA graph
// node takes the region open when its node was captured (GraphNodeTable) with the step and entry
// of the graph launch that ran it; a node the table does not know takes the graph launch's
// context. A record whose context is gone is ingested as unattributed and counted. The region's
// category comes with the context (resolved at launch, LaunchContext::category): nothing is
// asked of the region registry here, so no hook runs while the caller holds its lock.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <unordered_set>
#include <vector>

#include "activity_decoder.h"
#include "correlation_table.h"
#include "cupti_library.h"
#include "graph_node_table.h"
#include "traintime/core/gpu_aggregator.h"
#include "traintime/core/section.h"
#include "traintime/core/step_feed.h"

namespace traintime::cupti {

struct PipelineStats {
  uint64_t buffers = 0;
  uint64_t activities = 0;
  uint64_t api_records = 0;
  uint64_t no_timestamps = 0;
  uint64_t incomplete_buffers = 0;
  uint64_t joined_runtime = 0;     // memcpy joined on runtimeCorrelationId
  uint64_t joined_correlation = 0;
  uint64_t graph_node_context = 0; // took the capture-time context of their graph node
  uint64_t missing_context = 0;    // no launch context found: ingested as unattributed
  uint64_t memory_missing_context = 0;  // memory records whose call's context was not found
  uint64_t vmm_allocations = 0;  // VMM allocations the ledger counted (cuMemCreate)
  uint64_t vmm_records = 0;      // CUPTI memory records of VMM calls: dropped, counted by the ledger
  // CUPTI's overhead records by their kind (CUpti_ActivityOverheadKind, raw): records and summed
  // durations (self_cost).
  struct Overhead {
    uint64_t records = 0;
    uint64_t ns = 0;
  };
  std::map<uint32_t, Overhead> overhead;
};

// The name of an overhead kind in self_cost.callbacks ("buffer flush"), "kind <n>" for a value
// this build does not know.
std::string overhead_kind_name(uint32_t kind);

class ActivityPipeline {
 public:
  // Kernel name for the name pointer in a record; the live capture uses the pointer itself,
  // the replay maps recorded pointer values to the names stored with the fixture.
  using NameOf = std::function<std::string_view(const char*)>;

  ActivityPipeline(const CuptiLibrary& lib, const CorrelationTable& launches,
                   const GraphNodeTable& graph_nodes, core::GpuAggregator& aggregator,
                   NameOf name_of = nullptr);

  // Caller serialises calls and any concurrent use of the aggregator.
  void process(uint8_t* buffer, size_t valid_size);
  // Steps without a marker (core/step_feed.h): activities go through `feed` (its aggregator
  // being this pipeline's), which is settled after each buffer. Null: straight to the aggregator.
  void set_step_feed(core::StepFeed* feed) {
    feed_ = feed;
    if (feed_ != nullptr) feed_->set_memory(&memory_);
  }
  // The live capture's buffers are CUPTI's own: the additional data of their overhead records
  // is freed after it is read (the client's duty, cupti_activity.h). A replayed buffer's
  // pointers are another process's: never (the default).
  void free_overhead_data(bool on) { free_overhead_data_ = on; }

  // The launch context of one decoded record, by the join rules above (counts into stats()).
  core::LaunchContext join(const DecodedActivity& d) {
    core::LaunchContext ctx;
    join(d, &ctx);
    return ctx;
  }
  // The same into *ctx, every field written (process() keeps one for the whole buffer). The
  // common case inline (a record of no graph node whose launch's context is found, read where
  // the cursor of the table expects it); graph nodes and misses out of line.
  void join(const DecodedActivity& d, core::LaunchContext* ctx) {
    const core::GpuActivity& a = d.activity;
    bool found = true;
    if (d.runtime_correlation_id != 0 && launches_.lookup(d.runtime_correlation_id, ctx)) {
      ++stats_.joined_runtime;
    } else if (launches_.lookup(a.correlation_id, ctx)) {
      ++stats_.joined_correlation;
    } else {
      found = false;
    }
    if (__builtin_expect(a.graph_node_id != 0 || !found, 0)) join_rest(a, found, ctx);
  }

  const PipelineStats& stats() const { return stats_; }
  // Device memory from the buffers' memory records (caller serialises as for process()).
  core::MemoryTracker& memory() { return memory_; }
  // CUDA VMM memory (traintime/core/vmm_ledger.h): the ledger's events to the tracker, and the
  // correlation ids of the VMM calls made so far. A memory record CUPTI makes for one of those
  // calls is dropped, so the allocation counts once whether CUPTI reports VMM memory or not.
  // Ids must come before the buffers holding their records (the adapter takes them at a call's
  // entry and hands them over before each buffer). `event_calls`: the correlation id of each
  // event's call, by which steps detected without a marker place it (the step feed, as a memory
  // record). Caller serialises as for process().
  void add_vmm(const std::vector<core::MemoryEvent>& events, const std::vector<uint32_t>& event_calls,
               const std::vector<uint32_t>& calls);
  // The join's counters, each kind of trouble with its warning, into the GPU section.
  void count_into(core::Section& out) const;

 private:
  // A memory record to the tracker, with the step of its call's launch context.
  void memory_record(DecodedActivity& d);
  // An overhead record into stats_.overhead.
  void overhead_record(const DecodedActivity& d);
  // join() past the table: a graph node's capture-time context, or a miss.
  void join_rest(const core::GpuActivity& a, bool found, core::LaunchContext* ctx);

  const CuptiLibrary& lib_;
  const CorrelationTable& launches_;
  const GraphNodeTable& graph_nodes_;
  core::GpuAggregator& aggregator_;
  core::StepFeed* feed_ = nullptr;
  NameOf name_of_;
  PipelineStats stats_;
  bool free_overhead_data_ = false;
  // Step rows kept: at least as many as the rank file's step detail can hold.
  core::MemoryTracker memory_{4096};
  uint64_t memory_step_ = 0;  // the step of the last memory record whose context was found
  // The last kVmmCallsKept VMM calls' correlation ids, oldest first in vmm_order_: a record
  // arrives within a few buffers of its call, and allocator growth makes few such calls.
  static constexpr size_t kVmmCallsKept = size_t{1} << 16;
  std::unordered_set<uint32_t> vmm_calls_;
  std::deque<uint32_t> vmm_order_;
};

}  // namespace traintime::cupti
