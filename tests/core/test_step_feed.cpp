// The step feed (core/step_feed.h): a job with no marker gets, from the aggregator, the same
// per-step figures as the same job with tt_step called at each step's end; records arriving out
// of launch order, markers appearing later, and the window's bound.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "traintime/core/gpu_aggregator.h"
#include "traintime/core/step_feed.h"

using namespace traintime::core;

namespace {

struct Rec {
  GpuActivity a;
  LaunchContext ctx;  // ctx.step: the true step (what tt_step at each step's end would give)
  std::string name;
};

// A training loop: `warmup` set-up kernels, then `steps` steps of forward kernels, backward
// kernels, two AllReduce buckets and an optimizer kernel; correlation ids 2 apart (the runtime
// API record takes one too), GPU work back to back on one stream.
std::vector<Rec> training(int steps, int layers, int warmup = 0) {
  std::vector<Rec> out;
  uint32_t corr = 10;
  uint64_t t = 1000;
  uint64_t seq = 0;  // the communicator's sequence number (NCCL wrappers: 1-based)
  auto add = [&](const std::string& name, uint32_t step, CommOp op = CommOp::kNone, uint64_t bytes = 0) {
    Rec r;
    r.name = name;
    r.a.kind = ActivityKind::kKernel;
    r.a.correlation_id = corr;
    corr += 2;
    r.a.start_ns = t;
    r.a.end_ns = t + 100 + 7 * (corr % 5);
    t = r.a.end_ns + 20;
    r.ctx.step = step;
    r.ctx.comm.op = op;
    r.ctx.comm.comm_id = op == CommOp::kNone ? 0 : 1;
    r.ctx.comm.seq = op == CommOp::kNone ? 0 : ++seq;
    r.ctx.comm.bytes = bytes;
    out.push_back(r);
  };
  for (int i = 0; i < warmup; ++i) add("setup_" + std::to_string(i), 0);
  for (int s = 0; s < steps; ++s) {
    const auto step = static_cast<uint32_t>(s);
    for (int l = 0; l < layers; ++l) add("fwd_gemm", step), add("fwd_act_" + std::to_string(l % 3), step);
    for (int l = layers; l-- > 0;) {
      add("bwd_gemm", step), add("bwd_act_" + std::to_string(l % 3), step);
      if (l == layers / 2 || l == 0) add("ncclDevKernel_AllReduce_Sum_f32_RING_LL", step, CommOp::kAllReduce, 4096u * (l + 1));
    }
    add("adam_step", step);
    t += 5000;  // the host prepares the next batch
  }
  for (Rec& r : out) r.a.name = r.name;
  return out;
}

// n kernels that never repeat twice in a row: kernel i is named "k" + name_of(i).
template <typename NameOf>
std::vector<Rec> unrepeated(uint32_t n, NameOf name_of) {
  std::vector<Rec> recs(n);
  for (uint32_t i = 0; i < n; ++i) {
    recs[i].name = "k" + std::to_string(name_of(i));
    recs[i].a.correlation_id = 10 + i;
    recs[i].a.start_ns = 100 * i;
    recs[i].a.end_ns = 100 * i + 50;
  }
  for (Rec& r : recs) r.a.name = r.name;
  return recs;
}

// Feeds the records as CUPTI might deliver them: in buffers of `buffer` records, the buffers
// in shuffled order within groups of four, settling after each buffer.
void feed_all(StepFeed& feed, const std::vector<Rec>& recs, bool marker, std::size_t buffer = 64, unsigned seed = 1) {
  std::vector<std::size_t> order;
  for (std::size_t b = 0; b * buffer < recs.size(); ++b) order.push_back(b);
  std::mt19937 rng(seed);
  for (std::size_t g = 0; g < order.size(); g += 4)
    std::shuffle(order.begin() + static_cast<std::ptrdiff_t>(g),
                 order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), g + 4)), rng);
  for (std::size_t b : order) {
    for (std::size_t i = b * buffer; i < std::min(recs.size(), (b + 1) * buffer); ++i) {
      LaunchContext ctx = recs[i].ctx;
      if (!marker) ctx.step = 0;
      feed.ingest(recs[i].a, ctx, Category::kOther);
    }
    feed.settle();
  }
  feed.finish();
}

