// The rank file (schema traintime/1): field names of the contract, a field-by-field round trip of
// a fully populated file, clear reader errors, and the atomic, non-clobbering write.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <string>

#include "traintime/core/cpu_collectives.h"
#include "traintime/core/gpu_aggregator.h"
#include "traintime/core/live_record.h"
#include "traintime/core/rank_file_json.h"
#include "traintime/core/region_registry.h"
#include "traintime/core/section.h"
#include "traintime/core/self_cost.h"
#include <nlohmann/json.hpp>

namespace fs = std::filesystem;
using nlohmann::json;
using namespace traintime::core;

namespace {

constexpr uint64_t kBig = std::numeric_limits<uint64_t>::max();

StepTotals step_totals(uint64_t base) {
  StepTotals t;
  t.gpu_busy_ns = base + 1;
  t.compute_ns = base + 2;
  t.comm_ns = base + 3;
  t.comm_overlapped_ns = base + 4;
  t.exposed_comm_ns = base + 5;
  t.io_ns = base + 6;
  t.idle_ns = base + 7;
  t.gpu_sum_ns = base + 8;
  t.compute_sum_ns = base + 9;
  t.comm_sum_ns = base + 10;
  t.io_sum_ns = base + 11;
  return t;
}

// Every field set to a distinct non-default value, so a field lost or swapped shows up.
RankFile full_rank_file() {
  RankFile f;
  f.job_id = "123456";
  f.rank = 3;
  f.world_size = 8;
  f.role = Role::kAux;
  f.host = "node-17";
  f.pid = 4242;
  f.snapshot = true;
  f.exit_reason = ExitReason::kSigterm;
  f.gpu_capture = GpuCapture::kCupti;
  f.gpu_capture_reason = "CUPTI 13.0.1 loaded from /usr/local/cuda/lib64";
  f.gpu_records_complete = false;  // a snapshot
  f.start_unix_ns = 1763793120000000000ull;
  f.end_unix_ns = 1763793180000000000ull;
  f.modules["cupti"].counters = {{"dropped_records", 7}, {"missing_context", 0}};
  f.modules["nvtx"].counters = {{"untracked_ranges", 44}};
  uint64_t n = 10;
  for (std::string_view name : kCategoryNames) {
    f.categories.set(*category_from_name(name)) = {n, n + 1, n + 2};
    n += 10;
  }

  RegionRow r;
  r.path = "step/forward/layer3";
  r.category = Category::kForward;
  r.count = 100;
  r.cpu_ns = 5000000;
  r.cpu_min_ns = 40000;
  r.cpu_max_ns = 90000;
  r.gpu_busy_ns = 4000000;
  r.gpu_sum_ns = 4500000;
  r.gpu_span_ns = 4800000;
  r.kernels = 300;
  r.by_category.set(Category::kForward) = {3000000, 3200000, 250};
  r.by_category.set(Category::kComm) = {1000000, 1300000, 50};
  r.top_kernels.push_back({"ampere_sgemm_128x64_tn", 200, 2500000});
  r.top_kernels.push_back({"void at::native::vectorized_elementwise_kernel<4>", 100, 700000});
  f.regions.push_back(r);
  RegionRow r2;
  r2.path = "step/backward";
  r2.category = Category::kBackward;
  r2.count = 1;
  r2.cpu_ns = kBig;  // the largest *_ns must survive
  f.regions.push_back(r2);
  f.top_kernels.push_back({"ampere_sgemm_128x64_tn", 260, 3100000});
  f.top_kernels.push_back({"ncclDevKernel_AllReduce_Sum_f32_RING_LL", 50, 1300000});
  f.unbalanced_pops = 2;

  f.steps.count = 12;
  f.steps.warmup = 2;
  f.steps.wall_ns = {10, 1000000000, 90000000, 110000000, 100000000, 99000000, 108000000};
  f.steps.samples = 384;
  f.steps.tokens = 786432;
  f.steps.samples_per_s = 320.5;
  f.steps.tokens_per_s = 656384.25;
  f.steps.flops_per_step = 3.5e15;
  f.steps.tflops = 35.25;
  f.steps.mfu = 0.125;
  f.steps.hfu = 0.1875;
  f.steps.totals = step_totals(1000);
  f.steps.partial_final_step = true;
  f.steps.last_end_unix_ns = 1700000000500000000ull;
  f.steps.source = "detected";
  f.steps.detection = {true, 12, 57, 1250000, 0.875, 2, 31, 3, 1, 900, 0, "nccl", 44, 5, "a reason", "amp_update_scale"};
  Steps::Detail d;
  d.index = 11;
  d.wall_ns = 101000000;
  d.span_ns = 99000000;
  d.partial = true;
  d.totals = step_totals(2000);
  d.busy_ns_by_category.set(Category::kForward) = 30000000;
  d.busy_ns_by_category.set(Category::kIo) = 1000000;
  d.memory = {true, 7000, 5000, {{0, 4000, 3000}, {1, 3500, 2000}}};
  d.torch_memory = {true, 6000, 8192};
  f.steps.detail.push_back(d);
  f.memory = {true, 9000, 5000, {{0, 6000, 3000}, {1, 3500, 2000}}};

  CommRow c;
  c.op = CommOp::kAllReduce;
  c.comm_size = 8;
  c.calls = 48;
  c.bytes = 4831838208ull;
  c.bytes_known = false;
  c.gpu_ns = 250000000;
  c.algbw_gbps = 19.25;
  c.busbw_gbps = 33.6875;
  c.sizes.push_back({67108864, 40, 4026531840ull, 200000000});
  c.sizes.push_back({1024, 8, 8192, 50000000});
  f.comm.push_back(c);

  Communicator comm;
  comm.id = "a1b2c3d4e5f60718";
  comm.size = 8;
  comm.rank = 3;
  comm.ops_enqueued = 60;
  comm.ops_completed = 59;
  comm.recent.push_back({58, CommOp::kAllReduce, 100663296, 1000, 2000});
  comm.recent.push_back({59, CommOp::kBroadcast, 4096, 3000, 3500});
  f.communicators.push_back(comm);
  // A gloo process group's collectives, timed on the CPU by traintime.torch.
  CommRow gloo;
  gloo.op = CommOp::kAllReduce;
  gloo.comm_size = 2;
  gloo.calls = 12;
  gloo.bytes = 897408;
  gloo.backend = "gloo";
  gloo.cpu_ns = 480000000;
  f.comm.push_back(gloo);
  Communicator group;
  group.id = "2c5ce426926934e7";
  group.size = 2;
  group.rank = 1;
  group.ops_enqueued = 12;
  group.ops_completed = 12;
  group.recent.push_back({12, CommOp::kAllReduce, 74784, 6325050440883, 6325084590190});
  group.backend = "gloo";
  group.cpu_clock = true;
  f.communicators.push_back(group);

  f.memcpy[CopyKind::kHtoD] = {5, 500, 50};
  f.memcpy[CopyKind::kDtoH] = {6, 600, 60};
  f.memcpy[CopyKind::kDtoD] = {7, 700, 70};
  f.memcpy[CopyKind::kPtoP] = {8, 800, 80};
  f.dropped_records = 17;
  f.capture_stats = {true, 40, 123456, 120000, 3.25, 123000, 400, 56, 7};
  f.warnings = {"TRAINTIME_WARMUP_STEPS=\"abc\" is not a non-negative integer; using the default 2",
                "unbalanced tt_pop"};
  SelfCost& sc = f.self_cost;
  sc.present = true;
  sc.threads = {{"tt-cupti", 123456789}, {"tt-hang", 2345}};
  CallbackCost launch;
  launch.module = "cupti";
  launch.what = "launch callbacks";
  launch.calls = 120000;
  launch.sampled_every = 1024;
  launch.samples = 117;
  launch.interrupted = 2;
  launch.estimated_ns = 3600000;
  launch.spread_ns = 41000;
  CallbackCost unmeasured;  // calls and no timed call yet: n/a
  unmeasured.module = "nccl";
  unmeasured.what = "NCCL wrappers";
  unmeasured.calls = 12;
  unmeasured.sampled_every = 64;
  unmeasured.measured = false;
  CallbackCost flush = exact_row("flushes", 3, 7000000);
  flush.module = "cupti";
  sc.callbacks = {launch, unmeasured, flush};
  sc.memory = {{"cupti", "activity buffers", 5000000}, {"annotations", "thread states", 70000}};
  sc.peak_bytes = 5070000;
  sc.written_bytes = 987654;
  sc.callbacks_ns = 10600000;
  sc.has_pct = true;
  sc.pct = 0.3125;
  sc.steps_wall_ns = 900000000;
  sc.steps_callbacks_ns = 2812500;
  return f;
}

void check_self_cost(const SelfCost& a, const SelfCost& b) {
  CHECK(a.present == b.present);
  REQUIRE(a.threads.size() == b.threads.size());
  for (std::size_t i = 0; i < a.threads.size(); ++i) {
    CHECK(a.threads[i].name == b.threads[i].name);
    CHECK(a.threads[i].cpu_ns == b.threads[i].cpu_ns);
  }
  REQUIRE(a.callbacks.size() == b.callbacks.size());
  for (std::size_t i = 0; i < a.callbacks.size(); ++i) {
    const CallbackCost &x = a.callbacks[i], &y = b.callbacks[i];
    INFO("callbacks[" << i << "] " << y.what);
    CHECK(x.module == y.module);
    CHECK(x.what == y.what);
    CHECK(x.calls == y.calls);
    CHECK(x.sampled_every == y.sampled_every);
    CHECK(x.samples == y.samples);
    CHECK(x.interrupted == y.interrupted);
    CHECK(x.estimated == y.estimated);
    CHECK(x.measured == y.measured);
    CHECK(x.estimated_ns == y.estimated_ns);
    CHECK(x.spread_ns == y.spread_ns);
  }
  REQUIRE(a.memory.size() == b.memory.size());
  for (std::size_t i = 0; i < a.memory.size(); ++i) {
    CHECK(a.memory[i].module == b.memory[i].module);
    CHECK(a.memory[i].what == b.memory[i].what);
    CHECK(a.memory[i].peak_bytes == b.memory[i].peak_bytes);
  }
  CHECK(a.peak_bytes == b.peak_bytes);
  CHECK(a.written_bytes == b.written_bytes);
  CHECK(a.callbacks_ns == b.callbacks_ns);
  CHECK(a.has_pct == b.has_pct);
  CHECK(a.pct == b.pct);
  CHECK(a.steps_wall_ns == b.steps_wall_ns);
  CHECK(a.steps_callbacks_ns == b.steps_callbacks_ns);
}

void check_memory(const MemoryFigures& a, const MemoryFigures& b) {
  CHECK(a.present == b.present);
  CHECK(a.peak_bytes == b.peak_bytes);
  CHECK(a.in_use_bytes == b.in_use_bytes);
  REQUIRE(a.devices.size() == b.devices.size());
  for (std::size_t i = 0; i < a.devices.size(); ++i) {
    CHECK(a.devices[i].cuda_device == b.devices[i].cuda_device);
    CHECK(a.devices[i].peak_bytes == b.devices[i].peak_bytes);
    CHECK(a.devices[i].in_use_bytes == b.devices[i].in_use_bytes);
  }
}

void check_totals(const CategoryTotals& a, const CategoryTotals& b) {
  CHECK(a.gpu_busy_ns == b.gpu_busy_ns);
  CHECK(a.gpu_sum_ns == b.gpu_sum_ns);
  CHECK(a.count == b.count);
}

void check_step_totals(const StepTotals& a, const StepTotals& b) {
  CHECK(a.gpu_busy_ns == b.gpu_busy_ns);
  CHECK(a.compute_ns == b.compute_ns);
  CHECK(a.comm_ns == b.comm_ns);
  CHECK(a.comm_overlapped_ns == b.comm_overlapped_ns);
  CHECK(a.exposed_comm_ns == b.exposed_comm_ns);
  CHECK(a.io_ns == b.io_ns);
  CHECK(a.idle_ns == b.idle_ns);
  CHECK(a.gpu_sum_ns == b.gpu_sum_ns);
  CHECK(a.compute_sum_ns == b.compute_sum_ns);
  CHECK(a.comm_sum_ns == b.comm_sum_ns);
  CHECK(a.io_sum_ns == b.io_sum_ns);
}

void check_same(const RankFile& a, const RankFile& b) {
  CHECK(a.schema == b.schema);
  CHECK(a.job_id == b.job_id);
  CHECK(a.rank == b.rank);
  CHECK(a.world_size == b.world_size);
  CHECK(a.role == b.role);
  CHECK(a.host == b.host);
  CHECK(a.pid == b.pid);
  CHECK(a.snapshot == b.snapshot);
  CHECK(a.exit_reason == b.exit_reason);
  CHECK(a.gpu_capture == b.gpu_capture);
  CHECK(a.gpu_capture_reason == b.gpu_capture_reason);
  CHECK(a.start_unix_ns == b.start_unix_ns);
  CHECK(a.end_unix_ns == b.end_unix_ns);

  REQUIRE(a.categories.listed == b.categories.listed);
  for (std::size_t c = 0; c < kCategoryCount; ++c) {
    INFO("category " << kCategoryNames[c]);
    check_totals(a.categories[static_cast<Category>(c)], b.categories[static_cast<Category>(c)]);
  }

  REQUIRE(a.regions.size() == b.regions.size());
  for (std::size_t i = 0; i < a.regions.size(); ++i) {
    const RegionRow& x = a.regions[i];
    const RegionRow& y = b.regions[i];
    INFO("region " << x.path);
    CHECK(x.path == y.path);
    CHECK(x.category == y.category);
    CHECK(x.count == y.count);
    CHECK(x.cpu_ns == y.cpu_ns);
    CHECK(x.cpu_min_ns == y.cpu_min_ns);
    CHECK(x.cpu_max_ns == y.cpu_max_ns);
    CHECK(x.gpu_busy_ns == y.gpu_busy_ns);
    CHECK(x.gpu_sum_ns == y.gpu_sum_ns);
    CHECK(x.gpu_span_ns == y.gpu_span_ns);
    CHECK(x.kernels == y.kernels);
    REQUIRE(x.by_category.listed == y.by_category.listed);
    for (std::size_t c = 0; c < kCategoryCount; ++c) {
      INFO("category " << kCategoryNames[c]);
      check_totals(x.by_category[static_cast<Category>(c)], y.by_category[static_cast<Category>(c)]);
    }
    REQUIRE(x.top_kernels.size() == y.top_kernels.size());
    for (std::size_t k = 0; k < x.top_kernels.size(); ++k) {
      CHECK(x.top_kernels[k].name == y.top_kernels[k].name);
      CHECK(x.top_kernels[k].count == y.top_kernels[k].count);
      CHECK(x.top_kernels[k].gpu_sum_ns == y.top_kernels[k].gpu_sum_ns);
    }
  }
  REQUIRE(a.top_kernels.size() == b.top_kernels.size());
  for (std::size_t k = 0; k < a.top_kernels.size(); ++k) {
    CHECK(a.top_kernels[k].name == b.top_kernels[k].name);
    CHECK(a.top_kernels[k].count == b.top_kernels[k].count);
    CHECK(a.top_kernels[k].gpu_sum_ns == b.top_kernels[k].gpu_sum_ns);
  }
  CHECK(a.unbalanced_pops == b.unbalanced_pops);

  const Steps& s = a.steps;
  const Steps& t = b.steps;
  CHECK(s.count == t.count);
  CHECK(s.warmup == t.warmup);
  CHECK(s.wall_ns.count == t.wall_ns.count);
  CHECK(s.wall_ns.total_ns == t.wall_ns.total_ns);
  CHECK(s.wall_ns.min_ns == t.wall_ns.min_ns);
  CHECK(s.wall_ns.max_ns == t.wall_ns.max_ns);
  CHECK(s.wall_ns.mean_ns == t.wall_ns.mean_ns);
  CHECK(s.wall_ns.p50_ns == t.wall_ns.p50_ns);
  CHECK(s.wall_ns.p90_ns == t.wall_ns.p90_ns);
  CHECK(s.samples == t.samples);
  CHECK(s.tokens == t.tokens);
  CHECK(s.samples_per_s == t.samples_per_s);
  CHECK(s.tokens_per_s == t.tokens_per_s);
  CHECK(s.flops_per_step == t.flops_per_step);
  CHECK(s.tflops == t.tflops);
  CHECK(s.mfu == t.mfu);
  CHECK(s.hfu == t.hfu);
  check_step_totals(s.totals, t.totals);
  CHECK(s.partial_final_step == t.partial_final_step);
  CHECK(s.last_end_unix_ns == t.last_end_unix_ns);
  CHECK(s.source == t.source);
  CHECK(s.detection.present == t.detection.present);
  CHECK(s.detection.steps == t.detection.steps);
  CHECK(s.detection.period_calls == t.detection.period_calls);
  CHECK(s.detection.period_ns == t.detection.period_ns);
  CHECK(s.detection.coverage == t.detection.coverage);
  CHECK(s.detection.relocks == t.detection.relocks);
  CHECK(s.detection.warmup_launches == t.detection.warmup_launches);
  CHECK(s.detection.late_launches == t.detection.late_launches);
  CHECK(s.detection.folded_blocks == t.detection.folded_blocks);
  CHECK(s.detection.folded_launches == t.detection.folded_launches);
  CHECK(s.detection.marker_from_step == t.detection.marker_from_step);
  CHECK(s.detection.reason == t.detection.reason);
  CHECK(s.detection.numbering == t.detection.numbering);
  CHECK(s.detection.anchor == t.detection.anchor);
  CHECK(s.detection.undecided_launches == t.detection.undecided_launches);
  CHECK(s.detection.tokens_over_cap == t.detection.tokens_over_cap);
  REQUIRE(s.detail.size() == t.detail.size());
  for (std::size_t i = 0; i < s.detail.size(); ++i) {
    CHECK(s.detail[i].index == t.detail[i].index);
    CHECK(s.detail[i].wall_ns == t.detail[i].wall_ns);
    CHECK(s.detail[i].span_ns == t.detail[i].span_ns);
    CHECK(s.detail[i].partial == t.detail[i].partial);
    check_step_totals(s.detail[i].totals, t.detail[i].totals);
    CHECK(s.detail[i].busy_ns_by_category == t.detail[i].busy_ns_by_category);
    check_memory(s.detail[i].memory, t.detail[i].memory);
    CHECK(s.detail[i].torch_memory.present == t.detail[i].torch_memory.present);
    CHECK(s.detail[i].torch_memory.allocated_peak_bytes == t.detail[i].torch_memory.allocated_peak_bytes);
    CHECK(s.detail[i].torch_memory.reserved_peak_bytes == t.detail[i].torch_memory.reserved_peak_bytes);
    CHECK(s.detail[i].torch_memory.peaks_per_step == t.detail[i].torch_memory.peaks_per_step);
    CHECK(s.detail[i].torch_memory.has_current == t.detail[i].torch_memory.has_current);
    CHECK(s.detail[i].torch_memory.allocated_bytes == t.detail[i].torch_memory.allocated_bytes);
    CHECK(s.detail[i].torch_memory.reserved_bytes == t.detail[i].torch_memory.reserved_bytes);
  }
  check_memory(a.memory, b.memory);
  check_self_cost(a.self_cost, b.self_cost);

  REQUIRE(a.comm.size() == b.comm.size());
  for (std::size_t i = 0; i < a.comm.size(); ++i) {
    const CommRow& x = a.comm[i];
    const CommRow& y = b.comm[i];
    CHECK(x.op == y.op);
    CHECK(x.comm_size == y.comm_size);
    CHECK(x.calls == y.calls);
    CHECK(x.bytes == y.bytes);
    CHECK(x.bytes_known == y.bytes_known);
    CHECK(x.gpu_ns == y.gpu_ns);
    CHECK(x.algbw_gbps == y.algbw_gbps);
    CHECK(x.busbw_gbps == y.busbw_gbps);
    CHECK(x.backend == y.backend);
    CHECK(x.cpu_ns == y.cpu_ns);
    REQUIRE(x.sizes.size() == y.sizes.size());
    for (std::size_t k = 0; k < x.sizes.size(); ++k) {
      CHECK(x.sizes[k].lo_bytes == y.sizes[k].lo_bytes);
      CHECK(x.sizes[k].calls == y.sizes[k].calls);
      CHECK(x.sizes[k].bytes == y.sizes[k].bytes);
      CHECK(x.sizes[k].gpu_ns == y.sizes[k].gpu_ns);
    }
  }

  REQUIRE(a.communicators.size() == b.communicators.size());
  for (std::size_t i = 0; i < a.communicators.size(); ++i) {
    const Communicator& x = a.communicators[i];
    const Communicator& y = b.communicators[i];
    CHECK(x.id == y.id);
    CHECK(x.size == y.size);
    CHECK(x.rank == y.rank);
    CHECK(x.ops_enqueued == y.ops_enqueued);
    CHECK(x.ops_completed == y.ops_completed);
    CHECK(x.backend == y.backend);
    CHECK(x.cpu_clock == y.cpu_clock);
    REQUIRE(x.recent.size() == y.recent.size());
    for (std::size_t k = 0; k < x.recent.size(); ++k) {
      CHECK(x.recent[k].seq == y.recent[k].seq);
      CHECK(x.recent[k].op == y.recent[k].op);
      CHECK(x.recent[k].bytes == y.recent[k].bytes);
      CHECK(x.recent[k].gpu_start_ns == y.recent[k].gpu_start_ns);
      CHECK(x.recent[k].gpu_end_ns == y.recent[k].gpu_end_ns);
    }
  }

  REQUIRE(a.memcpy.size() == b.memcpy.size());
  for (const auto& [kind, m] : a.memcpy) {
    INFO("memcpy " << copy_kind_name(kind));
    REQUIRE(b.memcpy.count(kind) == 1);
    CHECK(m.count == b.memcpy.at(kind).count);
    CHECK(m.bytes == b.memcpy.at(kind).bytes);
    CHECK(m.gpu_ns == b.memcpy.at(kind).gpu_ns);
  }
  CHECK(a.dropped_records == b.dropped_records);
  CHECK(a.capture_stats.present == b.capture_stats.present);
  CHECK(a.capture_stats.buffers == b.capture_stats.buffers);
  CHECK(a.capture_stats.records == b.capture_stats.records);
  CHECK(a.capture_stats.launch_callbacks == b.capture_stats.launch_callbacks);
  CHECK(a.capture_stats.correlation_ids_per_callback == b.capture_stats.correlation_ids_per_callback);
  CHECK(a.capture_stats.joined == b.capture_stats.joined);
  CHECK(a.capture_stats.graph_node_context == b.capture_stats.graph_node_context);
  CHECK(a.capture_stats.missing_context == b.capture_stats.missing_context);
  CHECK(a.capture_stats.overwritten == b.capture_stats.overwritten);
  CHECK(a.modules == b.modules);
  CHECK(a.warnings == b.warnings);
}

// A fresh directory under /tmp, removed with everything in it at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "traintime-test-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path, ec);
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
};

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

