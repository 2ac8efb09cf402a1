// Join rules of the adapter (DESIGN §4): runtime correlation id first for memcpy, graph nodes
// take their capture-time region (the launch's when none was open) with the replay's step, a lost
// context is counted.
#include <catch2/catch.hpp>

#include <string>

#include "activity_pipeline.h"

using namespace traintime;
using cupti::DecodedActivity;

namespace {

core::LaunchContext ctx(core::PathId path, uint32_t step, uint64_t entry) {
  core::LaunchContext c;
  c.path = path;
  c.step = step;
  c.entry = entry;
  return c;
}

struct Fixture {
  cupti::CuptiLibrary lib;  // not used by join()
  cupti::CorrelationTable launches{1024};
  cupti::GraphNodeTable nodes{16};
  core::GpuAggregator aggregator;
  cupti::ActivityPipeline pipeline{lib, launches, nodes, aggregator};
};

DecodedActivity record(uint32_t correlation, uint32_t runtime_correlation = 0, uint64_t node = 0) {
  DecodedActivity d;
  d.activity.kind = runtime_correlation ? core::ActivityKind::kMemcpy : core::ActivityKind::kKernel;
  d.activity.start_ns = 100;
  d.activity.end_ns = 200;
  d.activity.correlation_id = correlation;
  d.activity.graph_node_id = node;
  d.runtime_correlation_id = runtime_correlation;
  return d;
}

}  // namespace

TEST_CASE("a memcpy joins on its runtime correlation id before its driver one", "[join]") {
  Fixture f;
  f.launches.store(20, ctx(5, 1, 50));  // the cudaMemcpyAsync call
  f.launches.store(21, ctx(6, 1, 60));  // its nested cuMemcpyHtoDAsync (same context in practice)
  CHECK(f.pipeline.join(record(21, 20)).path == 5);
  CHECK(f.pipeline.stats().joined_runtime == 1);
  // A memcpy issued through the driver API carries no runtime id: the driver id joins.
  CHECK(f.pipeline.join(record(21, 0)).path == 6);
  // Runtime id unknown (e.g. overwritten): fall back to the driver id.
  CHECK(f.pipeline.join(record(21, 999)).path == 6);
  CHECK(f.pipeline.stats().joined_correlation == 2);
}

TEST_CASE("a graph kernel takes its node's capture-time region with the launch's step and entry",
          "[join]") {
  Fixture f;
  f.nodes.created(99, ctx(7, 0, 70));  // captured inside region 7 during step 0
  f.nodes.cloned(1099, 99);            // instantiation clones the node
  f.launches.store(30, ctx(8, 4, 80)); // cudaGraphLaunch in step 4, region 8
  const core::LaunchContext c = f.pipeline.join(record(30, 0, 1099));
  CHECK(c.path == 7);
  CHECK(c.step == 4);
  CHECK(c.entry == 80);
  CHECK(f.pipeline.stats().graph_node_context == 1);
  // A node the table never saw (graph built before capture started): the launch's context.
  const core::LaunchContext l = f.pipeline.join(record(30, 0, 5555));
  CHECK(l.path == 8);
  CHECK(l.step == 4);
}

TEST_CASE("a graph node captured with no region open takes the region its graph launch ran in",
          "[join]") {
  // PyTorch captures its graphs during warm-up, outside the ranges the replays later run in
  // (the A100 trace of tests/sim/README.md's real traces: 345 graph activities): DESIGN §4 rule 5's
  // "failing that, the context of the graph launch".
  Fixture f;
  f.nodes.created(99, ctx(core::kNoPath, 0, 0));  // captured with nothing open
  f.nodes.cloned(1099, 99);
  core::LaunchContext graph_launch = ctx(8, 4, 80);
  graph_launch.category = core::Category::kForward;
  f.launches.store(30, graph_launch);  // cudaGraphLaunch inside region 8
  const core::LaunchContext c = f.pipeline.join(record(30, 0, 1099));
  CHECK(c.path == 8);
  CHECK(c.category == core::Category::kForward);
  CHECK((c.step == 4 && c.entry == 80));
  CHECK(f.pipeline.stats().graph_node_context == 0);  // the capture-time context was not used
  // An NCCL call captured outside any region keeps its capture context: it is that call's kernel.
  core::LaunchContext nccl = ctx(core::kNoPath, 0, 0);
  nccl.comm.op = core::CommOp::kAllReduce;
  nccl.comm.captured = true;
  f.nodes.created(98, nccl);
  f.nodes.cloned(1098, 98);
  const core::LaunchContext n = f.pipeline.join(record(30, 0, 1098));
  CHECK(n.comm.op == core::CommOp::kAllReduce);
  CHECK(n.path == core::kNoPath);
  CHECK(n.step == 4);
}

