// Activity ingest on one core (DESIGN §9: ingest ≥ 40 M, decode + join + ingest ≥ 15 M records/s). Two views of the processing thread:
//  - BM_AggregatorIngest: core::GpuAggregator::ingest alone, fed the synthetic workload one
//    pass (64 steps) at a time, each pass made untimed.
//  - BM_DecodeJoinIngest: a CUPTI 13.0 activity buffer (kernel, memcpy and memset records, each
//    preceded by the runtime and driver API records the adapter enables for launches) walked
//    with a real cuptiActivityGetNextRecord, joined with launch contexts and ingested — the whole
//    of ActivityPipeline::process. The record walker is the toolkit's libcupti when present (it
//    walks buffers without a GPU), else simgpu's; the benchmark label says which.
// Items are activities (kernel/memcpy/memset); API records ride along uncounted. api_records:1 is
// the buffer as the live capture gets it, api_records:0 the activity records alone.
//  - BM_DecodeJoinIngestMemory: the api_records:1 buffer with device memory records as well (the
//    issue-27 cost): before each kernel an allocation and after it the allocation's release, each
//    with its runtime and driver API records and its call's context in the correlation table — as
//    PyTorch's cudaMallocAsync allocator backend makes them (the caching allocator makes far
//    fewer). Items are still the activities: the memory records ride along, as the API records.
#include <algorithm>
#include <benchmark/benchmark.h>
#include <cupti.h>
#include <unistd.h>

#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "activity_pipeline.h"
#include "callgrind_marks.h"
#include "correlation_table.h"
#include "cupti_library.h"
#include "graph_node_table.h"
#include "synthetic_workload.h"
#include "traintime/core/gpu_aggregator.h"
#include "traintime/core/step_feed.h"

using namespace traintime;
using bench::SyntheticWorkload;

namespace {

const SyntheticWorkload& workload() {
  static const SyntheticWorkload* w = new SyntheticWorkload();
  return *w;
}

void BM_AggregatorIngest(benchmark::State& state) {
  const SyntheticWorkload& w = workload();
  core::GpuAggregator aggregator;
  // One pass of the workload per iteration, made before the timer runs (as BM_DecodeJoinIngest
  // fills its buffer untimed): the row times ingest, not the making of its arguments.
  std::vector<core::GpuActivity> acts(w.size());
  std::vector<core::LaunchContext> ctxs(w.size());
  std::vector<core::Category> cats(w.size());
  uint64_t pass = 0;
  for (auto _ : state) {
    state.PauseTiming();
    for (size_t i = 0; i < w.size(); ++i) w.get(i, pass, &acts[i], &ctxs[i], &cats[i]);
    ++pass;
    state.ResumeTiming();
    for (size_t i = 0; i < w.size(); ++i) aggregator.ingest(acts[i], ctxs[i], cats[i]);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * w.size()));
  state.counters["late_records"] = static_cast<double>(aggregator.late_records());
}
BENCHMARK(BM_AggregatorIngest);

// Step detection's cost on the processing thread (core/step_feed.h): the same passes as
// BM_AggregatorIngest with no marker (every step index 0), through StepFeed, settled after every
// 1 024 records as after a buffer. What it keeps: at most max_held activities of
// held_record_bytes each.
void BM_StepFeedIngest(benchmark::State& state) {
  const SyntheticWorkload& w = workload();
  core::GpuAggregator aggregator;
  core::StepFeed feed(aggregator, core::StepFeedOptions{});
  std::vector<core::GpuActivity> acts(w.size());
  std::vector<core::LaunchContext> ctxs(w.size());
  std::vector<core::Category> cats(w.size());
  uint64_t pass = 0;
  std::size_t most_held = 0;
  for (auto _ : state) {
    state.PauseTiming();
    for (size_t i = 0; i < w.size(); ++i) {
      w.get(i, pass, &acts[i], &ctxs[i], &cats[i]);
      ctxs[i].step = 0;
    }
    ++pass;
    state.ResumeTiming();
    for (size_t i = 0; i < w.size(); ++i) {
      feed.ingest(acts[i], ctxs[i], cats[i]);
      if ((i & 1023) == 1023) {
        feed.settle();
        most_held = std::max(most_held, feed.held());
      }
    }
    feed.settle();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * w.size()));
  const core::StepsOrigin origin = feed.origin();
  state.counters["detected_steps"] = static_cast<double>(origin.detection.steps);
  state.counters["steps_true"] = static_cast<double>(pass * SyntheticWorkload::kChunkSteps);
  state.counters["period_calls"] = static_cast<double>(origin.detection.period_calls);
  state.counters["most_held"] = static_cast<double>(most_held);
  state.counters["max_held"] = static_cast<double>(core::StepFeedOptions{}.max_held);
  state.counters["held_record_bytes"] = static_cast<double>(core::StepFeed::kHeldBytes);
}
BENCHMARK(BM_StepFeedIngest);