// j as a file on disk, read back by the report's reader (simdjson first, nlohmann on refusal).
RankFile read_through_report_reader(const json& j) {
  TempDir dir;
  const fs::path path = dir.path / "rank-00000.json";
  write_text(path, j.dump());
  std::string error;
  const std::optional<RankFile> read = read_rank_file(path.string(), &error);
  INFO(error);
  REQUIRE(read);
  return *read;
}

}  // namespace

TEST_CASE("rank file JSON uses the contract's field names and units", "[rank_file]") {
  const json j = rank_file_to_json(full_rank_file());
  CHECK(j.at("schema") == "traintime/1");
  CHECK(j.at("job_id") == "123456");
  CHECK(j.at("rank") == 3);
  CHECK(j.at("world_size") == 8);
  CHECK(j.at("role") == "aux");
  CHECK(j.at("host") == "node-17");
  CHECK(j.at("pid") == 4242);
  CHECK(j.at("snapshot") == true);
  CHECK(j.at("exit_reason") == "signal SIGTERM");
  CHECK(j.at("gpu_capture") == "cupti");
  CHECK(j.at("categories").at("forward").at("gpu_busy_ns") == 10);
  CHECK(j.at("categories").at("recompute").at("count") == 72);
  CHECK(j.at("categories").at("unattributed").at("count") == 82);
  const json& r = j.at("regions").at(0);
  CHECK(r.at("path") == "step/forward/layer3");
  CHECK(r.at("category") == "forward");
  CHECK(r.at("cpu_ns") == 5000000);
  CHECK(r.at("kernels") == 300);
  CHECK(r.at("by_category").at("comm").at("gpu_sum_ns") == 1300000);
  CHECK(r.at("top_kernels").at(0).at("name") == "ampere_sgemm_128x64_tn");
  CHECK(j.at("regions").at(1).at("cpu_ns").is_number_unsigned());
  CHECK(j.at("regions").at(1).at("cpu_ns").get<uint64_t>() == kBig);
  const json& steps = j.at("steps");
  CHECK(steps.at("count") == 12);
  CHECK(steps.at("warmup") == 2);
  CHECK(steps.at("wall_ns").at("p90_ns") == 108000000);
  CHECK(steps.at("totals").at("exposed_comm_ns") == 1005);
  CHECK(steps.at("totals").at("io_sum_ns") == 1011);
  CHECK(steps.at("detail").at(0).at("index") == 11);
  CHECK(steps.at("detail").at(0).at("partial") == true);
  CHECK(steps.at("mfu") == 0.125);
  CHECK(steps.at("hfu") == 0.1875);
  const json& c = j.at("comm").at(0);
  CHECK(c.at("op") == "AllReduce");
  CHECK(c.at("comm_size") == 8);
  CHECK(c.at("busbw_gbps") == 33.6875);
  CHECK(c.at("bytes_known") == false);
  CHECK(j.at("communicators").at(0).at("recent").at(1).at("op") == "Broadcast");
  CHECK(j.at("memcpy").at("PtoP").at("gpu_ns") == 80);
  CHECK(j.at("dropped_records") == 17);
  const json& cs = j.at("capture_stats");
  CHECK(cs.at("launch_callbacks") == 120000);
  CHECK(cs.at("correlation_ids_per_callback") == 3.25);
  CHECK(cs.at("missing_context") == 56);
  CHECK(cs.at("overwritten") == 7);
  CHECK(j.at("unbalanced_pops") == 2);
  CHECK(j.at("warnings").size() == 2);
}