TEST_CASE("a record takes the category its launch stored; a graph kernel its node's", "[join]") {
  // Nothing is asked of the region registry at ingest: the category comes with the context (the
  // launch callback resolved it), so these contexts carry categories no path rule would give.
  Fixture f;
  core::LaunchContext launch = ctx(5, 1, 50);
  launch.category = core::Category::kIo;
  f.launches.store(40, launch);
  CHECK(f.pipeline.join(record(40)).category == core::Category::kIo);
  core::LaunchContext captured = ctx(7, 0, 70);
  captured.category = core::Category::kRecompute;
  f.nodes.created(99, captured);
  f.nodes.cloned(1099, 99);
  core::LaunchContext graph_launch = ctx(8, 4, 80);
  graph_launch.category = core::Category::kOptimizer;
  f.launches.store(41, graph_launch);
  const core::LaunchContext c = f.pipeline.join(record(41, 0, 1099));
  CHECK(c.path == 7);
  CHECK(c.category == core::Category::kRecompute);  // the region captured, with its category
  CHECK(f.pipeline.join(record(41, 0, 5555)).category == core::Category::kOptimizer);
  // No context: unattributed, with kNoPath's category, as before.
  CHECK(f.pipeline.join(record(4242)).category == core::Category::kOther);
}

TEST_CASE("a record without a launch context is counted and left unattributed", "[join]") {
  Fixture f;
  const core::LaunchContext c = f.pipeline.join(record(12345));
  CHECK(c.path == core::kNoPath);
  CHECK(f.pipeline.stats().missing_context == 1);
  // The GPU section counts it, and its warning says so.
  core::Section s("cupti");
  f.pipeline.count_into(s);
  CHECK(s.counters.counters.at("missing_context") == 1);
  CHECK(s.counters.counters.at("overwritten") == 0);
  REQUIRE(s.warnings.size() == 1);
  CHECK(s.warnings[0].find("no launch context") != std::string::npos);
}

TEST_CASE("a lost context's warning names the cause the table saw, not always a reader behind",
          "[join]") {
  // A thread's one launch, then a busy thread's, each record found as it comes (the reader keeps
  // up): the first thread's record, arriving after a table of launches, came in a late buffer.
  Fixture f;
  cupti::CorrelationTable::Writer rare, busy;
  f.launches.store(rare, 1, ctx(5, 0, 50));
  uint32_t id = 10;
  for (uint32_t k = 0; k < 256; ++k, ++id) f.launches.store(busy, id, ctx(6, 0, 60));
  f.launches.store(rare, 2, ctx(5, 0, 50));  // its stale chunk given up
  for (uint32_t k = 0; k < 3 * 1024; ++k, ++id) {
    f.launches.store(busy, id, ctx(6, 0, 60));
    REQUIRE(f.pipeline.join(record(id)).path == 6);
  }
  CHECK(f.pipeline.join(record(1)).path == core::kNoPath);
  core::Section s("cupti");
  f.pipeline.count_into(s);
  CHECK(s.counters.counters.at("overwritten") == 1);
  CHECK(s.counters.counters.at("overwritten_late") == 1);
  CHECK(s.counters.counters.at("launching_threads_over_bound") == 0);
  bool named = false;
  for (const std::string& w : s.warnings) {
    if (w.find("newer launches had taken") == std::string::npos) continue;
    named = w.find("1 came in buffers that reached traintime late") != std::string::npos &&
            w.find("fallen behind") == std::string::npos;
  }
  CHECK(named);
}

TEST_CASE("clones of a destroyed graph exec stay until their room is needed; the source graph's "
          "nodes stay", "[graph]") {
  cupti::GraphNodeTable nodes{4};
  nodes.created(10, ctx(3, 0, 1));  // captured node of the source graph
  nodes.cloned(110, 10, /*owner=*/0xE1);  // instantiation 1
  nodes.cloned(210, 10, /*owner=*/0xE2);  // instantiation 2
  core::LaunchContext got;
  nodes.forget_owner(0xE1);  // exec 1 destroyed: records of its last replay may still arrive
  CHECK(nodes.retired() == 1);
  REQUIRE(nodes.lookup(110, &got));
  CHECK(got.path == 3);
  nodes.created(20, ctx(4, 0, 2));  // 4 of 4: still room without evicting
  REQUIRE(nodes.lookup(110, &got));
  nodes.created(30, ctx(5, 0, 3));  // full: the retired clone makes room
  CHECK_FALSE(nodes.lookup(110, &got));
  CHECK(nodes.lookup(30, &got));
  CHECK(nodes.lookup(210, &got));  // exec 2 still alive
  CHECK(nodes.lookup(10, &got));   // the original, whatever happened to the source graph
  CHECK(nodes.refused() == 0);
  nodes.created(40, ctx(6, 0, 4));  // full, nothing retired: refused and counted
  CHECK(nodes.refused() == 1);
}
