// The rank files' warnings grouped by shape (docs/report.md, rank_warnings): warnings that differ
// only in their numbers are one group with the numbers summed and the largest ranks named; other
// texts stay apart; a text without a number groups by its exact text.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis.h"
#include "render.h"

using nlohmann::json;
using namespace traintime::report;

namespace {

// A job of ranks 0..n-1, each with its own warnings (everything else left empty).
Job job_with(const std::vector<std::vector<std::string>>& warnings) {
  Job job;
  job.dir = "job-dir";
  job.job_id = "job-w";
  job.world_size = static_cast<int64_t>(warnings.size());
  for (std::size_t r = 0; r < warnings.size(); ++r) {
    RankInput in;
    in.file = "rank-" + std::to_string(r) + ".json";
    in.data.job_id = job.job_id;
    in.data.rank = static_cast<int64_t>(r);
    in.data.world_size = job.world_size;
    in.data.warnings = warnings[r];
    job.ranks.push_back(std::move(in));
  }
  return job;
}

const WarningGroup* group_of(const Report& r, const std::string& shape) {
  for (const WarningGroup& g : r.rank_warnings)
    if (g.shape == shape) return &g;
  return nullptr;
}

const std::string kLate = "activity record(s) arrived after the rank file was written";

}  // namespace

TEST_CASE("a warning's shape and its first number", "[report][warnings]") {
  WarningShape s = warning_shape("124 activity record(s) dropped; 3 buffers of 1.5 MiB");
  CHECK(s.shape == "N activity record(s) dropped; N buffers of N MiB");
  REQUIRE(s.first);
  CHECK(*s.first == 124);

  s = warning_shape("only 2.5 steps");
  CHECK(s.shape == "only N steps");
  REQUIRE(s.first);
  CHECK(*s.first == 2.5);

  // Digits glued to a word, a path or a version are part of the shape but not a count.
  s = warning_shape("/usr/local/cuda-12.4/lib64/libcupti.so has sm_90 code, 7 times");
  CHECK(s.shape == "/usr/local/cuda-N/libN/libcupti.so has sm_N code, N times");
  REQUIRE(s.first);
  CHECK(*s.first == 7);

  s = warning_shape("TRAINTIME_WARMUP_STEPS: 'x' is not a number; using 0");
  REQUIRE(s.first);
  CHECK(*s.first == 0);

  s = warning_shape("communicator 00ff11aa on H100");
  CHECK_FALSE(s.first);
  CHECK(warning_shape("no digits at all").shape == "no digits at all");
}

TEST_CASE("warnings differing only in numbers are one group, summed, the largest named", "[report][warnings]") {
  const Report r = analyze(job_with({{"123 " + kLate},
                                     {"124 " + kLate, "static CUPTI in libfoo.so"},
                                     {"99 " + kLate},
                                     {"124 " + kLate, "2 NCCL call(s) without a communicator"}}));
  REQUIRE(r.rank_warnings.size() == 3);

  const WarningGroup* late = group_of(r, "N " + kLate);
  REQUIRE(late);
  CHECK(late->ranks == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(late->has_number);
  CHECK(late->total == 123 + 124 + 99 + 124);
  REQUIRE(late->worst.size() == 3);
  // Largest first; of equal values the lower rank first, and its text is the one shown.
  CHECK(late->worst[0].rank == 1);
  CHECK(late->worst[0].value == 124);
  CHECK(late->worst[1].rank == 3);
  CHECK(late->worst[1].value == 124);
  CHECK(late->worst[2].rank == 0);
  CHECK(late->worst[2].value == 123);
  CHECK(late->text == "124 " + kLate);

  // A different message stays its own group, even with a number.
  const WarningGroup* nccl = group_of(r, "N NCCL call(s) without a communicator");
  REQUIRE(nccl);
  CHECK(nccl->ranks == std::vector<int64_t>{3});
  CHECK(nccl->total == 2);

  // A message without a number: its exact text, no total.
  const WarningGroup* plain = group_of(r, "static CUPTI in libfoo.so");
  REQUIRE(plain);
  CHECK(plain->text == "static CUPTI in libfoo.so");
  CHECK(plain->ranks == std::vector<int64_t>{1});
  CHECK_FALSE(plain->has_number);
  CHECK(plain->worst.empty());
}

TEST_CASE("texts without a number group by their exact text", "[report][warnings]") {
  const Report r = analyze(job_with({{"unbalanced pops on thread main"},
                                     {"unbalanced pops on thread main"},
                                     {"unbalanced pops on thread io"},
                                     {"library at /opt/v1/lib.so"},
                                     {"library at /opt/v2/lib.so"}}));
  REQUIRE(r.rank_warnings.size() == 4);
  const WarningGroup* main_thread = group_of(r, "unbalanced pops on thread main");
  REQUIRE(main_thread);
  CHECK(main_thread->ranks == std::vector<int64_t>{0, 1});
  const WarningGroup* v1 = group_of(r, "library at /opt/v1/lib.so");
  REQUIRE(v1);
  CHECK(v1->ranks == std::vector<int64_t>{3});
  CHECK_FALSE(v1->has_number);
  CHECK(group_of(r, "library at /opt/v2/lib.so"));
}

TEST_CASE("rank_warnings in the JSON summary and the warnings table", "[report][warnings]") {
  const Report r = analyze(job_with({{"10 " + kLate}, {"30 " + kLate}, {"1.5 " + kLate, "plain text"}, {}}));
  const json s = summary_json(r, Extras{});
  const json& w = s.at("rank_warnings");
  REQUIRE(w.size() == 2);
  CHECK(w[0] == json({{"warning", "30 " + kLate},
                      {"shape", "N " + kLate},
                      {"ranks", {0, 1, 2}},
                      {"total", 41.5},
                      {"worst", {{{"rank", 1}, {"value", 30}}, {{"rank", 0}, {"value", 10}}, {{"rank", 2}, {"value", 1.5}}}}}));
  CHECK(w[0]["worst"][0]["value"].is_number_integer());
  CHECK(w[1] == json({{"warning", "plain text"},
                      {"shape", "plain text"},
                      {"ranks", {2}},
                      {"total", nullptr},
                      {"worst", json::array()}}));

  const Document d = build_document(r, Extras{});
  const Table* table = nullptr;
  for (const Table& t : d.tables)
    if (t.id == "warnings") table = &t;
  REQUIRE(table);
  REQUIRE(table->rows.size() == 2);
  CHECK(table->rows[0] == std::vector<std::string>{"rank(s) 0, 1, 2", "30 " + kLate,
                                                   "total 41.5 over 3 rank(s); worst: rank 1: 30, rank 0: 10, rank 2: 1.5"});
  CHECK(table->rows[1] == std::vector<std::string>{"rank(s) 2", "plain text", ""});
  const std::string text = render_text(d);
  CHECK(text.find("rank(s) 2: plain text\n") != std::string::npos);
}