TEST_CASE("exit reasons are read as states and written back by name, an unknown one as written", "[rank_file]") {
  json j = rank_file_to_json(full_rank_file());
  for (const auto& [name, reason] : std::vector<std::pair<std::string, ExitReason>>{
           {"exit", ExitReason::kExit}, {"snapshot", ExitReason::kSnapshot},
           {"suspected hang", ExitReason::kSuspectedHang}, {"killed", ExitReason::kKilled},
           {"signal SIGTERM", ExitReason::kSigterm}, {"signal SIGINT", ExitReason::kSigint},
           {"signal SIGABRT", ExitReason::kSigabrt}, {"signal", ExitReason::kSignal},
           {"drained by the scheduler", ExitReason::kOther}, {"", ExitReason::kNone}}) {
    INFO(name);
    j["exit_reason"] = name;
    const RankFile f = rank_file_from_json(j);
    CHECK(f.exit_reason == reason);
    CHECK(signal_exit(f.exit_reason) == (name.rfind("signal", 0) == 0));
    CHECK(rank_file_to_json(f).at("exit_reason") == name);
  }
  CHECK(exit_signal_name(ExitReason::kSigabrt) == "SIGABRT");
  CHECK(exit_signal_name(ExitReason::kSignal).empty());
  CHECK(exit_signal_name(ExitReason::kExit).empty());
}

