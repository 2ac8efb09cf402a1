// A module's data format (Darshan's module shape; docs/architecture.md "Where a new intercepted
// API family goes"): its name in the rank file, the version of its part of the file, and its
// counters as an X-macro list -- an enum for the code that counts, the key each one is written
// under, and, for a counter that states a problem, the one function that formats its warning.
//
// The same table serves the module, which writes the warning into the rank file when it counts
// (Section::count), and traintime-report, which groups the ranks' warnings by counter key and
// renders the group's text from the counters of the rank that counted most: no warning's text is
// ever parsed back into numbers (DESIGN §6). The tables live in a small library both
// libtraintime.so and the report link (traintime_formats, modules/README.md).
//
// A module declares its counters once:
//
//   #define TRAINTIME_NULL_COUNTERS(X) X(calls, nullptr) X(failed_calls, &messages::failed_calls)
//   enum class Counter : uint16_t { TRAINTIME_NULL_COUNTERS(TRAINTIME_COUNTER_ENUM) };
//   const core::CounterSpec kCounters[] = {TRAINTIME_NULL_COUNTERS(TRAINTIME_COUNTER_SPEC)};
//
// A message reads the counter's own value `n` and any other counter of the same module section
// (`all`, counted before it), never state outside the counters: the report renders it again from
// the rank file alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "traintime/core/rank_file.h"

namespace traintime::core {

struct CounterSpec {
  std::string_view key;  // rank file modules.<module>.counters.<key>
  // The warning the counter states when above 0; null for a figure (a count that is no problem).
  std::string (*message)(uint64_t n, const ModuleCounters& all);
};

// One table of counters (a module's own, or a part of core a module's section holds: the GPU
// aggregator's counters are in the cupti section).
struct CounterTable {
  const CounterSpec* specs;
  std::size_t size;
  const CounterSpec* find(std::string_view key) const {
    for (std::size_t i = 0; i < size; ++i)
      if (specs[i].key == key) return &specs[i];
    return nullptr;
  }
};
template <std::size_t N>
constexpr CounterTable counter_table(const CounterSpec (&specs)[N]) {
  return {specs, N};
}

// A module's section of the rank file: modules.<name>, written at `version` (modules.<name>.version
// when above 1: files before the format had a version read as 1), its counters from `tables`.
struct ModuleFormat {
  std::string_view name;
  uint32_t version = 1;
  const CounterTable* tables = nullptr;
  std::size_t table_count = 0;
  const CounterSpec* find(std::string_view key) const {
    for (std::size_t t = 0; t < table_count; ++t)
      if (const CounterSpec* s = tables[t].find(key)) return s;
    return nullptr;
  }
};

// A counter's value in one section's counters (0 when not counted).
inline uint64_t counter(const ModuleCounters& all, std::string_view key) {
  const auto it = all.counters.find(std::string(key));
  return it == all.counters.end() ? 0 : it->second;
}

// The same by the counter's table and enum, as Section::count counts it: a message names the
// other counters it reads this way, never by a key spelled again.
template <std::size_t N, class E>
uint64_t counter(const ModuleCounters& all, const CounterSpec (&table)[N], E c) {
  static_assert(std::is_enum_v<E>, "a counter is named by its table's enum");
  return counter(all, table[static_cast<std::size_t>(c)].key);
}

// The warning a signal-time summary states when it used its module's last published figures
// (core/lock_order.h count_last_publish): `what` ("the GPU figures") and how old they were, from
// the counters summary_from_last_publish, last_publish_missing and last_publish_age_ms.
std::string last_publish_message(std::string_view what, const ModuleCounters& all);

}  // namespace traintime::core

#define TRAINTIME_COUNTER_ENUM(key, message) key,
#define TRAINTIME_COUNTER_SPEC(key, message) {#key, message},
