// launch_loop: a launch-bound loop of tiny kernels, the worst case for a tool that hooks every
// launch. scripts/gpu_overhead.py runs it with no tool, a bare CUPTI tracer and traintime.
// It carries no traintime annotation on purpose: what is measured is the cost of the tools'
// launch callbacks and activity records, nothing else.
//
//   build/bin/gpu_launch_loop [--launches N] [--warmup N]
//
// One 1-thread kernel that does nothing, launched N times back to back on the default stream.
// After --warmup launches and a cudaDeviceSynchronize, a host steady clock times the N launches
// plus ONE cudaDeviceSynchronize at the end (nothing synchronises inside the loop). The default N
// is meant to take about 1-2 s on an H100 with no tool, assuming a few microseconds per launch
// (an estimate: this has not run on a GPU yet).
//
// Output, one line on stdout (the only line; parsed by scripts/gpu_overhead.py):
//   launch_loop: <N> launches, <us per launch, 4 decimals> us/launch, total_s <seconds, 6 decimals>, device <name>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <cuda_runtime.h>

#include "args.h"

namespace {

const char kUsage[] =
    "usage: gpu_launch_loop [options]\n"
    "  --launches N   timed kernel launches (default 500000)\n"
    "  --warmup N     untimed launches before them (default 2000)\n";

__global__ void tiny_kernel() {}

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "gpu_launch_loop: %s failed: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  long long launches = 500000;
  long long warmup = 2000;
  example::Args args(argc, argv, kUsage);
  args.parse([&](const std::string& name, const char* v) -> int {
    if (name == "--launches") return launches = args.number(name, v, 1, 1000000000LL), 1;
    if (name == "--warmup") return warmup = args.number(name, v, 0, 1000000000LL), 1;
    return -1;
  });

  int device = 0;
  check(cudaSetDevice(device), "cudaSetDevice");
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");

  for (long long i = 0; i < warmup; ++i) tiny_kernel<<<1, 1>>>();
  check(cudaGetLastError(), "warm-up launch");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the warm-up");

  const auto t0 = std::chrono::steady_clock::now();
  for (long long i = 0; i < launches; ++i) tiny_kernel<<<1, 1>>>();
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the loop");
  const auto t1 = std::chrono::steady_clock::now();
  check(cudaGetLastError(), "launch");

  const double total_s = std::chrono::duration<double>(t1 - t0).count();
  std::printf("launch_loop: %lld launches, %.4f us/launch, total_s %.6f, device %s\n", launches,
              total_s * 1e6 / double(launches), total_s, prop.name);
  return 0;
}