TEST_CASE("an empty rank file still has every category and memcpy key, all zero", "[rank_file]") {
  const json j = rank_file_to_json(RankFile{});
  for (const char* cat :
       {"forward", "backward", "optimizer", "comm", "io", "other", "recompute", "unattributed"}) {
    INFO(cat);
    REQUIRE(j.at("categories").contains(cat));
    CHECK(j.at("categories").at(cat) == json{{"gpu_busy_ns", 0}, {"gpu_sum_ns", 0}, {"count", 0}});
  }
  CHECK(j.at("categories").size() == 8);
  for (const char* kind : {"HtoD", "DtoH", "DtoD", "PtoP"}) {
    INFO(kind);
    CHECK(j.at("memcpy").at(kind) == json{{"count", 0}, {"bytes", 0}, {"gpu_ns", 0}});
  }
  CHECK(j.at("memcpy").size() == 4);
  CHECK(j.at("gpu_capture") == "none");
  CHECK_FALSE(j.contains("capture_stats"));  // only when CUPTI capture ran
  CHECK(j.at("role") == "rank");
  CHECK(j.at("regions") == json::array());
  CHECK(j.at("comm") == json::array());
  CHECK(j.at("warnings") == json::array());
  CHECK_FALSE(j.contains("modules"));  // only when some module counted something
}

