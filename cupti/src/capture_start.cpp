// GpuCapture's start: configuration, the start decision (TRAINTIME_CUPTI, a refusal said once),
// the lazy start at tt_step once CUDA is loaded, and the fork child that never starts.
// Lock order: core/lock_order.h (start_mu_ is taken only here).
#include <dlfcn.h>

#include <cerrno>
#include <exception>
#include <mutex>
#include <string>

#include "gpu_capture_class.h"
#include "traintime/support/loader.h"
#include "traintime/support/log.h"

namespace traintime::cupti {

void GpuCapture::give_up(const std::string& reason) {
  reason_ = reason;
  state_.store(State::kUnavailable, std::memory_order_release);
  support::log_warn("GPU capture unavailable: {} (CPU regions and NCCL are still recorded)", reason);
}

void GpuCapture::configure(const Hooks& hooks, const core::Config& config) {
  std::lock_guard<std::mutex> lock(start_mu_);
  hooks_ = hooks;
  config_ = config;
  configured_ = true;
}

void GpuCapture::start(const char* trigger) { start(trigger, true); }

void GpuCapture::start(const char* trigger, bool sees_every_capture) {
  std::lock_guard<std::mutex> lock(start_mu_);
  lazy_pending_.store(false, std::memory_order_relaxed);
  if (state_.load(std::memory_order_acquire) != State::kIdle || !configured_ ||
      forked_.load(std::memory_order_relaxed))
    return;
  trigger_ = trigger;
  if (!config_.cupti) {
    reason_ = "TRAINTIME_CUPTI=0";
    state_.store(State::kOff, std::memory_order_release);
    return;
  }
  std::string reason;
  try {
    // A refusal after the library was chosen names it (path and version) as well.
    const CuptiLibrary& lib = sub_.lib();
    if (!start_capture(&reason))
      give_up(lib.version() != 0 && reason.rfind(lib.path(), 0) != 0 ? lib.describe() + ": " + reason : reason);
    else if (sees_every_capture)
      watch_captures(true);
  } catch (const std::exception& e) {
    // Out of memory, or no thread to be had (a process limit): the program goes on without GPU
    // capture instead of ending in std::terminate from this noexcept entry point.
    abandon_start();
    give_up(std::string("could not start GPU capture: ") + e.what());
  }
}

void GpuCapture::lazy_start() noexcept {
  if (!lazy_pending_.load(std::memory_order_relaxed)) return;
  // Runs at every tt_step until CUDA loads: a CPU-only process probes for libcuda again only
  // when the loader has added an object since the last probe.
  const unsigned long long adds = support::loaded_object_adds();
  if (lazy_probed_at_adds_.exchange(adds, std::memory_order_relaxed) == adds) return;
  // Saved before dlopen: a failed dlopen may set errno inside the application's step.
  const int saved_errno = errno;
  // Only a process that has the CUDA driver loaded pays for CUPTI.
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!cuda) {
    errno = saved_errno;
    return;
  }
  dlclose(cuda);
  start("lazily (CUDA_INJECTION64_PATH belongs to another tool; work launched before this "
        "point is not captured)",
        false);
  errno = saved_errno;
}

void GpuCapture::on_fork_child() noexcept {
  // The child has none of the parent's threads; it must never flush or process inherited state.
  forked_.store(true, std::memory_order_relaxed);
  capturing_.store(false, std::memory_order_relaxed);
  watch_captures(false);
  lazy_pending_.store(false, std::memory_order_relaxed);
  // The parent's cost is the parent's: the child counts none of it.
  launch_cost_.reset();
  buffer_cost_.reset();
  flush_cost_.reset();
  overhead_ns_.store(0, std::memory_order_relaxed);
}

}  // namespace traintime::cupti
