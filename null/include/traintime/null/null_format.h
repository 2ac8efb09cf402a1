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
// Its data section (core/module_format.h DataSectionFormat): the rank file's top-level `null`,
// {"largest_call_bytes": n}, the module's own type, written and read only by its format. A
// figure no counter carries (a largest value is not a sum): the report's half (null_report.cpp)
// takes its largest over the ranks.
struct NullData : core::ModuleData {
  uint64_t largest_call_bytes = 0;
};
// The file's `null` as the module's reader read it; null when the file has none.
const NullData* data(const core::RankFile& f);

extern const core::ModuleFormat kFormat;

}  // namespace traintime::null
