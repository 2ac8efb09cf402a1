// The nvml module's sampler (nvml_sampler.h): NVML opened with dlopen on the sampler thread, the
// CUDA devices in use matched by PCI bus id, one sample per device per interval.
//
// The state is allocated once per configure() and never freed: the sampler thread may still be
// inside a sample while the process exits, so nothing it touches may be destroyed under it.
#include "traintime/core/module.h"
#include "traintime/nvml/nvml_format.h"
#include "traintime/nvml/nvml_sampler.h"

#include <dlfcn.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "traintime/support/threads.h"

namespace traintime::nvml {
namespace {

// ---- NVML's C interface, as nvml.h declares it (only what is used) ----------------------------
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr int NVML_CLOCK_SM = 1;
constexpr int NVML_CLOCK_MEM = 2;
constexpr int NVML_TEMPERATURE_GPU = 0;
constexpr unsigned NVML_DEVICE_MIG_ENABLE = 1;
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
// nvmlDeviceGetMemoryInfo_v2's: `used` without the memory the driver reserves (the figure
// nvidia-smi shows); v1's `used` is total - free, the reserved memory included.
struct nvmlMemory_v2_t {
  unsigned version;
  unsigned long long total, reserved, free, used;
};
constexpr unsigned kNvmlMemoryV2 = static_cast<unsigned>(sizeof(nvmlMemory_v2_t)) | (2u << 24);

struct Nvml {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*by_pci_bus_id)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*reasons)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*pcie_gen)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*pcie_width)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*memory_v2)(nvmlDevice_t, nvmlMemory_v2_t*) = nullptr;    // optional (R510 on)
  nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;  // optional
};

// ---- the CUDA driver the process already loaded -------------------------------------------
using CUdevice = int;
struct Cuda {
  int (*count)(int*) = nullptr;
  int (*get)(CUdevice*, int) = nullptr;
  int (*primary_state)(CUdevice, unsigned*, int*) = nullptr;
  int (*pci_bus_id)(char*, int, CUdevice) = nullptr;
};

template <class F>
bool resolve(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  return *out != nullptr;
}

struct Device {
  int cuda_device = -1;
  std::string pci_bus_id;
  nvmlDevice_t handle = nullptr;
  bool mig = false;
  DeviceHealth health;
  explicit Device(uint32_t keep) : health(keep) {}
};

struct State {
  // The state this one replaced: never freed (its thread may still be sampling), but reachable,
  // so leak checkers see no leak.
  State* replaced = nullptr;
  uint32_t generation = 0;  // one per configure(): the sampler thread's argument
  Options options;
  Hooks hooks;
  std::atomic<bool> started{false};
  std::mutex mu;  // leaf: guards everything below
  std::condition_variable cv;
  bool stop = false;
  bool running = false;
  std::string status;  // "" until start(); see GpuHealth::status
  std::vector<Device> devices;
  uint64_t samples = 0;
  uint64_t failed_reads = 0;
  // The live metrics' figures (live_health). live_mu is a leaf taken after mu is released,
  // never with it: the sampler holds it only to store, a reader only to copy.
  std::mutex live_mu;
  bool live_valid = false;
  uint64_t live_step = 0;
  core::StepHealth live;
  // What summary() last handed out, for a signal-time write that cannot take mu.
  core::LastPublished<core::HealthSummary> published;
  // Steps detected without a marker: each device's samples (by index in devices) whose step is
  // not known yet, with their time, oldest first. timed_mu is taken before the hooks (which take
  // the GPU capture's lock) and before mu, never under either.
  std::mutex timed_mu;
  std::vector<std::deque<std::pair<uint64_t, Sample>>> timed;
};

constexpr std::size_t kMaxTimed = 4096;  // samples a device keeps waiting; older ones are placed

