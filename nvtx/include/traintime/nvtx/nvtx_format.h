// The nvtx module's data format (core/module_format.h): its counters, each warning's text, and
// its section's name and version. Compiled into traintime_formats, which libtraintime.so and
// traintime-report both link: the report renders these warnings from the rank files' counters.
#pragma once

#include "traintime/core/module_format.h"

namespace traintime::nvtx {

// NVTX ranges open on one thread beyond this are counted, not recorded.
inline constexpr int kMaxOpen = 256;

#define TRAINTIME_NVTX_COUNTERS(X) \
  X(untracked_ranges, &messages::untracked_ranges)

#define TRAINTIME_NVTX_MESSAGE(key, message) std::string key(uint64_t n, const core::ModuleCounters& all);
namespace messages { TRAINTIME_NVTX_COUNTERS(TRAINTIME_NVTX_MESSAGE) }
#undef TRAINTIME_NVTX_MESSAGE

enum class Counter : uint16_t { TRAINTIME_NVTX_COUNTERS(TRAINTIME_COUNTER_ENUM) };
inline constexpr core::CounterSpec kCounters[] = {TRAINTIME_NVTX_COUNTERS(TRAINTIME_COUNTER_SPEC)};

// Rank file modules.nvtx.
extern const core::ModuleFormat kFormat;

}  // namespace traintime::nvtx
