// Live metrics (core/live_metrics.h), the peak table (peak_flops.h), the step tracker's live
// counters and the aggregator's per-step figures. Expected values are worked out by hand here.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <map>
#include <string>
#include <vector>

#include "traintime/core/gpu_aggregator.h"
#include "traintime/core/live_metrics.h"
#include "traintime/core/peak_flops.h"
#include "traintime/core/step_tracker.h"

using namespace traintime::core;

namespace {

std::map<std::string, double> as_map(const LiveInput& in) {
  LiveMetric m[kMaxLiveMetrics];
  const std::size_t n = live_metrics(in, m, kMaxLiveMetrics);
  REQUIRE(n <= kMaxLiveMetrics);
  std::map<std::string, double> out;
  for (std::size_t i = 0; i < n; ++i) {
    CHECK(out.count(m[i].name) == 0);
    CHECK(std::strlen(live_metric_help(m[i].name)) > 10);
    out[m[i].name] = m[i].value;
  }
  return out;
}

LiveInput two_steps() {
  LiveInput in;
  in.totals = {2, 300'000'000, 64, 65536};  // two steps, 0.3 s in all
  in.last_wall_ns = 200'000'000;            // the last one: 0.2 s, 32 samples, 32768 tokens
  in.last_samples = 32;
  in.last_tokens = 32768;
  return in;
}

}  // namespace

TEST_CASE("live metrics: nothing before the first step, CPU figures of the last step after it",
          "[live]") {
  CHECK(as_map(LiveInput{}).empty());
  const auto m = as_map(two_steps());
  CHECK(m.size() == 4);
  CHECK(m.at("traintime/step") == 1);
  CHECK(m.at("traintime/step_ms") == Approx(200.0));
  CHECK(m.at("traintime/samples_per_s") == Approx(160.0));
  CHECK(m.at("traintime/tokens_per_s") == Approx(163840.0));
}

TEST_CASE("live metrics: TFLOP/s from FLOPs per step or per token, MFU only with a peak", "[live]") {
  LiveInput in = two_steps();
  in.flops_per_step = 4e14;  // 4e14 FLOPs in 0.2 s = 2000 TFLOP/s
  auto m = as_map(in);
  CHECK(m.at("traintime/tflops") == Approx(2000.0));
  CHECK(m.count("traintime/mfu") == 0);
  in.peak_tflops = 989.5;
  m = as_map(in);
  CHECK(m.at("traintime/mfu") == Approx(2000.0 / 989.5));
  in.flops_per_step = 0;
  in.flops_per_token = 6e9;  // 6e9 x 32768 tokens / 0.2 s = 983.04 TFLOP/s
  m = as_map(in);
  CHECK(m.at("traintime/tflops") == Approx(983.04));
  CHECK(model_flops(3, 5, 7, 11) == 21);  // per step wins when both are given
  CHECK(model_flops(0, 5, 7, 11) == 55);
  CHECK(model_flops(0, 0, 7, 11) == 0);
}

TEST_CASE("live metrics: HFU beside MFU from the published step's recompute / forward time", "[live][hfu]") {
  LiveInput in = two_steps();
  in.flops_per_step = 4e14;  // 2000 TFLOP/s
  in.peak_tflops = 4000;     // MFU 0.5
  in.gpu_valid = true;
  in.gpu.step = 0;
  auto& busy = in.gpu.category_busy_ns;
  busy[static_cast<int>(Category::kForward)] = 4'000'000;
  // No recompute in the published step: the share is not known, so no HFU (never MFU's copy).
  auto m = as_map(in);
  CHECK(m.at("traintime/mfu") == Approx(0.5));
  CHECK(m.count("traintime/hfu") == 0);
  // 1 ms recompute against 4 ms forward: 25% more forward FLOPs, HFU = 0.5 x 1.25.
  busy[static_cast<int>(Category::kRecompute)] = 1'000'000;
  m = as_map(in);
  CHECK(m.at("traintime/hfu") == Approx(0.625));
  CHECK(m.at("traintime/mfu") == Approx(0.5));  // model FLOPs only, recompute or not
  // Recompute without forward time, no peak, or no published GPU step: no HFU.
  busy[static_cast<int>(Category::kForward)] = 0;
  CHECK(as_map(in).count("traintime/hfu") == 0);
  busy[static_cast<int>(Category::kForward)] = 4'000'000;
  in.gpu_valid = false;
  CHECK(as_map(in).count("traintime/hfu") == 0);
  in.gpu_valid = true;
  in.peak_tflops = 0;
  CHECK(as_map(in).count("traintime/hfu") == 0);
  CHECK(hfu_from_mfu(0.4, 3, 2) == Approx(1.0));
  CHECK(hfu_from_mfu(0.4, 0, 2) == 0);
  CHECK(hfu_from_mfu(0.4, 3, 0) == 0);
  CHECK(hfu_from_mfu(0, 3, 2) == 0);
}

