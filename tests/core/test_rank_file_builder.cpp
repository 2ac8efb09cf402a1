// core::build_rank_file: the one place a rank file is put together. Every expected number here
// is worked out by hand from the inputs written in the test.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <tuple>

#include "traintime/core/rank_file_builder.h"
#include "traintime/core/rank_file_json.h"
#include <nlohmann/json.hpp>

using namespace traintime::core;

namespace {

RegionRow cpu_row(const std::string& path, Category category, uint64_t count, uint64_t cpu_ns) {
  RegionRow r;
  std::tie(r.path, r.category, r.count, r.cpu_ns) = std::tie(path, category, count, cpu_ns);
  return r;
}

CpuSummary two_regions() {
  CpuSummary cpu;
  cpu.regions = {cpu_row("step/forward", Category::kForward, 3, 3000),
                 cpu_row("step/backward", Category::kBackward, 3, 6000)};
  cpu.region_ids = {2, 3};
  cpu.path_names = {"", "step", "step/forward", "step/backward", "step/optimizer"};
  cpu.steps.count = 3;
  cpu.steps.warmup = 1;
  return cpu;
}

GpuSummary::Comm comm_time(uint32_t comm_index, CommOp op, uint64_t gpu_ns, uint64_t kernels) {
  GpuSummary::Comm c;
  c.comm_index = comm_index;
  c.op = op;
  c.time.gpu_ns = gpu_ns;
  c.time.kernels = kernels;
  return c;
}

GpuSummary::Region gpu_region(PathId path, Category category, uint64_t busy, uint64_t kernels) {
  GpuSummary::Region r;
  r.path = path;
  r.category = category;
  r.gpu_busy_ns = busy;
  r.gpu_sum_ns = busy;
  r.kernels = kernels;
  return r;
}

const RegionRow* find_region(const RankFile& f, const std::string& path) {
  for (const RegionRow& r : f.regions)
    if (r.path == path) return &r;
  return nullptr;
}

// A communicator of 4 ranks at table index 0 with stable id 0x1234, two AllReduces of 1000 B.
CommSummary one_communicator() {
  CommSummary comm;
  CommCallTable::CommSnapshot cs;
  cs.index = 0;
  cs.size = 4;
  cs.rank = 1;
  cs.stable_id = 0x1234;
  cs.ops_enqueued = 2;
  auto& op = cs.ops[static_cast<std::size_t>(CommOp::kAllReduce)];
  op.calls = 2;
  op.bytes = 2000;
  op.bucket_calls[size_bucket(1000)] = 2;
  op.bucket_bytes[size_bucket(1000)] = 2000;
  comm.calls.comms.push_back(cs);
  return comm;
}

}  // namespace

TEST_CASE("region rows join CPU and GPU by path id, GPU-only paths get their names",
          "[builder]") {
  GpuSummary gpu;
  gpu.regions = {gpu_region(3, Category::kBackward, 500, 4),
                 gpu_region(4, Category::kOptimizer, 70, 1)};
  const RankFile f = build_rank_file({}, two_regions(), gpu, {});
  REQUIRE(f.regions.size() == 3);
  const RegionRow* bwd = find_region(f, "step/backward");
  REQUIRE(bwd != nullptr);
  CHECK(bwd->cpu_ns == 6000);  // the CPU part is kept
  CHECK(bwd->gpu_busy_ns == 500);
  CHECK(bwd->kernels == 4);
  const RegionRow* fwd = find_region(f, "step/forward");
  REQUIRE(fwd != nullptr);
  CHECK(fwd->gpu_busy_ns == 0);  // no GPU work launched there
  const RegionRow* opt = find_region(f, "step/optimizer");
  REQUIRE(opt != nullptr);  // GPU work on a path with no CPU row (e.g. entered in a snapshot gap)
  CHECK(opt->count == 0);
  CHECK(opt->gpu_busy_ns == 70);
  CHECK(opt->category == Category::kOptimizer);
}

