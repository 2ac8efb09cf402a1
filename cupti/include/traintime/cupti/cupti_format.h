// The cupti module's data format (core/module_format.h): its counters, each warning's text, and
// its section's name and version. Compiled into traintime_formats, which libtraintime.so and
// traintime-report both link: the report renders these warnings from the rank files' counters.
#pragma once

#include "traintime/core/module_format.h"

namespace traintime::cupti {

#define TRAINTIME_CUPTI_COUNTERS(X) \
  X(launch_slots, nullptr) \
  X(correlation_ids_per_1000_launches, nullptr) \
  X(buffer_count, nullptr) \
  X(buffer_kib, nullptr) \
  X(launch_flush_every, nullptr) \
  X(launching_threads_peak, nullptr) \
  X(launching_threads_bound, nullptr) \
  X(overwritten_late, nullptr) \
  X(memory_vmm_allocations, nullptr) \
  X(memory_vmm_records, nullptr) \
  X(memory_missing_context, &messages::memory_missing_context) \
  X(overwritten, &messages::overwritten) \
  X(launching_threads_over_bound, &messages::launching_threads_over_bound) \
  X(missing_context, &messages::missing_context) \
  X(no_timestamps, &messages::no_timestamps) \
  X(incomplete_buffers, &messages::incomplete_buffers) \
  X(store_collisions, &messages::store_collisions) \
  X(graph_nodes_refused, &messages::graph_nodes_refused) \
  X(dropped_records, &messages::dropped_records) \
  X(buffer_requests_refused, &messages::buffer_requests_refused)

#define TRAINTIME_CUPTI_MESSAGE(key, message) std::string key(uint64_t n, const core::ModuleCounters& all);
namespace messages { TRAINTIME_CUPTI_COUNTERS(TRAINTIME_CUPTI_MESSAGE) }
#undef TRAINTIME_CUPTI_MESSAGE

enum class Counter : uint16_t { TRAINTIME_CUPTI_COUNTERS(TRAINTIME_COUNTER_ENUM) };
inline constexpr core::CounterSpec kCounters[] = {TRAINTIME_CUPTI_COUNTERS(TRAINTIME_COUNTER_SPEC)};

// Rank file modules.cupti.
extern const core::ModuleFormat kFormat;

}  // namespace traintime::cupti