bool same_totals(const StepTotals& x, const StepTotals& y) {
  return x.gpu_busy_ns == y.gpu_busy_ns && x.compute_ns == y.compute_ns && x.comm_ns == y.comm_ns &&
         x.exposed_comm_ns == y.exposed_comm_ns && x.idle_ns == y.idle_ns && x.gpu_sum_ns == y.gpu_sum_ns;
}

StepFeedOptions small_window() {
  StepFeedOptions o;
  o.settle_lag = 1024;  // the shuffled buffers reach ~400 ids back
  o.detector.min_evidence = 64;
  o.detector.min_repeats = 3;
  return o;
}

}  // namespace

TEST_CASE("a job with no marker gets the steps and figures tt_step at each step's end gives", "[step_feed]") {
  const auto recs = training(12, 6, 5);
  GpuAggregator truth_agg;
  for (const Rec& r : recs) {
    LaunchContext ctx = r.ctx;
    ctx.step = r.ctx.step;
    truth_agg.ingest(r.a, ctx, Category::kOther);
  }
  const GpuSummary truth = truth_agg.summary(12);

  GpuAggregator agg;
  StepFeed feed(agg, small_window());
  feed_all(feed, recs, false);
  CHECK(feed.held() == 0);
  CHECK(feed.steps_completed(0) == 12);
  const GpuSummary got = agg.summary(feed.steps_completed(0));
  REQUIRE(got.detail.size() == truth.detail.size());
  for (std::size_t i = 0; i < truth.detail.size(); ++i) {
    INFO("step " << i);
    CHECK(got.detail[i].index == truth.detail[i].index);
    CHECK(got.detail[i].span_ns == truth.detail[i].span_ns);
    CHECK(same_totals(got.detail[i].totals, truth.detail[i].totals));
  }
  CHECK(same_totals(got.totals, truth.totals));
  CHECK_FALSE(got.partial_final_step);
  const StepsOrigin origin = feed.origin();
  CHECK(origin.source == "detected");
  const StepDetection& o = origin.detection;
  CHECK(o.present);
  CHECK(o.steps == 12);
  CHECK(o.period_calls == 6 * 4 + 2 + 1);
  CHECK(o.warmup_launches == 5);
  CHECK(o.period_ns > 0);
  CHECK(o.coverage > 0.9);
  CHECK(o.late_launches == 0);
}

TEST_CASE("a marker that appears later decides the steps from there on", "[step_feed]") {
  // 8 unmarked steps (long enough for a mid-run lock), then the program starts calling tt_step:
  // its marker step m is step 8 + m.
  auto recs = training(14, 6);
  for (Rec& r : recs) r.ctx.step = r.ctx.step < 8 ? 0 : r.ctx.step - 7;
  GpuAggregator agg;
  StepFeedOptions o = small_window();
  o.settle_lag = 8;
  StepFeed feed(agg, o);
  for (const Rec& r : recs) {
    feed.ingest(r.a, r.ctx, Category::kOther);
    feed.settle();
  }
  feed.finish();
  const uint64_t marker_steps = 6;  // tt_step calls: at the end of steps 7 .. 12
  const StepsOrigin origin = feed.origin();
  CHECK(origin.source == "marker");
  CHECK(origin.detection.steps == 7);
  CHECK(origin.detection.marker_from_step == 7);  // the 8th ends at the first marker
  CHECK(feed.marker_offset() == 7);  // the live metrics' step of marker step m: 7 + m
  CHECK(feed.steps_completed(marker_steps) == 7 + marker_steps);
  const GpuSummary got = agg.summary(feed.steps_completed(marker_steps));
  REQUIRE(got.detail.size() == 14);
  for (std::size_t i = 0; i < got.detail.size(); ++i) CHECK(got.detail[i].index == i);
  CHECK(got.partial_final_step);  // step 13: after the last tt_step
}

TEST_CASE("a job marked from its start is numbered by its marker alone", "[step_feed]") {
  const auto recs = training(6, 4);
  GpuAggregator agg;
  StepFeed feed(agg, small_window());
  feed_all(feed, recs, true);
  CHECK(feed.origin().source == "marker");
  CHECK(feed.origin().detection.steps == 0);
  CHECK(feed.steps_completed(5) == 5);
  const GpuSummary got = agg.summary(5);
  REQUIRE(got.detail.size() == 6);
  CHECK(got.partial_final_step);  // step 5: launched after the last tt_step
}

