// The GPU health sampler's CPU cost (DESIGN §9 style budget: <= 0.1 % of a core): the nvml
// module's thread (tt-nvml) sampling the SIMULATED libnvidia-ml.so.1 (simgpu) every INTERVAL ms
// for SECONDS s, its CPU time as the kernel counts it for that thread (found by its name in
// /proc/self/task, read just before the sampler is stopped: its final reading and NVML's shutdown
// are left out) against the wall time. Against simulated NVML this bounds traintime's own work
// only: a real NVML call costs more (the GPU validation measures it). Prints one JSON object;
// judging is scripts/bench.sh's.
//   bench_nvml_sampler [SECONDS [INTERVAL_MS]]   (default 10, 100)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <cuda_runtime_api.h>

#include "traintime/nvml/nvml_sampler.h"
#include "traintime/support/threads.h"

using namespace traintime;

namespace {

// The CPU time, in seconds, of this process's thread named `name` (-1 when there is none):
// schedstat's first field (nanoseconds on the CPU).
double thread_cpu_s(const std::string& name) {
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream comm(task.path() / "comm");
    std::string got;
    if (!std::getline(comm, got) || got != name) continue;
    std::ifstream sched(task.path() / "schedstat");
    unsigned long long ns = 0;
    if (sched >> ns) return static_cast<double>(ns) / 1e9;
  }
  return -1;
}

uint32_t no_steps() noexcept { return 0; }

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 10.0;
  const uint32_t interval_ms = argc > 2 ? static_cast<uint32_t>(std::atoi(argv[2])) : 100;
  if (cudaFree(nullptr) != cudaSuccess) {  // the device comes into use
    std::fprintf(stderr, "bench_nvml_sampler: the simulated CUDA runtime refused cudaFree\n");
    return 1;
  }
  nvml::Options options;
  options.interval_ms = interval_ms;
  options.library = SIMGPU_NVML_LIB;
  nvml::Hooks hooks;
  hooks.steps_completed = &no_steps;
  nvml::configure(options, hooks);
  const auto t0 = std::chrono::steady_clock::now();
  nvml::start();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  // A very short run (bench.sh --smoke) may look before the thread has named itself.
  const std::string name(support::thread_name(support::OwnThread::kNvml));
  double cpu = thread_cpu_s(name);
  for (int i = 0; i < 200 && cpu < 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    cpu = thread_cpu_s(name);
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nvml::stop();
  const core::HealthSummary s = nvml::summary();
  const auto& c = s.section.counters.counters;
  if (s.health.status != "sampled" || cpu < 0) {
    std::fprintf(stderr, "bench_nvml_sampler: the sampler did not run (status \"%s\")\n", s.health.status.c_str());
    return 1;
  }
  std::printf("{\"interval_ms\": %u, \"wall_s\": %.6f, \"thread_cpu_s\": %.6f, \"samples\": %llu, \"core_pct\": %.6f}\n",
              interval_ms, wall, cpu, static_cast<unsigned long long>(c.count("samples") ? c.at("samples") : 0),
              cpu / wall * 100);
  return 0;
}
