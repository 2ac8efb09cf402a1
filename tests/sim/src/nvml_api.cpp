// SIMULATION: the fake libnvidia-ml.so.1 — the NVML entry points traintime's nvml module reads,
// answering for this rank's one simulated GPU what simgpu_health_of() says (nominal clocks,
// power and temperature, or the throttled ones under SIMGPU_THROTTLE=RANK:FACTOR). As the real
// library: every device call before nvmlInit_v2 (or after the last nvmlShutdown) fails with
// NVML_ERROR_UNINITIALIZED, and a PCI bus id that is no device of this node is NOT_FOUND.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "simgpu/engine.h"

namespace {

using nvmlReturn_t = int;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_UNINITIALIZED = 1;
constexpr nvmlReturn_t NVML_ERROR_INVALID_ARGUMENT = 2;
constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
constexpr int NVML_CLOCK_SM = 1;
constexpr int NVML_CLOCK_MEM = 2;

struct nvmlDevice_st {
  int bus;
};
nvmlDevice_st g_device{0};
std::atomic<int> g_inits{0};

struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlMemory_v2_t {
  unsigned version;
  unsigned long long total, reserved, free, used;
};
constexpr unsigned nvmlMemory_v2 = static_cast<unsigned>(sizeof(nvmlMemory_v2_t)) | (2u << 24);
constexpr nvmlReturn_t NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25;

bool valid(nvmlDevice_st* d) { return d == &g_device && g_inits.load() > 0; }

simgpu_health health() {
  simgpu_health h{};
  simgpu_health_of(simgpu_rank(), &h);
  return h;
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2(void) {
  g_inits.fetch_add(1);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) {
  int n = g_inits.load();
  while (n > 0 && !g_inits.compare_exchange_weak(n, n - 1)) {
  }
  return n > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

// What `traintime doctor` asks (as nvidia-smi does): the driver's version, the devices, their names.
// One device per node, named as cuDeviceGetName names it.
nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (g_inits.load() == 0) return NVML_ERROR_UNINITIALIZED;
  if (!version) return NVML_ERROR_INVALID_ARGUMENT;
  const int n = std::snprintf(version, length, "%s", "simgpu (SIMULATED)");
  return n < 0 || static_cast<unsigned>(n) >= length ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (g_inits.load() == 0) return NVML_ERROR_UNINITIALIZED;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  *count = 1;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_st** device) {
  if (g_inits.load() == 0) return NVML_ERROR_UNINITIALIZED;
  if (!device || index != 0) return NVML_ERROR_INVALID_ARGUMENT;
  g_device.bus = simgpu_rank() & 0xff;
  *device = &g_device;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_st* device, char* name, unsigned int length) {
  if (!valid(device)) return NVML_ERROR_UNINITIALIZED;
  if (!name) return NVML_ERROR_INVALID_ARGUMENT;
  const char* given = std::getenv("SIMGPU_DEVICE_NAME");
  const int n = std::snprintf(name, length, "%s", given && *given ? given : "simgpu (SIMULATED GPU)");
  return n < 0 || static_cast<unsigned>(n) >= length ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}

// "DOMAIN:BUS:DEVICE.FUNCTION" in hex (4 or 8 domain digits); this node's GPU sits on bus
// simgpu_rank(), as cuDeviceGetPCIBusId says.
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* pciBusId, nvmlDevice_st** device) {
  if (g_inits.load() == 0) return NVML_ERROR_UNINITIALIZED;
  if (!pciBusId || !device) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  if (std::sscanf(pciBusId, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4) return NVML_ERROR_INVALID_ARGUMENT;
  if (domain != 0 || bus != static_cast<unsigned>(simgpu_rank() & 0xff) || dev != 0 || fn != 0)
    return NVML_ERROR_NOT_FOUND;
  g_device.bus = static_cast<int>(bus);
  *device = &g_device;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_st* device, int type, unsigned int* clock) {
  if (!valid(device)) return NVML_ERROR_UNINITIALIZED;
  if (!clock) return NVML_ERROR_INVALID_ARGUMENT;
  const simgpu_health h = health();
  if (type == NVML_CLOCK_SM) *clock = h.sm_clock_mhz;
  else if (type == NVML_CLOCK_MEM) *clock = h.mem_clock_mhz;
  else return NVML_ERROR_INVALID_ARGUMENT;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_st* device, unsigned int* power) {
  if (!valid(device)) return NVML_ERROR_UNINITIALIZED;
  if (!power) return NVML_ERROR_INVALID_ARGUMENT;
  *power = health().power_mw;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_st* device, unsigned int* limit) {
  if (!valid(device)) return NVML_ERROR_UNINITIALIZED;
  if (!limit) return NVML_ERROR_INVALID_ARGUMENT;
  *limit = health().power_limit_mw;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_st* device, int sensor, unsigned int* temp) {
  if (!valid(device)) return NVML_ERROR_UNINITIALIZED;
  if (!temp || sensor != 0) return NVML_ERROR_INVALID_ARGUMENT;
  *temp = health().temperature_c;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_st* device, unsigned long long* reasons) {
  if (!valid(device)) return NVML_ERROR_UNINITIALIZED;
  if (!reasons) return NVML_ERROR_INVALID_ARGUMENT;
  *reasons = health().clock_event_reasons;
  return NVML_SUCCESS;
}

// The name before NVML 12.2; real libraries export both.
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_st* device, unsigned long long* reasons) {
  return nvmlDeviceGetCurrentClocksEventReasons(device, reasons);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_st* device, unsigned int* gen) {
  if (!valid(device)) return NVML_ERROR_UNINITIALIZED;
  if (!gen) return NVML_ERROR_INVALID_ARGUMENT;
  *gen = health().pcie_gen;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_st* device, unsigned int* width) {
  if (!valid(device)) return NVML_ERROR_UNINITIALIZED;
  if (!width) return NVML_ERROR_INVALID_ARGUMENT;
  *width = health().pcie_width;
  return NVML_SUCCESS;
}

// As a real driver answers (seen on an H200, driver 580, 2026-11-27: v1's used was 615 MiB above
// what nvidia-smi showed): the driver reserves memory that v1 counts as used (total - free) and
// v2 reports apart, so v2's used is the GPU's memory in use, nvidia-smi's memory.used.
constexpr unsigned long long kReservedBytes = 615ull << 20;
unsigned long long reserved(const simgpu_health& h) {
  return std::min(kReservedBytes, h.memory_total_bytes - h.memory_used_bytes);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_st* device, nvmlMemory_t* memory) {
  if (!valid(device)) return NVML_ERROR_UNINITIALIZED;
  if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
  const simgpu_health h = health();
  memory->total = h.memory_total_bytes;
  memory->free = h.memory_total_bytes - h.memory_used_bytes - reserved(h);
  memory->used = memory->total - memory->free;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_st* device, nvmlMemory_v2_t* memory) {
  if (!valid(device)) return NVML_ERROR_UNINITIALIZED;
  if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
  if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  const simgpu_health h = health();
  memory->total = h.memory_total_bytes;
  memory->reserved = reserved(h);
  memory->used = h.memory_used_bytes;
  memory->free = h.memory_total_bytes - h.memory_used_bytes - memory->reserved;
  return NVML_SUCCESS;
}

// MIG disabled (0), nothing pending.
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_st* device, unsigned int* current, unsigned int* pending) {
  if (!valid(device)) return NVML_ERROR_UNINITIALIZED;
  if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
  *current = 0;
  *pending = 0;
  return NVML_SUCCESS;
}

}  // extern "C"