TEST_CASE("rows with the same path text but different ids are not merged by name",
          "[builder]") {
  CpuSummary cpu;
  cpu.regions = {cpu_row("x", Category::kOther, 1, 10)};
  cpu.region_ids = {1};
  cpu.path_names = {"", "x", "x"};  // two paths spelt alike (e.g. a range and a push "x")
  GpuSummary gpu;
  gpu.regions = {gpu_region(2, Category::kOther, 40, 1)};
  const RankFile f = build_rank_file({}, cpu, gpu, {});
  REQUIRE(f.regions.size() == 2);
  CHECK(f.regions[0].gpu_busy_ns == 0);
  CHECK(f.regions[0].cpu_ns == 10);
  CHECK(f.regions[1].gpu_busy_ns == 40);
}

TEST_CASE("comm rows add CPU calls to GPU time, with the nccl-tests bus factor", "[builder]") {
  GpuSummary gpu;
  gpu.comm.push_back(comm_time(0, CommOp::kAllReduce, 400, 2));
  gpu.comm[0].time.bucket_gpu_ns[size_bucket(1000)] = 400;
  const RankFile f = build_rank_file({}, {}, gpu, one_communicator());
  REQUIRE(f.comm.size() == 1);
  const CommRow& r = f.comm[0];
  CHECK(r.op == CommOp::kAllReduce);
  CHECK(r.comm_size == 4);
  CHECK(r.calls == 2);
  CHECK(r.bytes == 2000);
  CHECK(r.gpu_ns == 400);
  CHECK(r.algbw_gbps == Approx(5.0));   // 2000 B / 400 ns
  CHECK(r.busbw_gbps == Approx(7.5));   // × 2(4−1)/4
  REQUIRE(r.sizes.size() == 1);
  CHECK(r.sizes[0].lo_bytes == 512);    // 1000 B is in [512, 1024)
  CHECK(r.sizes[0].calls == 2);
  CHECK(r.sizes[0].gpu_ns == 400);
}

TEST_CASE("without GPU capture comm rows carry CPU counts and claim no bandwidth", "[builder]") {
  const RankFile f = build_rank_file({}, {}, GpuSummary{}, one_communicator());
  REQUIRE(f.comm.size() == 1);
  CHECK(f.comm[0].calls == 2);
  CHECK(f.comm[0].gpu_ns == 0);
  CHECK(f.comm[0].algbw_gbps == 0);
  CHECK(f.comm[0].busbw_gbps == 0);
  REQUIRE(f.communicators.size() == 1);
  CHECK(f.communicators[0].ops_enqueued == 2);
  CHECK(f.communicators[0].ops_completed == 0);
}

TEST_CASE("communicator ids are the 16-hex stable ids, whatever else is known", "[builder]") {
  GpuSummary gpu;
  GpuSummary::Ring ring;
  ring.comm_index = 0;
  ring.ops_completed = 2;
  ring.recent = {{1, CommOp::kAllReduce, 1000, 10, 20}, {2, CommOp::kAllReduce, 1000, 30, 50}};
  gpu.rings.push_back(ring);
  // GPU side alone, NCCL side alone, and both: the id comes from the call table only.
  const RankFile both = build_rank_file({}, {}, gpu, one_communicator());
  REQUIRE(both.communicators.size() == 1);
  CHECK(both.communicators[0].id == "0000000000001234");
  CHECK(both.communicators[0].size == 4);
  CHECK(both.communicators[0].rank == 1);
  CHECK(both.communicators[0].ops_completed == 2);
  CHECK(both.communicators[0].recent.size() == 2);
  const RankFile nccl_only = build_rank_file({}, {}, {}, one_communicator());
  CHECK(nccl_only.communicators[0].id == "0000000000001234");
}

TEST_CASE("kernels found by name make a size-0 row with bytes unknown", "[builder]") {
  GpuSummary gpu;
  gpu.comm.push_back(comm_time(GpuSummary::kByName, CommOp::kAllGather, 90, 3));
  const RankFile f = build_rank_file({}, {}, gpu, {});
  REQUIRE(f.comm.size() == 1);
  CHECK(f.comm[0].comm_size == 0);
  CHECK(f.comm[0].calls == 3);  // one kernel per collective
  CHECK_FALSE(f.comm[0].bytes_known);
  CHECK(f.comm[0].algbw_gbps == 0);
}