// A mid-run summary while step detection holds a full window (core/step_feed.h "Snapshots"): no
// step found yet and max_held activities held (never settled, so none is fed or decided), the
// aggregator holding the records handed on before. A snapshot, the hang watchdog's file and a
// terminating signal's write each clone the aggregator, ingest the held activities into the
// copy, and summarise it. held:0 is the same summary with nothing held (no copy made), for the
// ratio; held:2 the copy alone (clone and snapshot_into, no summary). What the copy costs in
// memory: copy_bytes (the clone's held intervals after it took the window).
void BM_StepFeedSnapshot(benchmark::State& state) {
  const bool held = state.range(0) != 0;
  const bool summarise = state.range(0) != 2;
  const SyntheticWorkload& w = workload();
  core::GpuAggregator aggregator;
  core::StepFeed feed(aggregator, core::StepFeedOptions{});
  const std::size_t window = core::StepFeedOptions{}.max_held;
  core::GpuActivity a;
  core::LaunchContext ctx;
  core::Category cat;
  for (std::size_t i = 0; i < window; ++i) {
    w.get(i % w.size(), i / w.size(), &a, &ctx, &cat);
    ctx.step = 0;
    if (held) {
      feed.ingest(a, ctx, cat);
    } else {
      aggregator.ingest(a, ctx, cat);
    }
  }
  uint64_t copy_bytes = 0;
  for (auto _ : state) {
    if (held) {
      const std::unique_ptr<core::GpuAggregator> copy = aggregator.clone();
      feed.snapshot_into(*copy);
      if (summarise) benchmark::DoNotOptimize(copy->summary(0));
      copy_bytes = copy->held_bytes();
    } else {
      benchmark::DoNotOptimize(aggregator.summary(0));
    }
  }
  state.counters["held"] = static_cast<double>(feed.held());
  state.counters["copy_bytes"] = static_cast<double>(copy_bytes);
}
BENCHMARK(BM_StepFeedSnapshot)->ArgName("held")->Arg(1)->Arg(2)->Arg(0)->Unit(benchmark::kMillisecond);