TEST_CASE("TRAINTIME_STEPS=marker and off pass records straight through", "[step_feed]") {
  const auto recs = training(6, 4);
  for (StepsMode mode : {StepsMode::kMarker, StepsMode::kOff}) {
    GpuAggregator agg;
    StepFeedOptions o = small_window();
    o.mode = mode;
    StepFeed feed(agg, o);
    feed_all(feed, recs, true);
    CHECK(feed.held() == 0);
    const GpuSummary got = agg.summary(feed.steps_completed(6));
    CHECK(got.detail.size() == (mode == StepsMode::kOff ? 1u : 6u));
    const StepsOrigin origin = feed.origin();
    CHECK(origin.source == (mode == StepsMode::kOff ? "none" : "marker"));
    // Off says so in the file (steps.detection.reason); marker has no detection at all.
    CHECK(origin.detection.present == (mode == StepsMode::kOff));
    CHECK((origin.detection.reason.find("TRAINTIME_STEPS=off") == 0) == (mode == StepsMode::kOff));
  }
}

TEST_CASE("a sequence with no period has no detected steps and says why", "[step_feed]") {
  const auto recs = unrepeated(300, [](uint32_t i) { return i * 7919u % 1000u; });
  GpuAggregator agg;
  StepFeed feed(agg, small_window());
  feed_all(feed, recs, false);
  CHECK(feed.held() == 0);
  CHECK(feed.steps_completed(0) == 0);
  const StepsOrigin o = feed.origin();
  CHECK(o.source == "none");
  CHECK(o.detection.reason.find("never repeated") != std::string::npos);
  const GpuSummary got = agg.summary(0);
  REQUIRE(got.detail.size() == 1);
  CHECK(got.detail[0].partial);
}

TEST_CASE("a file with no detected steps says no numbering, though its collectives had sequence numbers", "[step_feed]") {
  // Inference-like: nothing repeats, and every fifth launch is an AllReduce with its NCCL
  // sequence number. The step in progress (all of it) is numbered from its first collective at
  // the end, but no step was detected: nothing was numbered "by NCCL" (it said "nccl").
  auto recs = unrepeated(300, [](uint32_t i) { return i * 7919u % 1000u; });
  uint64_t seq = 0;
  for (std::size_t i = 0; i < recs.size(); i += 5) {
    recs[i].ctx.comm.op = CommOp::kAllReduce;
    recs[i].ctx.comm.comm_id = 1;
    recs[i].ctx.comm.bytes = 4096 * (i + 1);
    recs[i].ctx.comm.seq = ++seq;
  }
  GpuAggregator agg;
  StepFeed feed(agg, small_window());
  feed_all(feed, recs, false);
  const StepsOrigin o = feed.origin();
  CHECK(o.source == "none");
  CHECK(o.detection.steps == 0);
  CHECK(o.detection.numbering.empty());
}

TEST_CASE("the anchor ends a step at each launch it names", "[step_feed]") {
  const auto recs = training(5, 3);
  GpuAggregator agg;
  StepFeedOptions o = small_window();
  o.anchor = "adam_step";
  StepFeed feed(agg, o);
  feed_all(feed, recs, false);
  CHECK(feed.steps_completed(0) == 5);
  CHECK(feed.origin().source == "detected");
  CHECK(feed.origin().detection.anchor == "adam_step");
  CHECK(feed.unanchored_launches() == 0);

  // An anchor that names no launch: no step, and the launches it was looked for in.
  GpuAggregator agg2;
  o.anchor = "no_such_kernel";
  StepFeed missing(agg2, o);
  feed_all(missing, recs, false);
  CHECK(missing.steps_completed(0) == 0);
  CHECK(missing.unanchored_launches() == recs.size());
  const StepsOrigin origin = missing.origin();
  CHECK(origin.source == "none");
  CHECK(origin.detection.anchor == "no_such_kernel");
  CHECK(origin.detection.reason.find("TRAINTIME_STEP_ANCHOR=no_such_kernel") == 0);
}

