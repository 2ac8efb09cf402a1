// GPU capture (CUPTI) as the rest of libtraintime.so sees it (DESIGN §2).
//
// Start: the CUDA driver calls InitializeInjection() while cuInit runs, because the preload's
// constructor points CUDA_INJECTION64_PATH at libtraintime.so. When that variable already named
// another tool, the driver never calls us; then the first lazy_start_point() that finds
// libcuda.so.1 loaded in the process subscribes instead (CUPTI attaches to an initialised
// driver too; kernels launched before that moment are not seen, and the rank file says so in
// gpu_capture_reason). The runtime calls lazy_start_point() at every tt_step and the NCCL
// wrappers at every communicator's first call; it costs one relaxed atomic load once capture
// is decided either way.
//
// TRAINTIME_CUPTI=0 turns capture off. A libcupti that cannot be found, lacks a function, has a
// record layout this build does not know, or refuses the subscription (another profiler holds
// it) leaves CPU regions and NCCL untouched and writes gpu_capture "unavailable" with the reason.
#pragma once

extern "C" {
// Called by the CUDA driver (CUDA_INJECTION64_PATH). Once per process, thread-safe; returns 1.
__attribute__((visibility("default"))) int InitializeInjection(void);
}

namespace traintime::cupti {

void lazy_start_point() noexcept;

}  // namespace traintime::cupti
