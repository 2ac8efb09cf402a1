#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gpu_rank_file.h"
#include "traintime/core/gpu_aggregator.h"
#include <nlohmann/json.hpp>

using namespace traintime::core;

namespace {

// One activity with its launch context and the category of its region.
struct Act {
  GpuActivity a;
  LaunchContext ctx;
  Category region = Category::kOther;
};

Act kern(uint64_t start, uint64_t end, PathId path, Category region, uint32_t step = 0,
         uint32_t stream = 7, std::string_view name = "k") {
  Act x;
  x.a.kind = ActivityKind::kKernel;
  x.a.start_ns = start;
  x.a.end_ns = end;
  x.a.stream = stream;
  x.a.name = name;
  x.ctx.path = path;
  x.ctx.step = step;
  x.ctx.entry = path == kNoPath ? 0 : 1000 + path;
  x.region = region;
  return x;
}

Act allreduce(uint64_t start, uint64_t end, uint32_t step = 0) {
  Act x = kern(start, end, kNoPath, Category::kOther, step, 9, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  x.ctx.comm.op = CommOp::kAllReduce;
  return x;
}

Act copy(uint64_t start, uint64_t end, CopyKind kind, uint64_t bytes, PathId path, Category region,
         uint32_t step = 0) {
  Act x = kern(start, end, path, region, step, 3, "");
  x.a.kind = ActivityKind::kMemcpy;
  x.a.copy_kind = kind;
  x.a.bytes = bytes;
  return x;
}

std::string name_of(PathId p) { return "path" + std::to_string(p); }

RankFile run(GpuAggregator& agg, const std::vector<Act>& acts, uint64_t steps_completed,
             const CommCallTable::Snapshot* calls = nullptr) {
  for (const Act& x : acts) agg.ingest(x.a, x.ctx, x.region);
  RankFile f = testing::gpu_rank_file(agg, name_of, steps_completed, calls);
  return f;
}

const RegionRow* region(const RankFile& f, const std::string& path) {
  for (const auto& r : f.regions)
    if (r.path == path) return &r;
  return nullptr;
}

// Forward [0,100), AllReduce [50,150) on another stream, backward [120,200), io copy [250,300).
std::vector<Act> overlap_step() {
  return {kern(0, 100, 1, Category::kForward), allreduce(50, 150),
          kern(120, 200, 2, Category::kBackward, 0, 8),
          copy(250, 300, CopyKind::kHtoD, 1000, 3, Category::kIo)};
}

}  // namespace

TEST_CASE("step breakdown: overlapped and exposed comm, io and idle on one device",
          "[aggregator]") {
  GpuAggregator agg;
  RankFile f = run(agg, overlap_step(), 1);
  const StepTotals& t = f.steps.totals;
  // compute = [0,100) ∪ [120,200) = 180; comm = 100; comm ∩ compute = [50,100)+[120,150) = 80.
  CHECK(t.compute_ns == 180);
  CHECK(t.comm_ns == 100);
  CHECK(t.comm_overlapped_ns == 80);
  CHECK(t.exposed_comm_ns == 20);  // [100,120)
  CHECK(t.io_ns == 50);
  CHECK(t.gpu_busy_ns == 250);  // [0,200) ∪ [250,300)
  CHECK(t.idle_ns == 50);       // span [0,300) − 250
  CHECK(t.gpu_sum_ns == 330);
  CHECK(t.compute_sum_ns == 180);
  CHECK(t.comm_sum_ns == 100);
  CHECK(t.io_sum_ns == 50);
  CHECK(f.categories[Category::kForward].gpu_busy_ns == 100);
  CHECK(f.categories[Category::kBackward].gpu_busy_ns == 80);
  CHECK(f.categories[Category::kComm].gpu_busy_ns == 100);
  CHECK(f.categories[Category::kComm].count == 1);
  CHECK(f.categories[Category::kIo].gpu_busy_ns == 50);
  CHECK(f.categories[Category::kUnattributed].count == 0);
  CHECK_FALSE(f.steps.partial_final_step);
}

TEST_CASE("step breakdown does not depend on arrival order", "[aggregator]") {
  std::vector<Act> acts = overlap_step();
  std::reverse(acts.begin(), acts.end());
  GpuAggregator agg;
  RankFile f = run(agg, acts, 1);
  CHECK(f.steps.totals.comm_overlapped_ns == 80);
  CHECK(f.steps.totals.exposed_comm_ns == 20);
  CHECK(f.steps.totals.idle_ns == 50);
  CHECK(f.steps.totals.gpu_busy_ns == 250);
}

TEST_CASE("busy time is a union: overlapping streams of one category count once",
          "[aggregator]") {
  GpuAggregator agg;
  RankFile f = run(agg,
                   {kern(0, 100, 1, Category::kForward, 0, 1), kern(50, 150, 1, Category::kForward, 0, 2),
                    kern(60, 70, 1, Category::kForward, 0, 3)},
                   1);
  CHECK(f.categories[Category::kForward].gpu_busy_ns == 150);
  CHECK(f.categories[Category::kForward].gpu_sum_ns == 210);
  CHECK(f.categories[Category::kForward].count == 3);
  CHECK(f.steps.totals.idle_ns == 0);
}

TEST_CASE("devices are broken down separately and summed", "[aggregator]") {
  std::vector<Act> acts = {kern(0, 100, 1, Category::kForward), kern(50, 80, 1, Category::kForward),
                           kern(300, 400, 1, Category::kForward)};
  acts[1].a.device = 1;  // overlaps device 0 in time but is another GPU
  GpuAggregator agg;
  RankFile f = run(agg, acts, 1);
  // device 0: busy 200 in span [0,400) → idle 200; device 1: busy 30, idle 0.
  CHECK(f.categories[Category::kForward].gpu_busy_ns == 230);
  CHECK(f.steps.totals.idle_ns == 200);
  REQUIRE(f.steps.detail.size() == 1);
  CHECK(f.steps.detail[0].span_ns == 430);
}

TEST_CASE("steps are broken down separately: the gap between steps is not idle",
          "[aggregator]") {
  GpuAggregator agg;
  RankFile f = run(agg, {kern(0, 100, 1, Category::kForward, 0), kern(1000, 1100, 1, Category::kForward, 1),
                         kern(1150, 1200, 1, Category::kForward, 1)},
                   2);
  CHECK(f.steps.totals.idle_ns == 50);  // only [1100,1150) inside step 1
  REQUIRE(f.steps.detail.size() == 2);
  CHECK(f.steps.detail[0].index == 0);
  CHECK(f.steps.detail[0].totals.gpu_busy_ns == 100);
  CHECK(f.steps.detail[1].index == 1);
  CHECK(f.steps.detail[1].totals.gpu_busy_ns == 150);
  CHECK(f.steps.detail[1].totals.idle_ns == 50);
  CHECK(f.steps.detail[1].busy_ns_by_category[Category::kForward] == 150);
}

TEST_CASE("work launched after the last tt_step is a partial final step, still in totals",
          "[aggregator]") {
  GpuAggregator agg;
  RankFile f = run(agg, {kern(0, 100, 1, Category::kForward, 0), kern(200, 260, 1, Category::kForward, 1),
                         kern(300, 310, kNoPath, Category::kOther, 2)},
                   2);
  CHECK(f.steps.partial_final_step);
  CHECK(f.steps.totals.gpu_busy_ns == 170);
  CHECK(f.categories[Category::kUnattributed].gpu_busy_ns == 10);
  REQUIRE(f.steps.detail.size() == 3);
  CHECK_FALSE(f.steps.detail[1].partial);
  CHECK(f.steps.detail[2].partial);
  RankFile g = testing::gpu_rank_file(agg, name_of, 3);  // a third tt_step completes that step
  CHECK_FALSE(g.steps.partial_final_step);
}

TEST_CASE("step detail keeps the most recent steps only", "[aggregator]") {
  AggregatorOptions o;
  o.step_detail = 3;
  GpuAggregator agg(o);
  std::vector<Act> acts;
  for (uint32_t s = 0; s < 10; ++s) acts.push_back(kern(s * 100, s * 100 + 10, 1, Category::kForward, s));
  RankFile f = run(agg, acts, 10);
  REQUIRE(f.steps.detail.size() == 3);
  CHECK(f.steps.detail[0].index == 7);
  CHECK(f.steps.detail[2].index == 9);
  CHECK(f.steps.totals.gpu_busy_ns == 100);  // totals cover all ten
}

TEST_CASE("records of a folded step arrive late: counted once as isolated intervals",
          "[aggregator]") {
  AggregatorOptions o;
  o.max_open_steps = 2;
  GpuAggregator agg(o);
  // Step 0 is folded when step 2 opens (three open steps > 2).
  run(agg, {kern(0, 100, 1, Category::kForward, 0), kern(1000, 1100, 1, Category::kForward, 1),
            kern(2000, 2100, 1, Category::kForward, 2)},
      3);
  CHECK(agg.late_records() == 0);
  // A record of step 0 overlapping its folded kernel by 50 ns.
  Act late = kern(50, 150, 1, Category::kForward, 0);
  agg.ingest(late.a, late.ctx, late.region);
  CHECK(agg.late_records() == 1);
  RankFile f = testing::gpu_rank_file(agg, name_of, 3);
  // Exact union would be 350; the late record is counted whole: 300 + 100.
  CHECK(f.categories[Category::kForward].gpu_busy_ns == 400);
  CHECK(f.categories[Category::kForward].gpu_sum_ns == 400);  // raw sums stay exact
  CHECK(f.categories[Category::kForward].count == 4);
  CHECK(std::any_of(f.warnings.begin(), f.warnings.end(),
                    [](const std::string& w) { return w.find("arrived after") != std::string::npos; }));
}

TEST_CASE("records of an open step arriving out of order are exact", "[aggregator]") {
  AggregatorOptions o;
  o.max_open_steps = 4;
  GpuAggregator agg(o);
  // Buffers of two threads: steps 0..2 from one, then step 0 from the other.
  RankFile f = run(agg, {kern(0, 100, 1, Category::kForward, 0), kern(1000, 1100, 1, Category::kForward, 1),
                         kern(2000, 2100, 1, Category::kForward, 2), kern(50, 150, 2, Category::kBackward, 0, 2)},
                   3);
  CHECK(agg.late_records() == 0);
  CHECK(f.steps.totals.gpu_busy_ns == 350);  // step 0: [0,150)
  CHECK(f.steps.totals.compute_ns == 350);
}

TEST_CASE("a step larger than the open-record budget is folded in segments", "[aggregator]") {
  AggregatorOptions o;
  o.max_open_records = 4;
  GpuAggregator agg(o);
  std::vector<Act> acts;
  for (uint64_t i = 0; i < 10; ++i) acts.push_back(kern(i * 100, i * 100 + 40, 1, Category::kForward, 0));
  RankFile f = run(agg, acts, 0);
  CHECK(agg.footprint().open_records <= 4);
  CHECK(f.steps.totals.gpu_busy_ns == 400);
  CHECK(f.steps.totals.idle_ns == 940 - 400);  // span [0,940) kept across segments
  CHECK(f.steps.partial_final_step);           // no tt_step at all
}

TEST_CASE("region rows: busy, sum, per-entry span, kernels and category split", "[aggregator]") {
  GpuAggregator agg;
  std::vector<Act> acts = {kern(0, 10, 1, Category::kForward, 0, 1), kern(30, 40, 1, Category::kForward, 0, 1),
                           kern(5, 15, 1, Category::kForward, 0, 2), kern(100, 105, 1, Category::kForward, 0, 1)};
  acts[3].ctx.entry = 2002;  // a second entry of the same region
  // An AllReduce launched inside the region counts as comm in the region's split.
  Act ar = allreduce(200, 260);
  ar.ctx.path = 1;
  ar.ctx.entry = 2002;
  ar.region = Category::kForward;
  acts.push_back(ar);
  CpuSummary cpu;
  RegionRow cpu_row;
  cpu_row.path = "path1";
  cpu_row.category = Category::kForward;
  cpu_row.count = 2;
  cpu_row.cpu_ns = 12345;
  cpu.regions.push_back(cpu_row);
  cpu.region_ids.push_back(1);  // rows join by PathId
  cpu.path_names = {"", "path1"};
  for (const Act& x : acts) agg.ingest(x.a, x.ctx, x.region);
  const RankFile f = build_rank_file({}, cpu, agg.summary(1), {});
  REQUIRE(f.regions.size() == 1);
  const RegionRow& r = f.regions[0];
  CHECK(r.cpu_ns == 12345);  // the CPU part is kept
  CHECK(r.count == 2);
  CHECK(r.kernels == 5);
  CHECK(r.gpu_sum_ns == 10 + 10 + 10 + 5 + 60);
  CHECK(r.gpu_busy_ns == 15 + 10 + 5 + 60);  // [0,15) [30,40) [100,105) [200,260)
  // entry 1001: [0,40) = 40; entry 2002: [100,260) = 160
  CHECK(r.gpu_span_ns == 200);
  CHECK(r.by_category[Category::kForward].gpu_busy_ns == 30);
  CHECK(r.by_category[Category::kForward].count == 4);
  CHECK(r.by_category[Category::kComm].gpu_busy_ns == 60);
  CHECK(!r.by_category.has(Category::kBackward));
}

TEST_CASE("regions with GPU work only are appended with their category", "[aggregator]") {
  GpuAggregator agg;
  RankFile f = run(agg, {kern(0, 10, 4, Category::kOptimizer)}, 1);
  const RegionRow* r = region(f, "path4");
  REQUIRE(r != nullptr);
  CHECK(r->category == Category::kOptimizer);
  CHECK(r->count == 0);
  CHECK(r->gpu_busy_ns == 10);
}

TEST_CASE("top kernels per region are demangled and ordered by total time", "[aggregator]") {
  AggregatorOptions o;
  o.top_kernels = 2;
  GpuAggregator agg(o);
  std::string foo = "_Z3fooi";
  std::string foo_copy = foo;  // same name at another address
  RankFile f = run(agg, {kern(0, 10, 1, Category::kForward, 0, 1, foo), kern(20, 40, 1, Category::kForward, 0, 1, foo_copy),
                         kern(50, 55, 1, Category::kForward, 0, 1, "bar"), kern(60, 61, 1, Category::kForward, 0, 1, "baz")},
                   1);
  const RegionRow* r = region(f, "path1");
  REQUIRE(r != nullptr);
  REQUIRE(r->top_kernels.size() == 2);
  CHECK(r->top_kernels[0].name == "foo(int)");
  CHECK(r->top_kernels[0].count == 2);
  CHECK(r->top_kernels[0].gpu_sum_ns == 30);
  CHECK(r->top_kernels[1].name == "bar");
}

TEST_CASE("a kernel name address reused for another name of the same length is a new name",
          "[aggregator]") {
  // The compare of a cached name runs in bytes, words and blocks of 16 and 64: every length
  // around those sizes, with the one differing character at every position.
  std::vector<std::pair<std::string, std::size_t>> cases;  // name, position of the change
  for (std::size_t n : {1, 2, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 39, 47, 48, 49, 63, 64, 65, 79,
                        80, 81, 95, 96, 97, 127, 128, 129, 200}) {
    std::string name(n, 'x');
    for (std::size_t i = 0; i < n; ++i) name[i] = static_cast<char>('a' + (i * 7) % 26);
    for (std::size_t at = 0; at < n; ++at) cases.emplace_back(name, at);
  }
  for (const auto& [first, changed] : cases) {
    CAPTURE(first.size(), changed);
    std::string second = first;
    second[changed] ^= 1;  // same length, one character differs
    GpuAggregator agg;
    std::vector<char> buf(first.begin(), first.end());
    const std::string_view at(buf.data(), buf.size());
    Act a = kern(0, 10, 1, Category::kForward, 0, 1, at);
    agg.ingest(a.a, a.ctx, a.region);
    std::copy(second.begin(), second.end(), buf.begin());  // the same address, another name
    a = kern(20, 50, 1, Category::kForward, 0, 1, at);
    agg.ingest(a.a, a.ctx, a.region);
    RankFile f = run(agg, {}, 1);
    const RegionRow* r = region(f, "path1");
    REQUIRE(r != nullptr);
    REQUIRE(r->top_kernels.size() == 2);
    CHECK(r->top_kernels[0].name == second);
    CHECK(r->top_kernels[0].gpu_sum_ns == 30);
    CHECK(r->top_kernels[1].name == first);
    CHECK(r->top_kernels[1].count == 1);
    CHECK(agg.footprint().kernel_names == 4);
  }
}

TEST_CASE("the rank's own top kernels add up every region and the work with no region open by name",
          "[aggregator]") {
  // A job with no annotation at all still sees its kernels (the real traces' bare replays): the
  // same kernel from two regions and from nowhere is one row; comm kernels are listed too.
  AggregatorOptions o;
  o.top_kernels = 3;
  GpuAggregator agg(o);
  RankFile f = run(agg,
                   {kern(0, 10, 1, Category::kForward, 0, 1, "gemm"), kern(10, 30, 2, Category::kBackward, 0, 1, "gemm"),
                    kern(30, 70, kNoPath, Category::kOther, 0, 1, "gemm"), kern(70, 75, kNoPath, Category::kOther, 0, 1, "_Z3fooi"),
                    kern(75, 76, kNoPath, Category::kOther, 0, 1, "tiny"), allreduce(80, 130),
                    copy(130, 140, CopyKind::kHtoD, 10, kNoPath, Category::kOther)},
                   1);
  REQUIRE(f.top_kernels.size() == 3);
  CHECK(f.top_kernels[0].name == "gemm");
  CHECK(f.top_kernels[0].count == 3);
  CHECK(f.top_kernels[0].gpu_sum_ns == 70);
  CHECK(f.top_kernels[1].name == "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  CHECK(f.top_kernels[1].gpu_sum_ns == 50);
  CHECK(f.top_kernels[2].name == "foo(int)");  // demangled; "tiny" (1 ns) is beyond the top 3
  // The regions' own lists are unchanged: each holds its own launches only.
  REQUIRE(region(f, "path1") != nullptr);
  CHECK(region(f, "path1")->top_kernels.size() == 1);
  CHECK(region(f, "path1")->top_kernels[0].gpu_sum_ns == 10);
  CHECK(f.regions.size() == 2);  // no row for the unattributed work
  // The same figures when every record takes the full path (a fresh site cache each time).
  GpuAggregator again(o);
  for (int i = 0; i < 5; ++i) {
    Act a = kern(200 + i * 10, 205 + i * 10, kNoPath, Category::kOther, 0, 1, "gemm");
    again.ingest(a.a, a.ctx, a.region);
  }
  RankFile g = testing::gpu_rank_file(again, name_of, 1);
  REQUIRE(g.top_kernels.size() == 1);
  CHECK((g.top_kernels[0].count == 5 && g.top_kernels[0].gpu_sum_ns == 25));
}

TEST_CASE("(region, kernel) pairs never outnumber their cap, (other kernels) pairs included",
          "[aggregator]") {
  // Each slot's "(other kernels)" pair, the no-region one too, is kept room for within the cap
  // (for the regions known when it is reached): the pair index then never grows past the cap's
  // size (a doubling of it at 2^16 pairs cost the memory budget of a kernel name). Every kernel
  // is still counted, by name or as other.
  AggregatorOptions o;
  o.max_region_kernels = 8;
  o.top_kernels = 100;
  GpuAggregator agg(o);
  std::vector<std::string> names;
  for (int n = 0; n < 20; ++n) names.push_back("kernel_" + std::to_string(n));
  uint64_t t = 0, kernels = 0;
  for (int round = 0; round < 20; ++round)
    for (PathId path : {PathId{1}, PathId{2}, kNoPath}) {
      const std::string& name = names[static_cast<std::size_t>(round)];
      Act a = kern(t, t + 3, path, path == kNoPath ? Category::kOther : Category::kForward, 0, 1, name);
      agg.ingest(a.a, a.ctx, a.region);
      t += 10;
      ++kernels;
    }
  CHECK(agg.footprint().region_kernels <= 8);
  RankFile f = run(agg, {}, 1);
  uint64_t listed = 0, other = 0;
  for (const KernelStat& k : f.top_kernels) {
    listed += k.count;
    if (k.name == "(other kernels)") other = k.count;
  }
  CHECK(listed == kernels);
  CHECK(other > 0);
  CHECK(f.categories[Category::kForward].count + f.categories[Category::kUnattributed].count == kernels);
}

TEST_CASE("kernels of more launch sites than the site cache holds are each counted where launched",
          "[aggregator]") {
  // 400 names from 4 regions: 1600 sites, more than the cache's 1024 entries, visited round
  // robin so that every site is evicted before it comes back. Every (region, kernel) pair must
  // still add up, as must a kernel without a name.
  AggregatorOptions o;
  o.top_kernels = 1000;
  GpuAggregator agg(o);
  std::vector<std::string> names;
  for (int n = 0; n < 400; ++n) names.push_back("kernel_" + std::to_string(n));
  uint64_t t = 0;
  for (int round = 0; round < 3; ++round)
    for (PathId path = 1; path <= 4; ++path)
      for (int n = 0; n < 400; ++n) {
        Act a = kern(t, t + 1 + path, path, Category::kForward, 0, 1, names[n]);
        agg.ingest(a.a, a.ctx, a.region);
        t += 10;
      }
  Act nameless = kern(t, t + 7, 2, Category::kForward, 0, 1, "");
  agg.ingest(nameless.a, nameless.ctx, nameless.region);
  RankFile f = run(agg, {}, 1);
  for (PathId path = 1; path <= 4; ++path) {
    const RegionRow* r = region(f, "path" + std::to_string(path));
    REQUIRE(r != nullptr);
    CHECK(r->kernels == (path == 2 ? 1201u : 1200u));
    CHECK(r->gpu_sum_ns == 1200 * (1 + path) + (path == 2 ? 7u : 0u));
    REQUIRE(r->top_kernels.size() == (path == 2 ? 401u : 400u));
    for (const KernelStat& k : r->top_kernels) {
      CHECK(k.count == (k.name.empty() ? 1u : 3u));
      CHECK(k.gpu_sum_ns == (k.name.empty() ? 7u : 3 * (1 + path)));
    }
  }
  CHECK(agg.footprint().kernel_names == 402);
}

TEST_CASE("memcpy is broken down by direction with bytes and time", "[aggregator]") {
  GpuAggregator agg;
  RankFile f = run(agg, {copy(0, 10, CopyKind::kHtoD, 100, 1, Category::kIo), copy(20, 40, CopyKind::kHtoD, 300, 1, Category::kIo),
                         copy(50, 55, CopyKind::kDtoH, 7, 1, Category::kIo), copy(60, 61, CopyKind::kDtoD, 8, 1, Category::kIo),
                         copy(70, 80, CopyKind::kPtoP, 9, 1, Category::kIo)},
                   1);
  CHECK(f.memcpy.at(CopyKind::kHtoD).count == 2);
  CHECK(f.memcpy.at(CopyKind::kHtoD).bytes == 400);
  CHECK(f.memcpy.at(CopyKind::kHtoD).gpu_ns == 30);
  CHECK(f.memcpy.at(CopyKind::kDtoH).bytes == 7);
  CHECK(f.memcpy.at(CopyKind::kDtoD).gpu_ns == 1);
  CHECK(f.memcpy.at(CopyKind::kPtoP).count == 1);
  CHECK(f.memcpy.count(CopyKind::kOther) == 0);
  CHECK(f.categories[Category::kIo].gpu_busy_ns == 46);
}

TEST_CASE("a batched memcpy record counts every copy it stands for", "[aggregator]") {
  GpuAggregator agg;
  Act batch = copy(0, 50, CopyKind::kHtoD, 3 * 1024, 1, Category::kIo);
  batch.a.copies = 3;  // CUPTI's copyCount of a cudaMemcpyBatchAsync record
  RankFile f = run(agg, {batch, copy(60, 70, CopyKind::kHtoD, 100, 1, Category::kIo)}, 1);
  CHECK(f.memcpy.at(CopyKind::kHtoD).count == 4);
  CHECK(f.memcpy.at(CopyKind::kHtoD).bytes == 3 * 1024 + 100);
  CHECK(f.memcpy.at(CopyKind::kHtoD).gpu_ns == 60);
  CHECK(f.categories[Category::kIo].count == 2);  // activities, not copies
}

TEST_CASE("dropped records are reported", "[aggregator]") {
  GpuAggregator agg;
  agg.note_dropped(5);
  agg.note_dropped(2);
  RankFile f = testing::gpu_rank_file(agg, name_of, 0);
  CHECK(f.dropped_records == 7);
  CHECK_FALSE(f.steps.partial_final_step);  // nothing recorded at all
}

TEST_CASE("memory stays bounded: 1M activities over 100k steps", "[aggregator][bounded]") {
  AggregatorOptions o;
  GpuAggregator agg(o);
  GpuActivity a;
  a.kind = ActivityKind::kKernel;
  a.name = "gemm_kernel";
  LaunchContext ctx;
  ctx.path = 1;
  std::size_t max_open = 0, max_steps = 0;
  for (uint32_t step = 0; step < 100000; ++step) {
    ctx.step = step;
    ctx.entry = step + 1;
    for (uint64_t k = 0; k < 10; ++k) {
      a.start_ns = uint64_t{step} * 1000 + k * 50;
      a.end_ns = a.start_ns + 10;
      agg.ingest(a, ctx, Category::kForward);
    }
    auto fp = agg.footprint();
    max_open = std::max(max_open, fp.open_records);
    max_steps = std::max(max_steps, fp.open_steps);
  }
  CHECK(max_open <= o.max_open_records);
  CHECK(max_steps <= o.max_open_steps);
  auto fp = agg.footprint();
  CHECK(fp.detail_steps <= o.step_detail);
  CHECK(fp.regions == 1);
  CHECK(fp.region_kernels == 1);
  CHECK(fp.kernel_names == 3);  // "", "(other kernels)", gemm_kernel
  RankFile f = testing::gpu_rank_file(agg, name_of, 100000);
  CHECK(f.steps.totals.gpu_busy_ns == 10'000'000);  // 1M kernels × 10 ns, none overlapping
  CHECK(f.steps.totals.idle_ns == 100000 * (460 - 100));  // span 460 per step
  CHECK(f.regions[0].gpu_span_ns == 100000 * 460);
  CHECK(agg.late_records() == 0);
}

TEST_CASE("kernel name cap keeps attribution and groups the rest", "[aggregator][bounded]") {
  AggregatorOptions o;
  o.max_kernel_names = 2;
  GpuAggregator agg(o);
  std::vector<std::string> names = {"a", "b", "c", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"};
  std::vector<Act> acts;
  for (std::size_t i = 0; i < names.size(); ++i)
    acts.push_back(kern(i * 10, i * 10 + 5, 1, Category::kForward, 0, 1, names[i]));
  RankFile f = run(agg, acts, 1);
  CHECK(agg.footprint().kernel_names == 4);
  CHECK(f.categories[Category::kComm].count == 1);  // still recognised past the cap
  const RegionRow* r = region(f, "path1");
  REQUIRE(r != nullptr);
  CHECK(std::any_of(r->top_kernels.begin(), r->top_kernels.end(),
                    [](const KernelStat& k) { return k.name == "(other kernels)" && k.count == 2; }));
}

TEST_CASE("trace keeps events up to its cap and says how many it dropped", "[aggregator][trace]") {
  AggregatorOptions o;
  o.trace = true;
  o.trace_max_events = 2;
  GpuAggregator agg(o);
  std::vector<Act> acts = {kern(0, 10, 1, Category::kForward), allreduce(5, 20),
                           kern(30, 40, kNoPath, Category::kOther)};
  for (const Act& x : acts) agg.ingest(x.a, x.ctx, x.region);
  nlohmann::json j = agg.trace_json(name_of);
  CHECK(j["format"] == "traintime-trace/1");
  CHECK(j["events_kept"] == 2);
  CHECK(j["events_dropped"] == 1);
  CHECK(j["truncated"] == true);
  REQUIRE(j["events"].size() == 2);
  const auto& cols = j["columns"];
  auto col = [&](const std::string& c) {
    return static_cast<std::size_t>(std::find(cols.begin(), cols.end(), c) - cols.begin());
  };
  const auto& e1 = j["events"][1];
  CHECK(e1[col("start_ns")] == 5);
  CHECK(e1[col("end_ns")] == 20);
  CHECK(j["categories"][e1[col("category")].get<std::size_t>()] == "comm");
  CHECK(j["comm_ops"][e1[col("comm_op")].get<std::size_t>()] == "AllReduce");
  CHECK(j["names"][e1[col("name")].get<std::size_t>()] == "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  CHECK(j["paths"]["1"] == "path1");
  RankFile f = testing::gpu_rank_file(agg, name_of, 1);
  CHECK(std::any_of(f.warnings.begin(), f.warnings.end(),
                    [](const std::string& w) { return w.find("TRAINTIME_TRACE") != std::string::npos; }));
}

TEST_CASE("zero-sized open window still terminates and stays exact for in-order steps",
          "[aggregator][bounded]") {
  AggregatorOptions o;
  o.max_open_steps = 0;
  o.max_open_records = 0;
  GpuAggregator agg(o);
  RankFile f = run(agg, {kern(0, 100, 1, Category::kForward, 0), kern(50, 150, 1, Category::kForward, 0),
                         kern(1000, 1100, 1, Category::kForward, 1)},
                   2);
  CHECK(agg.footprint().open_records == 0);
  // Step 0 was folded record by record as segments: the overlap [50,100) across the cut is
  // counted twice (documented), so busy is 100 + 100 + 100.
  CHECK(f.categories[Category::kForward].gpu_sum_ns == 300);
  CHECK(f.categories[Category::kForward].gpu_busy_ns == 300);
  CHECK(f.steps.totals.idle_ns == 0);
}

TEST_CASE("region spans stay exact when a step holds hundreds of region entries",
          "[aggregator][regions]") {
  // 300 entries per step over 3 regions; each entry's second kernel comes after every entry's
  // first, so folding finds entries again after many others (and the per-fold entry table grows).
  AggregatorOptions o;
  o.max_open_steps = 1;  // steps 0 and 1 fold while ingesting, step 2 in summary()
  GpuAggregator agg(o);
  for (uint32_t step = 0; step < 3; ++step) {
    const uint64_t base = uint64_t{step} * 1'000'000;
    for (uint64_t pass = 0; pass < 2; ++pass) {
      for (uint64_t e = 0; e < 300; ++e) {
        const uint64_t start = base + e * 100 + pass * 30'050;
        Act x = kern(start, start + 10, static_cast<PathId>(1 + e % 3), Category::kForward, step);
        x.ctx.entry = 1 + step * 1000 + e;
        agg.ingest(x.a, x.ctx, x.region);
      }
    }
  }
  RankFile f = testing::gpu_rank_file(agg, name_of, 3);
  for (const char* path : {"path1", "path2", "path3"}) {
    const RegionRow* r = region(f, path);
    REQUIRE(r != nullptr);
    CHECK(r->gpu_span_ns == 3 * 100 * 30'060);  // 3 steps × 100 entries × (30 050 + 10)
    CHECK(r->kernels == 3 * 200);
  }
}

namespace {

// ---- Brute-force reference for the union- and sum-based figures --------------------------
// Random steps of overlapping activities, counted nanosecond by nanosecond on a small time line
// straight from docs/attribution.md's definitions: nothing here calls the aggregator's helpers.

constexpr uint64_t kBase = 5'000'000'000'000ull;  // CUPTI-like absolute timestamps
constexpr uint64_t kStepStride = 150;  // steps overlap in time: each is still figured on its own
constexpr uint64_t kHorizon = 4 * kStepStride + 300 + 64;

struct PathInfo {
  PathId path;
  Category category;
};
// Region paths and their categories; kNoPath is drawn too (unattributed work).
constexpr std::array<PathInfo, 6> kPaths = {{{1, Category::kForward},
                                             {2, Category::kBackward},
                                             {3, Category::kOptimizer},
                                             {4, Category::kIo},
                                             {5, Category::kRecompute},
                                             {6, Category::kOther}}};
constexpr std::array<const char*, 4> kComputeNames = {"gemm_bf16_tn", "layer_norm_fwd",
                                                      "elementwise_add", "softmax_bwd"};
constexpr const char* kNcclName = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";

struct Gen {
  Act act;
  Category cat;   // expected category, by the documented rules
  uint64_t s, e;  // time line offsets (end clamped to start)
};

// The documented attribution rules: comm (interposed call or NCCL kernel name), else the region's
// category, else unattributed.
Category expected_category(const Act& x) {
  const bool nccl_name = x.a.kind == ActivityKind::kKernel && x.a.name == kNcclName;
  if (x.ctx.comm.op != CommOp::kNone || nccl_name) return Category::kComm;
  if (x.ctx.path == kNoPath) return Category::kUnattributed;
  return x.region;
}

std::vector<Gen> generate(std::mt19937& rng, uint32_t steps, uint32_t devices) {
  auto pick = [&rng](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
  std::vector<Gen> out;
  for (uint32_t step = 0; step < steps; ++step) {
    const uint32_t n = 3 + pick(22);
    for (uint32_t k = 0; k < n; ++k) {
      Act x;
      // Region: one of the paths (backward most often, so comm lands inside it), or none.
      const uint32_t r = pick(10);
      const PathInfo p = r < 2 ? PathInfo{kNoPath, Category::kOther}
                         : r < 5 ? kPaths[1]
                                 : kPaths[pick(kPaths.size())];
      x.ctx.path = p.path;
      x.region = p.category;
      x.ctx.step = step;
      // Entries: three per path, shared by every step (cut at the step boundary) and drawn in
      // random order, so one entry's records are not contiguous; 0 = no entry.
      x.ctx.entry = p.path == kNoPath || pick(6) == 0 ? 0 : 100 * p.path + 1 + pick(3);
      x.a.device = pick(devices);
      x.a.stream = 1 + pick(4);
      const uint32_t kind = pick(20);
      if (kind < 2) {
        x.a.kind = ActivityKind::kMemcpy;
        x.a.copy_kind = CopyKind::kHtoD;
        x.a.bytes = 1024;
      } else if (kind < 3) {
        x.a.kind = ActivityKind::kMemset;
        x.a.bytes = 256;
      } else if (kind < 8) {  // comm: inside an interposed call, or found by name only
        x.a.kind = ActivityKind::kKernel;
        x.a.name = kNcclName;
        if (pick(2) == 0) x.ctx.comm.op = CommOp::kAllReduce;
      } else {
        x.a.kind = ActivityKind::kKernel;
        x.a.name = kComputeNames[pick(kComputeNames.size())];
      }
      const uint64_t s = step * kStepStride + pick(300);
      const uint32_t len_kind = pick(10);
      // Zero-length records, an inverted one now and then (end before start: clamped), else
      // up to 60 ns.
      const uint64_t e = len_kind == 0   ? s
                         : len_kind == 1 ? s - std::min<uint64_t>(s, 3)
                                         : s + 1 + pick(60);
      x.a.start_ns = kBase + s;
      x.a.end_ns = kBase + e;
      out.push_back({x, expected_category(x), s, std::max(s, e)});
    }
  }
  return out;
}

// What the aggregator must report, counted nanosecond by nanosecond.
struct Expected {
  std::array<CategoryTotals, kCategoryCount> categories{};
  StepTotals totals;
  struct StepRow {
    uint64_t span = 0;  // summed over devices
    StepTotals totals;
    std::array<uint64_t, kCategoryCount> cat_busy{};
  };
  std::map<uint64_t, StepRow> steps;
  struct RegionExp {
    uint64_t busy = 0, sum = 0, span = 0, kernels = 0;
    std::array<CategoryTotals, kCategoryCount> cats{};
    std::map<std::string, std::pair<uint64_t, uint64_t>> kernel_names;  // count, sum
  };
  std::map<PathId, RegionExp> regions;
};

Expected brute_force_figures(const std::vector<Gen>& gens, uint32_t steps, uint32_t devices) {
  Expected x;
  auto bit = [](Category c) { return 1u << static_cast<unsigned>(c); };
  uint32_t compute_bits = 0;
  for (std::size_t c = 0; c < kCategoryCount; ++c)
    if (static_cast<Category>(c) != Category::kComm && static_cast<Category>(c) != Category::kIo)
      compute_bits |= 1u << c;
  for (uint32_t step = 0; step < steps; ++step) {
    // Per-entry [first start, last end] in this step, over every device.
    std::map<uint64_t, std::pair<uint64_t, uint64_t>> entry_span;
    std::map<uint64_t, PathId> entry_path;
    for (uint32_t dev = 0; dev < devices; ++dev) {
      // Categories covering each nanosecond: of all work, and of each region's work.
      std::vector<uint32_t> cover(kHorizon, 0);
      std::map<PathId, std::vector<uint32_t>> region_cover;
      uint64_t first = ~uint64_t{0}, last = 0;
      bool any = false;
      for (const Gen& g : gens) {
        if (g.act.ctx.step != step || g.act.a.device != dev) continue;
        any = true;
        first = std::min(first, g.s);
        last = std::max(last, g.e);
        const auto ci = static_cast<std::size_t>(g.cat);
        const uint64_t dur = g.e - g.s;
        x.categories[ci].gpu_sum_ns += dur;
        ++x.categories[ci].count;
        x.totals.gpu_sum_ns += dur;
        x.steps[step].totals.gpu_sum_ns += dur;
        uint64_t* sums[] = {g.cat == Category::kComm ? &x.totals.comm_sum_ns
                            : g.cat == Category::kIo ? &x.totals.io_sum_ns
                                                     : &x.totals.compute_sum_ns,
                            g.cat == Category::kComm ? &x.steps[step].totals.comm_sum_ns
                            : g.cat == Category::kIo ? &x.steps[step].totals.io_sum_ns
                                                     : &x.steps[step].totals.compute_sum_ns};
        for (uint64_t* s : sums) *s += dur;
        for (uint64_t t = g.s; t < g.e; ++t) cover[t] |= bit(g.cat);
        const PathId p = g.act.ctx.path;
        if (p == kNoPath) continue;
        Expected::RegionExp& re = x.regions[p];
        re.sum += dur;
        re.cats[ci].gpu_sum_ns += dur;
        ++re.cats[ci].count;
        if (g.act.a.kind == ActivityKind::kKernel) {
          ++re.kernels;
          auto& kn = re.kernel_names[std::string(g.act.a.name)];
          ++kn.first;
          kn.second += dur;
        }
        auto& rc = region_cover[p];
        rc.resize(kHorizon, 0);
        for (uint64_t t = g.s; t < g.e; ++t) rc[t] |= bit(g.cat);
        if (g.act.ctx.entry != 0) {
          const auto it = entry_span.try_emplace(g.act.ctx.entry, g.s, g.e).first;
          it->second.first = std::min(it->second.first, g.s);
          it->second.second = std::max(it->second.second, g.e);
          entry_path[g.act.ctx.entry] = p;
        }
      }
      if (!any) continue;
      StepTotals t;
      Expected::StepRow& row = x.steps[step];
      for (uint64_t ns = first; ns < last; ++ns) {  // nothing is covered outside the span
        const uint32_t m = cover[ns];
        const bool compute = (m & compute_bits) != 0;
        const bool comm = (m & bit(Category::kComm)) != 0;
        t.gpu_busy_ns += m != 0;
        t.compute_ns += compute;
        t.comm_ns += comm;
        t.comm_overlapped_ns += comm && compute;
        t.exposed_comm_ns += comm && !compute;
        t.io_ns += (m & bit(Category::kIo)) != 0;
        for (std::size_t c = 0; c < kCategoryCount; ++c) {
          if ((m >> c & 1u) == 0) continue;
          ++x.categories[c].gpu_busy_ns;
          ++row.cat_busy[c];
        }
      }
      const uint64_t span = last - first;
      t.idle_ns = span - t.gpu_busy_ns;  // busy lies inside the span
      row.span += span;
      for (StepTotals* into : {&x.totals, &row.totals}) {
        into->gpu_busy_ns += t.gpu_busy_ns;
        into->compute_ns += t.compute_ns;
        into->comm_ns += t.comm_ns;
        into->comm_overlapped_ns += t.comm_overlapped_ns;
        into->exposed_comm_ns += t.exposed_comm_ns;
        into->io_ns += t.io_ns;
        into->idle_ns += t.idle_ns;
      }
      for (const auto& [p, rc] : region_cover) {
        Expected::RegionExp& re = x.regions[p];
        for (uint64_t ns = first; ns < last; ++ns) {
          if (rc[ns] == 0) continue;
          ++re.busy;
          for (std::size_t c = 0; c < kCategoryCount; ++c)
            re.cats[c].gpu_busy_ns += rc[ns] >> c & 1u;
        }
      }
    }
    for (const auto& [entry, se] : entry_span)
      x.regions[entry_path[entry]].span += se.second - se.first;
  }
  return x;
}

// "what: got G, want W" for every figure that differs; the name is put together only then.
struct Diff {
  std::string text;
  template <typename... Name>
  void operator()(uint64_t got, uint64_t want, const Name&... name) {
    if (got == want) return;
    ((text += name), ...);
    text += ": got " + std::to_string(got) + ", want " + std::to_string(want) + "\n";
  }
  void totals(const std::string& what, const StepTotals& g, const StepTotals& w) {
    (*this)(g.gpu_busy_ns, w.gpu_busy_ns, what, ".gpu_busy_ns");
    (*this)(g.compute_ns, w.compute_ns, what, ".compute_ns");
    (*this)(g.comm_ns, w.comm_ns, what, ".comm_ns");
    (*this)(g.comm_overlapped_ns, w.comm_overlapped_ns, what, ".comm_overlapped_ns");
    (*this)(g.exposed_comm_ns, w.exposed_comm_ns, what, ".exposed_comm_ns");
    (*this)(g.io_ns, w.io_ns, what, ".io_ns");
    (*this)(g.idle_ns, w.idle_ns, what, ".idle_ns");
    (*this)(g.gpu_sum_ns, w.gpu_sum_ns, what, ".gpu_sum_ns");
    (*this)(g.compute_sum_ns, w.compute_sum_ns, what, ".compute_sum_ns");
    (*this)(g.comm_sum_ns, w.comm_sum_ns, what, ".comm_sum_ns");
    (*this)(g.io_sum_ns, w.io_sum_ns, what, ".io_sum_ns");
  }
};

void compare(const GpuSummary& s, const Expected& x, uint64_t steps_completed, Diff& d) {
  for (std::size_t c = 0; c < kCategoryCount; ++c) {
    const std::string_view n = category_name(static_cast<Category>(c));
    d(s.categories[c].gpu_busy_ns, x.categories[c].gpu_busy_ns, "categories.", n, ".gpu_busy_ns");
    d(s.categories[c].gpu_sum_ns, x.categories[c].gpu_sum_ns, "categories.", n, ".gpu_sum_ns");
    d(s.categories[c].count, x.categories[c].count, "categories.", n, ".count");
  }
  d.totals("totals", s.totals, x.totals);
  d(s.detail.size(), x.steps.size(), "detail rows");
  for (const Steps::Detail& row : s.detail) {
    const std::string n = "detail[" + std::to_string(row.index) + "]";
    const auto it = x.steps.find(row.index);
    d(it != x.steps.end(), 1, n, " expected");
    if (it == x.steps.end()) continue;
    d(row.span_ns, it->second.span, n, ".span_ns");
    d(row.partial, row.index >= steps_completed, n, ".partial");
    d.totals(n, row.totals, it->second.totals);
    for (std::size_t c = 0; c < kCategoryCount; ++c)
      d(row.busy_ns_by_category[static_cast<Category>(c)], it->second.cat_busy[c], n,
        ".busy_ns_by_category.", category_name(static_cast<Category>(c)));
  }
  d(s.regions.size(), x.regions.size(), "region rows");
  for (const GpuSummary::Region& r : s.regions) {
    const std::string n = "region[" + std::to_string(r.path) + "]";
    const auto it = x.regions.find(r.path);
    d(it != x.regions.end(), 1, n, " expected");
    if (it == x.regions.end()) continue;
    const Expected::RegionExp& re = it->second;
    d(r.gpu_busy_ns, re.busy, n, ".gpu_busy_ns");
    d(r.gpu_sum_ns, re.sum, n, ".gpu_sum_ns");
    d(r.gpu_span_ns, re.span, n, ".gpu_span_ns");
    d(r.kernels, re.kernels, n, ".kernels");
    for (std::size_t c = 0; c < kCategoryCount; ++c) {
      const auto cat = static_cast<Category>(c);
      const std::string_view nc = category_name(cat);
      d(r.by_category.has(cat), re.cats[c].count > 0, n, ".by_category.", nc, " listed");
      const CategoryTotals& got = r.by_category[cat];
      d(got.gpu_busy_ns, re.cats[c].gpu_busy_ns, n, ".by_category.", nc, ".gpu_busy_ns");
      d(got.gpu_sum_ns, re.cats[c].gpu_sum_ns, n, ".by_category.", nc, ".gpu_sum_ns");
      d(got.count, re.cats[c].count, n, ".by_category.", nc, ".count");
    }
    d(r.top_kernels.size(), re.kernel_names.size(), n, ".top_kernels size");
    for (const KernelStat& k : r.top_kernels) {
      const auto kn = re.kernel_names.find(k.name);
      d(kn != re.kernel_names.end(), 1, n, " kernel ", k.name, " expected");
      if (kn == re.kernel_names.end()) continue;
      d(k.count, kn->second.first, n, " kernel ", k.name, ".count");
      d(k.gpu_sum_ns, kn->second.second, n, " kernel ", k.name, ".gpu_sum_ns");
    }
  }
}

}  // namespace

TEST_CASE("GpuAggregator union and sum figures equal a brute-force count of covered nanoseconds",
          "[aggregator][random]") {
  std::mt19937 rng(20261126);
  const char* const kModes[] = {"shuffled within each step, default window",
                                "in (device, start) order, default window",
                                "shuffled across all steps, default window",
                                "shuffled within each step, one open step (oldest folds)",
                                "shuffled within each step, record budget of the largest step"};
  for (int round = 0; round < 200; ++round) {
    const int mode = round % 5;
    const uint32_t steps = 1 + rng() % 4;
    const uint32_t devices = 1 + rng() % 2;
    std::vector<Gen> gens = generate(rng, steps, devices);

    // Arrival order. Steps arrive in order except in mode 2, whose window never folds a step
    // before summary(): no record is late, so every figure is exact.
    std::vector<Gen> feed = gens;
    if (mode == 1) {
      std::stable_sort(feed.begin(), feed.end(), [](const Gen& a, const Gen& b) {
        if (a.act.ctx.step != b.act.ctx.step) return a.act.ctx.step < b.act.ctx.step;
        if (a.act.a.device != b.act.a.device) return a.act.a.device < b.act.a.device;
        return a.s < b.s;
      });
    } else if (mode == 2) {
      std::shuffle(feed.begin(), feed.end(), rng);
    } else {
      auto b = feed.begin();
      while (b != feed.end()) {
        const uint32_t step = b->act.ctx.step;
        auto e = std::find_if(b, feed.end(),
                              [step](const Gen& g) { return g.act.ctx.step != step; });
        std::shuffle(b, e, rng);
        b = e;
      }
    }
    AggregatorOptions o;
    if (mode == 3) o.max_open_steps = 1;
    if (mode == 4) {  // the oldest step folds once the window holds more than the largest step
      std::vector<std::size_t> per_step(steps, 0);
      for (const Gen& g : gens) ++per_step[g.act.ctx.step];
      o.max_open_records = *std::max_element(per_step.begin(), per_step.end());
    }
    const uint64_t steps_completed = steps - (round / 5) % 2;  // every other time: a partial step

    GpuAggregator agg(o);
    const std::size_t snapshot_at = feed.size() / 2;
    for (std::size_t i = 0; i < feed.size(); ++i) {
      if (i == snapshot_at) {  // a snapshot mid-run must not change what comes after
        (void)agg.summary(steps_completed);
        GpuStepFigures f;
        (void)agg.step_figures(feed[i].act.ctx.step, &f);
      }
      agg.ingest(feed[i].act.a, feed[i].act.ctx, feed[i].act.region);
    }

    const Expected x = brute_force_figures(gens, steps, devices);
    Diff d;
    d(agg.late_records(), 0, "late records");
    // The window rounds did fold their older steps before summary().
    if (mode >= 3 && steps > 1) d(agg.footprint().open_steps < steps, 1, "older steps folded");
    const GpuSummary s = agg.summary(steps_completed);
    compare(s, x, steps_completed, d);
    d(s.partial_final_step, steps_completed < steps, "partial_final_step");
    for (const auto& [step, row] : x.steps) {
      const std::string n = "step_figures(" + std::to_string(step) + ")";
      GpuStepFigures f;
      d(agg.step_figures(step, &f), 1, n, " answered");
      d(f.span_ns, row.span, n, ".span_ns");
      d(f.busy_ns, row.totals.gpu_busy_ns, n, ".busy_ns");
      d(f.compute_ns, row.totals.compute_ns, n, ".compute_ns");
      d(f.comm_ns, row.totals.comm_ns, n, ".comm_ns");
      d(f.exposed_comm_ns, row.totals.exposed_comm_ns, n, ".exposed_comm_ns");
      d(f.io_ns, row.totals.io_ns, n, ".io_ns");
      d(f.idle_ns, row.totals.idle_ns, n, ".idle_ns");
      for (std::size_t c = 0; c < kCategoryCount; ++c)
        d(f.category_busy_ns[c], row.cat_busy[c], n, ".category_busy_ns.",
          category_name(static_cast<Category>(c)));
    }
    INFO("round " << round << " (" << kModes[mode] << "), " << steps << " steps, " << devices
                  << " devices, " << gens.size() << " activities");
    REQUIRE(d.text == "");
  }
}
