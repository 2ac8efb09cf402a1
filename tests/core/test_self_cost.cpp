// core/self_cost.h: which calls are timed, the sums a timed call adds to, the estimate made from
// them, and the rank file's self_cost as build_rank_file puts it together.
#include <catch2/catch.hpp>

#include <cmath>
#include <thread>
#include <vector>

#include "traintime/core/fast_clock.h"
#include "traintime/core/rank_file_builder.h"
#include "traintime/core/self_cost.h"

using namespace traintime::core;

TEST_CASE("a thread's kCostPhase-th call is timed, then one in every", "[self_cost]") {
  std::vector<uint64_t> timed;
  for (uint64_t call = 1; call <= 3000; ++call)
    if (cost_timed(call)) timed.push_back(call);
  CHECK(timed == std::vector<uint64_t>{kCostPhase, kCostPhase + kCostEvery, kCostPhase + 2 * kCostEvery});
  timed.clear();
  for (uint64_t call = 1; call <= 200; ++call)
    if (cost_timed(call, 64)) timed.push_back(call);
  CHECK(timed == std::vector<uint64_t>{16, 80, 144});
  // Every call when every is 1.
  CHECK(cost_timed(1, 1));
  CHECK(cost_timed(2, 1));
}

TEST_CASE("the estimate is calls x the mean timed call, less the readings' cost", "[self_cost]") {
  CostSums sums;
  for (uint64_t ticks : {120, 140, 100}) sums.add(ticks, 1, 1'000'000);
  const CostSums::Totals t = sums.totals();
  CHECK(t.samples == 3);
  CHECK(t.ticks == 360);
  CHECK(t.pairs == 3);
  // Own times 100, 120, 80 ticks (pair cost 20): mean 100 ticks = 50 ns at 0.5 ns a tick.
  const CallbackCost row = cost_row("launch callbacks", 1000, 1024, t, 20, 0.5);
  CHECK(row.what == "launch callbacks");
  CHECK(row.calls == 1000);
  CHECK(row.sampled_every == 1024);
  CHECK(row.samples == 3);
  CHECK(row.estimated);
  CHECK(row.measured);
  CHECK(row.estimated_ns == 50000);
  // Standard deviation 20 ticks: standard error 20 / sqrt(3) ticks a call, x 1000 calls x 0.5 ns.
  CHECK(row.spread_ns == static_cast<uint64_t>(std::llround(1000 * 20 / std::sqrt(3.0) * 0.5)));
}

TEST_CASE("a sample of several pairs of readings takes off each pair's cost", "[self_cost]") {
  CostSums sums;
  sums.add(400, 4, 1'000'000);  // a launch's four callbacks, timed one by one
  sums.add(480, 4, 1'000'000);
  const CallbackCost row = cost_row("launch callbacks", 10, 256, sums.totals(), 25, 1.0);
  // Own times 300 and 380: mean 340 ticks a launch.
  CHECK(row.estimated_ns == 3400);
  CHECK(row.spread_ns > 0);
}

TEST_CASE("a timed call longer than the interruption limit is counted, not averaged", "[self_cost]") {
  CostSums sums;
  sums.add(100, 1, 1000);
  sums.add(5'000'000, 1, 1000);  // the thread was preempted between the readings
  const CostSums::Totals t = sums.totals();
  CHECK(t.samples == 1);
  CHECK(t.interrupted == 1);
  const CallbackCost row = cost_row("annotations", 2048, 1024, t, 0, 1.0);
  CHECK(row.interrupted == 1);
  CHECK(row.estimated_ns == 2048 * 100);
  // One sample has no spread of its own: the estimate is its own uncertainty.
  CHECK(row.spread_ns == row.estimated_ns);
}

TEST_CASE("calls with no timed call are not measured; no calls measure 0", "[self_cost]") {
  const CallbackCost none = cost_row("NCCL wrappers", 0, 64, CostSums().totals(), 0, 1.0);
  CHECK(none.measured);
  CHECK(none.estimated_ns == 0);
  const CallbackCost unmeasured = cost_row("NCCL wrappers", 12, 64, CostSums().totals(), 0, 1.0);
  CHECK_FALSE(unmeasured.measured);
  CHECK(unmeasured.calls == 12);
}

TEST_CASE("every call timed: the total is the sum, not an estimate", "[self_cost]") {
  CostSums sums;
  sums.add(1000, 1, 1'000'000);
  sums.add(3000, 1, 1'000'000);
  const CallbackCost row = cost_row("buffer callbacks", 2, 1, sums.totals(), 10, 2.0);
  CHECK_FALSE(row.estimated);
  CHECK(row.estimated_ns == (990 + 2990) * 2);
  CHECK(row.spread_ns == 0);
  const CallbackCost flush = exact_row("flushes", 3, 7000);
  CHECK_FALSE(flush.estimated);
  CHECK(flush.samples == 3);
  CHECK(flush.estimated_ns == 7000);
}

TEST_CASE("so_far is the timed calls and their own time, readings' cost off", "[self_cost]") {
  CostSums sums;
  sums.add(50, 1, 1'000'000);
  sums.add(70, 1, 1'000'000);
  CHECK(sums.so_far(10).samples == 2);
  CHECK(sums.so_far(10).own_ticks == 120 - 20);
  CHECK(sums.so_far(100).own_ticks == 0);  // never below 0
  sums.reset();
  CHECK(sums.so_far(0).samples == 0);
  CHECK(sums.so_far(0).own_ticks == 0);
}