// The waiting samples whose detected step is known now go to their step; `force` (the end, or
// a queue past kMaxTimed) places the rest in the step they would be in now.
void place_timed(State& st, bool force) {
  std::lock_guard<std::mutex> timed(st.timed_mu);
  for (std::size_t i = 0; i < st.timed.size(); ++i) {
    auto& q = st.timed[i];
    while (!q.empty()) {
      uint64_t step = 0;
      const core::StepAt at = st.hooks.step_at(q.front().first, &step);
      if (at == core::StepAt::kMarker) step = st.hooks.steps_completed ? st.hooks.steps_completed() : 0;
      else if (at == core::StepAt::kNotYet && !force && q.size() <= kMaxTimed) break;
      std::lock_guard<std::mutex> lock(st.mu);
      st.devices[i].health.add_step(step, q.front().second);
      q.pop_front();
    }
  }
}

std::atomic<State*> g_state{nullptr};
uint32_t g_generation = 0;  // configure() only (before threads, or in a fork child)

void set_status(State& st, std::string status) {
  std::lock_guard<std::mutex> lock(st.mu);
  st.status = std::move(status);
}

// Opens NVML and initialises it; "" or the reason it cannot be used.
std::string open_nvml(const char* library, Nvml* n) {
  void* lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return std::string(library) + " not found";
  const bool ok =
      resolve(lib, "nvmlInit_v2", &n->init) && resolve(lib, "nvmlShutdown", &n->shutdown) &&
      resolve(lib, "nvmlDeviceGetHandleByPciBusId_v2", &n->by_pci_bus_id) &&
      resolve(lib, "nvmlDeviceGetClockInfo", &n->clock) &&
      resolve(lib, "nvmlDeviceGetPowerUsage", &n->power) &&
      resolve(lib, "nvmlDeviceGetEnforcedPowerLimit", &n->power_limit) &&
      resolve(lib, "nvmlDeviceGetTemperature", &n->temperature) &&
      // Renamed in CUDA 12.2's NVML; drivers keep the old name beside the new one.
      (resolve(lib, "nvmlDeviceGetCurrentClocksEventReasons", &n->reasons) ||
       resolve(lib, "nvmlDeviceGetCurrentClocksThrottleReasons", &n->reasons)) &&
      resolve(lib, "nvmlDeviceGetCurrPcieLinkGeneration", &n->pcie_gen) &&
      resolve(lib, "nvmlDeviceGetCurrPcieLinkWidth", &n->pcie_width) &&
      resolve(lib, "nvmlDeviceGetMemoryInfo", &n->memory);
  if (!ok) return std::string(library) + " lacks an entry point traintime needs (too old a driver)";
  resolve(lib, "nvmlDeviceGetMigMode", &n->mig_mode);
  resolve(lib, "nvmlDeviceGetMemoryInfo_v2", &n->memory_v2);
  const nvmlReturn_t r = n->init();
  if (r != NVML_SUCCESS) return "nvmlInit_v2 failed (NVML error " + std::to_string(r) + ")";
  return "";
}

bool open_cuda(Cuda* c) {
  // The driver is loaded (the process launched GPU work); RTLD_NOLOAD never loads another.
  void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!lib) return false;
  return resolve(lib, "cuDeviceGetCount", &c->count) && resolve(lib, "cuDeviceGet", &c->get) &&
         resolve(lib, "cuDevicePrimaryCtxGetState", &c->primary_state) &&
         resolve(lib, "cuDeviceGetPCIBusId", &c->pci_bus_id);
}

