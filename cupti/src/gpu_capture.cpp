// The CUPTI adapter's entry points (traintime/cupti/gpu_capture.h), each forwarding to the one
// GpuCapture (gpu_capture_class.h, which lists the files that implement it). Lock order:
// core/lock_order.h.
#include "traintime/cupti/gpu_capture.h"

#include <cerrno>

#include "gpu_capture_class.h"
#include "traintime/core/module.h"
#include "traintime/cupti/cupti_format.h"

namespace traintime::cupti {

void configure(const Hooks& hooks, const core::Config& config) {
  GpuCapture::get().configure(hooks, config);
}
void start(const char* trigger) noexcept {
  const int saved_errno = errno;
  GpuCapture::get().start(trigger);
  errno = saved_errno;
}
void lazy_start_point() noexcept { GpuCapture::get().lazy_start(); }
core::GpuSummary summary(bool snapshot, const core::Deadline& deadline) {
  return GpuCapture::get().summary(snapshot, deadline);
}
void shutdown(const char* reason) { GpuCapture::get().shutdown(reason); }
bool flush_at_signal(const core::Deadline& deadline) noexcept {
  return GpuCapture::get().flush_at_signal(deadline);
}
nlohmann::json trace_json() { return GpuCapture::get().trace_json(); }
void on_fork_child() noexcept { GpuCapture::get().on_fork_child(); }
void enable_live_metrics() noexcept { GpuCapture::get().enable_live(); }
bool live_detected_steps(core::StepCounters* totals, uint64_t* last_wall_ns) {
  return GpuCapture::get().live_detected_steps(totals, last_wall_ns);
}
bool live_step(core::GpuStepFigures* out, uint64_t* late_records) {
  return GpuCapture::get().live_step(out, late_records);
}
std::string device_name() { return GpuCapture::get().device_name(); }
bool clock_now(uint64_t* ns) noexcept { return GpuCapture::get().clock_now(ns); }
core::StepAt step_at(uint64_t ns, uint64_t* step) noexcept { return GpuCapture::get().step_at(ns, step); }
void cost_so_far(core::CostSoFar& c, uint64_t pair_ticks, bool calls) noexcept {
  GpuCapture::get().cost_so_far(c, pair_ticks, calls);
}

namespace {
void configure_module(const core::ModuleHost& host) {
  if (host.fork_child) {  // the capture belongs to the parent
    on_fork_child();
    return;
  }
  configure(host, *host.config);  // its hooks: the host as it is (Hooks is ModuleHost)
}

// At exit: CUPTI's records flushed and ingested (forced flush), before CUDA's own teardown
// (the root's exit hook runs first: core/module.h). On a terminating signal: the flush, bounded.
bool stop_module(const char* reason, bool signal, const core::Deadline& deadline) {
  if (signal) return flush_at_signal(deadline);
  shutdown(reason);
  return true;
}
}  // namespace

// The runtime half the module table registers (core/module.h); its summary is joined by the root.
extern const core::Module kModule;  // listed in the module table (module_table.h)
const core::Module kModule{&kFormat, &configure_module, nullptr, &stop_module, nullptr, &cost_so_far};

}  // namespace traintime::cupti