TEST_CASE("every category and the four standard copy kinds are always present", "[builder]") {
  const RankFile f = build_rank_file({}, {}, {}, {});
  CHECK(f.categories.size() == kCategoryCount);
  for (const CopyKind k : kStandardCopyKinds) CHECK(f.memcpy.count(k) == 1);
  CHECK(f.gpu_capture == GpuCapture::kNone);
}

TEST_CASE("identity, module, CPU, GPU and NCCL warnings come in that order", "[builder]") {
  Identity id;
  id.warnings = {"config"};
  CpuSummary cpu;
  cpu.section.note("cpu");
  GpuSummary gpu;
  gpu.section.note("gpu");
  CommSummary comm;
  comm.section.note("nccl");
  Section a("a"), b("b");
  a.note("module a");
  b.note("module b");
  const RankFile f = build_rank_file(id, cpu, gpu, comm, {a, b});
  CHECK(f.warnings ==
        std::vector<std::string>{"config", "module a", "module b", "cpu", "gpu", "nccl"});
}

namespace test_messages {
std::string pops(uint64_t n, const ModuleCounters&) { return std::to_string(n) + " pops"; }
std::string dropped(uint64_t n, const ModuleCounters&) { return std::to_string(n) + " dropped"; }
std::string untracked(uint64_t n, const ModuleCounters&) { return std::to_string(n) + " untracked"; }
}  // namespace test_messages

TEST_CASE("each section's counters land under its module's name; its warnings are formatted "
          "from them", "[builder][sections]") {
  const CounterSpec pops{"unbalanced_pops", &test_messages::pops};
  const CounterSpec dropped{"dropped_records", &test_messages::dropped};
  const CounterSpec untracked{"untracked_ranges", &test_messages::untracked};
  CpuSummary cpu;
  cpu.section.count(pops, 2);
  GpuSummary gpu;
  gpu.section.count(dropped, 0);
  Section nvtx("nvtx");
  nvtx.count(untracked, 44);
  Section quiet("quiet");  // counted nothing: no entry
  const RankFile f = build_rank_file({}, cpu, gpu, {}, {nvtx, quiet});
  CHECK(f.modules.size() == 3);
  CHECK(f.modules.at("annotations").counters == std::map<std::string, uint64_t>{{"unbalanced_pops", 2}});
  CHECK(f.modules.at("cupti").counters == std::map<std::string, uint64_t>{{"dropped_records", 0}});
  CHECK(f.modules.at("nvtx").counters == std::map<std::string, uint64_t>{{"untracked_ranges", 44}});
  CHECK(f.modules.count("nccl") == 0);
  CHECK(f.modules.count("quiet") == 0);
  // A counter at zero has no warning; the others have exactly one each.
  CHECK(f.warnings == std::vector<std::string>{"44 untracked", "2 pops"});
}

TEST_CASE("two sections of one name add up key by key", "[builder][sections]") {
  Section a("x"), b("x");
  a.count("k", 3);
  b.count("k", 4);
  b.count("j", 1);
  const RankFile f = build_rank_file({}, {}, {}, {}, {a, b});
  CHECK(f.modules.at("x").counters == std::map<std::string, uint64_t>{{"j", 1}, {"k", 7}});
}

TEST_CASE("the output depends on the summaries only, not on the order they were made",
          "[builder]") {
  // The same facts, with the GPU rows and comm entries listed in the opposite order.
  GpuSummary a;
  a.regions = {gpu_region(2, Category::kForward, 100, 1), gpu_region(3, Category::kBackward, 200, 2)};
  a.comm = {comm_time(0, CommOp::kAllReduce, 10, 1), comm_time(0, CommOp::kBroadcast, 20, 1)};
  GpuSummary b = a;
  std::swap(b.regions[0], b.regions[1]);
  std::swap(b.comm[0], b.comm[1]);
  const CpuSummary cpu = two_regions();
  const CommSummary comm = one_communicator();
  CHECK(rank_file_to_json(build_rank_file({}, cpu, a, comm)).dump() ==
        rank_file_to_json(build_rank_file({}, cpu, b, comm)).dump());
}

