// The null module's report half (traintime/modules/module_report.h): what its data section says
// across the job -- the largest call any rank made, and which rank made it. traintime-report
// compiles this file in because it is here (tools/CMakeLists.txt); a module copied from null/
// keeps it, renamed.
#include <algorithm>
#include <memory>

#include "traintime/modules/module_report.h"
#include "traintime/null/null_format.h"

namespace traintime::null {
namespace {

struct Merged : modules::ReportMerge {
  bool any = false;  // some rank's file had the data section
  uint64_t largest = 0;
  int64_t largest_rank = -1;
};

constexpr modules::ReportFigure kFigures[] = {
    {"largest_call_bytes", "the largest call any rank made, in bytes (its data section)"},
    {"largest_call_rank", "the rank that made it (the first in file order, on a tie)"}};

void merge(const core::RankFile& f, modules::ReportMerge& into) {
  Merged& m = static_cast<Merged&>(into);
  const NullData* d = data(f);
  if (!d) return;
  if (!m.any || d->largest_call_bytes > m.largest) {
    m.largest = d->largest_call_bytes;
    m.largest_rank = f.rank;
  }
  m.any = true;
}

std::optional<double> value(const modules::ReportMerge& merged, std::size_t i) {
  const Merged& m = static_cast<const Merged&>(merged);
  if (!m.any) return std::nullopt;
  return i == 0 ? static_cast<double>(m.largest) : static_cast<double>(m.largest_rank);
}

}  // namespace

extern const modules::ModuleReport kReport;  // found through the module table (module_report.h)
const modules::ModuleReport kReport{"null", kFigures, std::size(kFigures),
                                    [] { return std::unique_ptr<modules::ReportMerge>(new Merged()); },
                                    &merge, &value};

}  // namespace traintime::null