// One chunk of the workload as CUPTI 13.0 lays it out in a buffer.
class CuptiBuffer {
 public:
  // with_api: each activity preceded by its runtime and driver API records, as the live capture's
  // buffers are (the adapter enables API records for the launch callbacks).
  // with_memory: each kernel between the allocation and the release of one block of device
  // memory (with_api_ only), as cudaMallocAsync and cudaFreeAsync record them.
  CuptiBuffer(const SyntheticWorkload& w, bool with_api, bool with_memory = false)
      : w_(w), with_api_(with_api), with_memory_(with_api && with_memory) {
    constexpr size_t kMemoryCall = 2 * sizeof(CUpti_ActivityAPI) + sizeof(CUpti_ActivityMemory4);
    size_t bytes = 0;
    for (size_t i = 0; i < w.size(); ++i) bytes += 2 * sizeof(CUpti_ActivityAPI) + record_size(i) + 2 * kMemoryCall;
    storage_.resize(bytes / 8 + 1);
    size_t used = 0;
    auto api_pair = [&] {
      for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER}) {
        auto* api = at<CUpti_ActivityAPI>(used);
        api->kind = kind;
        api_offsets_.push_back(used);
        used += sizeof(CUpti_ActivityAPI);
      }
    };
    auto memory_call = [&](size_t i, bool release) {
      api_pair();
      auto* m = at<CUpti_ActivityMemory4>(used);
      m->kind = CUPTI_ACTIVITY_KIND_MEMORY2;
      m->memoryOperationType = release ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE
                                       : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
      m->memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
      m->address = 0x7f0000000000ull + (i << 20);
      m->bytes = 1u << 20;
      m->deviceId = 0;
      memory_offsets_.push_back(used);
      used += sizeof(CUpti_ActivityMemory4);
    };
    for (size_t i = 0; i < w.size(); ++i) {
      const bool memory = with_memory_ && w.activity(i).kind == core::ActivityKind::kKernel;
      if (memory) memory_call(i, false);
      if (with_api_) api_pair();
      offsets_.push_back(used);
      used += record_size(i);
      if (memory) memory_call(i, true);
    }
    size_ = used;
  }

  // The memory calls' runtime correlation ids of pass p, in buffer order (fill() sets them).
  const std::vector<uint32_t>& memory_ids() const { return memory_ids_; }

  // Pass p of the workload: timestamps and correlation ids as that pass would have them.
  void fill(uint64_t pass) {
    core::GpuActivity a;
    core::LaunchContext c;
    core::Category cat;
    size_t api = 0, memory = 0;
    memory_ids_.clear();
    // A memory call's ids: above every launch's of any pass (launches take 2 per activity).
    uint32_t next_memory_id = 0x80000000u + static_cast<uint32_t>(pass * w_.size() * 4);
    auto memory_call = [&](uint64_t timestamp) {
      const uint32_t runtime_id = next_memory_id, driver_id = next_memory_id + 1;
      next_memory_id += 2;
      at<CUpti_ActivityAPI>(api_offsets_[api++])->correlationId = runtime_id;
      at<CUpti_ActivityAPI>(api_offsets_[api++])->correlationId = driver_id;
      auto* m = at<CUpti_ActivityMemory4>(memory_offsets_[memory++]);
      m->correlationId = runtime_id;
      m->timestamp = timestamp;
      memory_ids_.push_back(runtime_id);
    };
    for (size_t i = 0; i < w_.size(); ++i) {
      w_.get(i, pass, &a, &c, &cat);
      const bool with_memory = with_memory_ && a.kind == core::ActivityKind::kKernel;
      if (with_memory) memory_call(a.start_ns - 1000);
      const uint32_t runtime_id = a.correlation_id, driver_id = a.correlation_id + 1;
      if (with_api_) {
        at<CUpti_ActivityAPI>(api_offsets_[api++])->correlationId = runtime_id;
        at<CUpti_ActivityAPI>(api_offsets_[api++])->correlationId = driver_id;
      }
      if (with_memory) memory_call(a.end_ns + 1000);
      const size_t off = offsets_[i];
      switch (a.kind) {
        case core::ActivityKind::kKernel: {
          auto* k = at<CUpti_ActivityKernel10>(off);
          k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
          k->start = a.start_ns;
          k->end = a.end_ns;
          k->deviceId = a.device;
          k->streamId = a.stream;
          k->correlationId = runtime_id;
          k->name = a.name.data();  // NUL-terminated: points into the workload's std::strings
          break;
        }
        case core::ActivityKind::kMemcpy: {
          auto* m = at<CUpti_ActivityMemcpy6>(off);
          m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
          m->copyKind = a.copy_kind == core::CopyKind::kHtoD ? CUPTI_ACTIVITY_MEMCPY_KIND_HTOD
                                                             : CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
          m->bytes = a.bytes;
          m->start = a.start_ns;
          m->end = a.end_ns;
          m->streamId = a.stream;
          m->correlationId = driver_id;
          m->runtimeCorrelationId = runtime_id;
          break;
        }
        case core::ActivityKind::kMemset: {
          auto* m = at<CUpti_ActivityMemset4>(off);
          m->kind = CUPTI_ACTIVITY_KIND_MEMSET;
          m->bytes = a.bytes;
          m->start = a.start_ns;
          m->end = a.end_ns;
          m->streamId = a.stream;
          m->correlationId = driver_id;
          break;
        }
      }
    }
  }

  uint8_t* data() { return reinterpret_cast<uint8_t*>(storage_.data()); }
  size_t size() const { return size_; }

 private:
  size_t record_size(size_t i) const {
    switch (w_.activity(i).kind) {
      case core::ActivityKind::kKernel: return sizeof(CUpti_ActivityKernel10);
      case core::ActivityKind::kMemcpy: return sizeof(CUpti_ActivityMemcpy6);
      case core::ActivityKind::kMemset: return sizeof(CUpti_ActivityMemset4);
    }
    return 0;
  }
  template <class T>
  T* at(size_t off) {
    return reinterpret_cast<T*>(data() + off);
  }

  const SyntheticWorkload& w_;
  const bool with_api_;
  const bool with_memory_;
  std::vector<uint64_t> storage_;  // zeroed: unused fields stay 0 as CUPTI leaves them
  std::vector<size_t> offsets_, api_offsets_, memory_offsets_;
  std::vector<uint32_t> memory_ids_;
  size_t size_ = 0;
};

