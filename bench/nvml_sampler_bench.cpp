// The GPU health sampler's CPU cost (DESIGN §9 style budget: <= 0.1 % of a core): the nvml
// module's thread sampling the SIMULATED libnvidia-ml.so.1 (simgpu) every INTERVAL ms for SECONDS
// s, its own thread CPU time (CLOCK_THREAD_CPUTIME_ID, read on that thread as it ends) against the
// wall time. Against simulated NVML this bounds traintime's own work only: a real NVML call costs
// more (the GPU validation measures it). Prints one JSON object; judging is scripts/bench.sh's.
//   bench_nvml_sampler [SECONDS [INTERVAL_MS]]   (default 10, 100)
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <cuda_runtime_api.h>

#include "traintime/nvml/nvml_sampler.h"

using namespace traintime;

namespace {

std::atomic<double> g_thread_cpu_s{-1};
void (*g_fn)(uint32_t) = nullptr;

void measured(uint32_t arg) {
  g_fn(arg);
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  g_thread_cpu_s = static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

bool start_measured(void (*fn)(uint32_t), uint32_t arg) {
  g_fn = fn;
  std::thread(measured, arg).detach();
  return true;
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
  hooks.start_thread = &start_measured;
  nvml::configure(options, hooks);
  const auto t0 = std::chrono::steady_clock::now();
  nvml::start();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  nvml::stop();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int i = 0; i < 200 && g_thread_cpu_s.load() < 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const core::HealthSummary s = nvml::summary();
  const auto& c = s.section.counters.counters;
  const double cpu = g_thread_cpu_s.load();
  if (s.health.status != "sampled" || cpu < 0) {
    std::fprintf(stderr, "bench_nvml_sampler: the sampler did not run (status \"%s\")\n", s.health.status.c_str());
    return 1;
  }
  std::printf("{\"interval_ms\": %u, \"wall_s\": %.6f, \"thread_cpu_s\": %.6f, \"samples\": %llu, \"core_pct\": %.6f}\n",
              interval_ms, wall, cpu, static_cast<unsigned long long>(c.count("samples") ? c.at("samples") : 0),
              cpu / wall * 100);
  return 0;
}
