// What NCCL's proxy thread pays for traintime as its profiler plugin, per network op and per step
// (nccl/src/proxy_progress.h): the plugin's v7 table called as NCCL's src/plugin/profiler.cc
// calls it from the proxy thread (ProxyOp: start, ProxyOpInProgress, stop; ProxyStep: start,
// SendGPUWait, SendWait with its bytes, stop), against a plugin that does nothing called the same
// way (the calls' own cost). scripts/bench.sh reports the difference; nothing here asserts a time.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "proxy_progress.h"
#include "traintime/nccl/profiler_plugin_api.h"

extern "C" traintime::nccl_profiler::PluginV7 ncclProfiler_v7;

namespace {

namespace np = traintime::nccl_profiler;

// The reference: a plugin whose callbacks do nothing but hand out a handle.
int g_bare_handle;
ncclResult_t bare_start(void*, void** handle, np::EventDescrV7*) {
  *handle = &g_bare_handle;
  return ncclSuccess;
}
ncclResult_t bare_stop(void*) { return ncclSuccess; }
ncclResult_t bare_record(void*, int, np::StateArgsV7*) { return ncclSuccess; }
np::PluginV7 g_bare = {"bare", nullptr, bare_start, bare_stop, bare_record, nullptr};

struct Setup {
  void* context = nullptr;
  int mask = 0;
  np::EventDescrV7 coll{};
  void* task = nullptr;
  Setup() {
    traintime::nccl::proxy::configure("on");
    if (ncclProfiler_v7.init(&context, 1, &mask, "bench", 1, 2, 0, nullptr) != ncclSuccess) {
      std::fprintf(stderr, "bench_proxy_progress: the plugin's init failed\n");
      std::exit(1);
    }
    coll.type = np::kColl;
    coll.coll.func = "AllReduce";
    coll.coll.seq_number = 1;
    ncclProfiler_v7.start_event(context, &task, &coll);
  }
};

Setup& setup() {
  static Setup* s = new Setup();
  return *s;
}

np::EventDescrV7 proxy_op(void* parent) {
  np::EventDescrV7 d{};
  d.type = np::kProxyOp;
  d.parent = parent;
  d.rank = 0;
  d.proxy_op.pid = static_cast<int32_t>(getpid());
  d.proxy_op.channel_id = 3;
  d.proxy_op.peer = 1;
  d.proxy_op.n_steps = 8;
  d.proxy_op.chunk_size = 1 << 16;
  d.proxy_op.is_send = 1;
  return d;
}

// One ProxyOp as NCCL's proxy thread makes it: started, ProxyOpInProgress, stopped.
void op_lifecycle(benchmark::State& state, const np::PluginV7& p, void* context, void* parent) {
  np::EventDescrV7 d = proxy_op(parent);
  np::StateArgsV7 args{};
  for (auto _ : state) {
    void* h = nullptr;
    p.start_event(context, &h, &d);
    p.record_event_state(h, np::kProxyOpInProgress, &args);
    p.stop_event(h);
    benchmark::DoNotOptimize(h);
  }
}

// One ProxyStep of an op in flight: posted (SendGPUWait), sent (SendWait, its bytes), done.
void step_lifecycle(benchmark::State& state, const np::PluginV7& p, void* context, void* parent) {
  np::EventDescrV7 d = proxy_op(parent);
  void* op = nullptr;
  p.start_event(context, &op, &d);
  np::EventDescrV7 s{};
  s.type = np::kProxyStep;
  s.parent = op;
  np::StateArgsV7 args{};
  args.proxy_step.trans_size = 1 << 16;
  int step = 0;
  for (auto _ : state) {
    s.proxy_step.step = step++ & 7;
    void* h = nullptr;
    p.start_event(context, &h, &s);
    p.record_event_state(h, np::kProxyStepSendGpuWait, &args);
    p.record_event_state(h, np::kProxyStepSendWait, &args);
    p.stop_event(h);
    benchmark::DoNotOptimize(h);
  }
  p.stop_event(op);
}

void BM_BareProxyOp(benchmark::State& state) {
  const np::PluginV7* volatile p = &g_bare;
  op_lifecycle(state, *p, setup().context, setup().task);
}
BENCHMARK(BM_BareProxyOp);

void BM_TraintimeProxyOp(benchmark::State& state) {
  const np::PluginV7* volatile p = &ncclProfiler_v7;
  op_lifecycle(state, *p, setup().context, setup().task);
}
BENCHMARK(BM_TraintimeProxyOp);

void BM_BareProxyStep(benchmark::State& state) {
  const np::PluginV7* volatile p = &g_bare;
  step_lifecycle(state, *p, setup().context, setup().task);
}
BENCHMARK(BM_BareProxyStep);

void BM_TraintimeProxyStep(benchmark::State& state) {
  const np::PluginV7* volatile p = &ncclProfiler_v7;
  step_lifecycle(state, *p, setup().context, setup().task);
}
BENCHMARK(BM_TraintimeProxyStep);

}  // namespace

BENCHMARK_MAIN();
