// libtraintime.so as NCCL's profiler plugin: the callbacks of one collective, called as NCCL 2.32
// calls ncclProfiler_v7 (tests/sim/src/nccl_profiler.h follows the same source), against the
// table the preloaded library exports. scripts/bench.sh runs it with LD_PRELOAD=libtraintime.so.
//  - BM_PluginCollective: what the calling thread runs per collective (GroupApi, CollApi,
//    KernelLaunch, Group and Coll events with their states), NCCL bound inside its object: the
//    plugin counts the call itself (the heavier path: no interposed wrapper counted it).
//  - BM_PluginKernelCh: what NCCL's proxy thread runs per collective of 4 channels (a KernelCh
//    start, KernelChStop state and stop per channel, and the kernel's completion).
//  - BM_NoopCollective, BM_NoopKernelCh: the same calls into a plugin that does nothing (what
//    building the descriptors and calling through the table costs, NCCL's share): the rows are
//    the differences, measured in the same process.
//  - BM_InstructionCount/1 (traintime) and /0 (the plugin doing nothing), for
//    scripts/count_instructions.py: the calling thread's callbacks of a fixed number of
//    collectives, counted by callgrind (deterministic, where timings on a shared machine are not).
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "callgrind_marks.h"
#include "traintime/nccl/profiler_plugin_api.h"

namespace np = traintime::nccl_profiler;

