// GpuCapture's device name: the CUDA name of the first record's device, asked of the already
// loaded driver (dlopen RTLD_NOLOAD) by the processing thread once, and published without a lock
// (a signal-time summary reads it). Lock order: core/lock_order.h (agg_mu_ alone).
#include <dlfcn.h>

#include <mutex>
#include <string>

#include "gpu_capture_class.h"

namespace traintime::cupti {

void GpuCapture::resolve_device_name() {
  int device = -1;
  {
    std::lock_guard<std::mutex> agg(agg_mu_);
    device = aggregator_->first_device();
    // Activities the step feed still holds have not reached the aggregator.
    if (device < 0 && step_feed_) device = step_feed_->first_device();
  }
  if (device < 0) return;
  device_resolved_ = true;
  // The driver is loaded (it produced the record); RTLD_NOLOAD never loads another one.
  void* cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!cuda) return;
  using GetFn = int (*)(int*, int);
  using NameFn = int (*)(char*, int, int);
  auto get = reinterpret_cast<GetFn>(dlsym(cuda, "cuDeviceGet"));
  auto name_of = reinterpret_cast<NameFn>(dlsym(cuda, "cuDeviceGetName"));
  char name[256] = {};
  int handle = 0;
  if (get && name_of && get(&handle, device) == 0 && name_of(name, sizeof name - 1, handle) == 0) {
    device_name_ = name;
    device_named_.store(true, std::memory_order_release);
  }
  dlclose(cuda);
}

std::string GpuCapture::device_name() {
  return device_named_.load(std::memory_order_acquire) ? device_name_ : std::string();
}

}  // namespace traintime::cupti
