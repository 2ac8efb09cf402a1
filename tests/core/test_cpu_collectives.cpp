// core::CpuCollectives (the collectives traintime.torch times on gloo and MPI groups) and how
// build_rank_file writes them: rows and communicators of their own, beside NCCL's, which do not
// change. Every expected number is worked out by hand from the inputs here.
#include <catch2/catch.hpp>

#include <string>

#include "traintime/core/cpu_collectives.h"
#include "traintime/core/rank_file_builder.h"
#include "traintime/core/rank_file_json.h"
#include <nlohmann/json.hpp>

using namespace traintime::core;

namespace {

CpuCollective allreduce(uint64_t seq, uint64_t start, uint64_t end, uint64_t bytes = 1000) {
  CpuCollective c;
  c.group = "00000000000000ab";
  c.backend = "gloo";
  c.group_size = 2;
  c.group_rank = 1;
  c.op = CommOp::kAllReduce;
  c.bytes = bytes;
  c.seq = seq;
  c.start_ns = start;
  c.end_ns = end;
  return c;
}

// An NCCL communicator of 4 ranks with two AllReduces of 1000 B and their GPU time: the
// GPU-shaped job whose figures the CPU collectives must leave as they are.
void nccl_job(GpuSummary& gpu, CommSummary& comm) {
  CommCallTable::CommSnapshot cs;
  cs.index = 0;
  cs.size = 4;
  cs.rank = 1;
  cs.stable_id = 0x1234;
  cs.ops_enqueued = 2;
  auto& op = cs.ops[static_cast<std::size_t>(CommOp::kAllReduce)];
  op.calls = 2;
  op.bytes = 2000;
  comm.calls.comms.push_back(cs);
  GpuSummary::Comm c;
  c.comm_index = 0;
  c.op = CommOp::kAllReduce;
  c.time.gpu_ns = 400;
  c.time.kernels = 2;
  gpu.comm.push_back(c);
  GpuSummary::Ring ring;
  ring.comm_index = 0;
  ring.ops_completed = 2;
  ring.recent = {{1, CommOp::kAllReduce, 1000, 10, 210}, {2, CommOp::kAllReduce, 1000, 300, 500}};
  gpu.rings.push_back(ring);
}

}  // namespace

TEST_CASE("CPU collectives keep per-op totals and a ring ordered by sequence number", "[cpu_collectives]") {
  CpuCollectives cc;
  cc.record(allreduce(2, 300, 350));  // completed before seq 1 (async work out of order)
  cc.record(allreduce(1, 100, 400));
  CpuCollective bcast = allreduce(3, 500, 510, 64);
  bcast.op = CommOp::kBroadcast;
  cc.record(bcast);
  const CpuCollectives::Summary s = cc.summary();
  REQUIRE(s.groups.size() == 1);
  const CpuCollectives::Group& g = s.groups[0];
  CHECK(g.id == "00000000000000ab");
  CHECK(g.backend == "gloo");
  CHECK((g.size == 2 && g.rank == 1));
  CHECK((g.ops_enqueued == 3 && g.ops_completed == 3));
  const auto& ar = g.ops[static_cast<std::size_t>(CommOp::kAllReduce)];
  CHECK((ar.calls == 2 && ar.bytes == 2000 && ar.cpu_ns == 300 + 50));
  REQUIRE(g.recent.size() == 3);
  CHECK((g.recent[0].seq == 1 && g.recent[0].gpu_start_ns == 100 && g.recent[0].gpu_end_ns == 400));
  CHECK((g.recent[1].seq == 2 && g.recent[2].seq == 3 && g.recent[2].op == CommOp::kBroadcast));
  CHECK(s.section.counters.counters.at("recorded") == 3);
  CHECK(s.section.counters.counters.at("dropped") == 0);
}