TEST_CASE("past the window's bound an unrepeated stretch folds as one block, nothing lost", "[step_feed]") {
  const auto recs = unrepeated(2000, [](uint32_t i) { return i; });  // every kernel different
  GpuAggregator agg;
  StepFeedOptions o = small_window();
  o.max_held = 256;
  StepFeed feed(agg, o);
  std::size_t most = 0;
  for (std::size_t i = 0; i < recs.size(); ++i) {
    feed.ingest(recs[i].a, recs[i].ctx, Category::kOther);
    if (i % 16 == 15) feed.settle();
    most = std::max(most, feed.held());
  }
  feed.finish();
  CHECK(most <= 256 + 16);
  CHECK(feed.origin().detection.folded_blocks > 0);
  CHECK(feed.origin().source == "none");
  const GpuSummary got = agg.summary(0);
  uint64_t count = 0;
  for (const auto& c : got.categories) count += c.count;
  CHECK(count == 2000);
}

TEST_CASE("detected steps' live figures: each step once the next has ended and none of its records is held", "[step_feed]") {
  const auto recs = training(60, 6, 5);  // 3 700 correlation ids: steps end while records come
  GpuAggregator agg;
  StepFeed feed(agg, small_window());
  uint64_t steps = 0, wall = 0, last = 0;
  CHECK_FALSE(feed.live_steps(0, &steps, &wall, &last));  // nothing ended yet

  // A record of step 20 arrives after all the others: behind the held records of the step in
  // progress, so its step is not whole in the aggregator until those leave.
  const auto late = std::find_if(recs.begin(), recs.end(), [](const Rec& r) { return r.ctx.step == 20; }) + 3;
  auto ingest = [&](const Rec& r) {
    LaunchContext ctx = r.ctx;
    ctx.step = 0;
    feed.ingest(r.a, ctx, Category::kOther);
    feed.settle();
  };
  for (auto it = recs.begin(); it != recs.end(); ++it)
    if (it != late) ingest(*it);
  const uint64_t ended = feed.detected_ended();
  REQUIRE(ended >= 30);
  REQUIRE(feed.held() > 0);  // the step in progress
  for (uint64_t k = 0; k + 2 <= ended; ++k) CHECK(feed.live_steps(k, &steps, &wall, &last));
  ingest(*late);
  uint64_t blocked = 0;
  while (blocked + 2 <= ended && feed.live_steps(blocked, &steps, &wall, &last)) ++blocked;
  CHECK(blocked >= 15);
  CHECK(blocked <= 21);
  feed.finish();
  CHECK(feed.held() == 0);

  // One stream, work back to back: the next step starts 20 ns after a step's last end, or 5 020
  // where the host prepared the next batch. A step's wall time is its span plus that gap.
  const GpuSummary summary = agg.summary(feed.steps_completed(0));
  uint64_t sum = 0;
  for (uint64_t k = 0; k + 2 <= feed.detected_ended(); ++k) {
    INFO("step " << k);
    REQUIRE(feed.live_steps(k, &steps, &wall, &last));
    CHECK(steps == k + 1);
    REQUIRE(k < summary.detail.size());
    CHECK(summary.detail[k].index == k);
    const uint64_t gap = last - summary.detail[k].span_ns;
    CHECK((gap == 20 || gap == 5020));
    sum += last;
    CHECK(wall == sum);
  }
  CHECK_FALSE(feed.live_steps(feed.detected_ended() - 1, &steps, &wall, &last));  // no next step
}

TEST_CASE("a marked job has no detected steps' live figures", "[step_feed]") {
  GpuAggregator agg;
  StepFeed feed(agg, small_window());
  feed_all(feed, training(12, 6, 0), true);
  uint64_t steps = 0, wall = 0, last = 0;
  CHECK(feed.detected_ended() == 0);
  CHECK_FALSE(feed.live_steps(0, &steps, &wall, &last));
}

namespace {

// The aggregator's summary of every activity so far, as the file's: categories' counts summed.
uint64_t counted(const GpuSummary& s) {
  uint64_t n = 0;
  for (const auto& c : s.categories) n += c.count;
  return n;
}

}  // namespace