// Adds the CUDA devices whose primary context became active since the last scan, matched to
// NVML by PCI bus id.
void scan_devices(State& st, const Cuda& cuda, const Nvml& nvml) {
  int count = 0;
  if (cuda.count(&count) != 0) return;
  for (int ordinal = 0; ordinal < count && ordinal < 64; ++ordinal) {
    {
      std::lock_guard<std::mutex> lock(st.mu);
      bool known = false;
      for (const Device& d : st.devices) known = known || d.cuda_device == ordinal;
      if (known) continue;
    }
    CUdevice dev = 0;
    unsigned flags = 0;
    int active = 0;
    char bus_id[32] = {};
    if (cuda.get(&dev, ordinal) != 0 || cuda.primary_state(dev, &flags, &active) != 0 || !active ||
        cuda.pci_bus_id(bus_id, sizeof bus_id - 1, dev) != 0)
      continue;
    nvmlDevice_t handle = nullptr;
    if (nvml.by_pci_bus_id(bus_id, &handle) != NVML_SUCCESS) continue;
    Device d(st.options.step_detail);
    d.cuda_device = ordinal;
    d.pci_bus_id = bus_id;
    d.handle = handle;
    unsigned current = 0, pending = 0;
    d.mig = nvml.mig_mode && nvml.mig_mode(handle, &current, &pending) == NVML_SUCCESS &&
            current == NVML_DEVICE_MIG_ENABLE;
    std::lock_guard<std::mutex> lock(st.mu);
    st.devices.push_back(std::move(d));
    st.status = "sampled";
  }
}

// One reading of a device; *failed counts the calls NVML refused.
Sample read_device(const Nvml& n, nvmlDevice_t h, uint64_t* failed) {
  Sample s;
  auto check = [failed](nvmlReturn_t r) { *failed += r != NVML_SUCCESS; };
  unsigned v = 0;
  check(n.clock(h, NVML_CLOCK_SM, &v)), s.sm_clock_mhz = v, v = 0;
  check(n.clock(h, NVML_CLOCK_MEM, &v)), s.mem_clock_mhz = v, v = 0;
  check(n.power(h, &v)), s.power_mw = v, v = 0;
  check(n.power_limit(h, &v)), s.power_limit_mw = v, v = 0;
  check(n.temperature(h, NVML_TEMPERATURE_GPU, &v)), s.temperature_c = v, v = 0;
  unsigned long long reasons = 0;
  check(n.reasons(h, &reasons)), s.clock_event_reasons = reasons;
  check(n.pcie_gen(h, &v)), s.pcie_gen = v, v = 0;
  check(n.pcie_width(h, &v)), s.pcie_width = v, v = 0;
  nvmlMemory_v2_t v2{};
  v2.version = kNvmlMemoryV2;
  if (n.memory_v2 && n.memory_v2(h, &v2) == NVML_SUCCESS) {
    s.memory_used_bytes = v2.used, s.memory_total_bytes = v2.total;
  } else {
    nvmlMemory_t mem{};
    check(n.memory(h, &mem)), s.memory_used_bytes = mem.used, s.memory_total_bytes = mem.total;
  }
  return s;
}

// The newest finished step's figures, of the device with the lowest SM clock median in it (the
// one that holds the step back), for live_health. Called after every sample; does nothing until
// a step finished since the last call (*published: the step published last, +1; 0: none yet).
void publish_live(State& st, uint64_t* published) {
  bool have = false;
  uint64_t step = 0;
  core::StepHealth best;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    for (const Device& d : st.devices) {
      uint64_t k = 0;
      core::StepHealth h;
      if (!d.health.last_finished(&k, &h)) continue;
      h.cuda_device = d.cuda_device;
      if (!have || k > step || (k == step && h.sm_clock_mhz_median < best.sm_clock_mhz_median)) {
        have = true;
        step = k;
        best = h;
      }
    }
  }
  if (!have || step + 1 == *published) return;
  *published = step + 1;
  std::lock_guard<std::mutex> lock(st.live_mu);
  st.live_valid = true;
  st.live_step = step;
  st.live = best;
}

