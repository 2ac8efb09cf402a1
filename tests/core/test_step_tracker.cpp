#include <catch2/catch.hpp>

#include "traintime/core/region_registry.h"
#include "traintime/core/step_tracker.h"

using namespace traintime::core;

TEST_CASE("step wall times run between tt_step calls, the first from the origin", "[steps]") {
  StepTracker st(0);
  st.set_origin(1000);
  st.set_origin(5000);  // only the first origin counts
  st.step(1100, 0, 0);  // 100
  st.step(1300, 0, 0);  // 200
  st.step(1600, 0, 0);  // 300
  const Steps s = st.summary();
  CHECK(s.count == 3);
  CHECK(s.warmup == 0);
  CHECK(s.wall_ns.count == 3);
  CHECK(s.wall_ns.total_ns == 600);
  CHECK(s.wall_ns.mean_ns == 200);
  CHECK(s.wall_ns.min_ns == 100);
  CHECK(s.wall_ns.max_ns == 300);
  CHECK(s.wall_ns.p50_ns == 200);
  CHECK(s.wall_ns.p90_ns == 300);
}

TEST_CASE("without an origin the first step has zero wall time", "[steps]") {
  StepTracker st(0);
  st.step(777, 0, 0);
  st.step(800, 0, 0);
  const Steps s = st.summary();
  CHECK(s.wall_ns.min_ns == 0);
  CHECK(s.wall_ns.max_ns == 23);
}

