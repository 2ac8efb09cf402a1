// One module's section of the rank file (Darshan's module shape; docs/architecture.md "Where a
// new intercepted API family goes"): the module's name, what it counted as typed {key, count}
// counters, and its warnings. The module fills its own section and hands it up as a value;
// core::build_rank_file copies the counters under modules.<name>.counters and the warnings into
// the file's warnings. No module writes into another's section.
//
// Every warning that states a count is formatted exactly once, from its counter, by count():
// the key and the sentence travel together, so the rank file carries both the number a reader
// sums across ranks (modules.<name>.counters.<key>) and the sentence a person reads. A warning
// with nothing to count (a condition: a statically linked CUPTI, a file written on a signal)
// goes through note().
//
// Its rows of self_cost (what the module's own code and memory cost) travel the same way: the
// builder gathers every section's rows into the file's self_cost.
//
// Built when a rank file is assembled, never on a hot path: the hot paths keep their counters
// as relaxed atomics and the module reads them here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

  Section() = default;
  explicit Section(std::string_view module_name) noexcept : name(module_name) {}

  // Counts `key` (written even when 0: the module measured it) and, when n > 0, adds the
  // warning `message(n)` makes: the only place that warning's text is formatted.
  template <class Message>
  void count(std::string_view key, uint64_t n, Message&& message) {
    count(key, n);
    if (n > 0) warnings.push_back(std::forward<Message>(message)(n));
  }
  // A counter with no warning of its own (a figure, not a problem).
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