TEST_CASE("module counters are written per module as {key: count}", "[rank_file][sections]") {
  const json j = rank_file_to_json(full_rank_file());
  // Each with its format's version (core/module_format.h), read back as it was written.
  CHECK(j.at("modules") == json{{"cupti", {{"counters", {{"dropped_records", 7}, {"missing_context", 0}}}, {"version", 1}}},
                                {"nvtx", {{"counters", {{"untracked_ranges", 44}}}, {"version", 1}}}});
  CHECK(rank_file_from_json(j).modules.at("cupti").version == 1);
}

TEST_CASE("rank files with and without module counters both read", "[rank_file][sections]") {
  json j = rank_file_to_json(full_rank_file());
  REQUIRE(rank_file_from_json(j).modules.at("nvtx").counters.at("untracked_ranges") == 44);
  // A module without counters, a module from the future with fields of its own.
  j["modules"]["nvml"] = json::object();
  j["modules"]["nvml2"] = {{"counters", {{"x", 1}}}, {"devices", {1, 2}}};
  const RankFile with = rank_file_from_json(j);
  CHECK(with.modules.at("nvml").counters.empty());
  CHECK(with.modules.at("nvml2").counters == std::map<std::string, uint64_t>{{"x", 1}});
  // An older writer: no modules at all.
  j.erase("modules");
  CHECK(rank_file_from_json(j).modules.empty());
}

TEST_CASE("a mistyped module counter is refused naming its path", "[rank_file][sections]") {
  json j = rank_file_to_json(full_rank_file());
  j["modules"]["nvtx"]["counters"]["untracked_ranges"] = -1;
  CHECK_THROWS_WITH(rank_file_from_json(j),
                    Catch::Contains("\"modules.nvtx.counters.untracked_ranges\" must be an unsigned integer"));
  j["modules"]["nvtx"] = 3;
  CHECK_THROWS_WITH(rank_file_from_json(j), Catch::Contains("\"modules.nvtx\" must be an object"));
}

TEST_CASE("role and gpu_capture read back as enums; other values are refused", "[rank_file]") {
  json j = rank_file_to_json(full_rank_file());
  CHECK(rank_file_from_json(j).role == Role::kAux);
  CHECK(rank_file_from_json(j).gpu_capture == GpuCapture::kCupti);
  j["gpu_capture"] = "unavailable";
  CHECK(rank_file_from_json(j).gpu_capture == GpuCapture::kUnavailable);
  j["gpu_capture"] = "CUPTI";
  CHECK_THROWS_WITH(rank_file_from_json(j), Catch::Contains("\"gpu_capture\" must be"));
  j["gpu_capture"] = "none";
  j["role"] = "worker";
  CHECK_THROWS_WITH(rank_file_from_json(j),
                    Catch::Contains("field \"role\" must be \"rank\" or \"aux\" (got \"worker\")"));
}

TEST_CASE("rank file round-trips every field through JSON", "[rank_file]") {
  const RankFile original = full_rank_file();
  check_same(rank_file_from_json(rank_file_to_json(original)), original);
}

TEST_CASE("rank file round-trips through text and through a file on disk", "[rank_file]") {
  const RankFile original = full_rank_file();
  check_same(rank_file_from_json(json::parse(rank_file_to_json(original).dump())), original);

  TempDir dir;
  const std::string path = (dir.path / "rank-00003.json").string();
  std::string error;
  REQUIRE(write_rank_file(path, original, &error));
  const std::optional<RankFile> back = read_rank_file(path, &error);
  INFO(error);
  REQUIRE(back);
  check_same(*back, original);
}

TEST_CASE("rank file written before step detection reads as marker steps, no detection", "[rank_file]") {
  json j = rank_file_to_json(full_rank_file());
  REQUIRE(j.at("steps").at("source") == "detected");
  REQUIRE(j.at("steps").contains("detection"));
  j["steps"].erase("source");
  j["steps"].erase("detection");
  for (const RankFile& back : {rank_file_from_json(j), read_through_report_reader(j)}) {
    CHECK(back.steps.source == "marker");
    CHECK_FALSE(back.steps.detection.present);
    CHECK(back.steps.count == full_rank_file().steps.count);
  }
}

TEST_CASE("rank file written before the recompute category still reads, recompute zero", "[rank_file]") {
  json j = rank_file_to_json(full_rank_file());
  REQUIRE(j.at("categories").contains("recompute"));
  j["categories"].erase("recompute");
  const RankFile back = rank_file_from_json(j);
  REQUIRE(back.categories.has(Category::kRecompute));
  CHECK(back.categories[Category::kRecompute].gpu_busy_ns == 0);
  CHECK(back.categories[Category::kRecompute].count == 0);
  CHECK(back.categories[Category::kForward].gpu_busy_ns == full_rank_file().categories[Category::kForward].gpu_busy_ns);
  CHECK(read_through_report_reader(j).categories[Category::kRecompute].gpu_busy_ns == 0);
}

TEST_CASE("a category from a newer writer is read and left out; the known ones keep their values",
          "[rank_file]") {
  json j = rank_file_to_json(full_rank_file());
  j["categories"]["dataloader"] = {{"gpu_busy_ns", 5}, {"gpu_sum_ns", 5}, {"count", 1}};
  const RankFile back = rank_file_from_json(j);
  CHECK(back.categories == full_rank_file().categories);
  // A region's own list is checked: an unknown name there is refused, naming the field.
  j["regions"][0]["by_category"]["dataloader"] = {{"gpu_busy_ns", 5}, {"gpu_sum_ns", 5}, {"count", 1}};
  CHECK_THROWS_WITH(rank_file_from_json(j), Catch::Contains("unknown category \"dataloader\""));
}