TEST_CASE("steps are numbered by their first collective's sequence number: the same on every rank", "[step_feed]") {
  // Rank 0 records from the start; rank 1's capture starts in step 3 (a start trigger) after
  // 40 kernels of its own set-up, while its NCCL calls were counted from the start. Numbered
  // alone, rank 1's first step would be 0; by sequence number it is 3, as on rank 0. Each
  // AllReduce launch is one call, or a group of three (one kernel, three sequence numbers).
  const uint64_t members = GENERATE(1u, 3u);
  INFO(members << " sequence numbers a launch");
  auto recs = training(12, 6, 5);
  for (Rec& r : recs)
    if (r.ctx.comm.seq != 0) r.ctx.comm.seq = (r.ctx.comm.seq - 1) * members + 1;
  GpuAggregator truth_agg;
  for (const Rec& r : recs) truth_agg.ingest(r.a, r.ctx, Category::kOther);
  const GpuSummary truth = truth_agg.summary(12);

  GpuAggregator agg0;
  StepFeed rank0(agg0, small_window());
  feed_all(rank0, recs, false);
  std::vector<Rec> late;
  for (int i = 0; i < 40; ++i) {  // its own set-up, launched before step 3 (ids of steps 0-2)
    Rec r = recs[static_cast<std::size_t>(i)];
    r.name = "rank1_setup_" + std::to_string(i);
    r.ctx = LaunchContext{};
    late.push_back(r);
  }
  for (const Rec& r : recs)
    if (r.ctx.step >= 3) late.push_back(r);
  for (Rec& r : late) r.a.name = r.name;
  GpuAggregator agg1;
  StepFeed rank1(agg1, small_window());
  feed_all(rank1, late, false, 64, 7);

  for (StepFeed* feed : {&rank0, &rank1}) CHECK(feed->origin().detection.numbering == "nccl");
  CHECK(rank0.steps_completed(0) == 12);
  CHECK(rank1.steps_completed(0) == 12);
  const GpuSummary got0 = agg0.summary(rank0.steps_completed(0));
  const GpuSummary got1 = agg1.summary(rank1.steps_completed(0));
  REQUIRE(got0.detail.size() == 12);
  // Rank 1's first row is its set-up and step 3 together (its warm-up); then steps 4 to 11.
  REQUIRE(got1.detail.size() == 9);
  CHECK(got1.detail[0].index == 3);
  for (std::size_t i = 1; i < got1.detail.size(); ++i) {
    INFO("rank 1's row " << i);
    CHECK(got1.detail[i].index == i + 3);
    CHECK(got1.detail[i].index == got0.detail[i + 3].index);
    CHECK(same_totals(got1.detail[i].totals, truth.detail[i + 3].totals));
  }
}

TEST_CASE("a job without NCCL sequence numbers numbers its steps alone and says so", "[step_feed]") {
  auto recs = training(10, 5, 3);
  for (Rec& r : recs) r.ctx.comm.seq = 0;  // collectives captured in a CUDA graph: no sequence
  GpuAggregator agg;
  StepFeed feed(agg, small_window());
  feed_all(feed, recs, false);
  CHECK(feed.steps_completed(0) == 10);
  CHECK(feed.origin().detection.numbering == "local");
}

TEST_CASE("a kernel launched with different grids is told apart: the step is both micro-batches", "[step_feed]") {
  // Each optimizer step runs the same kernels twice, the second micro-batch with other shapes
  // (another grid), then no optimizer kernel of its own: by name alone one micro-batch repeats.
  std::vector<Rec> recs;
  uint32_t corr = 10;
  uint64_t t = 1000;
  for (uint32_t step = 0; step < 12; ++step)
    for (uint32_t mb = 0; mb < 2; ++mb)
      for (int k = 0; k < 12; ++k) {
        Rec r;
        r.name = "kern_" + std::to_string(k);
        r.a.kind = ActivityKind::kKernel;
        r.a.correlation_id = corr;
        corr += 2;
        r.a.start_ns = t;
        r.a.end_ns = t + 100;
        t += 150;
        r.a.grid = kernel_grid(mb == 0 ? 64 : 96, 1, 1);
        r.ctx.step = step;
        recs.push_back(r);
      }
  for (Rec& r : recs) r.a.name = r.name;
  GpuAggregator agg;
  StepFeed feed(agg, small_window());
  feed_all(feed, recs, false);
  CHECK(feed.origin().detection.period_calls == 24);
  CHECK(feed.steps_completed(0) == 12);
  CHECK(kernel_grid(64, 1, 1) != kernel_grid(1, 64, 1));
  CHECK(kernel_grid(64, 2, 1) != kernel_grid(2, 64, 1));
}