TEST_CASE("the ring keeps the newest collectives; malformed ones and groups beyond the cap are dropped",
          "[cpu_collectives]") {
  CpuCollectives cc;
  const uint64_t n = CpuCollectives::kRecent + 10;
  for (uint64_t k = 1; k <= n; ++k) cc.record(allreduce(k, k * 10, k * 10 + 5));
  cc.record(allreduce(0, 1, 2));      // no sequence number
  cc.record(allreduce(n + 1, 9, 3));  // ends before it starts
  for (std::size_t g = 0; g <= CpuCollectives::kMaxGroups; ++g) {
    CpuCollective c = allreduce(1, 0, 1);
    c.group = "group-" + std::to_string(g);
    cc.record(c);
  }
  const CpuCollectives::Summary s = cc.summary();
  REQUIRE(s.groups.size() == CpuCollectives::kMaxGroups);
  REQUIRE(s.groups[0].recent.size() == CpuCollectives::kRecent);
  CHECK(s.groups[0].recent.front().seq == 11);
  CHECK(s.groups[0].recent.back().seq == n);
  // 2 malformed, and 2 more groups than the 64 kept (the first group is not one of the named).
  CHECK(s.section.counters.counters.at("dropped") == 4);
  REQUIRE(s.section.warnings.size() == 1);
  CHECK(s.section.warnings[0].find("4 collective(s)") == 0);
}

TEST_CASE("a GPU-shaped job's comm figures do not change with CPU collectives beside them",
          "[cpu_collectives][builder]") {
  GpuSummary gpu;
  CommSummary comm;
  nccl_job(gpu, comm);
  const RankFile alone = build_rank_file({}, {}, gpu, comm);
  CpuCollectives cc;
  cc.record(allreduce(1, 100, 400));
  cc.record(allreduce(2, 500, 520));
  comm.cpu = cc.summary();
  const RankFile both = build_rank_file({}, {}, gpu, comm);

  REQUIRE(alone.comm.size() == 1);
  REQUIRE(both.comm.size() == 2);
  const CommRow& nccl = both.comm[0];
  CHECK(nccl.backend.empty());
  CHECK((nccl.calls == alone.comm[0].calls && nccl.bytes == alone.comm[0].bytes && nccl.gpu_ns == alone.comm[0].gpu_ns));
  CHECK(nccl.busbw_gbps == Approx(alone.comm[0].busbw_gbps));
  const CommRow& gloo = both.comm[1];
  CHECK((gloo.op == CommOp::kAllReduce && gloo.comm_size == 2 && gloo.backend == "gloo"));
  CHECK((gloo.calls == 2 && gloo.bytes == 2000 && gloo.cpu_ns == 300 + 20));
  CHECK((gloo.gpu_ns == 0 && gloo.algbw_gbps == 0 && gloo.busbw_gbps == 0));

  REQUIRE(both.communicators.size() == 2);
  const Communicator& nc = both.communicators[0];
  CHECK((!nc.cpu_clock && nc.id == alone.communicators[0].id && nc.recent.size() == 2));
  const Communicator& gc = both.communicators[1];
  CHECK((gc.cpu_clock && gc.backend == "gloo" && gc.id == "00000000000000ab" && gc.size == 2 && gc.rank == 1));
  CHECK((gc.ops_enqueued == 2 && gc.recent.size() == 2 && gc.recent[1].gpu_end_ns == 520));
  CHECK(both.modules.at("collectives").counters.at("recorded") == 2);
}

TEST_CASE("CPU collectives survive the rank file's JSON round trip; older files read without them",
          "[cpu_collectives][rank_file]") {
  GpuSummary gpu;
  CommSummary comm;
  nccl_job(gpu, comm);
  CpuCollectives cc;
  cc.record(allreduce(1, 100, 400));
  comm.cpu = cc.summary();
  const RankFile f = build_rank_file({}, {}, gpu, comm);
  const nlohmann::json j = rank_file_to_json(f);
  CHECK(j["comm"][1]["backend"] == "gloo");
  CHECK(j["comm"][1]["cpu_ns"] == 300);
  CHECK(!j["comm"][0].contains("backend"));
  CHECK(j["communicators"][1]["clock"] == "cpu");
  CHECK(!j["communicators"][0].contains("clock"));
  const std::optional<RankFile> back = rank_file_from_text("f", j.dump(), static_cast<ReadError*>(nullptr));
  REQUIRE(back.has_value());
  CHECK((back->comm[1].backend == "gloo" && back->comm[1].cpu_ns == 300 && back->comm[0].backend.empty()));
  CHECK((back->communicators[1].cpu_clock && back->communicators[1].backend == "gloo"));
  CHECK(!back->communicators[0].cpu_clock);
}
