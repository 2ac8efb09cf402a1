// The modules' report halves in traintime-report (module_reports.h): found through the module
// table, by the list tools/CMakeLists.txt generates of the modules whose folder has one.
#include "module_reports.h"

#include <cmath>
#include <cstdio>
#include <utility>

#include <nlohmann/json.hpp>

#include "render.h"
#include "traintime/modules/module_reports_list.h"  // generated: TRAINTIME_MODULE_REPORTS(X)

#define TRAINTIME_DECLARE_REPORT(m) \
  namespace traintime::m {          \
  extern const modules::ModuleReport kReport; \
  }
TRAINTIME_MODULE_REPORTS(TRAINTIME_DECLARE_REPORT)
#undef TRAINTIME_DECLARE_REPORT

namespace traintime::report {

const std::vector<const modules::ModuleReport*>& module_reports() {
#define TRAINTIME_REPORT_OF(m) &traintime::m::kReport,
  static const std::vector<const modules::ModuleReport*> all = {TRAINTIME_MODULE_REPORTS(TRAINTIME_REPORT_OF)};
#undef TRAINTIME_REPORT_OF
  return all;
}

ModuleMerges::ModuleMerges() : merged_(module_reports().size()) {}
ModuleMerges::~ModuleMerges() = default;
ModuleMerges::ModuleMerges(ModuleMerges&&) noexcept = default;
ModuleMerges& ModuleMerges::operator=(ModuleMerges&&) noexcept = default;

void ModuleMerges::merge(const core::RankFile& f) {
  const auto& reports = module_reports();
  for (std::size_t i = 0; i < reports.size(); ++i) {
    const std::string name(reports[i]->module);
    if (!merged_[i]) {
      // Its counters alone (modules.<module>, in every file the module's table names) are no data
      // of its own: a module the job never used gives no figures, not a row of n/a.
      if (!f.module_data.count(name)) continue;
      merged_[i] = reports[i]->start();
    }
    reports[i]->merge(f, *merged_[i]);
  }
}

std::vector<ModuleFigures> ModuleMerges::figures() const {
  std::vector<ModuleFigures> out;
  const auto& reports = module_reports();
  for (std::size_t i = 0; i < reports.size(); ++i) {
    if (!merged_[i]) continue;
    const modules::ModuleReport& m = *reports[i];
    ModuleFigures mf;
    mf.module = std::string(m.module);
    for (std::size_t k = 0; k < m.figure_count; ++k)
      mf.rows.push_back({std::string(m.figures[k].key), std::string(m.figures[k].what), m.value(*merged_[i], k)});
    out.push_back(std::move(mf));
  }
  return out;
}

std::string module_figure_name(std::string_view module, std::string_view key) {
  return std::string(module) + "_" + std::string(key);
}

std::vector<std::string> module_figure_names() {
  std::vector<std::string> out;
  for (const modules::ModuleReport* m : module_reports())
    for (std::size_t k = 0; k < m->figure_count; ++k) out.push_back(module_figure_name(m->module, m->figures[k].key));
  return out;
}

const ModuleFigures::Row* find_module_figure(const std::vector<ModuleFigures>& figures, const std::string& name) {
  for (const ModuleFigures& mf : figures)
    for (const ModuleFigures::Row& row : mf.rows)
      if (module_figure_name(mf.module, row.key) == name) return &row;
  return nullptr;
}

void add_module_tables(const std::vector<ModuleFigures>& figures, Document* d) {
  for (const ModuleFigures& mf : figures) {
    Table t;
    t.id = "module_" + mf.module;
    t.title = "Module " + mf.module + " (its report half: " + mf.module + "/src/" + mf.module + "_report.cpp)";
    t.headers = {"figure", "value", "what"};
    t.numeric = {false, true, false};
    t.note = "The gate takes each figure as " + mf.module + "_<figure>; - = n/a (no rank measured it).";
    for (const ModuleFigures::Row& row : mf.rows) {
      // A whole number (a count, bytes, a rank) in full; anything else to 6 significant digits.
      char value[64] = "-";
      if (row.value)
        std::snprintf(value, sizeof value,
                      std::floor(*row.value) == *row.value && std::fabs(*row.value) < 1e15 ? "%.0f" : "%.6g",
                      *row.value);
      t.rows.push_back({row.key, value, row.what});
    }
    d->tables.push_back(std::move(t));
  }
}

void add_module_figures_json(const std::vector<ModuleFigures>& figures, nlohmann::json* modules) {
  for (const ModuleFigures& mf : figures) {
    nlohmann::json fs = nlohmann::json::object();
    for (const ModuleFigures::Row& row : mf.rows)
      fs[row.key] = row.value ? nlohmann::json(*row.value) : nlohmann::json(nullptr);
    (*modules)[mf.module]["figures"] = std::move(fs);
  }
}

}  // namespace traintime::report