void sampler_main(uint32_t generation) {
  State* sp = g_state.load(std::memory_order_acquire);
  // Configured again since start() (a test, a fork child): that state is not this thread's.
  if (!sp || sp->generation != generation) return;
  State& st = *sp;
  Nvml nvml;
  const std::string why = open_nvml(st.options.library, &nvml);
  if (!why.empty()) {
    std::lock_guard<std::mutex> lock(st.mu);
    st.status = "unavailable: " + why;
    st.running = false;
    st.cv.notify_all();
    return;
  }
  Cuda cuda;
  const bool have_cuda = open_cuda(&cuda);
  set_status(st, have_cuda ? "unavailable: no CUDA device in use matched an NVML device by PCI bus id"
                           : "unavailable: the CUDA driver (libcuda.so.1) lacks the device queries");
  const auto interval = std::chrono::milliseconds(st.options.interval_ms);
  auto next_scan = std::chrono::steady_clock::now();
  std::vector<std::pair<std::size_t, nvmlDevice_t>> handles;
  uint64_t published = 0;
  uint64_t last_step = UINT64_MAX;
  auto sample_all = [&] {
    {
      std::lock_guard<std::mutex> lock(st.mu);
      handles.clear();
      for (std::size_t i = 0; i < st.devices.size(); ++i) handles.emplace_back(i, st.devices[i].handle);
    }
    uint64_t step = last_step;
    bool timed = false;
    for (const auto& [i, handle] : handles) {
      step = st.hooks.steps_completed ? st.hooks.steps_completed() : 0;
      // Steps detected without a marker: the sample's step is the detected step its time falls
      // in, known later (the marker's count stays 0).
      uint64_t ns = 0, now = 0;
      const bool by_time = st.hooks.gpu_clock_ns && st.hooks.step_at && st.hooks.gpu_clock_ns(&ns) &&
                           st.hooks.step_at(ns, &now) != core::StepAt::kMarker;
      uint64_t failed = 0;
      const Sample s = read_device(nvml, handle, &failed);
      if (by_time) {
        std::lock_guard<std::mutex> lock(st.timed_mu);
        if (st.timed.size() <= i) st.timed.resize(i + 1);
        st.timed[i].emplace_back(ns, s);
        timed = true;
      }
      std::lock_guard<std::mutex> lock(st.mu);
      if (by_time) {
        st.devices[i].health.add_run(s);
      } else {
        st.devices[i].health.add(step, s);
      }
      ++st.samples;
      st.failed_reads += failed;
    }
    if (timed) place_timed(st, false);
    // A step can only have finished when the step count moved (or a detected one was placed).
    if (step != last_step || timed) publish_live(st, &published);
    last_step = step;
  };
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    if (have_cuda && now >= next_scan) {  // a device may come into use later
      scan_devices(st, cuda, nvml);
      // Every second until one is in use, then every 10 s: a second device a process takes up
      // later is rare, and each scan asks the driver about every device of the node.
      bool any = false;
      {
        std::lock_guard<std::mutex> lock(st.mu);
        any = !st.devices.empty();
      }
      next_scan = now + std::chrono::seconds(any ? 10 : 1);
    }
    sample_all();
    std::unique_lock<std::mutex> lock(st.mu);
    if (st.cv.wait_for(lock, interval, [&] { return st.stop; })) break;
  }
  // One reading more at stop: the final step has one even when it was shorter than the interval.
  sample_all();
  nvml.shutdown();
  std::lock_guard<std::mutex> lock(st.mu);
  st.running = false;
  st.cv.notify_all();
}

}  // namespace

void configure(const Options& options, const Hooks& hooks) {
  // The previous state is kept, never freed: in a fork child its mutex may be held by a thread
  // that no longer exists.
  auto* st = new State();
  st->replaced = g_state.load(std::memory_order_acquire);
  st->generation = ++g_generation;
  st->options = options;
  st->hooks = hooks;
  g_state.store(st, std::memory_order_release);
}

void start() noexcept {
  State* st = g_state.load(std::memory_order_acquire);
  if (!st || st->started.exchange(true, std::memory_order_relaxed)) return;
  const int saved = errno;
  try {
    if (!st->options.enabled) {
      set_status(*st, "off");
    } else {
      {
        std::lock_guard<std::mutex> lock(st->mu);
        st->status = "unavailable: the sampler thread did not start";
        st->running = true;
      }
      const uint32_t generation = st->generation;
      if (!support::start_detached(support::OwnThread::kNvml,
                                   [generation] { sampler_main(generation); })) {
        std::lock_guard<std::mutex> lock(st->mu);
        st->running = false;
      }
    }
  } catch (...) {
  }
  errno = saved;
}

