// The rank files' warnings grouped across ranks as they are read (WarningGroup, analysis.h).
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "analysis.h"

namespace traintime::report::views {

// The warnings of the ranks, grouped as they are read (WarningGroup): per group the ranks and
// their counts only, and one text, so 16384 ranks cost two numbers per rank and warning. A
// warning a module counted is found from the rank's counters (modules.<module>.counters) and its
// text rendered from the module's table (core/module_format.h module_formats), the same function the
// writer formatted it with; the rank's own copy of that text in warnings[] is then not read again.
// No text is parsed for a number.
class WarningGrouper {
 public:
  void add_rank(const core::RankFile& f);
  // The groups by key (counted) or text, each counted one with its total and worst ranks.
  std::vector<WarningGroup> take();

 private:
  // `id`: "<module>.<key>" of a counted warning (`counted`, with its count `v`), else the text.
  void add(const std::string& id, bool counted, double v, int64_t rank, const std::string& text);

  struct Building {
    WarningGroup g;
    std::vector<double> values;  // parallel to g.ranks when g.has_number
    double top = 0;              // the value of g.text's rank
  };
  std::unordered_map<std::string, std::size_t> index_;  // "#" key or "=" exact text -> groups_
  std::vector<Building> groups_;
};

}  // namespace traintime::report::views