TEST_CASE("a region lists only the categories of its work", "[rank_file]") {
  const json j = rank_file_to_json(full_rank_file());
  CHECK(j.at("regions")[0].at("by_category").size() == 2);
  const RankFile back = rank_file_from_json(j);
  CHECK(back.regions[0].by_category.has(Category::kComm));
  CHECK_FALSE(back.regions[0].by_category.has(Category::kBackward));
}

TEST_CASE("rank file written before the memory records still reads, memory absent", "[rank_file][memory]") {
  json j = rank_file_to_json(full_rank_file());
  REQUIRE(j.contains("memory"));
  CHECK(j.at("memory").at("devices").at(1).at("cuda_device") == 1);
  CHECK(j.at("steps").at("detail").at(0).at("memory").at("peak_bytes") == 7000);
  j.erase("memory");
  j["steps"]["detail"][0].erase("memory");
  const RankFile back = rank_file_from_json(j);
  CHECK_FALSE(back.memory.present);
  CHECK_FALSE(back.steps.detail.at(0).memory.present);
  CHECK_FALSE(back.steps.detail.at(0).torch_memory.present);
  // PyTorch's figures alone (no CUPTI memory records): memory holds only torch.
  RankFile torch_only = full_rank_file();
  torch_only.steps.detail.at(0).memory = {};
  const json tj = rank_file_to_json(torch_only);
  CHECK(tj.at("steps").at("detail").at(0).at("memory") ==
        json({{"torch", {{"allocated_peak_bytes", 6000}, {"reserved_peak_bytes", 8192}, {"peaks", "step"}}}}));
  const RankFile tb = rank_file_from_json(tj);
  CHECK_FALSE(tb.steps.detail.at(0).memory.present);
  CHECK((tb.steps.detail.at(0).torch_memory.present && tb.steps.detail.at(0).torch_memory.reserved_peak_bytes == 8192));
  // Peaks that run from the start (traintime.torch's default), with the step-end figures.
  RankFile run_peaks = torch_only;
  TorchMemory& rt = run_peaks.steps.detail.at(0).torch_memory;
  rt.peaks_per_step = false;
  rt.has_current = true;
  rt.allocated_bytes = 2500;
  rt.reserved_bytes = 4096;
  const json rj = rank_file_to_json(run_peaks);
  CHECK(rj.at("steps").at("detail").at(0).at("memory").at("torch") ==
        json({{"allocated_peak_bytes", 6000}, {"reserved_peak_bytes", 8192}, {"peaks", "run"},
              {"allocated_bytes", 2500}, {"reserved_bytes", 4096}}));
  const TorchMemory rb = rank_file_from_json(rj).steps.detail.at(0).torch_memory;
  CHECK((rb.present && !rb.peaks_per_step && rb.has_current && rb.allocated_bytes == 2500 &&
         rb.reserved_bytes == 4096 && rb.allocated_peak_bytes == 6000));
  // A file from before "peaks" reads as per-step peaks without step-end figures.
  json old = tj;
  old["steps"]["detail"][0]["memory"]["torch"].erase("peaks");
  const TorchMemory ob = rank_file_from_json(old).steps.detail.at(0).torch_memory;
  CHECK((ob.present && ob.peaks_per_step && !ob.has_current));
  json wrong = rj;
  wrong["steps"]["detail"][0]["memory"]["torch"]["peaks"] = "epoch";
  CHECK_THROWS_WITH(rank_file_from_json(wrong), Catch::Contains("steps.detail[0].memory.torch.peaks"));
  // A mistyped figure is refused, naming its place.
  json bad = rank_file_to_json(full_rank_file());
  bad["steps"]["detail"][0]["memory"]["devices"][0]["peak_bytes"] = "many";
  CHECK_THROWS_WITH(rank_file_from_json(bad), Catch::Contains("steps.detail[0].memory.devices[0].peak_bytes"));
}

TEST_CASE("rank file written before HFU still reads, HFU unknown and MFU kept", "[rank_file][hfu]") {
  json j = rank_file_to_json(full_rank_file());
  REQUIRE(j.at("steps").contains("hfu"));
  j["steps"].erase("hfu");
  CHECK(rank_file_from_json(j).steps.hfu == 0);
  CHECK(rank_file_from_json(j).steps.mfu == 0.125);
  const RankFile read = read_through_report_reader(j);
  CHECK(read.steps.hfu == 0);
  CHECK(read.steps.mfu == 0.125);
  // An unknown HFU is left out of the file, not written as 0 or as MFU.
  RankFile f = full_rank_file();
  f.steps.hfu = 0;
  CHECK_FALSE(rank_file_to_json(f).at("steps").contains("hfu"));
}

TEST_CASE("rank file reader rejects another schema with a clear message", "[rank_file]") {
  json j = rank_file_to_json(full_rank_file());
  j["schema"] = "traintime/2";
  CHECK_THROWS_WITH(rank_file_from_json(j),
                    Catch::Contains("unsupported schema \"traintime/2\"") &&
                        Catch::Contains("understands \"traintime/1\""));
  j.erase("schema");
  CHECK_THROWS_WITH(rank_file_from_json(j), Catch::Contains("not a traintime rank file"));
  CHECK_THROWS_WITH(rank_file_from_json(json::array()), Catch::Contains("must be an object"));
}

TEST_CASE("rank file reader names a missing or mistyped contract field", "[rank_file]") {
  const json good = rank_file_to_json(full_rank_file());
  json j = good;
  j["regions"][0].erase("cpu_ns");
  CHECK_THROWS_WITH(rank_file_from_json(j), Catch::Contains("missing field \"regions[0].cpu_ns\""));
  j = good;
  j.erase("job_id");
  CHECK_THROWS_WITH(rank_file_from_json(j), Catch::Contains("missing field \"job_id\""));
  j = good;
  j["categories"].erase("unattributed");
  CHECK_THROWS_WITH(rank_file_from_json(j),
                    Catch::Contains("missing field \"categories.unattributed\""));
  j = good;
  j["memcpy"].erase("PtoP");
  CHECK_THROWS_WITH(rank_file_from_json(j), Catch::Contains("missing field \"memcpy.PtoP\""));
  j = good;
  j["steps"]["totals"].erase("idle_ns");
  CHECK_THROWS_WITH(rank_file_from_json(j),
                    Catch::Contains("missing field \"steps.totals.idle_ns\""));
  j = good;
  j["steps"]["wall_ns"]["p50_ns"] = -5;
  CHECK_THROWS_WITH(rank_file_from_json(j),
                    Catch::Contains("\"steps.wall_ns.p50_ns\" must be an unsigned integer"));
  j = good;
  j["comm"][0]["gpu_ns"] = "12";
  CHECK_THROWS_WITH(rank_file_from_json(j),
                    Catch::Contains("\"comm[0].gpu_ns\" must be an unsigned integer"));
  j = good;
  j["regions"][0]["category"] = "training";
  CHECK_THROWS_WITH(rank_file_from_json(j), Catch::Contains("unknown category \"training\""));
}

