// One module's section of the rank file (Darshan's module shape; docs/architecture.md "Where a
// new intercepted API family goes"): the module's name, what it counted as typed {key, count}
// counters, and its warnings. The module fills its own section and hands it up as a value;
// core::build_rank_file copies the counters under modules.<name>.counters and the warnings into
// the file's warnings. No module writes into another's section.
//
// Every warning that states a count is formatted exactly once, from its counter, by the message
// its module's counter table gives that key (core/module_format.h), which traintime-report uses
// too: the rank file carries both the number a reader sums across ranks
// (modules.<name>.counters.<key>) and the sentence a person reads, and the report groups the
// ranks' warnings by key. A warning with nothing to count (a condition: a statically linked
// CUPTI, a file written on a signal) goes through note(); the report groups those by their text.
//
// Its rows of self_cost (what the module's own code and memory cost) travel the same way: the
// builder gathers every section's rows into the file's self_cost.
//
// Built when a rank file is assembled, never on a hot path: the hot paths keep their counters
// as relaxed atomics and the module reads them here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "traintime/core/module_format.h"
#include "traintime/core/rank_file.h"

namespace traintime::core {

struct Section {
  // Rank file modules.<name>: a string literal of the module's (lower-case, unique per module).
  // Not a std::string: a summary holding a section is then built without anything that can
  // throw before its other members are complete.
  std::string_view name;
  ModuleCounters counters;            // by key
  std::vector<std::string> warnings;  // in the order the module counted them
  std::vector<CallbackCost> costs;    // self_cost.callbacks rows, in the order added (cost())
  std::vector<MemoryCost> memory;     // self_cost.memory rows (own_memory())
  // Its data section (DataSectionFormat::write: its own top-level keys), as its own type; null: none.
  // Immutable once handed up, so a copy (a signal-time summary's last publication) shares it.
  std::shared_ptr<const ModuleData> data;

  Section() = default;
  explicit Section(std::string_view module_name) noexcept : name(module_name) {}

  // Counts `spec.key` (written even when 0: the module measured it) and, when n > 0 and the
  // counter states a problem, adds the warning its table's message makes from the counters.
  void count(const CounterSpec& spec, uint64_t n) {
    count(spec.key, n);
    if (n > 0 && spec.message != nullptr) warnings.push_back(spec.message(n, counters));
  }
  // The counter `c` of a module's X-macro enum, from its table (module_format.h).
  template <std::size_t N, class E>
  void count(const CounterSpec (&table)[N], E c, uint64_t n) {
    count(table[static_cast<std::size_t>(c)], n);
  }
  // A counter by key alone: a figure, no warning.
  void count(std::string_view key, uint64_t n) { counters.counters[std::string(key)] += n; }
  // A warning with nothing to count.
  void note(std::string text) { warnings.push_back(std::move(text)); }

  // What the module itself cost (rank file self_cost, core/self_cost.h): a row of its code on
  // threads traintime did not start (a path with no call has no row), and a row of its own
  // buffers and tables.
  void cost(CallbackCost row) {
    if (row.calls == 0) return;
    row.module = std::string(name);
    costs.push_back(std::move(row));
  }
  void own_memory(std::string_view what, uint64_t peak_bytes) {
    memory.push_back(MemoryCost{std::string(name), std::string(what), peak_bytes});
  }
};

}  // namespace traintime::core
