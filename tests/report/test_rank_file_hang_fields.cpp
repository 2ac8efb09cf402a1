// The hang-forensics fields of the rank file (docs/schema.md: communicators[].in_flight and
// threads[]): written only when present, read back field by field, absent in older files, and
// refused with the field named when malformed.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "traintime/core/rank_file_json.h"
#include <nlohmann/json.hpp>

using nlohmann::json;
using namespace traintime::core;

namespace {

RankFile hung_rank_file() {
  RankFile f;
  f.job_id = "job-7";
  f.rank = 2;
  f.world_size = 4;
  f.snapshot = true;
  f.exit_reason = ExitReason::kSigterm;
  Communicator c;
  c.id = "00112233445566aa";
  c.size = 4;
  c.rank = 2;
  c.ops_enqueued = 42;
  c.ops_completed = 40;
  c.in_flight.push_back({41, CommOp::kAllReduce, 1u << 20});
  c.in_flight.push_back({42, CommOp::kBroadcast, 4096});
  f.communicators.push_back(c);
  Communicator idle = c;
  idle.id = "ffeeddccbbaa9988";
  idle.in_flight.clear();
  f.communicators.push_back(idle);
  f.threads.push_back({12345, 17, {"step", "step/backward"}});
  f.threads.push_back({12346, 17, {}});
  return f;
}

}  // namespace

TEST_CASE("in_flight and threads round-trip field by field", "[rank_file][hang]") {
  const RankFile f = hung_rank_file();
  const json j = rank_file_to_json(f);
  // The writer's spelling, checked by hand against docs/schema.md.
  REQUIRE(j.at("communicators").at(0).at("in_flight").size() == 2);
  CHECK(j["communicators"][0]["in_flight"][1] == json({{"seq", 42}, {"op", "Broadcast"}, {"bytes", 4096}}));
  CHECK(j.at("threads").at(0) ==
        json({{"tid", 12345}, {"step", 17}, {"open_regions", {"step", "step/backward"}}}));

  const RankFile back = rank_file_from_json(json::parse(j.dump()));
  REQUIRE(back.communicators.size() == 2);
  const Communicator& c = back.communicators[0];
  CHECK(c.ops_enqueued == 42);
  CHECK(c.ops_completed == 40);
  REQUIRE(c.in_flight.size() == 2);
  CHECK(c.in_flight[0].seq == 41);
  CHECK(c.in_flight[0].op == CommOp::kAllReduce);
  CHECK(c.in_flight[0].bytes == (1u << 20));
  CHECK(c.in_flight[1].seq == 42);
  CHECK(c.in_flight[1].op == CommOp::kBroadcast);
  CHECK(c.in_flight[1].bytes == 4096);
  CHECK(back.communicators[1].in_flight.empty());
  REQUIRE(back.threads.size() == 2);
  CHECK(back.threads[0].tid == 12345);
  CHECK(back.threads[0].step == 17);
  CHECK(back.threads[0].open_regions == std::vector<std::string>{"step", "step/backward"});
  CHECK(back.threads[1].tid == 12346);
  CHECK(back.threads[1].open_regions.empty());
  // And again through the writer: nothing lost on a second trip.
  CHECK(rank_file_to_json(back) == j);
}

TEST_CASE("empty in_flight and threads are omitted from the file", "[rank_file][hang]") {
  RankFile f = hung_rank_file();
  f.threads.clear();
  for (Communicator& c : f.communicators) c.in_flight.clear();
  const json j = rank_file_to_json(f);
  CHECK_FALSE(j.contains("threads"));
  CHECK_FALSE(j["communicators"][0].contains("in_flight"));
  CHECK_FALSE(j["communicators"][1].contains("in_flight"));
}

TEST_CASE("a file from an older writer, without the hang fields, reads them as empty",
          "[rank_file][hang]") {
  json j = rank_file_to_json(hung_rank_file());
  j.erase("threads");
  j["communicators"][0].erase("in_flight");
  const RankFile f = rank_file_from_json(j);
  CHECK(f.threads.empty());
  CHECK(f.communicators[0].in_flight.empty());
  CHECK(f.communicators[0].ops_enqueued == 42);
}

TEST_CASE("malformed hang fields are refused with the field path", "[rank_file][hang]") {
  const json good = rank_file_to_json(hung_rank_file());
  auto message = [](const json& j) {
    try {
      rank_file_from_json(j);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  json j = good;
  j["communicators"][0]["in_flight"][1].erase("seq");
  CHECK_THAT(message(j), Catch::Contains("communicators[0].in_flight[1].seq"));
  j = good;
  j["communicators"][0]["in_flight"] = "AllReduce";
  CHECK_THAT(message(j), Catch::Contains("communicators[0].in_flight") && Catch::Contains("array"));
  j = good;
  j["threads"][0]["open_regions"][1] = 7;
  CHECK_THAT(message(j), Catch::Contains("threads[0].open_regions[1]") && Catch::Contains("string"));
  j = good;
  j["threads"][1].erase("step");
  CHECK_THAT(message(j), Catch::Contains("threads[1].step"));
}

TEST_CASE("docs/schema.md documents the hang fields", "[rank_file][hang][doc]") {
  const std::filesystem::path doc = std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() /
                                    "docs" / "schema.md";
  std::ifstream in(doc);
  REQUIRE(in.good());
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* field : {"`in_flight`", "`threads`", "`tid`", "`step`", "`open_regions`", "no hang data",
                            "`proxy_progress`", "`proxy_steps`", "`steps_done`", "`bytes_done`", "`since_ns`",
                            "`pxn`"}) {
    INFO(field);
    CHECK(text.find(field) != std::string::npos);
  }
}
