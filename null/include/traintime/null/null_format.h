// The null module's data format (core/module_format.h): its counters, each warning's text, and
// its section's name and version. Compiled into traintime_formats, which libtraintime.so and
// traintime-report both link: the report renders these warnings from the rank files' counters.
#pragma once

#include "traintime/core/module_format.h"

namespace traintime::null {

#define TRAINTIME_NULL_COUNTERS(X) \
  X(calls, nullptr) \
  X(bytes, nullptr) \
  X(failed_calls, &messages::failed_calls)

#define TRAINTIME_NULL_MESSAGE(key, message) std::string key(uint64_t n, const core::ModuleCounters& all);
namespace messages { TRAINTIME_NULL_COUNTERS(TRAINTIME_NULL_MESSAGE) }
#undef TRAINTIME_NULL_MESSAGE

enum class Counter : uint16_t { TRAINTIME_NULL_COUNTERS(TRAINTIME_COUNTER_ENUM) };
inline constexpr core::CounterSpec kCounters[] = {TRAINTIME_NULL_COUNTERS(TRAINTIME_COUNTER_SPEC)};

// Rank file modules.null.
extern const core::ModuleFormat kFormat;

}  // namespace traintime::null