void decode_join_ingest(benchmark::State& state, bool with_api, bool with_memory) {
  const SyntheticWorkload& w = workload();
  cupti::CuptiLibrary lib;
  std::string why;
  const bool toolkit = access(TOOLKIT_CUPTI, R_OK) == 0 && lib.load(TOOLKIT_CUPTI, &why) &&
                       lib.layout() == cupti::RecordLayout::kCupti13_0;
  if (!toolkit && !lib.load(SIM_CUPTI, &why)) {
    state.SkipWithError(("no usable libcupti: " + why).c_str());
    return;
  }
  state.SetLabel(toolkit ? "record walker: toolkit libcupti" : "record walker: simgpu libcupti (SIMULATED)");
  cupti::CorrelationTable launches(1u << 14);  // the live capture's size (capture_tuning.h)
  cupti::GraphNodeTable nodes(16);
  core::GpuAggregator aggregator;
  cupti::ActivityPipeline pipeline(lib, launches, nodes, aggregator);
  // The category the launch callback would have put in the context: the region's, layers
  // counted as forward.
  const auto category = [](core::PathId p) {
    return p == 1 ? core::Category::kIo : p == 2 ? core::Category::kForward
         : p == 3 ? core::Category::kBackward : p == 4 ? core::Category::kOptimizer
         : core::Category::kForward;
  };
  CuptiBuffer buffer(w, with_api, with_memory);
  uint64_t pass = 0;
  for (auto _ : state) {
    state.PauseTiming();  // the launch callbacks' share: not the processing thread's work
    buffer.fill(pass);
    core::GpuActivity a;
    core::LaunchContext c;
    core::Category cat;
    size_t memory = 0;
    uint64_t first_step = UINT64_MAX;
    // As the callback keeps a runtime call (a launch, or an allocation's: ApiRole::kMemory) and
    // its nested driver call's id, in the order the calls were made.
    auto keep = [&launches](uint32_t runtime_id, const core::LaunchContext& ctx) {
      const uint64_t ticket = launches.claim(runtime_id, ctx);
      launches.add_nested(ticket, runtime_id + 1);
      launches.publish(ticket);
    };
    for (size_t i = 0; i < w.size(); ++i) {
      w.get(i, pass, &a, &c, &cat);
      c.category = category(c.path);
      first_step = std::min<uint64_t>(first_step, c.step);
      const bool with_memory_calls = with_memory && a.kind == core::ActivityKind::kKernel;
      if (with_memory_calls) keep(buffer.memory_ids()[memory++], c);
      keep(a.correlation_id, c);
      if (with_memory_calls) keep(buffer.memory_ids()[memory++], c);
    }
    ++pass;
    // As the processing thread does before each buffer: the steps before this buffer's are
    // complete, so the memory records held for them are applied (MemoryTracker::settle).
    pipeline.memory().set_complete_below(first_step);
    state.ResumeTiming();
    pipeline.process(buffer.data(), buffer.size());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * w.size()));
  state.counters["activities"] = static_cast<double>(pipeline.stats().activities);
  state.counters["missing_context"] = static_cast<double>(pipeline.stats().missing_context);
  state.counters["late_records"] = static_cast<double>(aggregator.late_records());
  pipeline.memory().summary();  // applies the records it holds
  state.counters["memory_records"] = static_cast<double>(pipeline.memory().records());
  state.counters["memory_missing_context"] = static_cast<double>(pipeline.stats().memory_missing_context);
}

void BM_DecodeJoinIngest(benchmark::State& state) { decode_join_ingest(state, state.range(0) != 0, false); }
BENCHMARK(BM_DecodeJoinIngest)->ArgName("api_records")->Arg(1)->Arg(0);

void BM_DecodeJoinIngestMemory(benchmark::State& state) { decode_join_ingest(state, true, true); }
BENCHMARK(BM_DecodeJoinIngestMemory);

