// The rank files' warnings grouped (docs/report.md, rank_warnings): a warning a module counted is
// one group per counter key, found from the ranks' counters and rendered from the module's table
// (the writer's own function), its counts summed and the largest ranks named; a warning with
// nothing counted groups by its exact text. No warning's text is read for a number.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis.h"
#include "render.h"
#include "traintime/core/section.h"
#include "traintime/cupti/cupti_format.h"
#include "traintime/core/module_format.h"

using nlohmann::json;
using namespace traintime::report;
namespace core = traintime::core;

namespace {

struct RankWarnings {
  uint64_t dropped = 0;  // modules.cupti.counters.dropped_records, its warning written as the writer does
  std::vector<std::string> texts;
};

// A job of ranks 0..n-1, each with its counters and warnings (everything else left empty).
Job job_with(const std::vector<RankWarnings>& ranks) {
  Job job;
  job.dir = "job-dir";
  job.job_id = "job-w";
  job.world_size = static_cast<int64_t>(ranks.size());
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    RankInput in;
    in.file = "rank-" + std::to_string(r) + ".json";
    in.data.job_id = job.job_id;
    in.data.rank = static_cast<int64_t>(r);
    in.data.world_size = job.world_size;
    if (ranks[r].dropped > 0) {
      core::Section s("cupti");
      s.count(traintime::cupti::kCounters, traintime::cupti::Counter::dropped_records, ranks[r].dropped);
      in.data.modules["cupti"] = s.counters;
      in.data.warnings = s.warnings;
    }
    for (const std::string& t : ranks[r].texts) in.data.warnings.push_back(t);
    job.ranks.push_back(std::move(in));
  }
  return job;
}

const WarningGroup* group_of(const Report& r, const std::string& key_or_text) {
  for (const WarningGroup& g : r.rank_warnings)
    if (g.key == key_or_text || (g.key.empty() && g.text == key_or_text)) return &g;
  return nullptr;
}

std::string dropped_text(uint64_t n) {
  return traintime::cupti::messages::dropped_records(n, core::ModuleCounters{});
}

}  // namespace

TEST_CASE("every counter of every module format has its key once; a message only where it states a problem",
          "[report][warnings]") {
  for (const core::ModuleFormat* f : core::module_formats()) {
    REQUIRE(core::find_module_format(f->name) == f);
    std::vector<std::string_view> keys;
    for (std::size_t t = 0; t < f->table_count; ++t)
      for (std::size_t i = 0; i < f->tables[t].size; ++i) keys.push_back(f->tables[t].specs[i].key);
    for (std::string_view k : keys) {
      INFO(f->name << "." << k);
      CHECK(std::count(keys.begin(), keys.end(), k) == 1);
    }
  }
  CHECK(core::find_module_format("no-such-module") == nullptr);
}

TEST_CASE("a counted warning is one group, summed, the largest named, its text rendered from the counters",
          "[report][warnings]") {
  const Report r = analyze(job_with({{123, {}},
                                     {124, {"static CUPTI in libfoo.so"}},
                                     {99, {}},
                                     {124, {"2 NCCL call(s) without a communicator"}}}));
  REQUIRE(r.rank_warnings.size() == 3);

  const WarningGroup* dropped = group_of(r, "cupti.dropped_records");
  REQUIRE(dropped);
  CHECK(dropped->ranks == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(dropped->has_number);
  CHECK(dropped->total == 123 + 124 + 99 + 124);
  REQUIRE(dropped->worst.size() == 3);
  // Largest first; of equal values the lower rank first, and its text is the one shown.
  CHECK(dropped->worst[0].rank == 1);
  CHECK(dropped->worst[0].value == 124);
  CHECK(dropped->worst[1].rank == 3);
  CHECK(dropped->worst[1].value == 124);
  CHECK(dropped->worst[2].rank == 0);
  CHECK(dropped->worst[2].value == 123);
  CHECK(dropped->text == dropped_text(124));

  // Texts nothing counted: each its exact text, no total, even with a number in it.
  const WarningGroup* nccl = group_of(r, "2 NCCL call(s) without a communicator");
  REQUIRE(nccl);
  CHECK(nccl->ranks == std::vector<int64_t>{3});
  CHECK_FALSE(nccl->has_number);
  const WarningGroup* plain = group_of(r, "static CUPTI in libfoo.so");
  REQUIRE(plain);
  CHECK(plain->ranks == std::vector<int64_t>{1});
  CHECK(plain->worst.empty());
}

TEST_CASE("texts nothing counted group by their exact text, numbers and all", "[report][warnings]") {
  // What a file from a writer before module counters holds: texts only. They are never parsed.
  const Report r = analyze(job_with({{0, {"unbalanced pops on thread main", "3 things"}},
                                     {0, {"unbalanced pops on thread main", "4 things"}},
                                     {0, {"library at /opt/v1/lib.so"}}}));
  REQUIRE(r.rank_warnings.size() == 4);
  const WarningGroup* main_thread = group_of(r, "unbalanced pops on thread main");
  REQUIRE(main_thread);
  CHECK(main_thread->ranks == std::vector<int64_t>{0, 1});
  CHECK(group_of(r, "3 things"));
  CHECK(group_of(r, "4 things"));
  CHECK_FALSE(group_of(r, "library at /opt/v1/lib.so")->has_number);
}

TEST_CASE("a counter's text written by an older writer in other words stays beside the counted group",
          "[report][warnings]") {
  Job job = job_with({{5, {}}});
  job.ranks[0].data.warnings = {"5 records were lost (an older writer's words)"};
  const Report r = analyze(job);
  REQUIRE(r.rank_warnings.size() == 2);
  CHECK(group_of(r, "cupti.dropped_records")->text == dropped_text(5));
  CHECK(group_of(r, "5 records were lost (an older writer's words)"));
}

TEST_CASE("rank_warnings in the JSON summary and the warnings table", "[report][warnings]") {
  const Report r = analyze(job_with({{10, {}}, {30, {}}, {2, {"plain text"}}, {}}));
  const json s = summary_json(r, Extras{});
  const json& w = s.at("rank_warnings");
  REQUIRE(w.size() == 2);
  CHECK(w[0] == json({{"warning", "plain text"},
                      {"key", nullptr},
                      {"ranks", {2}},
                      {"total", nullptr},
                      {"worst", json::array()}}));
  CHECK(w[1] == json({{"warning", dropped_text(30)},
                      {"key", "cupti.dropped_records"},
                      {"ranks", {0, 1, 2}},
                      {"total", 42},
                      {"worst", {{{"rank", 1}, {"value", 30}}, {{"rank", 0}, {"value", 10}}, {{"rank", 2}, {"value", 2}}}}}));
  CHECK(w[1]["worst"][0]["value"].is_number_integer());

  const Document d = build_document(r, Extras{});
  const Table* table = nullptr;
  for (const Table& t : d.tables)
    if (t.id == "warnings") table = &t;
  REQUIRE(table);
  REQUIRE(table->rows.size() == 2);
  CHECK(table->rows[0] == std::vector<std::string>{"rank(s) 2", "plain text", ""});
  CHECK(table->rows[1] == std::vector<std::string>{"rank(s) 0, 1, 2", dropped_text(30),
                                                   "total 42 over 3 rank(s); worst: rank 1: 30, rank 0: 10, rank 2: 2"});
  const std::string text = render_text(d);
  CHECK(text.find("rank(s) 2: plain text\n") != std::string::npos);
}