TEST_CASE("warm-up steps are counted but skipped by statistics and throughput", "[steps]") {
  StepTracker st(2);
  st.set_origin(0);
  // Two slow warm-up steps (1 s each), then three steps of 0.5 s with 10 samples, 100 tokens.
  st.step(1'000'000'000, 999, 9999);
  st.step(2'000'000'000, 999, 9999);
  st.step(2'500'000'000, 10, 100);
  st.step(3'000'000'000, 10, 100);
  st.step(3'500'000'000, 10, 100);
  const Steps s = st.summary();
  CHECK(s.count == 5);
  CHECK(s.warmup == 2);
  CHECK(s.samples == 2028);
  CHECK(s.tokens == 20298);
  CHECK(s.wall_ns.count == 3);
  CHECK(s.wall_ns.mean_ns == 500'000'000);
  CHECK(s.wall_ns.max_ns == 500'000'000);
  CHECK(s.samples_per_s == Approx(20.0));
  CHECK(s.tokens_per_s == Approx(200.0));
}

TEST_CASE("fewer steps than the warm-up give zero statistics, not garbage", "[steps]") {
  StepTracker st(2);
  st.set_origin(0);
  st.step(10, 5, 5);
  const Steps s = st.summary();
  CHECK(s.count == 1);
  CHECK(s.wall_ns.count == 0);
  CHECK(s.wall_ns.mean_ns == 0);
  CHECK(s.samples_per_s == 0.0);
}

TEST_CASE("percentiles use the nearest rank", "[steps]") {
  std::vector<uint64_t> v;
  for (uint64_t i = 1; i <= 10; ++i) v.push_back(i * 10);  // 10..100, shuffled below
  std::swap(v[0], v[9]);
  std::swap(v[3], v[6]);
  const DurationStats d = duration_stats(v);
  CHECK(d.count == 10);
  CHECK(d.p50_ns == 50);
  CHECK(d.p90_ns == 90);
  CHECK(d.max_ns == 100);
  CHECK(d.min_ns == 10);
  CHECK(d.mean_ns == 55);
  CHECK(duration_stats({}).count == 0);
  CHECK(duration_stats({7}).p90_ns == 7);
}

TEST_CASE("long runs keep exact mean and max with bounded memory", "[steps]") {
  StepTracker st(0);
  st.set_origin(0);
  const uint64_t n = StepTracker::kMaxWallSamples + 1000;
  uint64_t t = 0;
  for (uint64_t i = 0; i < n; ++i) {
    t += (i == n - 1) ? 1000 : 10;  // the very last step is the slowest
    st.step(t, 1, 0);
  }
  const Steps s = st.summary();
  CHECK(s.count == n);
  CHECK(s.wall_ns.count == n);
  CHECK(s.wall_ns.max_ns == 1000);
  CHECK(s.wall_ns.total_ns == (n - 1) * 10 + 1000);
  CHECK(s.wall_ns.p50_ns == 10);
}

TEST_CASE("the registry counts steps for the launch context and uses its warm-up", "[steps]") {
  RegionRegistry reg(CategoryRules::defaults(), 1);
  ThreadState* ts = reg.thread_state();
  reg.steps().set_origin(0);
  reg.step(ts, 10, 1, 0);
  reg.step(ts, 30, 1, 0);
  CHECK(reg.launch_context(ts).step == 2);
  const Steps s = reg.steps().summary();
  CHECK(s.warmup == 1);
  CHECK(s.wall_ns.count == 1);
  CHECK(s.wall_ns.mean_ns == 20);
}

TEST_CASE("the wall time of each of the last detail steps is kept by step index", "[steps]") {
  StepTracker st(0, 3);
  st.set_origin(1000);
  const uint64_t ends[] = {1100, 1300, 1600, 2000, 2500};  // walls 100, 200, 300, 400, 500
  for (uint64_t t : ends) st.step(t, 0, 0);
  const Steps s = st.summary();
  REQUIRE(s.detail.size() == 3);  // steps 2, 3, 4: the most recent three, oldest first
  CHECK(s.detail[0].index == 2);
  CHECK(s.detail[0].wall_ns == 300);
  CHECK(s.detail[1].index == 3);
  CHECK(s.detail[1].wall_ns == 400);
  CHECK(s.detail[2].index == 4);
  CHECK(s.detail[2].wall_ns == 500);

  StepTracker few(0, 3);  // fewer steps than kept: all of them
  few.set_origin(0);
  few.step(50, 0, 0);
  const Steps f = few.summary();
  REQUIRE(f.detail.size() == 1);
  CHECK(f.detail[0].index == 0);
  CHECK(f.detail[0].wall_ns == 50);

  StepTracker none(0, 0);  // TRAINTIME_STEP_DETAIL=0: no rows
  none.step(10, 0, 0);
  CHECK(none.summary().detail.empty());
}

namespace {
LiveSteps g_sunk{};
int g_sinks = 0;
void sink(const LiveSteps& s) noexcept {
  g_sunk = s;
  ++g_sinks;
}
}  // namespace

TEST_CASE("every step hands its cumulative counters to the sink, as the summary has them", "[steps]") {
  StepTracker st(1);
  st.set_origin(1000);
  st.step(1100, 4, 40);  // warm-up
  st.set_sink(sink);
  g_sinks = 0;
  st.step(1300, 4, 40);  // 200
  st.step(1600, 4, 40);  // 300
  CHECK(g_sinks == 2);
  const Steps s = st.summary();
  CHECK(g_sunk.count == s.count);
  CHECK(g_sunk.count == 3);
  CHECK(g_sunk.samples == 12);
  CHECK(g_sunk.tokens == 120);
  CHECK(g_sunk.measured == s.wall_ns.count);
  CHECK(g_sunk.measured_wall_ns == s.wall_ns.total_ns);
  CHECK(g_sunk.min_wall_ns == 200);
  CHECK(g_sunk.max_wall_ns == 300);
  CHECK(g_sunk.measured_samples == 8);
  CHECK(g_sunk.measured_tokens == 80);
  st.set_sink(nullptr);
  st.step(1700, 0, 0);
  CHECK(g_sinks == 2);
}

// The figures of the two-figure entry (tt_api_v1.step_memory): per-step peaks.
static TorchMemory peaks(uint64_t allocated, uint64_t reserved) {
  TorchMemory m;
  m.allocated_peak_bytes = allocated;
  m.reserved_peak_bytes = reserved;
  return m;
}

TEST_CASE("PyTorch's allocator figures go to the step in progress, the latest call of it", "[steps][memory]") {
  StepTracker t(0, 2);  // two detail rows kept
  t.set_origin(0);
  t.set_torch_memory(peaks(100, 200));
  t.step(10, 1, 1);            // step 0: 100 / 200
  t.step(20, 1, 1);            // step 1: no call
  t.set_torch_memory(peaks(300, 400));
  t.set_torch_memory(peaks(350, 450));  // replaces the call before, same step
  t.step(30, 1, 1);            // step 2: 350 / 450 (step 0's row has left the ring)
  const Steps s = t.summary();
  REQUIRE(s.detail.size() == 2);
  CHECK(s.detail[0].index == 1);
  CHECK_FALSE(s.detail[0].torch_memory.present);
  CHECK(s.detail[1].index == 2);
  CHECK(s.detail[1].torch_memory.present);
  CHECK(s.detail[1].torch_memory.allocated_peak_bytes == 350);
  CHECK(s.detail[1].torch_memory.reserved_peak_bytes == 450);
  CHECK(s.detail[1].torch_memory.peaks_per_step);  // the two-figure call: per-step peaks
  CHECK_FALSE(s.detail[1].torch_memory.has_current);
}

TEST_CASE("PyTorch's figures with the step-end values and peaks that run from the start", "[steps][memory]") {
  StepTracker t(0, 4);
  t.set_origin(0);
  TorchMemory m;
  m.allocated_peak_bytes = 900;
  m.reserved_peak_bytes = 2048;
  m.peaks_per_step = false;
  m.has_current = true;
  m.allocated_bytes = 300;
  m.reserved_bytes = 1024;
  t.set_torch_memory(m);
  t.step(10, 1, 1);
  const Steps s = t.summary();
  REQUIRE(s.detail.size() == 1);
  const TorchMemory& got = s.detail[0].torch_memory;
  CHECK(got.present);  // set by the call, whatever the caller's flag said
  CHECK_FALSE(got.peaks_per_step);
  CHECK(got.has_current);
  CHECK(got.allocated_bytes == 300);
  CHECK(got.reserved_bytes == 1024);
  CHECK(got.allocated_peak_bytes == 900);
}