TEST_CASE("live metrics: GPU figures of the published step, with lag and percentages", "[live]") {
  LiveInput in = two_steps();
  in.totals.steps = 10;
  in.gpu_valid = true;
  in.gpu.step = 7;
  in.gpu.span_ns = 4'000'000;
  in.gpu.busy_ns = 3'000'000;
  in.gpu.compute_ns = 2'000'000;
  in.gpu.comm_ns = 1'500'000;
  in.gpu.exposed_comm_ns = 1'000'000;
  in.gpu.io_ns = 0;
  in.gpu.idle_ns = 1'000'000;
  in.gpu.category_busy_ns[static_cast<int>(Category::kBackward)] = 1'250'000;
  in.gpu_late_records = 3;
  const auto m = as_map(in);
  CHECK(m.at("traintime/gpu_step") == 7);
  CHECK(m.at("traintime/gpu_lag_steps") == 2);  // step 9 ended on the CPU
  CHECK(m.at("traintime/gpu_span_ms") == 4.0);
  CHECK(m.at("traintime/gpu_exposed_comm_ms") == 1.0);
  CHECK(m.at("traintime/gpu_compute_pct") == Approx(50.0));
  CHECK(m.at("traintime/gpu_exposed_comm_pct") == Approx(25.0));
  CHECK(m.at("traintime/gpu_idle_pct") == Approx(25.0));
  CHECK(m.at("traintime/gpu_backward_ms") == 1.25);
  CHECK(m.at("traintime/gpu_forward_ms") == 0);
  CHECK(m.at("traintime/gpu_late_records") == 3);
  CHECK(m.count("traintime/gpu_comm_ms") == 1);
  // No memory record yet: no memory figure, not 0.
  CHECK(m.count("traintime/gpu_memory_peak_bytes") == 0);
  in.gpu.memory_valid = true;
  in.gpu.memory_peak_bytes = 39'124'996;
  CHECK(as_map(in).at("traintime/gpu_memory_peak_bytes") == 39'124'996);
}

TEST_CASE("live metrics: GPU health of the newest finished sampled step, absent without", "[live][nvml]") {
  LiveInput in = two_steps();
  // No NVML figures (off, unavailable, no sampled step ended yet): no health_* at all, not 0.
  for (const auto& [name, value] : as_map(in)) CHECK(name.rfind("traintime/health_", 0) == std::string::npos);
  in.health_valid = true;
  in.health_step = 0;
  in.health.cuda_device = 1;
  in.health.samples = 3;
  in.health.sm_clock_mhz_median = 1386;
  in.health.sm_clock_mhz_min = 1300;
  in.health.power_w_median = 455.5;
  in.health.temperature_c_max = 87;
  in.health.clock_event_reasons.bits = 0x1;  // gpu_idle alone is no throttle
  auto m = as_map(in);
  CHECK(m.at("traintime/health_step") == 0);
  CHECK(m.at("traintime/health_sm_clock_mhz") == 1386);
  CHECK(m.at("traintime/health_power_w") == 455.5);
  CHECK(m.at("traintime/health_temperature_c") == 87);
  CHECK(m.at("traintime/health_throttled") == 0);
  in.health.clock_event_reasons.bits = 0x1 | 0x40;  // hw_thermal_slowdown
  CHECK(as_map(in).at("traintime/health_throttled") == 1);
  in.health.clock_event_reasons.bits = 0x4;  // sw_power_cap
  CHECK(as_map(in).at("traintime/health_throttled") == 1);
  // Each health figure carries its device (for Prometheus); the others none.
  LiveMetric all[kMaxLiveMetrics];
  const std::size_t n = live_metrics(in, all, kMaxLiveMetrics);
  for (std::size_t i = 0; i < n; ++i) {
    INFO(all[i].name);
    CHECK(all[i].device == (std::string(all[i].name).rfind("traintime/health_", 0) == 0 ? 1 : -1));
  }
}

