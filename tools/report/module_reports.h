// The modules' report halves (traintime/modules/module_report.h) in traintime-report: their
// merges over a job's rank files, and the one call each output builds its rows with.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "traintime/core/rank_file.h"
#include "traintime/modules/module_report.h"

namespace traintime::report {

struct Document;

// One module's figures of the job, in its declared order.
struct ModuleFigures {
  std::string module;
  struct Row {
    std::string key;
    std::string what;
    std::optional<double> value;  // nullopt: n/a
  };
  std::vector<Row> rows;
};

// The report halves' merges of one job: a module's starts at the first rank file holding its data
// section (RankFile::module_data); only those that started give figures, so a module the job never
// used (its counters alone, or nothing) has no rows, no JSON figures and no headline metrics.
class ModuleMerges {
 public:
  ModuleMerges();
  ~ModuleMerges();
  ModuleMerges(ModuleMerges&&) noexcept;
  ModuleMerges& operator=(ModuleMerges&&) noexcept;
  void merge(const core::RankFile& f);
  std::vector<ModuleFigures> figures() const;

 private:
  std::vector<std::unique_ptr<modules::ReportMerge>> merged_;  // by module_reports() index
};

// The report halves compiled in, in the module table's order.
const std::vector<const modules::ModuleReport*>& module_reports();

// The gate's name of a module's figure: <module>_<key>.
std::string module_figure_name(std::string_view module, std::string_view key);
// The gate's names of every compiled-in module's figures (what --fail-if accepts, whether or not
// a job has the module's data), and the figure of one (nullptr: no figure of that name in the job).
std::vector<std::string> module_figure_names();
const ModuleFigures::Row* find_module_figure(const std::vector<ModuleFigures>& figures, const std::string& name);

// The hook each output calls once: the tables of the document (text, md, csv and HTML render
// them) and the JSON's modules.<module>.figures.
void add_module_tables(const std::vector<ModuleFigures>& figures, Document* d);
void add_module_figures_json(const std::vector<ModuleFigures>& figures, nlohmann::json* modules);

}  // namespace traintime::report
