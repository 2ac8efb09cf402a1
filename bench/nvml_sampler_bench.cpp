// The GPU health sampler's CPU cost (DESIGN §9: <= 0.1 % of a core): the nvml module's thread
// (tt-nvml) sampling the SIMULATED libnvidia-ml.so.1 (simgpu) every INTERVAL ms. The budget is a
// rate over a training job's hours, so the row measures the steady state: the thread's CPU time as
// the kernel counts it (schedstat), from WARMUP s after start (NVML opened with dlopen, nvmlInit,
// the first device scan: a one-time cost, reported apart) over SECONDS s of wall time, read before
// the sampler is stopped. Beside it, in the same process and over the same window, a reference
// thread that wakes at the same interval and does nothing (the wakeup floor the kernel charges
// any periodic thread) — what remains above it is the sampler's own work and the NVML calls
// (simulated here, so nearly free: a real NVML call costs more; the GPU validation measures it).
// A training step ends every STEP_MS (default: the interval, so every sample finds a new step
// and summarises the one before, the sampler's most work per sample). Prints one JSON object;
// judging is scripts/bench.sh's.
//   bench_nvml_sampler [SECONDS [INTERVAL_MS [WARMUP_S [STEP_MS]]]]   (default 10, 100, 1, INTERVAL_MS)
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include <cuda_runtime_api.h>

#include "traintime/nvml/nvml_sampler.h"
#include "traintime/support/threads.h"

using namespace traintime;

namespace {

struct TaskCpu {
  double cpu_s = -1;       // schedstat's first field: nanoseconds on the CPU
  uint64_t switches = 0;   // voluntary + involuntary context switches: its wakeups
};

TaskCpu task_cpu(const std::filesystem::path& task) {
  TaskCpu t;
  std::ifstream sched(task / "schedstat");
  unsigned long long ns = 0;
  if (sched >> ns) t.cpu_s = static_cast<double>(ns) / 1e9;
  std::ifstream status(task / "status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("voluntary_ctxt_switches:", 0) == 0 || line.rfind("nonvoluntary_ctxt_switches:", 0) == 0)
      t.switches += std::strtoull(line.substr(line.find(':') + 1).c_str(), nullptr, 10);
  return t;
}

// This process's thread named `name` (empty when there is none).
std::filesystem::path task_named(const std::string& name) {
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream comm(task.path() / "comm");
    std::string got;
    if (std::getline(comm, got) && got == name) return task.path();
  }
  return {};
}

std::chrono::steady_clock::time_point g_start;
double g_step_ms = 100;

// The steps a training loop finished by now, one every g_step_ms.
uint32_t steps_so_far() noexcept {
  return static_cast<uint32_t>(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - g_start).count() / g_step_ms);
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 10.0;
  const uint32_t interval_ms = argc > 2 ? static_cast<uint32_t>(std::atoi(argv[2])) : 100;
  const double warmup = argc > 3 ? std::atof(argv[3]) : 1.0;
  g_step_ms = argc > 4 ? std::atof(argv[4]) : interval_ms;
  g_start = std::chrono::steady_clock::now();
  if (cudaFree(nullptr) != cudaSuccess) {  // the device comes into use
    std::fprintf(stderr, "bench_nvml_sampler: the simulated CUDA runtime refused cudaFree\n");
    return 1;
  }
  // The wakeup floor: a thread waiting on a condition variable with the sampler's interval, as the
  // sampler does between samples, doing nothing else.
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::atomic<pid_t> floor_tid{0};
  std::thread idle([&] {
    floor_tid = static_cast<pid_t>(::syscall(SYS_gettid));
    std::unique_lock<std::mutex> lock(mu);
    while (!cv.wait_for(lock, std::chrono::milliseconds(interval_ms), [&] { return stop; })) {
    }
  });
  nvml::Options options;
  options.interval_ms = interval_ms;
  options.library = SIMGPU_NVML_LIB;
  nvml::Hooks hooks;
  hooks.steps_completed = &steps_so_far;
  nvml::configure(options, hooks);
  nvml::start();
  std::this_thread::sleep_for(std::chrono::duration<double>(warmup));
  // A very short run (bench.sh --smoke) may look before the thread has named itself.
  const std::string name(support::thread_name(support::OwnThread::kNvml));
  std::filesystem::path task = task_named(name);
  for (int i = 0; i < 200 && task.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    task = task_named(name);
  }
  while (floor_tid.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const std::filesystem::path floor_task = "/proc/self/task/" + std::to_string(floor_tid.load());
  const TaskCpu s0 = task_cpu(task), f0 = task_cpu(floor_task);
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const TaskCpu s1 = task_cpu(task), f1 = task_cpu(floor_task);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nvml::stop();
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  cv.notify_all();
  idle.join();
  const core::HealthSummary s = nvml::summary();
  const auto& c = s.section.counters.counters;
  const nvml::GpuHealth* health = nvml::gpu_health(s);
  const std::string status = health ? health->status : std::string();
  if (status != "sampled" || task.empty() || s0.cpu_s < 0 || s1.cpu_s < 0 || f0.cpu_s < 0) {
    std::fprintf(stderr, "bench_nvml_sampler: the sampler did not run (status \"%s\")\n", status.c_str());
    return 1;
  }
  const double cpu = s1.cpu_s - s0.cpu_s, floor_cpu = f1.cpu_s - f0.cpu_s;
  const uint64_t wakeups = s1.switches - s0.switches;
  std::printf("{\"interval_ms\": %u, \"step_ms\": %.1f, \"wall_s\": %.6f, \"thread_cpu_s\": %.6f, \"start_cpu_s\": %.6f, "
              "\"wakeups\": %llu, \"floor_cpu_s\": %.6f, \"floor_wakeups\": %llu, \"samples\": %llu, "
              "\"core_pct\": %.6f, \"floor_core_pct\": %.6f}\n",
              interval_ms, g_step_ms, wall, cpu, s0.cpu_s, static_cast<unsigned long long>(wakeups), floor_cpu,
              static_cast<unsigned long long>(f1.switches - f0.switches),
              static_cast<unsigned long long>(c.count("samples") ? c.at("samples") : 0), cpu / wall * 100,
              floor_cpu / wall * 100);
  return 0;
}