TEST_CASE("device memory records take the detected step of their call", "[step_feed]") {
  // An allocation before each step's first kernel and its release after the optimizer: with
  // tt_step the tracker would key them by the marker's step; detected, by the found one.
  const auto recs = training(10, 5, 2);
  MemoryTracker truth_mem(64), got_mem(64);
  GpuAggregator agg;
  StepFeed feed(agg, small_window());
  feed.set_memory(&got_mem);
  REQUIRE(feed.takes_memory());
  uint32_t prev_step = 99;
  std::size_t in_buffer = 0;
  for (const Rec& r : recs) {
    if (r.ctx.step != prev_step) {
      MemoryEvent e;
      e.timestamp_ns = r.a.start_ns - 1;
      e.address = 0x1000 + r.ctx.step;
      e.bytes = (r.ctx.step + 1) * 1000;
      e.step = r.ctx.step;
      truth_mem.add(e);
      e.step = 0;  // no marker
      feed.memory(e, r.a.correlation_id - 1);
      prev_step = r.ctx.step;
    }
    LaunchContext ctx = r.ctx;
    ctx.step = 0;
    feed.ingest(r.a, ctx, Category::kOther);
    if (++in_buffer % 50 == 0) feed.settle();
  }
  feed.finish();
  const MemorySummary want = truth_mem.summary(true);
  const MemorySummary got = got_mem.summary(true);
  REQUIRE(got.steps.size() == want.steps.size());
  for (std::size_t i = 0; i < want.steps.size(); ++i) {
    INFO("row " << i);
    CHECK(got.steps[i].first == want.steps[i].first);
    CHECK(got.steps[i].second.peak_bytes == want.steps[i].second.peak_bytes);
    CHECK(got.steps[i].second.in_use_bytes == want.steps[i].second.in_use_bytes);
  }
  CHECK(got.run.peak_bytes == want.run.peak_bytes);
}

TEST_CASE("a mid-run step's memory counts complete only once every record of it reached the tracker", "[step_feed]") {
  // Each step allocates 10 MiB of activations at its start (one address, reused every step) and
  // a 64 KiB cache block it never frees, and frees the activations before its last launch. Buffers
  // come in any order: the memory records of steps 110 to 149 (one buffer) arrive before those of
  // steps 100 to 109 (an older one), both before detection has ended step 100. Once detection has
  // ended steps past 110, steps 100 to 109 must not count complete without their records: a row
  // would read the 10 MiB its release takes away (what a mid-run file showed).
  const auto recs = training(200, 6, 5);
  StepFeedOptions o = small_window();
  o.settle_lag = 4096;  // ~75 steps: detection ends a step long after its records came
  GpuAggregator agg;
  StepFeed feed(agg, o);
  MemoryTracker truth_mem(256), got_mem(256);
  feed.set_memory(&got_mem);
  struct Call {
    MemoryEvent e;  // e.step: the true step
    uint32_t correlation;
  };
  std::vector<std::vector<Call>> calls(200);  // by step
  for (std::size_t i = 0; i < recs.size(); ++i) {
    const Rec& r = recs[i];
    if (i < 5) continue;  // the warm-up allocates nothing
    const uint32_t s = r.ctx.step;
    const bool first = recs[i - 1].ctx.step != s || i == 5;
    const bool last = i + 1 == recs.size() || recs[i + 1].ctx.step != s;
    MemoryEvent e;
    e.step = s;
    if (first) {
      e.timestamp_ns = r.a.start_ns - 2;
      e.address = 0x10000000;
      e.bytes = 10u << 20;
      calls[s].push_back({e, r.a.correlation_id - 1});
      e.timestamp_ns = r.a.start_ns - 1;
      e.address = 0x20000000 + uint64_t{s} * 0x10000;
      e.bytes = 64u << 10;
      calls[s].push_back({e, r.a.correlation_id - 1});
    }
    if (last) {  // before the optimizer's last launch, as sim_train's before its memset
      e.timestamp_ns = r.a.start_ns - 1;
      e.address = 0x10000000;
      e.bytes = 0;
      e.release = true;
      calls[s].push_back({e, r.a.correlation_id - 1});
    }
  }
  for (const auto& step : calls)
    for (const Call& c : step) truth_mem.add(c.e);
  auto deliver = [&](uint32_t from, uint32_t to) {
    for (uint32_t s = from; s < to; ++s)
      for (Call c : calls[s]) {
        c.e.step = 0;  // no marker
        feed.memory(c.e, c.correlation);
      }
  };
  uint32_t delivered = 0;  // steps whose memory records went to the feed
  std::size_t in_buffer = 0;
  for (const Rec& r : recs) {
    const uint32_t s = r.ctx.step;
    if (s == 150 && delivered == 100) {
      REQUIRE(feed.detected_ended() < 100);
      deliver(110, 150);  // the newer buffer first
      deliver(100, 110);
      delivered = 150;
    }
    if ((s < 100 || s >= 150) && delivered <= s) {  // the others with their step's first launch
      deliver(delivered, s + 1);
      delivered = s + 1;
    }
    LaunchContext ctx = r.ctx;
    ctx.step = 0;
    feed.ingest(r.a, ctx, Category::kOther);
    if (++in_buffer % 50 == 0) feed.settle();
  }
  feed.settle();
  const uint64_t ended = feed.detected_ended();
  REQUIRE(ended >= 115);
  REQUIRE(ended < 150);  // steps 110 to 149's records are held past the ended ones
  // Every buffer is back: the steps through position ended - 2 have had all their records
  // ingested; the feed has handed on those of the steps that ended, whatever their order.
  const uint64_t below = feed.memory_complete_below(ended);
  CHECK(below == feed.ended_number(ended - 2) + 1);
  got_mem.set_complete_below(below);
  const MemorySummary got = got_mem.summary(false);
  const MemorySummary want = truth_mem.summary(true);
  std::vector<uint64_t> indexes;
  for (uint64_t k = 90; k < below; ++k) indexes.push_back(k);
  const auto got_rows = got.rows_for(indexes);
  const auto want_rows = want.rows_for(indexes);
  for (std::size_t i = 0; i < indexes.size(); ++i) {
    INFO("step " << indexes[i]);
    REQUIRE(got_rows[i].present);
    CHECK(got_rows[i].peak_bytes == want_rows[i].peak_bytes);
    CHECK(got_rows[i].in_use_bytes == want_rows[i].in_use_bytes);
  }
}

