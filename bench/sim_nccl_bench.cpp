// NCCL wrapper overhead per call (DESIGN §9: ≤ 20 ns CPU; group start/end ≤ 10 ns), against the SIMULATED libnccl.so.2
// (simgpu, build/sim). scripts/bench.sh runs this binary with and without
// LD_PRELOAD=libtraintime.so; the difference per call is the wrappers' own cost. World size 1
// and in place, so the fake launches nothing and its own cost stays small and identical in both
// runs.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>

namespace {

struct Setup {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  void* buf = nullptr;
  Setup() {
    ncclUniqueId id;
    if (cudaSetDevice(0) != cudaSuccess || cudaStreamCreate(&stream) != cudaSuccess ||
        cudaMalloc(&buf, 4096) != cudaSuccess || ncclGetUniqueId(&id) != ncclSuccess ||
        ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) {
      std::fprintf(stderr, "bench_sim_nccl: simulated CUDA/NCCL set-up failed\n");
      std::exit(1);
    }
  }
};

Setup& setup() {
  static Setup* s = new Setup();
  return *s;
}

void BM_NcclAllReduceInPlace(benchmark::State& state) {
  Setup& s = setup();
  for (auto _ : state) {
    ncclResult_t r = ncclAllReduce(s.buf, s.buf, 1024, ncclFloat32, ncclSum, s.comm, s.stream);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_NcclAllReduceInPlace);

// Two calls per iteration: the per-call figure is half of it.
void BM_NcclGroupStartEnd(benchmark::State& state) {
  setup();
  for (auto _ : state) {
    ncclResult_t a = ncclGroupStart();
    ncclResult_t b = ncclGroupEnd();
    benchmark::DoNotOptimize(a);
    benchmark::DoNotOptimize(b);
  }
}
BENCHMARK(BM_NcclGroupStartEnd);

}  // namespace

BENCHMARK_MAIN();