TEST_CASE("live metrics: traintime's own cost once a step after warm-up ended, absent before", "[live][self_cost]") {
  LiveInput in = two_steps();
  CHECK(as_map(in).count("traintime/self_cost_pct") == 0);  // n/a is no metric, not 0
  in.self_cost_valid = true;
  in.self_cost_pct = 0.42;
  const auto m = as_map(in);
  CHECK(m.at("traintime/self_cost_pct") == 0.42);
  CHECK(m.size() == 5);
}

TEST_CASE("clock-event reasons: names only at the edge, an unknown name kept as written", "[live][nvml]") {
  ClockEventReasons r;
  r.bits = clock_event_bit(ClockEventReason::kGpuIdle) | clock_event_bit(ClockEventReason::kHwThermalSlowdown) |
           (uint64_t{1} << 40);
  const std::vector<std::string> names = clock_event_reason_names(r);
  CHECK(names == std::vector<std::string>{"gpu_idle", "hw_thermal_slowdown", "bit_40"});
  ClockEventReasons back;
  for (const std::string& name : names) add_clock_event_reason(name, &back);
  CHECK(back == r);
  CHECK(back.unknown.empty());
  const auto read = [](std::string_view name) {
    ClockEventReasons one;
    add_clock_event_reason(name, &one);
    return one;
  };
  CHECK(read("sw_power_cap").bits == 0x4);
  CHECK(read("sw_power_cap").has(ClockEventReason::kSwPowerCap));
  // A name this reader does not know (a newer writer's, or bit_<n> where a name is written) is
  // kept as written, once, and written back so; it counts as a throttle, as every reason but
  // gpu_idle does.
  for (const char* other : {"bit_3", "bit_", "bit_64", "a_reason_of_tomorrow"}) {
    INFO(other);
    const ClockEventReasons kept = read(other);
    CHECK(kept.bits == 0);
    CHECK(kept.unknown == std::vector<std::string>{other});
    CHECK(clock_event_reason_names(kept) == std::vector<std::string>{other});
    CHECK(kept.throttled());
  }
  ClockEventReasons both = read("a_reason_of_tomorrow");
  both |= read("a_reason_of_tomorrow");
  both |= read("gpu_idle");
  CHECK(clock_event_reason_names(both) == std::vector<std::string>{"gpu_idle", "a_reason_of_tomorrow"});
  CHECK(clock_event_reason_names(both.without(ClockEventReason::kGpuIdle)) ==
        std::vector<std::string>{"a_reason_of_tomorrow"});
  CHECK_FALSE(read("gpu_idle").throttled());
  CHECK(read("applications_clocks_setting").throttled());
  CHECK(std::size(kClockEventReasonNames) == static_cast<std::size_t>(ClockEventReason::kDisplayClockSetting) + 1);
}

TEST_CASE("live metrics: a short buffer gets what fits and learns the full count", "[live]") {
  LiveInput in = two_steps();
  LiveMetric two[2];
  CHECK(live_metrics(in, two, 2) == 4);
  CHECK(std::string(two[0].name) == "traintime/step");
  CHECK(live_metrics(in, nullptr, 0) == 4);
}