TEST_CASE("rank file reader accepts files without the optional fields", "[rank_file]") {
  json j = rank_file_to_json(full_rank_file());
  for (const char* k :
       {"start_unix_ns", "end_unix_ns", "unbalanced_pops", "gpu_records_complete", "capture_stats", "top_kernels"})
    j.erase(k);
  j["regions"][0].erase("top_kernels");
  j["regions"][0].erase("cpu_min_ns");
  j["steps"].erase("detail");
  j["steps"].erase("samples_per_s");
  j["steps"]["totals"].erase("compute_sum_ns");
  j["comm"][0].erase("sizes");
  j["comm"][0].erase("bytes_known");
  j["communicators"][0].erase("recent");
  j["extra_field_from_the_future"] = {1, 2, 3};
  // top_kernels is part of the contract: required.
  CHECK_THROWS_WITH(rank_file_from_json(j),
                    Catch::Contains("missing field \"regions[0].top_kernels\""));
  j["regions"][0]["top_kernels"] = json::array();
  const RankFile f = rank_file_from_json(j);
  CHECK(f.start_unix_ns == 0);
  CHECK(f.top_kernels.empty());  // the rank's own list came after 1.0
  CHECK(f.gpu_records_complete);  // files from before the field: complete, as they were written
  CHECK_FALSE(f.capture_stats.present);
  CHECK(f.unbalanced_pops == 0);
  CHECK(f.regions[0].cpu_min_ns == 0);
  CHECK(f.regions[0].cpu_max_ns == 90000);
  CHECK(f.steps.detail.empty());
  CHECK(f.steps.samples_per_s == 0);
  CHECK(f.steps.totals.compute_sum_ns == 0);
  CHECK(f.steps.totals.comm_sum_ns == 1010);
  CHECK(f.steps.tokens_per_s == 656384.25);
  CHECK(f.comm[0].sizes.empty());
  CHECK(f.comm[0].bytes_known);
  CHECK(f.communicators[0].recent.empty());
}

TEST_CASE("reading a truncated rank file fails with a clear message", "[rank_file]") {
  TempDir dir;
  const fs::path path = dir.path / "rank-00000.json";
  const std::string text = rank_file_to_json(full_rank_file()).dump(1);
  write_text(path, text.substr(0, text.size() / 2));
  std::string error;
  CHECK_FALSE(read_rank_file(path.string(), &error));
  CHECK(error.find(path.string() + ": not valid JSON (truncated or corrupt?)") == 0);

  write_text(path, "");
  CHECK_FALSE(read_rank_file(path.string(), &error));
  CHECK(error.find("not valid JSON") != std::string::npos);

  CHECK_FALSE(read_rank_file((dir.path / "missing.json").string(), &error));
  CHECK(error.find("missing.json: cannot open") != std::string::npos);
}

TEST_CASE("reading a file of the wrong schema names the file and the schema", "[rank_file]") {
  TempDir dir;
  const fs::path path = dir.path / "rank-00000.json";
  write_text(path, R"({"schema": "nsys/1"})");
  std::string error;
  CHECK_FALSE(read_rank_file(path.string(), &error));
  CHECK(error == path.string() +
                     ": rank file: unsupported schema \"nsys/1\" (this reader understands "
                     "\"traintime/1\")");
}

TEST_CASE("read_rank_file refuses a mistyped field with the same message as the JSON reader",
          "[rank_file]") {
  // read_rank_file parses with simdjson; the message of a refusal comes from the nlohmann path,
  // with the field's type and value, exactly as rank_file_from_json gives it.
  json j = rank_file_to_json(full_rank_file());
  j["regions"][0]["cpu_ns"] = "soon";
  j["steps"]["detail"][0]["span_ns"] = -4;
  std::string expected;
  try {
    (void)rank_file_from_json(j);
  } catch (const std::runtime_error& e) {
    expected = e.what();
  }
  REQUIRE(expected == "rank file: field \"regions[0].cpu_ns\" must be an unsigned integer (got string \"soon\")");
  TempDir dir;
  const fs::path path = dir.path / "rank-00000.json";
  write_text(path, j.dump(1));
  std::string error;
  CHECK_FALSE(read_rank_file(path.string(), &error));
  CHECK(error == path.string() + ": " + expected);

  j["regions"][0]["cpu_ns"] = 7;
  write_text(path, j.dump(1));
  CHECK_FALSE(read_rank_file(path.string(), &error));
  CHECK(error == path.string() +
                     ": rank file: field \"steps.detail[0].span_ns\" must be an unsigned integer (got number -4)");
}

TEST_CASE("read_rank_file's typed error says what failed, the file, and the reason alone",
          "[rank_file]") {
  TempDir dir;
  const fs::path path = dir.path / "rank-00000.json";
  const auto read = [&](const std::string& text) {
    write_text(path, text);
    ReadError e;
    CHECK_FALSE(read_rank_file(path.string(), &e));
    CHECK(e.file == path.string());
    return e;
  };
  ReadError e = read(R"({"schema": "nsys/1"})");
  CHECK(e.kind == ReadError::Kind::kSchema);
  CHECK(e.detail == "unsupported schema \"nsys/1\" (this reader understands \"traintime/1\")");
  CHECK(read_error_line(e) == path.string() + ": rank file: " + e.detail);

  json j = rank_file_to_json(full_rank_file());
  j["memcpy"].erase("PtoP");
  e = read(j.dump());
  CHECK(e.kind == ReadError::Kind::kSchema);
  CHECK(e.detail == "missing field \"memcpy.PtoP\"");

  e = read(R"({"schema": "traintime/1", "schema": "traintime/1"})");
  CHECK(e.kind == ReadError::Kind::kDuplicateKey);
  CHECK(e.detail.rfind("duplicate key \"schema\"", 0) == 0);
  CHECK(read_error_line(e) == path.string() + ": " + e.detail);

  e = read("{\"schema\": ");
  CHECK(e.kind == ReadError::Kind::kNotJson);
  CHECK(e.detail.rfind("not valid JSON (truncated or corrupt?)", 0) == 0);

  e = read(std::string(kLiveRecordMagic, sizeof kLiveRecordMagic));
  CHECK(e.kind == ReadError::Kind::kBadRecord);
  CHECK(e.detail == "not a traintime record (bad header)");

  const std::string missing = (dir.path / "missing.json").string();
  CHECK_FALSE(read_rank_file(missing, &e));
  CHECK(e.kind == ReadError::Kind::kUnreadable);
  CHECK(e.file == missing);
  CHECK(e.detail == "cannot open: No such file or directory");
}

TEST_CASE("writing a rank file leaves exactly that file, no temporaries", "[rank_file]") {
  TempDir dir;
  std::string error;
  REQUIRE(write_rank_file((dir.path / "rank-00000.json").string(), full_rank_file(), &error));
  REQUIRE(write_rank_file((dir.path / "rank-00001.json").string(), RankFile{}, &error));
  CHECK(dir.entries() == std::vector<std::string>{"rank-00000.json", "rank-00001.json"});
  const auto mode = fs::status(dir.path / "rank-00000.json").permissions();
  CHECK((mode & fs::perms::others_read) != fs::perms::none);
}