void stop() noexcept {
  State* st = g_state.load(std::memory_order_acquire);
  if (!st) return;
  const int saved = errno;
  try {
    std::unique_lock<std::mutex> lock(st->mu);
    st->stop = true;
    st->cv.notify_all();
    st->cv.wait_for(lock, std::chrono::seconds(1), [st] { return !st->running; });
  } catch (...) {
  }
  errno = saved;
}

bool live_health(uint64_t* step, core::StepHealth* out) {
  State* st = g_state.load(std::memory_order_acquire);
  if (!st) return false;
  std::lock_guard<std::mutex> lock(st->live_mu);
  if (!st->live_valid) return false;
  *step = st->live_step;
  *out = st->live;
  return true;
}

core::HealthSummary summary(const core::Deadline& deadline) {
  core::HealthSummary out;
  State* st = g_state.load(std::memory_order_acquire);
  if (!st) return out;
  // Samples waiting for their detected step: those known now go to it, and at the end (the
  // sampler stopped, the GPU capture's steps all ended) every one; never at a signal, which may
  // have stopped a thread holding the GPU capture's lock.
  if (!deadline.bounded() && st->hooks.step_at) {
    bool done = false;
    {
      std::lock_guard<std::mutex> lock(st->mu);
      done = st->stop && !st->running;
    }
    place_timed(*st, done);
  }
  // Lock order: core/lock_order.h (mu is a leaf; a signal-time write waits until its deadline).
  std::unique_lock<std::mutex> lock(st->mu, std::defer_lock);
  if (!core::lock_until(lock, deadline)) {
    const auto last = st->published.get(deadline);
    if (last.figures) {
      out = *last.figures;
    } else {
      auto health = std::make_shared<GpuHealth>();
      health->status = "unavailable: the sampler's figures could not be read at the signal";
      out.section.data = std::move(health);
    }
    core::count_last_publish<core::HealthSummary>(out.section, kCounters, last);
    return out;
  }
  if (st->status.empty()) return out;  // no gpu_health: start() never ran
  auto health = std::make_shared<GpuHealth>();
  health->status = st->status;
  health->interval_ms = st->options.enabled ? st->options.interval_ms : 0;
  for (const Device& d : st->devices) {
    HealthDevice hd;
    hd.cuda_device = d.cuda_device;
    hd.pci_bus_id = d.pci_bus_id;
    hd.mig = d.mig;
    d.health.fill(&hd);
    health->devices.push_back(std::move(hd));
  }
  hand_up(std::move(health), &out);
  if (st->options.enabled) {
    out.section.count(kCounters, Counter::samples, st->samples);
    out.section.count(kCounters, Counter::failed_reads, st->failed_reads);
  }
  lock.unlock();
  st->published.publish(out);
  return out;
}

// The runtime half the module table registers (core/module.h): sampling starts at the process's
// first GPU launch and stops at exit before the final file (on a signal the sampler is left
// running: the file takes what it last summarised).
extern const core::Module kModule;  // listed in the module table (module_table.h)
const core::Module kModule{&kFormat,
                           [](const core::ModuleHost& host) {
                             Options options;
                             options.enabled = host.config->nvml;
                             options.interval_ms = host.config->nvml_interval_ms;
                             options.step_detail = host.config->step_detail;
                             configure(options, Hooks{host.steps_completed, host.gpu_clock_ns, host.step_at});
                           },
                           &start,
                           [](const char*, bool signal, const core::Deadline&) {
                             if (!signal) stop();
                             return true;
                           },
                           nullptr, nullptr};

}  // namespace traintime::nvml
