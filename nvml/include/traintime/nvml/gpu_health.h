// The nvml module's data section (rank file gpu_health, docs/schema.md): what NVML's samples
// said of each GPU over the run and per step. Written and read by the module's format
// (nvml_format.cpp, in traintime_formats: libtraintime.so and traintime-report both link it);
// the compact per-step figures the builder joins into steps.detail[].gpu_health are core's
// StepHealth.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "traintime/core/rank_file.h"
#include "traintime/core/summaries.h"

namespace traintime::nvml {

// NVML's view of one GPU over a set of samples (a step, or the whole run): rank file
// gpu_health.devices[].run and .steps[] (docs/schema.md). Sampled by the nvml/ module's own
// thread every TRAINTIME_NVML_INTERVAL_MS, so a step shorter than that may have no sample.
struct HealthFigures {
  uint64_t samples = 0;
  double sm_clock_mhz_median = 0;
  uint32_t sm_clock_mhz_min = 0;
  double mem_clock_mhz_median = 0;
  double power_w_median = 0;
  double power_limit_w = 0;  // the enforced limit (the largest seen)
  uint32_t temperature_c_max = 0;
  // NVML's clock-event (throttle) reasons seen in any sample (written by name, in NVML's bit
  // order: core::clock_event_reason_names()).
  core::ClockEventReasons clock_event_reasons;
  uint32_t pcie_gen_min = 0;    // the current link generation, lowest seen (0 unknown)
  uint32_t pcie_width_min = 0;  // the current link width, lowest seen
  uint64_t memory_used_bytes_max = 0;  // driver-level used bytes (every process), highest seen
  uint64_t memory_total_bytes = 0;
};

// One CUDA device the rank used, matched to NVML by PCI bus id.
struct HealthDevice {
  int32_t cuda_device = -1;  // the CUDA ordinal in this process (after CUDA_VISIBLE_DEVICES)
  std::string pci_bus_id;    // as CUDA gives it, e.g. "0000:3B:00.0"
  // Under MIG the clocks, power, temperature and PCIe link are the whole GPU's, shared with
  // every other instance on it.
  bool mig = false;
  HealthFigures run;  // every sample of the run
  struct Step {
    uint64_t index = 0;  // as steps.detail[].index: the step in progress when sampled
    HealthFigures figures;
  };
  std::vector<Step> steps;  // the last TRAINTIME_STEP_DETAIL steps that have samples, oldest first
};

// Rank file gpu_health, the module's data section (core::ModuleData): absent when the process
// never used CUDA.
struct GpuHealth : core::ModuleData {
  // "sampled"; "off" (TRAINTIME_NVML=0); "unavailable: <why>" (no libnvidia-ml.so.1, a failing
  // nvmlInit, no device matched): the one line a missing NVML costs.
  std::string status;
  uint32_t interval_ms = 0;
  std::vector<HealthDevice> devices;
};

// The compact figures of one device's step (figures from the same set of samples).
core::StepHealth step_health(int32_t cuda_device, const HealthFigures& f);

// The module's summary with `health` as its data section: section.data, and each device's step
// rows that the builder joins into steps.detail[].gpu_health.
void hand_up(std::shared_ptr<const GpuHealth> health, core::HealthSummary* out);
// The gpu_health a summary holds; null when it holds none (the process never used CUDA).
const GpuHealth* gpu_health(const core::HealthSummary& s);

// The rank file's gpu_health as the module's reader read it; null when the file has none (the
// process never used CUDA, or a section newer than this reader: RankFile::read_notes).
const GpuHealth* gpu_health(const core::RankFile& f);

}  // namespace traintime::nvml