TEST_CASE("steps.detail rows carry the CPU wall time of the same step index", "[builder]") {
  CpuSummary cpu = two_regions();
  for (uint64_t i : {1, 2, 3}) {  // the CPU side kept steps 1..3
    Steps::Detail d;
    d.index = i;
    d.wall_ns = 1000 * (i + 1);
    cpu.steps.detail.push_back(d);
  }
  GpuSummary gpu;
  for (uint64_t i : {1, 3, 4}) {  // step 2 launched nothing; step 4 is the partial final step
    Steps::Detail d;
    d.index = i;
    d.span_ns = 10 * i;
    d.partial = i == 4;
    d.totals.gpu_busy_ns = 5 * i;
    gpu.detail.push_back(d);
  }
  const RankFile f = build_rank_file(Identity{}, cpu, gpu, CommSummary{});
  // Three rows kept (the larger side): steps 2, 3, 4; step 1 is the oldest of the union.
  REQUIRE(f.steps.detail.size() == 3);
  CHECK(f.steps.detail[0].index == 2);
  CHECK(f.steps.detail[0].wall_ns == 3000);
  CHECK(f.steps.detail[0].span_ns == 0);  // no GPU work in step 2
  CHECK(f.steps.detail[1].index == 3);
  CHECK(f.steps.detail[1].wall_ns == 4000);
  CHECK(f.steps.detail[1].span_ns == 30);
  CHECK(f.steps.detail[1].totals.gpu_busy_ns == 15);
  CHECK(f.steps.detail[2].index == 4);
  CHECK(f.steps.detail[2].wall_ns == 0);  // not ended by a tt_step: no wall time
  CHECK(f.steps.detail[2].partial);
}

namespace {

// One rank with model FLOPs and a known peak: 3 steps after warm-up in 1 s, 1e15 FLOPs per step
// (3 PFLOP/s = 3000 TFLOP/s) against a 6000 TFLOP/s peak: MFU 0.5.
RankFile with_flops(uint64_t forward_ns, uint64_t recompute_ns) {
  Identity id;
  id.model.flops_per_step = 1e15;
  id.model.peak_tflops = 6000;
  CpuSummary cpu;
  cpu.steps.count = 4;
  cpu.steps.warmup = 1;
  cpu.steps.wall_ns.count = 3;
  cpu.steps.wall_ns.total_ns = 1'000'000'000;
  GpuSummary gpu;
  gpu.categories[static_cast<std::size_t>(Category::kForward)].gpu_busy_ns = forward_ns;
  gpu.categories[static_cast<std::size_t>(Category::kRecompute)].gpu_busy_ns = recompute_ns;
  gpu.categories[static_cast<std::size_t>(Category::kBackward)].gpu_busy_ns = 3 * forward_ns;
  return build_rank_file(id, cpu, gpu, CommSummary{});
}

}  // namespace

TEST_CASE("HFU counts recompute from its GPU time against forward's, MFU stays model FLOPs", "[builder][hfu]") {
  // 300 ms of recompute against 600 ms of forward: half the forward FLOPs again, HFU = 0.5 x 1.5.
  const RankFile f = with_flops(600'000'000, 300'000'000);
  CHECK(f.steps.tflops == Approx(3000));
  CHECK(f.steps.mfu == Approx(0.5));
  CHECK(f.steps.hfu == Approx(0.75));
  CHECK(rank_file_to_json(f).at("steps").at("hfu").get<double>() == Approx(0.75));
  // The same run without checkpointing: the same MFU, and HFU unknown (absent), not MFU.
  const RankFile none = with_flops(600'000'000, 0);
  CHECK(none.steps.mfu == Approx(f.steps.mfu));
  CHECK(none.steps.hfu == 0);
  CHECK_FALSE(rank_file_to_json(none).at("steps").contains("hfu"));
  // Recompute but no forward time: the share cannot be estimated.
  CHECK(with_flops(0, 300'000'000).steps.hfu == 0);
}