TEST_CASE("console line: interval averages, TFLOP/s with MFU, and the GPU breakdown", "[live]") {
  LiveInput now = two_steps();
  now.flops_per_step = 1e14;
  now.peak_tflops = 1000;
  // 10 steps in 2 s: 200 ms/step, 320 samples / 2 s, 10 x 1e14 FLOPs / 2 s = 500 TFLOP/s.
  const StepCounters interval{10, 2'000'000'000, 320, 0};
  std::string line = console_line(interval, now);
  // No GPU step published (a CPU-only run, or none yet): nothing about the GPU, on every print.
  CHECK(line == "step 1 | 200.0 ms/step | 160.0 samples/s | 500.0 TFLOP/s (MFU 50.0%)");
  now.gpu_valid = true;
  now.gpu.step = 0;
  now.gpu.span_ns = 1000;
  now.gpu.compute_ns = 700;
  now.gpu.exposed_comm_ns = 200;
  now.gpu.idle_ns = 100;
  line = console_line(interval, now);
  CHECK(line.find("| GPU step 0: compute 70.0%, exposed comm 20.0%, io 0.0%, idle 10.0%") !=
        std::string::npos);
  CHECK(line.find("health") == std::string::npos);  // no NVML figures: nothing said
  now.health_valid = true;
  now.health_step = 1;
  now.health.sm_clock_mhz_median = 1386;
  now.health.power_w_median = 455.5;
  now.health.temperature_c_max = 87;
  now.health.clock_event_reasons.bits = 0x1;  // gpu_idle only
  line = console_line(interval, now);
  CHECK(line.substr(line.find(" | health")) == " | health step 1: SM 1386 MHz, 456 W, 87 C");
  now.health.clock_event_reasons.bits = 0x40;
  line = console_line(interval, now);
  CHECK(line.substr(line.find(" | health")) == " | health step 1: SM 1386 MHz, 456 W, 87 C, throttled");
}

TEST_CASE("console line: HFU beside MFU once the GPU step has recompute", "[live][hfu]") {
  LiveInput now = two_steps();
  now.flops_per_step = 1e14;
  now.peak_tflops = 1000;
  const StepCounters interval{10, 2'000'000'000, 320, 0};
  now.gpu_valid = true;
  now.gpu.span_ns = 1000;
  now.gpu.category_busy_ns[static_cast<int>(Category::kForward)] = 400;
  CHECK(console_line(interval, now).find("500.0 TFLOP/s (MFU 50.0%) |") != std::string::npos);
  now.gpu.category_busy_ns[static_cast<int>(Category::kRecompute)] = 200;  // x 1.5
  CHECK(console_line(interval, now).find("500.0 TFLOP/s (MFU 50.0%, HFU 75.0%) |") != std::string::npos);
}

TEST_CASE("Prometheus text: counters, gauges, help and escaped labels", "[live]") {
  LiveMetric m[] = {{"traintime/step_ms", 12.5}, {"traintime/mfu", 0.25}};
  const std::string text = prometheus_text(m, 2, StepCounters{3, 1'500'000'000, 96, 0},
                                           PrometheusLabels{"job\"1\\", 4, "node-7"});
  const std::string lbl = "{job=\"job\\\"1\\\\\",rank=\"4\",host=\"node-7\"}";
  CHECK(text.find("# TYPE traintime_steps_total counter\ntraintime_steps_total" + lbl + " 3\n") !=
        std::string::npos);
  CHECK(text.find("traintime_step_seconds_total" + lbl + " 1.5\n") != std::string::npos);
  CHECK(text.find("# TYPE traintime_step_ms gauge\ntraintime_step_ms" + lbl + " 12.5\n") !=
        std::string::npos);
  CHECK(text.find("# HELP traintime_mfu model FLOPs utilisation") != std::string::npos);
  CHECK(text.find("traintime_mfu" + lbl + " 0.25\n") != std::string::npos);
}

TEST_CASE("Prometheus text: a device's gauge adds the device label to the others", "[live][nvml]") {
  LiveMetric m[] = {{"traintime/step_ms", 12.5}, {"traintime/health_sm_clock_mhz", 1386, 3}};
  const std::string text = prometheus_text(m, 2, StepCounters{}, PrometheusLabels{"j", 4, "h"});
  CHECK(text.find("\ntraintime_step_ms{job=\"j\",rank=\"4\",host=\"h\"} 12.5\n") != std::string::npos);
  CHECK(text.find("\ntraintime_health_sm_clock_mhz{job=\"j\",rank=\"4\",host=\"h\",device=\"3\"} 1386\n") !=
        std::string::npos);
}

TEST_CASE("peak table: CUDA device names match on whole tokens, most specific row first", "[live]") {
  CHECK(lookup_peak_tflops("NVIDIA H100 80GB HBM3", "bf16").gpu == "H100 SXM");
  CHECK(lookup_peak_tflops("NVIDIA H100 80GB HBM3", "bf16").tflops == 989.5);
  CHECK(lookup_peak_tflops("NVIDIA H100 PCIe", "fp8").tflops == 1513);
  CHECK(lookup_peak_tflops("NVIDIA H100 NVL", "bf16").gpu == "H100 NVL");
  CHECK(lookup_peak_tflops("NVIDIA GH200 480GB", "bf16").gpu == "GH200");
  CHECK(lookup_peak_tflops("NVIDIA A100-SXM4-80GB", "tf32").tflops == 156);
  CHECK(lookup_peak_tflops("NVIDIA A10", "bf16").gpu == "A10");  // not A100
  CHECK(lookup_peak_tflops("NVIDIA L40S", "bf16").gpu == "L40S");
  CHECK(lookup_peak_tflops("NVIDIA L4", "bf16").gpu == "L4");
  CHECK(lookup_peak_tflops("Tesla V100-SXM2-32GB", "bf16").tflops == 0);  // no bf16 on Volta
  CHECK(lookup_peak_tflops("Tesla V100-SXM2-32GB", "fp16").tflops == 125);
  CHECK(lookup_peak_tflops("simgpu (SIMULATED GPU)", "bf16").gpu.empty());
  CHECK(resolve_peak(123, "NVIDIA H100 80GB HBM3", "bf16").tflops == 123);
  CHECK(resolve_peak(123, "", "bf16").source == "TRAINTIME_PEAK_TFLOPS");
  CHECK(resolve_peak(0, "NVIDIA H200", "fp8").source == "table: H200, fp8");
  CHECK(resolve_peak(0, "NVIDIA H200", "fp8").tflops == 1979);
  CHECK(resolve_peak(0, "Tesla V100-PCIE-16GB", "bf16").source == "table: V100 PCIe has no bf16 figure");
  CHECK(resolve_peak(0, "Quadro X", "bf16").source ==
        "GPU \"Quadro X\" is not in the table (set TRAINTIME_PEAK_TFLOPS)");
  CHECK(resolve_peak(0, "", "bf16").tflops == 0);
  for (const char* d : {"bf16", "fp16", "fp8", "tf32", "fp32"}) CHECK(is_peak_dtype(d));
  CHECK_FALSE(is_peak_dtype("int8"));
}

TEST_CASE("step tracker: live counters and the last step's figures", "[live]") {
  StepTracker t(1);
  t.set_origin(1000);
  t.step(3000, 8, 80);
  t.step(7000, 4, 40);
  const StepTracker::Live l = t.live();
  CHECK(l.totals.steps == 2);
  CHECK(l.totals.wall_ns == 6000);  // warm-up included
  CHECK(l.totals.samples == 12);
  CHECK(l.totals.tokens == 120);
  CHECK(l.last_wall_ns == 4000);
  CHECK(l.last_samples == 4);
  CHECK(l.last_tokens == 40);
}

TEST_CASE("aggregator: a step's live figures equal its detail row, open or folded", "[live]") {
  AggregatorOptions opt;
  opt.max_open_steps = 2;  // step 0 folds when step 2's first record arrives
  GpuAggregator agg(opt);
  auto ingest = [&](uint64_t start, uint64_t end, uint32_t step, Category cat, CommOp op = CommOp::kNone) {
    GpuActivity a;
    a.kind = ActivityKind::kKernel;
    a.start_ns = start;
    a.end_ns = end;
    a.name = op == CommOp::kNone ? "gemm" : "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
    LaunchContext ctx;
    ctx.path = 1;
    ctx.step = step;
    ctx.entry = 10 + step;
    ctx.comm.op = op;
    agg.ingest(a, ctx, cat);
  };
  // Step 0: forward [0,100), comm [50,200) -> span 200, busy 200, compute 100, exposed 100.
  ingest(0, 100, 0, Category::kForward);
  ingest(50, 200, 0, Category::kForward, CommOp::kAllReduce);
  // Step 1: backward [1000,1100) and [1300,1400) -> span 400, busy 200, idle 200.
  ingest(1000, 1100, 1, Category::kBackward);
  ingest(1300, 1400, 1, Category::kBackward);
  GpuStepFigures f;
  REQUIRE(agg.step_figures(0, &f));
  CHECK(f.step == 0);
  CHECK(f.span_ns == 200);
  CHECK(f.busy_ns == 200);
  CHECK(f.compute_ns == 100);
  CHECK(f.comm_ns == 150);
  CHECK(f.exposed_comm_ns == 100);
  CHECK(f.idle_ns == 0);
  CHECK(f.category_busy_ns[static_cast<int>(Category::kComm)] == 150);
  REQUIRE(agg.step_figures(1, &f));
  CHECK(f.span_ns == 400);
  CHECK(f.idle_ns == 200);
  CHECK(f.category_busy_ns[static_cast<int>(Category::kBackward)] == 200);
  // Peeking changed nothing: step 0 folds later with the same figures.
  agg.set_published_below(2);
  ingest(2000, 2100, 2, Category::kForward);
  ingest(2100, 2150, 2, Category::kForward);
  ingest(2150, 2160, 2, Category::kForward);
  REQUIRE(agg.step_figures(0, &f));  // folded now: from its detail row
  CHECK(f.span_ns == 200);
  CHECK(f.exposed_comm_ns == 100);
  CHECK(agg.records_after_publish() == 0);
  ingest(1400, 1450, 1, Category::kBackward);  // step 1 was published: a late record
  CHECK(agg.records_after_publish() == 1);
  const GpuSummary s = agg.summary(3);
  REQUIRE(s.detail.size() == 3);
  CHECK(s.detail[0].totals.exposed_comm_ns == 100);
  // A step with no GPU work has all-zero figures.
  REQUIRE(agg.step_figures(5, &f));
  CHECK(f.step == 5);
  CHECK(f.span_ns == 0);
  CHECK(agg.first_device() == 0);
}

namespace {

std::string doc_text(const char* relative) {
  std::string here = __FILE__;  // .../tests/core/test_live_metrics.cpp
  std::ifstream in(here.substr(0, here.rfind("/tests/")) + "/" + relative);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string g(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

TEST_CASE("docs/metrics.md lists every metric name and the peak table exactly", "[live][docs]") {
  const std::string doc = doc_text("docs/metrics.md");
  REQUIRE_FALSE(doc.empty());
  std::set<std::string> names, peaks;
  std::istringstream lines(doc);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| `traintime/", 0) == 0) names.insert(line);
    else if (line.rfind("| ", 0) == 0 && line.find(" | ") != std::string::npos) peaks.insert(line);
  }
  std::set<std::string> want_names;
  for (const auto& [name, help] : live_metric_docs()) want_names.insert("| `" + name + "` | " + help + " |");
  CHECK(names == want_names);
  for (const PeakGpu& p : peak_table()) {
    std::string tokens = p.tokens[0];
    if (p.tokens[1]) tokens += std::string(" ") + p.tokens[1];
    const std::string row = std::string("| ") + p.label + " | " + tokens + " | " + g(p.bf16) + " | " +
                            g(p.fp16) + " | " + g(p.fp8) + " | " + g(p.tf32) + " | " + g(p.fp32) + " |";
    INFO(row);
    CHECK(peaks.count(row) == 1);
  }
}
