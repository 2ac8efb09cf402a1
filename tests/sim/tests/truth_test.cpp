// SIMULATION tests of sim_train's truth arithmetic on a hand-worked example, so the expected
// numbers come from the definitions in tests/sim/README.md, not from the code under test.
#include <catch2/catch.hpp>

#include "truth.h"

using sim_train::Activity;
using sim_train::Cat;

namespace {
Activity act(Cat c, uint64_t s, uint64_t e, uint64_t step, int kind = 1) {
  Activity a;
  a.kind = kind;
  a.cat = c;
  a.start = s;
  a.end = e;
  a.step = step;
  a.path = c == Cat::kComm ? "" : "p";
  a.comm_op = c == Cat::kComm ? "AllReduce" : "";
  return a;
}
}  // namespace

TEST_CASE("union of intervals merges overlaps and touching ends, skips empty ones") {
  CHECK(sim_train::union_ns({}) == 0);
  CHECK(sim_train::union_ns({{0, 10}, {5, 15}, {15, 20}, {30, 30}, {40, 41}}) == 21);
  CHECK(sim_train::union_ns({{10, 20}, {0, 100}}) == 100);
}

TEST_CASE("step totals follow DESIGN section 4 on a hand-worked two-step example") {
  sim_train::TruthInput in;
  in.steps = 2;
  in.world_size = 2;
  // step 0: forward [0,10) and [5,15) on two streams, comm [12,20), io [25,30).
  in.activities = {act(Cat::kForward, 0, 10, 0), act(Cat::kForward, 5, 15, 0), act(Cat::kComm, 12, 20, 0),
                   act(Cat::kIo, 25, 30, 0, 2),
                   // step 1: backward [100,110), comm [105,108) fully hidden.
                   act(Cat::kBackward, 100, 110, 1), act(Cat::kComm, 105, 108, 1)};
  in.comm_calls = {{"AllReduce", 2, 64}, {"AllReduce", 2, 64}};
  const auto t = sim_train::compute_truth(in);
  const auto& tot = t["steps"]["totals"];
  // step 0: busy 20 + 5 = 25; compute 15; comm 8; overlap [12,15) = 3; exposed 5; io 5; span 30 -> idle 5
  // step 1: busy 10; compute 10; comm 3; overlap 3; exposed 0; io 0; span 10 -> idle 0
  CHECK(tot["gpu_busy_ns"] == 35);
  CHECK(tot["compute_ns"] == 25);
  CHECK(tot["comm_ns"] == 11);
  CHECK(tot["comm_overlapped_ns"] == 6);
  CHECK(tot["exposed_comm_ns"] == 5);
  CHECK(tot["io_ns"] == 5);
  CHECK(tot["idle_ns"] == 5);
  CHECK(t["steps"]["count"] == 2);
  CHECK(t["steps"]["partial_final_step"] == false);
  CHECK(t["categories"]["forward"]["gpu_busy_ns"] == 15);
  CHECK(t["categories"]["forward"]["gpu_sum_ns"] == 20);
  CHECK(t["categories"]["forward"]["count"] == 2);
  CHECK(t["categories"]["comm"]["gpu_sum_ns"] == 11);
  CHECK(t["comm"].size() == 1);
  CHECK(t["comm"][0]["calls"] == 2);
  CHECK(t["comm"][0]["bytes"] == 128);
  CHECK(t["comm"][0]["gpu_ns"] == 11);
}

TEST_CASE("category busy time is a union per step, summed over steps") {
  sim_train::TruthInput in;
  in.steps = 2;
  // The same interval in two steps counts twice; overlapping ones within a step once.
  in.activities = {act(Cat::kOptimizer, 0, 10, 0), act(Cat::kOptimizer, 0, 10, 1), act(Cat::kOptimizer, 5, 10, 1)};
  const auto t = sim_train::compute_truth(in);
  CHECK(t["categories"]["optimizer"]["gpu_busy_ns"] == 20);
  CHECK(t["categories"]["optimizer"]["gpu_sum_ns"] == 25);
}

TEST_CASE("work launched after the last step marker forms a flagged partial step") {
  sim_train::TruthInput in;
  in.steps = 1;
  in.activities = {act(Cat::kForward, 0, 10, 0), act(Cat::kForward, 20, 30, 1)};
  const auto t = sim_train::compute_truth(in);
  CHECK(t["steps"]["partial_final_step"] == true);
  CHECK(t["steps"]["totals"]["gpu_busy_ns"] == 20);
  CHECK(t["steps"]["totals"]["idle_ns"] == 0);
}

TEST_CASE("device memory truth: per-step peak and end-of-step use, carried across steps") {
  using sim_train::MemoryOp;
  // Step 0: +100 +50 -100 (peak 150, ends 50); step 1: nothing (peak = in use = 50);
  // step 2: +30 -50 +10 (peak 80, ends 40); after the last marker (step 3): -30 -10.
  const std::vector<MemoryOp> ops = {{0, 100}, {0, 50}, {0, -100}, {2, 30}, {2, -50},
                                     {2, 10},  {3, -30}, {3, -10}};
  const nlohmann::json m = sim_train::memory_truth(ops, 3);
  CHECK(m["peak_bytes"] == 150);
  CHECK(m["in_use_bytes"] == 0);
  REQUIRE(m["by_step"].size() == 3);
  CHECK(m["by_step"][0] == nlohmann::json({{"index", 0}, {"peak_bytes", 150}, {"in_use_bytes", 50}}));
  CHECK(m["by_step"][1] == nlohmann::json({{"index", 1}, {"peak_bytes", 50}, {"in_use_bytes", 50}}));
  CHECK(m["by_step"][2] == nlohmann::json({{"index", 2}, {"peak_bytes", 80}, {"in_use_bytes", 40}}));
}
