// The counter tables of the parts of core that count into a section (core/module_format.h):
// the region registry's (section annotations), the CPU-side collectives' (section collectives),
// and the GPU aggregator's and the memory tracker's, which the cupti module's section holds
// (its format, cupti/, lists these tables with its own).
#pragma once

#include "traintime/core/module_format.h"

namespace traintime::core {

// Every section whose summary can be taken at a terminating signal from its last published
// figures counts these three (count_last_publish, lock_order.h): the warning's counter, whether
// nothing had been published (1) and how old the figures were. Each table lists them with its
// own message (the figures it names).
#define TRAINTIME_LAST_PUBLISH_COUNTERS(X, message) \
  X(last_publish_missing, nullptr)                  \
  X(last_publish_age_ms, nullptr)                   \
  X(summary_from_last_publish, message)

std::string annotations_last_publish(uint64_t, const ModuleCounters& all);
std::string gpu_last_publish(uint64_t, const ModuleCounters& all);
std::string collectives_last_publish(uint64_t, const ModuleCounters& all);

#define TRAINTIME_ANNOTATION_COUNTERS(X)                                 \
  X(unbalanced_pops, &annotation_messages::unbalanced_pops)             \
  X(depth_overflows, &annotation_messages::depth_overflows)             \
  X(unknown_range_ends, &annotation_messages::unknown_range_ends)       \
  X(dropped_names, &annotation_messages::dropped_names)                 \
  TRAINTIME_LAST_PUBLISH_COUNTERS(X, &annotations_last_publish)

#define TRAINTIME_GPU_COUNTERS(X)                                        \
  X(late_records, &gpu_messages::late_records)                          \
  X(segmented_steps, &gpu_messages::segmented_steps)                    \
  X(kernel_names_over_cap, &gpu_messages::kernel_names_over_cap)        \
  X(region_kernels_over_cap, &gpu_messages::region_kernels_over_cap)    \
  X(group_lookups_missed, &gpu_messages::group_lookups_missed)          \
  X(trace_events_dropped, &gpu_messages::trace_events_dropped)          \
  TRAINTIME_LAST_PUBLISH_COUNTERS(X, &gpu_last_publish)

#define TRAINTIME_MEMORY_COUNTERS(X)                                     \
  X(memory_records, nullptr)                                            \
  X(memory_unknown_frees, &memory_messages::memory_unknown_frees)       \
  X(memory_reused_addresses, &memory_messages::memory_reused_addresses)

#define TRAINTIME_COLLECTIVE_COUNTERS(X)             \
  X(recorded, nullptr)                              \
  X(dropped, &collective_messages::dropped)         \
  TRAINTIME_LAST_PUBLISH_COUNTERS(X, &collectives_last_publish)

#define TRAINTIME_DECLARE_MESSAGE(key, message) std::string key(uint64_t n, const ModuleCounters& all);
namespace annotation_messages { TRAINTIME_ANNOTATION_COUNTERS(TRAINTIME_DECLARE_MESSAGE) }
namespace gpu_messages { TRAINTIME_GPU_COUNTERS(TRAINTIME_DECLARE_MESSAGE) }
namespace memory_messages { TRAINTIME_MEMORY_COUNTERS(TRAINTIME_DECLARE_MESSAGE) }
namespace collective_messages { TRAINTIME_COLLECTIVE_COUNTERS(TRAINTIME_DECLARE_MESSAGE) }

enum class AnnotationCounter : uint16_t { TRAINTIME_ANNOTATION_COUNTERS(TRAINTIME_COUNTER_ENUM) };
enum class GpuCounter : uint16_t { TRAINTIME_GPU_COUNTERS(TRAINTIME_COUNTER_ENUM) };
enum class MemoryCounter : uint16_t { TRAINTIME_MEMORY_COUNTERS(TRAINTIME_COUNTER_ENUM) };
enum class CollectiveCounter : uint16_t { TRAINTIME_COLLECTIVE_COUNTERS(TRAINTIME_COUNTER_ENUM) };

inline constexpr CounterSpec kAnnotationCounters[] = {TRAINTIME_ANNOTATION_COUNTERS(TRAINTIME_COUNTER_SPEC)};
inline constexpr CounterSpec kGpuCounters[] = {TRAINTIME_GPU_COUNTERS(TRAINTIME_COUNTER_SPEC)};
inline constexpr CounterSpec kMemoryCounters[] = {TRAINTIME_MEMORY_COUNTERS(TRAINTIME_COUNTER_SPEC)};
inline constexpr CounterSpec kCollectiveCounters[] = {TRAINTIME_COLLECTIVE_COUNTERS(TRAINTIME_COUNTER_SPEC)};

// The sections core fills on its own (rank file modules.annotations, modules.collectives).
extern const ModuleFormat kAnnotationsFormat;
extern const ModuleFormat kCollectivesFormat;

}  // namespace traintime::core
