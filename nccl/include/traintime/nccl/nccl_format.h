// The nccl module's data format (core/module_format.h): its counters, each warning's text, and
// its section's name and version. Compiled into traintime_formats, which libtraintime.so and
// traintime-report both link: the report renders these warnings from the rank files' counters.
#pragma once

#include "traintime/core/module_format.h"

namespace traintime::nccl {

// Communicators made by ncclCommSplit/Shrink waiting for their first use to be named: beyond this
// the oldest is given a per-process id (children_unnamed).
inline constexpr std::size_t kMaxPending = 64;

#define TRAINTIME_NCCL_COUNTERS(X) \
  X(missing_real, &messages::missing_real) \
  X(unregistered, &messages::unregistered) \
  X(pending_dropped, &messages::pending_dropped) \
  X(children_unnamed, &messages::children_unnamed) \
  X(calls_without_communicator, &messages::calls_without_communicator) \
  X(groups_lost, &messages::groups_lost) \
  X(profiler_plugin_inits, nullptr) \
  X(profiler_plugin_version, nullptr) \
  X(profiler_plugin_chained_version, nullptr) \
  X(profiler_plugin_chained_init_failures, &messages::profiler_plugin_chained_init_failures) \
  X(profiler_plugin_counted_calls, nullptr) \
  X(profiler_plugin_coll_events, nullptr) \
  X(profiler_plugin_coll_api_events, nullptr) \
  X(profiler_plugin_nccl_version, nullptr) \
  X(profiler_plugin_kernel_ch, nullptr) \
  X(profiler_plugin_kernel_ch_collectives, nullptr) \
  X(profiler_plugin_kernel_ch_lost, &messages::profiler_plugin_kernel_ch_lost) \
  X(profiler_plugin_proxy_ops, nullptr) \
  X(profiler_plugin_proxy_steps, nullptr) \
  X(profiler_plugin_pxn_proxy_ops, nullptr) \
  X(profiler_plugin_kernel_channels, nullptr) \
  X(profiler_plugin_suspected, nullptr) \
  X(profiler_plugin_suspected_straggler, nullptr) \
  X(profiler_plugin_progress_dropped, &messages::profiler_plugin_progress_dropped) \
  X(profiler_plugin_progress_unstopped, nullptr)

#define TRAINTIME_NCCL_MESSAGE(key, message) std::string key(uint64_t n, const core::ModuleCounters& all);
namespace messages { TRAINTIME_NCCL_COUNTERS(TRAINTIME_NCCL_MESSAGE) }
#undef TRAINTIME_NCCL_MESSAGE

enum class Counter : uint16_t { TRAINTIME_NCCL_COUNTERS(TRAINTIME_COUNTER_ENUM) };
inline constexpr core::CounterSpec kCounters[] = {TRAINTIME_NCCL_COUNTERS(TRAINTIME_COUNTER_SPEC)};

// Rank file modules.nccl.
extern const core::ModuleFormat kFormat;

}  // namespace traintime::nccl