// The join's harder cases, the correlation table alone (items: lookups), against the decode +
// join + ingest budget, which a record the processing thread must get through meets whatever its
// context's fate:
//  - case:0, a reader that fell behind: every record's context was evicted a moment ago, and the
//    window moves on by a launch per record (a lost record costing a scan of the table kept such a
//    reader behind for good);
//  - case:1, three threads launching in turn (a training thread, an autograd worker, NCCL's own
//    thread), their records in time order: each one's launch a chunk away from the previous one's.
void BM_JoinLookup(benchmark::State& state) {
  const bool behind = state.range(0) == 0;
  constexpr uint32_t kCap = 1u << 14;  // the live capture's size (capture_tuning.h)
  cupti::CorrelationTable t(kCap);
  cupti::CorrelationTable::Writer writers[3];
  core::LaunchContext ctx;
  uint32_t id = 0;
  uint32_t k = 0;
  const auto launch = [&] {  // a runtime launch's id and its nested driver call's
    id += 2;
    const uint64_t ticket = t.claim(behind ? writers[0] : writers[k++ % 3], id - 1, ctx);
    t.add_nested(ticket, id);
    t.publish(ticket);
  };
  for (uint32_t n = 0; n < 2 * kCap; ++n) launch();
  core::LaunchContext got;
  uint64_t found = 0;
  if (behind) {
    benchmark::DoNotOptimize(t.lookup(id - 1, &got));  // a hit: the reader's cursor
    uint32_t record = id - 2 * (kCap + 64) - 1;  // evicted a moment ago, as every one after it
    for (auto _ : state) {
      found += t.lookup(record, &got);
      record += 2;
      launch();
    }
  } else {
    uint32_t record = id - 2 * (kCap / 2) + 1;  // the older half of the window on, in launch order
    for (auto _ : state) {
      found += t.lookup(record, &got);
      record += 2;
      launch();
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.counters["found"] = static_cast<double>(found);
  state.counters["scans"] = static_cast<double>(t.scans());
  state.counters["full_scans"] = static_cast<double>(t.full_scans());
}
BENCHMARK(BM_JoinLookup)->ArgName("case")->Arg(0)->Arg(1);

// Instruction counts for scripts/count_instructions.py (callgrind started with instrumentation
// off): kWarmPasses untimed passes fill the open-step window, then the next kCountedPasses are
// instrumented. ingest:1 counts GpuAggregator::ingest alone, ingest:0 the whole processing path
// on a buffer with API records, contexts kept as the launch callback keeps them. Outside
// callgrind it only runs the passes (its time is not a figure of bench.sh).
constexpr uint64_t kWarmPasses = 24, kCountedPasses = 16;
void BM_InstructionCount(benchmark::State& state) {
  const SyntheticWorkload& w = workload();
  const bool ingest_only = state.range(0) != 0;
  cupti::CuptiLibrary lib;
  std::string why;
  if (!lib.load(TOOLKIT_CUPTI, &why) && !lib.load(SIM_CUPTI, &why)) {
    state.SkipWithError(("no usable libcupti: " + why).c_str());
    return;
  }
  cupti::CorrelationTable launches(1u << 14);
  cupti::GraphNodeTable nodes(16);
  core::GpuAggregator aggregator;
  cupti::ActivityPipeline pipeline(lib, launches, nodes, aggregator);
  CuptiBuffer buffer(w, true);
  std::vector<core::GpuActivity> acts(w.size());
  std::vector<core::LaunchContext> ctxs(w.size());
  std::vector<core::Category> cats(w.size());
  for (auto _ : state) {
    for (uint64_t pass = 0; pass < kWarmPasses + kCountedPasses; ++pass) {
      if (ingest_only) {
        for (size_t i = 0; i < w.size(); ++i) w.get(i, pass, &acts[i], &ctxs[i], &cats[i]);
      } else {
        buffer.fill(pass);
        core::GpuActivity a;
        core::LaunchContext c;
        core::Category cat;
        for (size_t i = 0; i < w.size(); ++i) {
          w.get(i, pass, &a, &c, &cat);
          c.category = core::Category::kForward;  // one category for every path
          const uint64_t ticket = launches.claim(a.correlation_id, c);
          launches.add_nested(ticket, a.correlation_id + 1);
          launches.publish(ticket);
        }
      }
      if (pass >= kWarmPasses) CALLGRIND_START_INSTRUMENTATION;
      if (ingest_only) {
        for (size_t i = 0; i < w.size(); ++i) aggregator.ingest(acts[i], ctxs[i], cats[i]);
      } else {
        pipeline.process(buffer.data(), buffer.size());
      }
      CALLGRIND_STOP_INSTRUMENTATION;
    }
  }
  state.counters["counted_activities"] = static_cast<double>(kCountedPasses * w.size());
}
BENCHMARK(BM_InstructionCount)->ArgName("ingest")->Arg(1)->Arg(0)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