namespace {

constexpr unsigned kChannels = 4;
constexpr int kBatch = 256;  // collectives planned at once for the proxy row

void log_noop(int, unsigned long, const char*, int, const char*, ...) {}

ncclResult_t noop_init(void** ctx, uint64_t, int* mask, const char*, int, int, int, np::DebugLogger) {
  static int context;
  *ctx = &context;
  *mask = ~0;
  return ncclSuccess;
}
int g_noop_event;
ncclResult_t noop_start(void*, void** h, np::EventDescrV7* d) {
  benchmark::DoNotOptimize(d->type);
  *h = &g_noop_event;
  return ncclSuccess;
}
ncclResult_t noop_stop(void* h) {
  benchmark::DoNotOptimize(h);
  return ncclSuccess;
}
ncclResult_t noop_state(void* h, int, np::StateArgsV7*) {
  benchmark::DoNotOptimize(h);
  return ncclSuccess;
}
ncclResult_t noop_finalize(void*) { return ncclSuccess; }
const np::PluginV7 kNoop = {"noop", noop_init, noop_start, noop_stop, noop_state, noop_finalize};

struct Plugin {
  const np::PluginV7* table = nullptr;
  void* context = nullptr;
  int mask = 0;
  uint64_t seq = 0;
  explicit Plugin(const np::PluginV7* t) {
    table = t;
    if (!table || table->init(&context, 0x5eed, &mask, "bench", 1, 2, 0,
                              reinterpret_cast<np::DebugLogger>(&log_noop)) != ncclSuccess) {
      std::fprintf(stderr, "bench_nccl_plugin: no %s in the process (run it with LD_PRELOAD=libtraintime.so)\n",
                   np::kSymbolV7);
      std::exit(1);
    }
  }
  void* start(np::EventDescrV7 d) {
    void* h = nullptr;
    table->start_event(context, &h, &d);
    return h;
  }
  // One AllReduce as NCCL's calling thread reports it; returns its task (Coll) event.
  void* collective() {
    np::EventDescrV7 d{};
    d.type = np::kGroupApi;
    d.group_api.group_depth = 1;
    void* group_api = start(d);
    table->record_event_state(group_api, np::kGroupStartApiStop, nullptr);
    d = {};
    d.type = np::kCollApi;
    d.parent = group_api;
    d.coll_api.func = "AllReduce", d.coll_api.count = 1024, d.coll_api.datatype = "ncclFloat32";
    void* api = start(d);
    table->stop_event(api);
    table->record_event_state(group_api, np::kGroupEndApiStart, nullptr);
    d = {};
    d.type = np::kKernelLaunch;
    d.parent = group_api;
    table->stop_event(start(d));
    d = {};
    d.type = np::kGroup;
    void* group = start(d);
    d = {};
    d.type = np::kColl;
    d.parent = api;
    d.coll.parent_group = group;
    d.coll.seq_number = seq++;
    d.coll.func = "AllReduce", d.coll.count = 1024, d.coll.datatype = "ncclFloat32";
    d.coll.n_channels = kChannels;
    void* task = start(d);
    table->stop_event(task);
    table->stop_event(group);
    table->stop_event(group_api);
    return task;
  }
  // The proxy thread's kernel-channel events of one task.
  void channels(void* task, uint64_t t0) {
    for (unsigned c = 0; c < kChannels; ++c) {
      np::EventDescrV7 d{};
      d.type = np::kKernelCh;
      d.parent = task;
      d.kernel_ch.channel_id = static_cast<uint8_t>(c);
      d.kernel_ch.gpu_timer = t0 + c;
      void* h = start(d);
      np::StateArgsV4 args{};
      args.kernel_ch.gpu_timer = t0 + 5000 + c;
      table->record_event_state(h, np::kKernelChStop, &args);
      table->stop_event(h);
    }
  }
};

Plugin& plugin() {
  static Plugin* p = new Plugin(static_cast<const np::PluginV7*>(dlsym(RTLD_DEFAULT, np::kSymbolV7)));
  return *p;
}
Plugin& noop() {
  static Plugin* p = new Plugin(&kNoop);
  return *p;
}

void collectives(benchmark::State& state, Plugin& p) {
  uint64_t t = 0;
  int n = 0;
  void* tasks[kBatch];
  for (auto _ : state) {
    tasks[n++] = p.collective();
    if (n == kBatch) {  // their kernels complete, as on a GPU, so no kernel slot stays open
      state.PauseTiming();
      for (void* task : tasks) p.channels(task, t += 10000);
      n = 0;
      state.ResumeTiming();
    }
  }
}
void BM_PluginCollective(benchmark::State& state) { collectives(state, plugin()); }
void BM_NoopCollective(benchmark::State& state) { collectives(state, noop()); }
BENCHMARK(BM_NoopCollective);
BENCHMARK(BM_PluginCollective);

void kernel_ch(benchmark::State& state, Plugin& p) {
  uint64_t t = 0;
  int n = kBatch;
  void* tasks[kBatch];
  for (auto _ : state) {
    if (n == kBatch) {
      state.PauseTiming();
      for (void*& task : tasks) task = p.collective();
      n = 0;
      state.ResumeTiming();
    }
    p.channels(tasks[n++], t += 10000);
  }
}
void BM_PluginKernelCh(benchmark::State& state) { kernel_ch(state, plugin()); }
void BM_NoopKernelCh(benchmark::State& state) { kernel_ch(state, noop()); }
BENCHMARK(BM_NoopKernelCh);
BENCHMARK(BM_PluginKernelCh);

// Whole batches of collectives, as BM_*Collective runs them; only the calling thread's callbacks
// of the counted batches are instrumented, not their kernels' channels.
constexpr int kWarmBatches = 8;
constexpr int kCountedBatches = 16;
void BM_InstructionCount(benchmark::State& state) {
  Plugin& p = state.range(0) ? plugin() : noop();
  uint64_t t = 0;
  void* tasks[kBatch];
  for (auto _ : state) {
    for (int b = 0; b < kWarmBatches + kCountedBatches; ++b) {
      if (b >= kWarmBatches) CALLGRIND_START_INSTRUMENTATION;
      for (void*& task : tasks) task = p.collective();
      CALLGRIND_STOP_INSTRUMENTATION;
      for (void* task : tasks) p.channels(task, t += 10000);
    }
  }
  state.counters["counted_collectives"] = kCountedBatches * kBatch;
}
BENCHMARK(BM_InstructionCount)->Arg(0)->Arg(1)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
