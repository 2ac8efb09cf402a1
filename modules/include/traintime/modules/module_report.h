// A module's report half (Darshan's module shape: each module's own part of the post-hoc tools):
// from its own folder, `<module>/src/<module>_report.cpp`, which traintime-report compiles in
// when the file exists (tools/CMakeLists.txt reads the module table), a module merges its part of
// every rank file of the job into a value of its own type and hands back named figures of the
// job. Each figure is a row of the module's table in every output format (text, md, csv, HTML:
// the table `module_<module>`; JSON: modules.<module>.figures.<key>) and a name the gate takes
// (`--fail-if <module>_<key>>N`). The module's counters are merged without it (typed, by key:
// modules.<module>.counters); this is for what the counters alone do not say (its data section).
//
// A report half defines, in its module's namespace, `const modules::ModuleReport kReport`.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string_view>

#include "traintime/core/rank_file.h"

namespace traintime::modules {

// What a module's report half keeps of the rank files it merged (its own type derives from this).
struct ReportMerge {
  virtual ~ReportMerge() = default;
};

// One figure, declared once: its key (lower-case, [a-z0-9_]: the gate's name is <module>_<key>)
// and what it means, for the table's rows and `--fail-if`'s list of names.
struct ReportFigure {
  std::string_view key;
  std::string_view what;
};

struct ModuleReport {
  std::string_view module;  // its format's name (rank file modules.<module>)
  const ReportFigure* figures = nullptr;
  std::size_t figure_count = 0;
  // A fresh merge of the job, made at the first rank file holding the module's data section
  // (RankFile::module_data): a job without it shows none of the module's figures (no table, no
  // JSON figures, no headline metric), though --fail-if still takes their names (n/a).
  std::unique_ptr<ReportMerge> (*start)() = nullptr;
  // One rank file of the job (role "rank"), in file order, on the report's merging thread.
  void (*merge)(const core::RankFile& f, ReportMerge& into) = nullptr;
  // Figure `i` (of `figures`) of the job; nullopt: n/a (no rank measured it).
  std::optional<double> (*value)(const ReportMerge& merged, std::size_t i) = nullptr;
};

}  // namespace traintime::modules
