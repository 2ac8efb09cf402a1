// The nvml module's data format (core/module_format.h): its counters, each warning's text, and
// its section's name and version. Compiled into traintime_formats, which libtraintime.so and
// traintime-report both link: the report renders these warnings from the rank files' counters.
#pragma once

#include "traintime/core/module_format.h"

namespace traintime::nvml {

#define TRAINTIME_NVML_COUNTERS(X) \
  X(samples, nullptr) \
  X(failed_reads, nullptr) \
  X(last_publish_missing, nullptr) \
  X(last_publish_age_ms, nullptr) \
  X(summary_from_last_publish, &messages::summary_from_last_publish)

#define TRAINTIME_NVML_MESSAGE(key, message) std::string key(uint64_t n, const core::ModuleCounters& all);
namespace messages { TRAINTIME_NVML_COUNTERS(TRAINTIME_NVML_MESSAGE) }
#undef TRAINTIME_NVML_MESSAGE

enum class Counter : uint16_t { TRAINTIME_NVML_COUNTERS(TRAINTIME_COUNTER_ENUM) };
inline constexpr core::CounterSpec kCounters[] = {TRAINTIME_NVML_COUNTERS(TRAINTIME_COUNTER_SPEC)};

// Rank file modules.nvml.
extern const core::ModuleFormat kFormat;

}  // namespace traintime::nvml
