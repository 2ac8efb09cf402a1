// SIMULATION: state shared by the parts of the fake libcupti.so.13 (callbacks, activity buffers).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include <cupti.h>

#include "simgpu/engine.h"

namespace simcupti {

// Callback ids per domain never reach this bound in CUDA 13 (driver: 807).
inline constexpr uint32_t kMaxCbid = 1024;

// Hooks from the engine (on the thread that made the call).
void on_api_enter(simgpu_api_frame* f);
void on_api_exit(simgpu_api_frame* f);
void on_work(const simgpu_work* w);
void on_memory(const simgpu_memory_op* op);
void on_resource(int event, void* context, void* handle, void* graph);

// Activity side: API records and external-correlation records for a traced call.
void record_api(const simgpu_api_frame* f);
void record_external_correlation(const simgpu_api_frame* f);
bool activity_kind_enabled(CUpti_ActivityKind kind);
// Callback side: tears down the subscriber (cuptiFinalize).
void reset_callbacks();
void reset_activity();

// The CUPTI API version this fake reports: SIMGPU_CUPTI_API_VERSION=<n> (e.g. 22 for 12.4, 26
// for 12.8), else the toolkit's (13.0). It decides the record layouts written (Kernel9 and
// Memcpy5/6 below 13.0, as the 12.x releases write them), the attribute defaults, and that a
// refused buffer request aborts below API 27 (a stand-in for the crash real CUPTI can have there).
uint32_t api_version();

// Installs the engine hooks once (every public entry point calls it).
void ensure_hooks();

}  // namespace simcupti