// self_cost.pct's window (steps_callbacks_ns) and the row (callbacks_ns) are one estimator, so
// the window is never more than the row. A path called 20 times on each of 8 threads has one
// timed call per thread (its kCostPhase-th): the row is 160 calls x the mean timed call; the
// timed calls are not each 1024 calls' worth.
TEST_CASE("a window's share of a sampled path is the row's estimator, never above the row", "[self_cost]") {
  CostSums sums;
  const uint64_t pair = 10;
  const CostSums::SoFar warm = sums.so_far(pair);
  for (int thread = 0; thread < 8; ++thread) sums.add(110, 1, 1'000'000);  // 100 ticks each, own
  const CostSums::SoFar last = sums.so_far(pair);
  const uint64_t calls = 8 * 20;
  const CallbackCost row = cost_row("NCCL wrappers", calls, kCostEvery, sums.totals(), pair, 1.0);
  CHECK(row.estimated_ns == calls * 100);
  const uint64_t window = window_ticks(calls, last.samples, warm.own_ticks, last.own_ticks);
  CHECK(window == calls * 100);
  CHECK(window <= row.estimated_ns);

  // Timed calls after the newest mark (the run went on past the last step): the window holds
  // the calls its timed calls stand for, the row all of them.
  sums.add(210, 1, 1'000'000);
  const CostSums::SoFar end = sums.so_far(pair);
  const CallbackCost final_row = cost_row("NCCL wrappers", calls + 1024, kCostEvery, sums.totals(), pair, 1.0);
  const uint64_t w = window_ticks(calls + 1024, end.samples, warm.own_ticks, last.own_ticks);
  CHECK(w == static_cast<uint64_t>(std::llround((calls + 1024) * 800.0 / 9)));
  CHECK(w < final_row.estimated_ns);
  CHECK(final_row.estimated_ns == static_cast<uint64_t>(std::llround((calls + 1024) * 1000.0 / 9)));

  CHECK(window_ticks(calls, 0, 0, 0) == 0);  // no timed call: nothing to share
  CHECK(window_ticks(calls, 3, 500, 400) == 0);  // marks out of order (a torn read): 0, not a wrap
}

TEST_CASE("timed calls from many threads add up", "[self_cost]") {
  CostSums sums;
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) sums.add(10, 1, 1'000'000);
    });
  for (std::thread& t : threads) t.join();
  const CostSums::Totals t = sums.totals();
  CHECK(t.samples == 40000);
  CHECK(t.ticks == 400000);
  CHECK(t.ticks_squared == 40000 * 100.0);
}

TEST_CASE("the readings' own cost is measured once and is a few ticks", "[self_cost]") {
  FastClock clock;
  const uint64_t c = clock.pair_ticks();
  CHECK(c >= 1);
  CHECK(clock.pair_ticks() == c);  // kept
  // Far below the interruption limit on any machine (a pair of clock readings).
  CHECK(c < clock.ticks_for_ns(kInterruptedNs));
}

TEST_CASE("build_rank_file gathers every section's rows and shares them over the measured steps",
          "[self_cost][builder]") {
  Identity id;
  id.cost.present = true;
  id.cost.threads = {{"tt-cupti", 5000}, {"tt-hang", 70}};
  id.cost.written_bytes = 4096;
  id.cost.steps_callbacks_ns = 2'000'000;
  CpuSummary cpu;
  cpu.steps.count = 12;
  cpu.steps.warmup = 2;
  cpu.steps.wall_ns.count = 10;
  cpu.steps.wall_ns.total_ns = 400'000'000;
  cpu.section.cost(exact_row("annotations", 5, 500));
  cpu.section.own_memory("thread states", 20000);
  GpuSummary gpu;
  CallbackCost launch = exact_row("launch callbacks", 100, 3'000'000);
  gpu.section.cost(launch);
  CallbackCost unmeasured;
  unmeasured.what = "buffer callbacks";
  unmeasured.calls = 2;
  unmeasured.measured = false;
  unmeasured.estimated_ns = 99;  // not counted: not measured
  gpu.section.cost(unmeasured);
  gpu.section.own_memory("activity buffers", 1'000'000);
  const RankFile f = build_rank_file(id, cpu, gpu, CommSummary());
  const SelfCost& c = f.self_cost;
  REQUIRE(c.present);
  CHECK(c.threads.size() == 2);
  CHECK(c.written_bytes == 4096);
  REQUIRE(c.callbacks.size() == 3);
  CHECK(c.callbacks[0].module == "annotations");
  CHECK(c.callbacks[1].module == "cupti");
  CHECK(c.callbacks[1].what == "launch callbacks");
  CHECK(c.callbacks_ns == 3'000'500);
  REQUIRE(c.memory.size() == 2);
  CHECK(c.memory[1].module == "cupti");
  CHECK(c.peak_bytes == 1'020'000);
  CHECK(c.has_pct);
  CHECK(c.steps_wall_ns == 400'000'000);
  CHECK(c.steps_callbacks_ns == 2'000'000);
  CHECK(c.pct == Approx(0.5));
}

TEST_CASE("no step after warm-up: pct is n/a, and a file without the process's figures has no self_cost",
          "[self_cost][builder]") {
  Identity id;
  id.cost.present = true;
  CpuSummary cpu;
  cpu.steps.count = 2;
  cpu.steps.warmup = 2;
  const RankFile f = build_rank_file(id, cpu, GpuSummary(), CommSummary());
  CHECK(f.self_cost.present);
  CHECK_FALSE(f.self_cost.has_pct);
  CHECK_FALSE(build_rank_file(Identity(), cpu, GpuSummary(), CommSummary()).self_cost.present);
}