TEST_CASE("detected steps give the count; a marker after them keeps its rows at their step numbers",
          "[builder][step_feed]") {
  GpuSummary gpu;
  gpu.steps_source = "detected";
  gpu.steps_detection.present = true;
  gpu.steps_detection.steps = 9;
  gpu.steps_count = 9;
  CpuSummary cpu;  // no tt_step call
  RankFile f = build_rank_file({}, cpu, gpu, {});
  CHECK(f.steps.source == "detected");
  CHECK(f.steps.count == 9);
  CHECK(f.steps.detection.present);

  // 7 detected steps, then 3 tt_step calls: marker step m is step 7 + m; its CPU rows move there.
  gpu.steps_source = "marker";
  gpu.steps_detection.steps = 7;
  gpu.steps_detection.marker_from_step = 7;
  gpu.steps_count = 10;
  Steps::Detail g;
  g.index = 8;
  g.span_ns = 500;
  gpu.detail = {g};
  cpu.steps.count = 3;
  Steps::Detail c;
  c.index = 1;
  c.wall_ns = 1234;
  cpu.steps.detail = {c};
  f = build_rank_file({}, cpu, gpu, {});
  CHECK(f.steps.source == "marker");
  CHECK(f.steps.count == 10);
  REQUIRE(f.steps.detail.size() == 1);
  CHECK(f.steps.detail[0].index == 8);
  CHECK(f.steps.detail[0].wall_ns == 1234);
  CHECK(f.steps.detail[0].span_ns == 500);

  // Neither a marker nor a detected step: the file says there are none.
  f = build_rank_file({}, CpuSummary{}, GpuSummary{}, {});
  CHECK(f.steps.source == "none");
  CHECK(f.steps.count == 0);
}

TEST_CASE("TRAINTIME_STEPS=off: the markers end no step, what they reported stays, the reason says so",
          "[builder][step_feed]") {
  CpuSummary cpu;
  cpu.steps.count = 3;
  cpu.steps.samples = 96;
  cpu.steps.wall_ns.count = 2;
  cpu.steps.wall_ns.total_ns = 2000;
  cpu.steps.samples_per_s = 5e7;
  Steps::Detail c;
  c.index = 1;
  c.wall_ns = 1000;
  cpu.steps.detail = {c};
  GpuSummary gpu;  // the step feed's: every activity in step 0
  gpu.steps_off = true;
  gpu.steps_source = "none";
  gpu.steps_detection.present = true;
  gpu.steps_detection.reason = "TRAINTIME_STEPS=off: steps are not told apart";
  Steps::Detail g;
  g.index = 0;
  g.span_ns = 500;
  g.partial = true;
  gpu.detail = {g};
  RankFile f = build_rank_file({}, cpu, gpu, {});
  CHECK(f.steps.source == "none");
  CHECK(f.steps.count == 0);
  CHECK(f.steps.wall_ns.count == 0);
  CHECK(f.steps.samples_per_s == 0);
  CHECK(f.steps.samples == 96);
  REQUIRE(f.steps.detail.size() == 1);
  CHECK(f.steps.detail[0].index == 0);
  CHECK(f.steps.detail[0].wall_ns == 0);
  CHECK(f.steps.detection.reason == "TRAINTIME_STEPS=off: steps are not told apart; 3 step marker(s) "
                                    "(tt_step, NVTX step ranges) were ignored");

  // No GPU capture (a summary with nothing of the step feed's): the same, with a reason of its own.
  GpuSummary idle;
  idle.steps_off = true;
  f = build_rank_file({}, cpu, idle, {});
  CHECK(f.steps.source == "none");
  CHECK(f.steps.count == 0);
  CHECK(f.steps.detail.empty());
  CHECK(f.steps.detection.present);
  CHECK(f.steps.detection.reason.find("TRAINTIME_STEPS=off") == 0);
}
