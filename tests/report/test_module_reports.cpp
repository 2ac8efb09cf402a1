// traintime-report's use of the modules' report halves (module_reports.h), through the one that
// main has: the template module's (null/src/null_report.cpp). Its rows in the document (text,
// md, csv and HTML render its tables), its JSON and the gate's names.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "module_reports.h"
#include "render.h"
#include "traintime/core/rank_file_builder.h"
#include "traintime/core/rank_file_json.h"
#include "traintime/null/null_format.h"
#include "traintime/null/null_module.h"

using namespace traintime;

TEST_CASE("its report half adds its figures to every output and names the gate takes", "[null][report]") {
  report::ModuleMerges merges;
  report::ModuleMerges none;
  for (int64_t rank : {0, 1, 2}) {
    null::configure(true, null::Hooks{});
    null::note_call(rank == 1 ? 900 : 10 * static_cast<uint64_t>(rank + 1), true);
    core::Identity id;
    id.rank = rank;
    id.world_size = 3;
    merges.merge(core::rank_file_from_json(core::rank_file_to_json(core::build_rank_file(id, {}, {}, {}, {null::section()}))));
    none.merge(core::build_rank_file(id, {}, {}, {}, {}));  // no null section in the file
  }
  CHECK(none.figures().empty());
  const std::vector<report::ModuleFigures> figures = merges.figures();
  REQUIRE(figures.size() == 1);
  CHECK(figures[0].module == "null");
  REQUIRE(figures[0].rows.size() == 2);
  CHECK(figures[0].rows[0].key == "largest_call_bytes");
  CHECK(figures[0].rows[0].value == 900.0);
  CHECK(figures[0].rows[1].value == 1.0);  // rank 1 made it

  // Rows in the document (text, md, csv and HTML render its tables) and in the JSON.
  report::Document d;
  report::add_module_tables(figures, &d);
  REQUIRE(d.tables.size() == 1);
  CHECK(d.tables[0].id == "module_null");
  CHECK(d.tables[0].rows[0] == std::vector<std::string>{"largest_call_bytes", "900",
                                                        "the largest call any rank made, in bytes (its data section)"});
  CHECK(report::render_text(d).find("largest_call_bytes") != std::string::npos);
  // A whole number in full (bytes past 10^6 are not 1.07374e+09), a fraction to 6 digits, n/a as -.
  report::Document big;
  report::add_module_tables({{"x", {{"bytes", "", 1073741824.0}, {"ratio", "", 0.125}, {"none", "", std::nullopt}}}}, &big);
  REQUIRE(big.tables.size() == 1);
  CHECK(big.tables[0].rows[0][1] == "1073741824");
  CHECK(big.tables[0].rows[1][1] == "0.125");
  CHECK(big.tables[0].rows[2][1] == "-");
  nlohmann::json modules = nlohmann::json::object();
  report::add_module_figures_json(figures, &modules);
  CHECK(modules == nlohmann::json({{"null", {{"figures", {{"largest_call_bytes", 900.0}, {"largest_call_rank", 1.0}}}}}}));

  // The gate takes null_largest_call_bytes; n/a (a job without the module) counts as holding.
  const std::vector<std::string> names = report::metric_names();
  CHECK(std::find(names.begin(), names.end(), "null_largest_call_bytes") != names.end());
  report::Report r;
  r.module_figures = figures;
  const std::vector<report::Verdict> over = report::evaluate(report::parse_fail_if("null_largest_call_bytes>512"), r, nullptr);
  REQUIRE(over.size() == 1);
  CHECK(over[0].holds);
  CHECK_FALSE(report::evaluate(report::parse_fail_if("null_largest_call_bytes>1000"), r, nullptr)[0].holds);
  report::Report without;
  const report::Verdict na = report::evaluate(report::parse_fail_if("null_largest_call_bytes>1000"), without, nullptr)[0];
  CHECK(na.holds);
  CHECK(na.explanation.find("cannot be judged") != std::string::npos);
}

TEST_CASE("a module's counters without its data section give no figures and no headline metric", "[null][report]") {
  // Every file has modules.<module> for each module of the table that counted: counters alone are
  // no data of the module's own, and its figures would be a row of n/a in every report.
  core::Section counters_only("null");
  counters_only.count(null::kCounters, null::Counter::calls, 3);
  core::Identity id;
  id.world_size = 1;
  const core::RankFile f = core::build_rank_file(id, {}, {}, {}, {counters_only});
  REQUIRE(f.modules.count("null"));
  REQUIRE_FALSE(f.module_data.count("null"));
  report::ModuleMerges merges;
  merges.merge(f);
  CHECK(merges.figures().empty());
  report::Report r;
  r.module_figures = merges.figures();
  for (const report::Metric& m : report::headline_metrics(r)) CHECK(m.name.rfind("null_", 0) != 0);
  // The gate still takes the name (a module figure a job lacks cannot be judged).
  const report::Verdict na = report::evaluate(report::parse_fail_if("null_largest_call_bytes>1"), r, &r)[0];
  CHECK(na.holds);
  CHECK(na.explanation.find("no rank file holds its module's part") != std::string::npos);
  // Against a baseline that has it, --compare shows it, n/a in this run.
  report::Report with = r;
  with.module_figures = {{"null", {{"largest_call_bytes", "", 7.0}, {"largest_call_rank", "", 0.0}}}};
  const report::Comparison cmp = report::compare(r, with);
  const auto row = std::find_if(cmp.metrics.begin(), cmp.metrics.end(),
                                [](const report::MetricChange& c) { return c.name == "null_largest_call_bytes"; });
  REQUIRE(row != cmp.metrics.end());
  CHECK_FALSE(row->now);
  CHECK(row->base == 7.0);
}
