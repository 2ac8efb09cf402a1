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

TEST_CASE("proxy_progress round-trips, a figure not measured stays absent, and older files have none",
          "[rank_file][hang]") {
  RankFile f = hung_rank_file();
  f.proxy_steps = "auto";
  ProxyProgress sent;
  sent.communicator = "00112233445566aa";
  sent.nccl_seq = 6;
  sent.op = CommOp::kAllReduce;
  sent.rank = 2;
  sent.channel = 3;
  sent.peer = 3;
  sent.direction = "send";
  sent.state = "send_wait";
  sent.source = "proxy_step";
  sent.steps_total = 8;
  sent.steps_posted = 8;
  sent.steps_done = 2;
  sent.bytes_done = 131072;
  sent.since_ns = 123456789;
  sent.idle_ns = 2000000000;
  ProxyProgress pxn;  // another process's op: no communicator, no steps (ProxyStep off)
  pxn.rank = 5;
  pxn.channel = 1;
  pxn.peer = 6;
  pxn.direction = "recv";
  pxn.state = "in_progress";
  pxn.source = "proxy_op";
  pxn.pxn = true;
  pxn.steps_total = 4;
  f.proxy_progress = {sent, pxn};
  const json j = rank_file_to_json(f);
  CHECK(j.at("proxy_steps") == "auto");
  REQUIRE(j.at("proxy_progress").size() == 2);
  CHECK(j["proxy_progress"][0].at("bytes_done") == 131072);
  CHECK(j["proxy_progress"][0].at("op") == "AllReduce");
  CHECK_FALSE(j["proxy_progress"][1].contains("steps_done"));  // n/a, never 0
  CHECK_FALSE(j["proxy_progress"][1].contains("bytes_done"));
  CHECK_FALSE(j["proxy_progress"][1].contains("op"));
  CHECK(j["proxy_progress"][1].at("pxn") == true);
  const RankFile back = rank_file_from_json(json::parse(j.dump()));
  REQUIRE(back.proxy_progress.size() == 2);
  const ProxyProgress& b = back.proxy_progress[0];
  CHECK(b.communicator == sent.communicator);
  CHECK(b.nccl_seq == 6);
  CHECK(b.op == CommOp::kAllReduce);
  CHECK((b.rank == 2 && b.channel == 3 && b.peer == 3));
  CHECK((b.direction == "send" && b.state == "send_wait" && b.source == "proxy_step"));
  CHECK((b.steps_total == 8 && b.steps_posted == 8 && b.steps_done == 2 && b.bytes_done == 131072));
  CHECK((b.since_ns == 123456789 && b.idle_ns == 2000000000));
  const ProxyProgress& p = back.proxy_progress[1];
  CHECK(p.pxn);
  CHECK(p.communicator.empty());
  CHECK(p.steps_done == ProxyProgress::kUnknown);
  CHECK(p.bytes_done == ProxyProgress::kUnknown);
  CHECK(p.op == CommOp::kUnknown);
  CHECK(back.proxy_steps == "auto");

  json old = j;
  old.erase("proxy_progress");
  old.erase("proxy_steps");
  const RankFile older = rank_file_from_json(old);
  CHECK(older.proxy_progress.empty());
  CHECK(older.proxy_steps.empty());
  json bad = j;
  bad["proxy_progress"][0].erase("channel");
  CHECK_THROWS_WITH(rank_file_from_json(bad), Catch::Contains("proxy_progress[0].channel"));
}
