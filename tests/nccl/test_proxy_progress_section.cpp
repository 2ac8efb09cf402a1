// The nccl module's data section (proxy_progress_section.h; docs/schema.md proxy_progress and
// proxy_steps): written only when present, read back field by field by the module's reader,
// through both documents, absent in older files, and refused with the field named when malformed.
#include <catch2/catch.hpp>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "traintime/core/rank_file_json.h"
#include "traintime/nccl/proxy_progress_section.h"

using nlohmann::json;
using namespace traintime::core;
using traintime::nccl::proxy_progress;
using traintime::nccl::ProxyProgress;
using traintime::nccl::ProxyProgressSection;

namespace {

RankFile written_rank_file() {
  RankFile f;
  f.job_id = "job-7";
  f.rank = 2;
  f.world_size = 4;
  f.snapshot = true;
  f.exit_reason = ExitReason::kSigterm;
  return f;
}

}  // namespace

TEST_CASE("proxy_progress round-trips, a figure not measured stays absent, and older files have none",
          "[rank_file][hang]") {
  RankFile f = written_rank_file();
  auto section = std::make_shared<ProxyProgressSection>();
  section->proxy_steps = "auto";
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
  section->rows = {sent, pxn};
  f.module_data["nccl"] = section;
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
  REQUIRE(proxy_progress(back) != nullptr);
  const std::vector<ProxyProgress>& rows = proxy_progress(back)->rows;
  REQUIRE(rows.size() == 2);
  const ProxyProgress& b = rows[0];
  CHECK(b.communicator == sent.communicator);
  CHECK(b.nccl_seq == 6);
  CHECK(b.op == CommOp::kAllReduce);
  CHECK((b.rank == 2 && b.channel == 3 && b.peer == 3));
  CHECK((b.direction == "send" && b.state == "send_wait" && b.source == "proxy_step"));
  CHECK((b.steps_total == 8 && b.steps_posted == 8 && b.steps_done == 2 && b.bytes_done == 131072));
  CHECK((b.since_ns == 123456789 && b.idle_ns == 2000000000));
  const ProxyProgress& p = rows[1];
  CHECK(p.pxn);
  CHECK(p.communicator.empty());
  CHECK(p.steps_done == ProxyProgress::kUnknown);
  CHECK(p.bytes_done == ProxyProgress::kUnknown);
  CHECK(p.op == CommOp::kUnknown);
  CHECK(proxy_progress(back)->proxy_steps == "auto");

  json old = j;
  old.erase("proxy_progress");
  old.erase("proxy_steps");
  const RankFile older = rank_file_from_json(old);
  CHECK(proxy_progress(older) == nullptr);
  json bad = j;
  bad["proxy_progress"][0].erase("channel");
  CHECK_THROWS_WITH(rank_file_from_json(bad), Catch::Contains("proxy_progress[0].channel"));
}

TEST_CASE("proxy_progress reads the same through the fast reader, and proxy_steps alone is a section",
          "[rank_file][hang]") {
  RankFile f = written_rank_file();
  auto section = std::make_shared<ProxyProgressSection>();
  section->proxy_steps = "on";
  ProxyProgress k;  // a kernel channel: no peer, no network steps
  k.communicator = "ffeeddccbbaa9988";
  k.nccl_seq = 3;
  k.op = CommOp::kAllGather;
  k.rank = 2;
  k.channel = 7;
  k.direction = "kernel";
  k.state = "running";
  k.source = "kernel_channel";
  k.since_ns = 5;
  k.idle_ns = 9;
  section->rows = {k};
  f.module_data["nccl"] = section;
  const std::string path = "/tmp/tt_proxy_progress_" + std::to_string(::getpid()) + ".json";
  std::remove(path.c_str());
  std::string error;
  REQUIRE(write_rank_file(path, f, &error));
  const std::optional<RankFile> fast = read_rank_file(path, &error);
  std::remove(path.c_str());
  REQUIRE(fast.has_value());
  REQUIRE(proxy_progress(*fast) != nullptr);
  CHECK(proxy_progress(*fast)->proxy_steps == "on");
  REQUIRE(proxy_progress(*fast)->rows.size() == 1);
  const ProxyProgress& r = proxy_progress(*fast)->rows[0];
  CHECK((r.communicator == k.communicator && r.nccl_seq == 3 && r.op == CommOp::kAllGather));
  CHECK((r.channel == 7 && r.peer == -1 && r.direction == "kernel" && r.source == "kernel_channel"));
  CHECK((r.steps_total == ProxyProgress::kUnknown && r.bytes_done == ProxyProgress::kUnknown));
  CHECK((r.since_ns == 5 && r.idle_ns == 9));

  // The plugin registered and nothing in flight: proxy_steps alone, no empty proxy_progress.
  section->rows.clear();
  const json j = rank_file_to_json(f);
  CHECK_FALSE(j.contains("proxy_progress"));
  CHECK(j.at("proxy_steps") == "on");
  const RankFile back = rank_file_from_json(j);
  REQUIRE(proxy_progress(back) != nullptr);
  CHECK(proxy_progress(back)->rows.empty());
  CHECK(proxy_progress(back)->proxy_steps == "on");
}