TEST_CASE("a snapshot counts the activities detection has not placed yet", "[step_feed]") {
  // Mid-run (no finish): the warm-up before any lock and the step in progress are held. A
  // snapshot's copy counts them; the aggregator itself is left as it was.
  const auto recs = training(30, 6, 7);
  GpuAggregator agg;
  StepFeed feed(agg, small_window());
  const std::size_t half = recs.size() / 2;
  for (std::size_t i = 0; i < half; ++i) {
    LaunchContext ctx = recs[i].ctx;
    ctx.step = 0;
    feed.ingest(recs[i].a, ctx, Category::kOther);
    if (i % 64 == 63) feed.settle();
  }
  REQUIRE(feed.held() > 0);
  const uint64_t before = counted(agg.summary(feed.steps_completed(0)));
  CHECK(before < half);
  const auto copy = agg.clone();
  feed.snapshot_into(*copy);
  const GpuSummary snap = copy->summary(feed.steps_completed(0));
  CHECK(counted(snap) == half);
  CHECK(snap.partial_final_step);
  CHECK(counted(agg.summary(feed.steps_completed(0))) == before);
  CHECK(feed.origin().detection.undecided_launches > 0);
  feed.finish();
  CHECK(counted(agg.summary(feed.steps_completed(0))) == half);
  CHECK(feed.origin().detection.undecided_launches == 0);
}

TEST_CASE("past the caps on names and launch kinds nothing is lost, and the reason says so", "[step_feed]") {
  auto recs = unrepeated(600, [](uint32_t i) { return i; });
  recs[599].a.end_ns = recs[599].a.start_ns + 1000000;  // the longest: first in top_kernels
  GpuAggregator agg;
  StepFeedOptions o = small_window();
  o.max_names = 16;
  o.max_tokens = 32;
  StepFeed feed(agg, o);
  feed_all(feed, recs, false);
  const GpuSummary got = agg.summary(0);
  CHECK(counted(got) == 600);
  const StepsOrigin origin = feed.origin();
  CHECK(origin.detection.tokens_over_cap > 0);
  CHECK(origin.detection.reason.find("told apart no more") != std::string::npos);
  // A name past the cap keeps its characters until its activity is handed on.
  REQUIRE_FALSE(got.top_kernels.empty());
  CHECK(got.top_kernels[0].name == "k599");
}
