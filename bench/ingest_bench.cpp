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

// One chunk of the workload as CUPTI 13.0 lays it out in a buffer.
class CuptiBuffer {
 public:
  // with_api: each activity preceded by its runtime and driver API records, as the live capture's
  // buffers are (the adapter enables API records for the launch callbacks).
  CuptiBuffer(const SyntheticWorkload& w, bool with_api) : w_(w), with_api_(with_api) {
    size_t bytes = 0;
    for (size_t i = 0; i < w.size(); ++i) bytes += 2 * sizeof(CUpti_ActivityAPI) + record_size(i);
    storage_.resize(bytes / 8 + 1);
    size_t used = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER}) {
        if (!with_api_) break;
        auto* api = at<CUpti_ActivityAPI>(used);
        api->kind = kind;
        api_offsets_.push_back(used);
        used += sizeof(CUpti_ActivityAPI);
      }
      offsets_.push_back(used);
      used += record_size(i);
    }
    size_ = used;
  }

  // Pass p of the workload: timestamps and correlation ids as that pass would have them.
  void fill(uint64_t pass) {
    core::GpuActivity a;
    core::LaunchContext c;
    core::Category cat;
    for (size_t i = 0; i < w_.size(); ++i) {
      w_.get(i, pass, &a, &c, &cat);
      const uint32_t runtime_id = a.correlation_id, driver_id = a.correlation_id + 1;
      if (with_api_) {
        at<CUpti_ActivityAPI>(api_offsets_[2 * i])->correlationId = runtime_id;
        at<CUpti_ActivityAPI>(api_offsets_[2 * i + 1])->correlationId = driver_id;
      }
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
  std::vector<uint64_t> storage_;  // zeroed: unused fields stay 0 as CUPTI leaves them
  std::vector<size_t> offsets_, api_offsets_;
  size_t size_ = 0;
};

void BM_DecodeJoinIngest(benchmark::State& state) {
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
  CuptiBuffer buffer(w, state.range(0) != 0);
  uint64_t pass = 0;
  for (auto _ : state) {
    state.PauseTiming();  // the launch callbacks' share: not the processing thread's work
    buffer.fill(pass);
    core::GpuActivity a;
    core::LaunchContext c;
    core::Category cat;
    for (size_t i = 0; i < w.size(); ++i) {  // as the launch callback keeps a runtime launch
      w.get(i, pass, &a, &c, &cat);
      c.category = category(c.path);
      const uint64_t ticket = launches.claim(a.correlation_id, c);
      launches.add_nested(ticket, a.correlation_id + 1);  // its nested driver call's id
      launches.publish(ticket);
    }
    ++pass;
    state.ResumeTiming();
    pipeline.process(buffer.data(), buffer.size());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * w.size()));
  state.counters["activities"] = static_cast<double>(pipeline.stats().activities);
  state.counters["missing_context"] = static_cast<double>(pipeline.stats().missing_context);
  state.counters["late_records"] = static_cast<double>(aggregator.late_records());
}
BENCHMARK(BM_DecodeJoinIngest)->ArgName("api_records")->Arg(1)->Arg(0);

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