TEST_CASE("writing never clobbers an existing rank file", "[rank_file]") {
  TempDir dir;
  const std::string path = (dir.path / "rank-00000.json").string();
  write_text(path, "another process's file");
  std::string error;
  CHECK_FALSE(write_rank_file(path, full_rank_file(), &error));
  CHECK(error == path + ": already exists (not overwritten)");
  std::ifstream in(path);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(content == "another process's file");
  CHECK(dir.entries() == std::vector<std::string>{"rank-00000.json"});
}

TEST_CASE("the owner can replace its own rank file atomically", "[rank_file]") {
  TempDir dir;
  const std::string path = (dir.path / "rank-00000.json").string();
  RankFile f = full_rank_file();
  std::string error;
  REQUIRE(write_rank_file(path, f, &error, WriteMode::kCreateNew));
  f.snapshot = false;
  f.dropped_records = 99;
  REQUIRE(write_rank_file(path, f, &error, WriteMode::kReplace));
  const auto back = read_rank_file(path, &error);
  REQUIRE(back);
  CHECK_FALSE(back->snapshot);
  CHECK(back->dropped_records == 99);
  CHECK(dir.entries() == std::vector<std::string>{"rank-00000.json"});
}

TEST_CASE("a symlink planted at the file's name is replaced, never written through",
          "[rank_file]") {
  TempDir dir;
  const fs::path victim = dir.path / "victim.txt";
  { std::ofstream(victim) << "keep me\n"; }
  for (const char* name : {"rank-00000.json", "rank-00000.trace.json"}) {
    const fs::path path = dir.path / name;
    fs::create_symlink(victim, path);
    std::string error;
    const bool ok = std::string(name).find("trace") != std::string::npos
                        ? write_text_file(path.string(), "{}\n", &error, WriteMode::kReplace)
                        : write_rank_file(path.string(), full_rank_file(), &error, WriteMode::kReplace);
    REQUIRE(ok);
    CHECK_FALSE(fs::is_symlink(path));
    CHECK((fs::status(path).permissions() & fs::perms::others_write) == fs::perms::none);
  }
  std::ifstream in(victim);
  std::string kept;
  std::getline(in, kept);
  CHECK(kept == "keep me");
}

TEST_CASE("writing into an unwritable directory fails cleanly and keeps errno", "[rank_file]") {
  TempDir dir;
  std::vector<std::string> bad_paths = {
      (dir.path / "no-such-dir" / "rank-00000.json").string(),  // missing directory
      "/proc/self/rank-00000.json",                             // a directory nobody can write
  };
  const fs::path locked = dir.path / "locked";
  fs::create_directory(locked);
  if (geteuid() != 0) {  // root ignores directory permissions
    fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
    bad_paths.push_back((locked / "rank-00000.json").string());
  }
  for (const std::string& path : bad_paths) {
    INFO(path);
    std::string error;
    errno = 1234;
    CHECK_FALSE(write_rank_file(path, full_rank_file(), &error));
    CHECK(errno == 1234);
    CHECK(error.find(path + ": cannot create a file in ") == 0);
  }
  fs::permissions(locked, fs::perms::owner_all);
  CHECK(fs::is_empty(locked));
  CHECK(dir.entries() == std::vector<std::string>{"locked"});
}

TEST_CASE("names with invalid UTF-8 are written, not fatal", "[rank_file]") {
  TempDir dir;
  RankFile f;
  RegionRow r;
  r.path = "step/\xff\xfe-layer";
  f.regions.push_back(r);
  const std::string path = (dir.path / "rank-00000.json").string();
  std::string error;
  REQUIRE(write_rank_file(path, f, &error));
  const auto back = read_rank_file(path, &error);
  REQUIRE(back);
  REQUIRE(back->regions.size() == 1);
  CHECK(back->regions[0].path.find("-layer") != std::string::npos);
  CHECK(back->regions[0].path.find("step/") == 0);
}

TEST_CASE("non-finite rates are written as 0", "[rank_file]") {
  RankFile f;
  f.steps.samples_per_s = std::numeric_limits<double>::infinity();
  f.steps.tokens_per_s = std::numeric_limits<double>::quiet_NaN();
  const json j = rank_file_to_json(f);
  CHECK(j.at("steps").at("samples_per_s") == 0.0);
  CHECK(j.at("steps").at("tokens_per_s") == 0.0);
  CHECK_NOTHROW(rank_file_from_json(json::parse(j.dump())));
}

namespace {

// docs/schema.md, found from this file's own path (tests/core/ -> repo root).
std::string schema_doc() {
  const fs::path doc = fs::path(__FILE__).parent_path().parent_path().parent_path() / "docs" /
                       "schema.md";
  std::ifstream in(doc);
  REQUIRE(in.good());
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Every object key the writer emits, except the keys of maps keyed by data (category names,
// memcpy kinds), which the document lists in prose.
void collect_keys(const json& j, std::set<std::string>& keys, bool keys_are_data = false) {
  if (j.is_array()) {
    for (const json& e : j) collect_keys(e, keys);
  } else if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (!keys_are_data) keys.insert(k);
      const bool map_valued = k == "categories" || k == "by_category" || k == "memcpy" ||
                              k == "busy_ns_by_category" || k == "modules" || k == "counters";
      collect_keys(v, keys, map_valued);
    }
  }
}

}  // namespace

TEST_CASE("docs/schema.md documents every field the writer emits", "[rank_file][doc]") {
  const std::string doc = schema_doc();
  std::set<std::string> keys;
  collect_keys(rank_file_to_json(full_rank_file()), keys);
  CHECK(keys.size() > 60);
  for (const std::string& k : keys) {
    INFO("field " << k);
    CHECK(doc.find("`" + k + "`") != std::string::npos);
  }
}

TEST_CASE("docs/schema.md lists every counter the annotation and GPU sections write",
          "[rank_file][doc][sections]") {
  const std::string doc = schema_doc();
  const RegionRegistry registry;
  const GpuAggregator aggregator;
  CpuCollectives collectives;
  const std::vector<Section> sections = {registry.summary().section, aggregator.summary(0).section,
                                         [&] {
                                           CpuCollective c;
                                           c.group = "2c5ce426926934e7";
                                           c.seq = 1;
                                           collectives.record(c);
                                           return collectives.summary().section;
                                         }()};
  for (const Section& s : sections) {
    CHECK(doc.find("| `" + std::string(s.name) + "` |") != std::string::npos);
    CHECK_FALSE(s.counters.counters.empty());
    for (const auto& [key, count] : s.counters.counters) {
      INFO(s.name << " counter " << key);
      CHECK(doc.find("`" + key + "`") != std::string::npos);
    }
  }
}

TEST_CASE("the example in docs/schema.md is a valid traintime/1 rank file", "[rank_file][doc]") {
  const std::string doc = schema_doc();
  const std::size_t open = doc.find("```json\n");
  REQUIRE(open != std::string::npos);
  const std::size_t start = open + 8;
  const std::size_t close = doc.find("\n```", start);
  REQUIRE(close != std::string::npos);
  const RankFile f = rank_file_from_json(json::parse(doc.substr(start, close - start)));
  CHECK(f.schema == "traintime/1");
  CHECK(f.categories.size() == kCategoryCount);
  CHECK_FALSE(f.regions.empty());
}
