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

#include <memory>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "traintime/core/rank_file.h"

namespace traintime::core {

namespace json_read {
struct SimdValue;  // json_read.h
}  // namespace json_read

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

// A module's part of the rank file: modules.<name> with its counters (from `tables`) and its
// version (modules.<name>.version, written with its counters; none reads as version 1), and
// its data section -- the top-level key(s) it owns (nvml: gpu_health), written and read by its
// own functions (DataSectionFormat), never by core's reader.
//
// The rank-file reader (rank_file_json.h, read_rank_file) meets a module's section at a version
// above `version` (a newer writer's): it reads the counters, leaves the data section out, keeps
// the rest of the file and adds one line saying so to RankFile::read_notes.
// Its data section: the top-level key(s) of the rank file it owns, and its writer and reader.
struct DataSectionFormat {
  // For messages and docs ("gpu_health"); empty: the module has no data section.
  std::string_view keys;
  // Writes `data` (what the module's Section::data held: its own type) under its keys of `top`,
  // the rank file's object.
  void (*write)(const ModuleData& data, nlohmann::json* top) = nullptr;
  // Reads its keys of the rank file's object back: null when the file has none. Throws
  // std::runtime_error naming the field (json_read.h fail) on a field it cannot read, as core's
  // reader does. One template instantiated for both documents (json_read.h).
  std::shared_ptr<const ModuleData> (*read)(const nlohmann::json& top) = nullptr;
  std::shared_ptr<const ModuleData> (*read_fast)(const json_read::SimdValue& top) = nullptr;
};

struct ModuleFormat {
  std::string_view name;
  uint32_t version = 1;
  const CounterTable* tables = nullptr;
  std::size_t table_count = 0;
  DataSectionFormat data;

  constexpr ModuleFormat(std::string_view name_, uint32_t version_, const CounterTable* tables_,
                         std::size_t table_count_, DataSectionFormat data_ = {})
      : name(name_), version(version_), tables(tables_), table_count(table_count_), data(data_) {}
  const CounterSpec* find(std::string_view key) const {
    for (std::size_t t = 0; t < table_count; ++t)
      if (const CounterSpec* s = tables[t].find(key)) return s;
    return nullptr;
  }
};

// Every module format of this build (the module table's and core's own sections). Declared
// here, defined by traintime_formats (modules/src/formats.cpp), which every program linking
// traintime_core links too: the rank file's writer and reader find each module's format here.
// A plain array, never destroyed: the exit path's writer reads it after static destructors ran.
struct ModuleFormatList {
  const ModuleFormat* const* first;
  std::size_t size;
  const ModuleFormat* const* begin() const { return first; }
  const ModuleFormat* const* end() const { return first + size; }
};
ModuleFormatList module_formats();
// The format of modules.<name>; null for a name no module of this build writes (a newer
// writer's: its counters still merge, its warnings are grouped by their text).
const ModuleFormat* find_module_format(std::string_view name);

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
