// The library side of hang forensics (docs/schema.md): the ring of calls enqueued per
// communicator, what build_rank_file makes of it (communicators[].in_flight), and the per-thread
// rows (threads[]) the region registry publishes.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <string>
#include <vector>

#include "traintime/core/comm_stats.h"
#include "traintime/core/rank_file_builder.h"
#include "traintime/core/region_registry.h"

using namespace traintime::core;

TEST_CASE("each communicator keeps its last 16 calls enqueued, oldest first", "[hang]") {
  CommCallTable table;
  const uint32_t c = table.register_communicator(0xc0, 4, 1, 0xabc);
  for (uint64_t i = 1; i <= 20; ++i) {
    const uint64_t seq = table.next_seq(c);
    table.on_call(c, i % 2 ? CommOp::kAllReduce : CommOp::kAllGather, 100 * i, seq);
  }
  const auto snap = table.snapshot();
  const auto& recent = snap.comms.at(c).recent_enqueued;
  REQUIRE(recent.size() == CommCallTable::kEnqueuedRing);
  for (std::size_t k = 0; k < recent.size(); ++k) {
    const uint64_t seq = 5 + k;
    CHECK(recent[k].seq == seq);
    CHECK(recent[k].bytes == 100 * seq);
    CHECK(recent[k].op == (seq % 2 ? CommOp::kAllReduce : CommOp::kAllGather));
  }
  // A call with no sequence number (captured into a graph) does not enter the ring.
  table.on_call(c, CommOp::kBroadcast, 7, 0);
  CHECK(table.snapshot().comms.at(c).recent_enqueued.back().seq == 20);
}

TEST_CASE("in_flight lists what was enqueued and not completed, only when GPU capture ran", "[hang]") {
  CommSummary comm;
  CommCallTable table;
  const uint32_t c = table.register_communicator(0xc1, 2, 0, 0x77);
  for (uint64_t i = 1; i <= 9; ++i) table.on_call(c, CommOp::kAllReduce, 1024, table.next_seq(c));
  comm.calls = table.snapshot();
  GpuSummary gpu;
  gpu.capture = GpuCapture::kCupti;
  gpu.rings.push_back({c, 7, {}});
  const RankFile f = build_rank_file(Identity{}, CpuSummary{}, gpu, comm);
  REQUIRE(f.communicators.size() == 1);
  const Communicator& com = f.communicators[0];
  CHECK(com.ops_enqueued == 9);
  CHECK(com.ops_completed == 7);
  REQUIRE(com.in_flight.size() == 2);
  CHECK((com.in_flight[0].seq == 8 && com.in_flight[1].seq == 9));
  CHECK(com.in_flight[0].op == CommOp::kAllReduce);
  CHECK(com.in_flight[0].bytes == 1024);

  GpuSummary no_gpu;  // completion unknown: nothing is claimed to be in flight
  CHECK(build_rank_file(Identity{}, CpuSummary{}, no_gpu, comm).communicators.at(0).in_flight.empty());
}

TEST_CASE("every recording thread has a row with its tid, the step and its open regions", "[hang]") {
  RegionRegistry reg;
  ThreadState* ts = reg.thread_state();
  reg.push(ts, "step", kCategoryAuto, 0);
  reg.step(ts, 5, 0, 0);
  reg.step(ts, 6, 0, 0);
  reg.push(ts, "forward", kCategoryAuto, 10);
  reg.push(ts, "layer3", kCategoryAuto, 20);
  const CpuSummary s = reg.summary();
  REQUIRE(s.threads.size() == 1);
  CHECK(s.threads[0].tid == static_cast<uint64_t>(::gettid()));
  CHECK(s.threads[0].step == 2);
  CHECK(s.threads[0].open_regions ==
        std::vector<std::string>{"step", "step/forward", "step/forward/layer3"});
  reg.pop(ts, 30);
  reg.pop(ts, 40);
  reg.pop(ts, 50);
  CHECK(reg.summary().threads.at(0).open_regions.empty());
}
