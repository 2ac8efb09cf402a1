// The nvml module: GPU health per step, with no code in the application (rank file gpu_health,
// docs/schema.md). Once the process uses CUDA (the first GPU launch the capture sees), a thread of
// the module's own opens libnvidia-ml.so.1 with dlopen, finds the CUDA devices whose primary
// context is active, matches each to its NVML device by PCI bus id (CUDA_VISIBLE_DEVICES
// reorders and hides devices; the bus id does not change), and every `interval_ms` reads the SM
// and memory clocks, power draw and enforced limit, temperature, clock-event (throttle) reasons,
// PCIe link generation and width, and NVML's memory info. Samples are keyed by the step in
// progress (Hooks::steps_completed) and summarised per step and over the run.
//
// Nothing runs on the application's threads but start(), once, which starts the thread (tt-nvml,
// support/threads.h: none of the application's asynchronous signals reach it). A
// missing or failing NVML is one status line in the file ("unavailable: ..."), never a message
// per sample. A process that never uses CUDA never loads NVML.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "traintime/core/activity.h"
#include "traintime/core/lock_order.h"
#include "traintime/core/summaries.h"
#include "traintime/nvml/gpu_health.h"

namespace traintime::nvml {

struct Hooks {
  // tt_step calls so far: the index of the step in progress. Lock-free, called by the sampler.
  uint32_t (*steps_completed)() noexcept = nullptr;
  // Steps detected without a marker (core::ModuleHost): the GPU activity clock now, and the step
  // at such a time. A sample then waits, with its time, until its step is known. May be null.
  bool (*gpu_clock_ns)(uint64_t* ns) noexcept = nullptr;
  core::StepAt (*step_at)(uint64_t ns, uint64_t* step) noexcept = nullptr;
};

struct Options {
  bool enabled = true;         // TRAINTIME_NVML
  uint32_t interval_ms = 100;  // TRAINTIME_NVML_INTERVAL_MS
  uint32_t step_detail = 64;   // TRAINTIME_STEP_DETAIL: per-step rows kept
  // The library to open; tests point it at a double.
  const char* library = "libnvidia-ml.so.1";
};

// Takes the options and hooks and forgets every sample (a fork child starts clean: the sampler
// thread did not survive the fork). Called before the application's threads run, or in a fork
// child.
void configure(const Options& options, const Hooks& hooks);

// The process uses CUDA: starts the sampler thread, once per configure(). errno kept; returns at
// once (NVML is opened on the sampler thread).
void start() noexcept;

// Stops the sampler (at exit, before the final file): waits at most about a second for it to
// take its last sample and shut NVML down. Later summaries keep what was sampled.
void stop() noexcept;

// gpu_health and the module's section (counters samples, failed_reads). Status "" (no
// gpu_health) when start() never ran; "off" when disabled. A terminating signal's write gives a
// bounded `deadline` (core/lock_order.h): when the sampler's lock is not had by then (the signal
// stopped the sampler holding it), the figures last handed out, with the counter
// summary_from_last_publish saying so.
core::HealthSummary summary(const core::Deadline& deadline = core::Deadline::never());

// The live metrics' GPU health (docs/metrics.md): the figures of the newest finished step (one a
// later sample showed ended) that had samples, of the device whose SM clock median was lowest in
// it. False while there is none: NVML off, unavailable, or no step finished since sampling began.
// The sampler publishes it when it sees a step end; this copies it under a leaf lock the sampler
// holds only to store it, so neither side waits on the other's work.
bool live_health(uint64_t* step, core::StepHealth* out);

// ---- the summarising, without NVML (health_accumulator.cpp) ---------------------------------

// One reading of one device. A field NVML refused stays 0 (reasons: no bit).
struct Sample {
  uint32_t sm_clock_mhz = 0;
  uint32_t mem_clock_mhz = 0;
  uint32_t power_mw = 0;
  uint32_t power_limit_mw = 0;
  uint32_t temperature_c = 0;
  uint64_t clock_event_reasons = 0;  // NVML's bit mask
  uint32_t pcie_gen = 0;
  uint32_t pcie_width = 0;
  uint64_t memory_used_bytes = 0;
  uint64_t memory_total_bytes = 0;
};

// The figures of a set of samples: exact medians (clocks by MHz, power by 0.1 W, as counts per
// value, so a long run's memory is bounded by the distinct values, not the samples).
class HealthAccumulator {
 public:
  void add(const Sample& s);
  bool empty() const { return samples_ == 0; }
  HealthFigures figures() const;

 private:
  uint64_t samples_ = 0;
  std::map<uint32_t, uint64_t> sm_, mem_, power_dw_;
  uint32_t sm_min_ = 0, temp_max_ = 0, limit_mw_ = 0, pcie_gen_ = 0, pcie_width_ = 0;
  uint64_t reasons_ = 0, used_max_ = 0, total_ = 0;
};

// A device's samples over the run and per step: add() with the step in progress; steps are kept
// for the last `keep_steps` step indices that had samples.
class DeviceHealth {
 public:
  explicit DeviceHealth(uint32_t keep_steps) : keep_(keep_steps) {}
  void add(uint64_t step, const Sample& s) {
    add_run(s);
    add_step(step, s);
  }
  // The run's figures at once; the step's when it is known (steps detected without a marker).
  void add_run(const Sample& s) { run_.add(s); }
  void add_step(uint64_t step, const Sample& s);
  // run and steps of a HealthDevice (identity fields left to the caller).
  void fill(HealthDevice* out) const;
  // The figures of the newest step that had samples and ended (a sample of a later step came),
  // cuda_device left -1; false before one did. Kept whatever keep_steps is.
  bool last_finished(uint64_t* step, core::StepHealth* out) const;

 private:
  uint32_t keep_;
  HealthAccumulator run_;
  uint64_t current_step_ = 0;
  HealthAccumulator current_;  // the samples of current_step_
  bool have_finished_ = false;
  uint64_t finished_step_ = 0;
  core::StepHealth finished_;
  std::map<uint64_t, HealthAccumulator> steps_;  // the last keep_ steps with samples
};

}  // namespace traintime::nvml
