// The proxy-progress table (nccl/src/proxy_progress.h) and the plugin's handling of NCCL's proxy
// events: what a hung collective's channels show (steps, bytes, state), ProxyStep switched on for
// the collectives after a suspicion only, a PXN op's foreign parent and context never read, and a
// full table counted, never blocking.
#include <unistd.h>

#include <catch2/catch.hpp>

#include "proxy_progress.h"
#include "traintime/core/comm_stats.h"
#include "traintime/nccl/profiler_plugin_api.h"

extern "C" traintime::nccl_profiler::PluginV7 ncclProfiler_v7;

namespace {

namespace np = traintime::nccl_profiler;
namespace proxy = traintime::nccl::proxy;
using traintime::nccl::ProxyProgress;

std::vector<std::pair<uint32_t, ProxyProgress>> rows_now() {
  traintime::core::Section section("nccl");
  return proxy::summary(section).rows;
}

uint64_t counter(const char* key) {
  traintime::core::Section section("nccl");
  proxy::summary(section);
  return section.counters.counters.at(key);
}

}  // namespace

TEST_CASE("a proxy op in flight shows its steps, bytes and state, and a finished one is gone", "[nccl][proxy]") {
  proxy::configure("on");
  const auto ar = static_cast<uint8_t>(traintime::core::CommOp::kAllReduce);
  const uint32_t send = proxy::start_op(0, 3, 0, ar, 6, 2, 1, 8, true, false);
  const uint32_t done = proxy::start_op(0, 3, 0, ar, 6, 1, 1, 8, true, false);
  REQUIRE(send != proxy::kNone);
  proxy::op_state(send, np::kProxyOpInProgress);
  for (int s = 0; s < 3; ++s) proxy::start_step(send, s);
  proxy::step_state(send, np::kProxyStepSendWait);
  proxy::stop_step(send, 65536);
  proxy::stop_step(send, 65536);
  proxy::step_state(send, np::kProxyStepSendPeerWait);
  proxy::stop_op(done);
  const auto rows = rows_now();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].first == 2);  // call-table index of communicator id 3
  const ProxyProgress& p = rows[0].second;
  CHECK(p.channel == 2);
  CHECK(p.peer == 1);
  CHECK(p.direction == "send");
  CHECK(p.op == traintime::core::CommOp::kAllReduce);
  CHECK(p.nccl_seq == 6);
  CHECK(p.source == "proxy_step");
  CHECK(p.state == "send_peer_wait");
  CHECK(p.steps_total == 8);
  CHECK(p.steps_posted == 3);
  CHECK(p.steps_done == 2);
  CHECK(p.bytes_done == 131072);
  CHECK(p.since_ns > 0);
  proxy::stop_op(send);
  CHECK(rows_now().empty());
}

TEST_CASE("without ProxyStep a row says so: steps and bytes are not measured", "[nccl][proxy]") {
  proxy::configure("off");
  const uint32_t recv = proxy::start_op(0, 1, 1, 0, 0, 0, 0, 4, false, false);
  proxy::op_state(recv, np::kProxyOpInProgress);
  const uint32_t kernel = proxy::start_kernel_channel(0, 1, 1, 0, 0, 5);
  auto rows = rows_now();
  REQUIRE(rows.size() == 2);
  const ProxyProgress& op = rows[0].second.direction == "recv" ? rows[0].second : rows[1].second;
  const ProxyProgress& ch = rows[0].second.direction == "kernel" ? rows[0].second : rows[1].second;
  CHECK(op.source == "proxy_op");
  CHECK(op.state == "in_progress");
  CHECK(op.steps_total == 4);
  CHECK(op.steps_done == ProxyProgress::kUnknown);
  CHECK(op.bytes_done == ProxyProgress::kUnknown);
  CHECK(ch.source == "kernel_channel");
  CHECK(ch.channel == 5);
  CHECK(ch.peer == -1);
  proxy::stop_op(recv);
  proxy::stop_kernel_channel(kernel);
  CHECK(rows_now().empty());
}

TEST_CASE("ProxyStep: always with on, never with off, for the next collectives after a suspicion with auto",
          "[nccl][proxy]") {
  proxy::configure("on");
  CHECK((proxy::mask_bits() & np::kProxyStep) != 0);
  CHECK((proxy::mask_bits() & np::kProxyOp) != 0);
  CHECK((proxy::mask_bits() & np::kKernelCh) == 0);  // the plugin's own mask decides it (NCCL 2.31.x)
  proxy::configure("off");
  proxy::suspect();
  CHECK((proxy::mask_bits() & np::kProxyStep) == 0);
  CHECK((proxy::mask_bits() & np::kProxyOp) != 0);
  proxy::configure("auto");
  CHECK((proxy::mask_bits() & np::kProxyStep) == 0);
  const uint64_t before = counter("profiler_plugin_suspected");
  proxy::suspect();
  CHECK(counter("profiler_plugin_suspected") == before + 1);
  for (uint32_t i = 0; i + 1 < proxy::kSuspectCollectives; ++i) proxy::note_task();
  CHECK((proxy::mask_bits() & np::kProxyStep) != 0);
  proxy::note_task();
  CHECK((proxy::mask_bits() & np::kProxyStep) == 0);
}

TEST_CASE("a full table counts what it drops and never blocks", "[nccl][proxy]") {
  proxy::configure("auto");
  std::vector<uint32_t> rows;
  for (uint32_t i = 0; i < proxy::kRows; ++i) rows.push_back(proxy::start_op(0, 1, 0, 0, 0, 0, 1, 1, true, false));
  for (uint32_t r : rows) CHECK(r != proxy::kNone);
  const uint64_t dropped = counter("profiler_plugin_progress_dropped");
  CHECK(proxy::start_op(0, 1, 0, 0, 0, 0, 1, 1, true, false) == proxy::kNone);
  CHECK(counter("profiler_plugin_progress_dropped") == dropped + 1);
  proxy::stop_step(proxy::kNone, 1);  // every call accepts kNone
  for (uint32_t r : rows) proxy::stop_op(r);
  CHECK(rows_now().empty());
}

TEST_CASE("the plugin never reads a PXN op's parent or context, and keeps its row without a communicator",
          "[nccl][proxy][plugin]") {
  proxy::configure("on");
  void* context = nullptr;
  int mask = 0;
  REQUIRE(ncclProfiler_v7.init(&context, 42, &mask, "pxn-test", 1, 4, 0, nullptr) == ncclSuccess);
  CHECK((mask & np::kProxyOp) != 0);
  np::EventDescrV7 d{};
  d.type = np::kProxyOp;
  d.parent = reinterpret_cast<void*>(uintptr_t{0x10});  // another process's pointer: unreadable here
  d.rank = 3;
  d.proxy_op.pid = static_cast<int32_t>(getpid()) + 1;
  d.proxy_op.channel_id = 7;
  d.proxy_op.peer = 2;
  d.proxy_op.n_steps = 4;
  d.proxy_op.is_send = 1;
  void* foreign_context = reinterpret_cast<void*>(uintptr_t{0x20});
  void* op = nullptr;
  REQUIRE(ncclProfiler_v7.start_event(foreign_context, &op, &d) == ncclSuccess);
  REQUIRE(op != nullptr);
  np::EventDescrV7 s{};
  s.type = np::kProxyStep;
  s.parent = op;
  s.proxy_step.step = 0;
  void* step = nullptr;
  REQUIRE(ncclProfiler_v7.start_event(foreign_context, &step, &s) == ncclSuccess);
  np::StateArgsV7 args{};
  args.proxy_step.trans_size = 4096;
  CHECK(ncclProfiler_v7.record_event_state(step, np::kProxyStepSendWait, &args) == ncclSuccess);
  CHECK(ncclProfiler_v7.stop_event(step) == ncclSuccess);
  auto rows = rows_now();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].first == traintime::core::CommCallTable::kNoComm);
  CHECK(rows[0].second.pxn);
  CHECK(rows[0].second.rank == 3);
  CHECK(rows[0].second.channel == 7);
  CHECK(rows[0].second.bytes_done == 4096);
  CHECK(rows[0].second.op == traintime::core::CommOp::kUnknown);
  CHECK(ncclProfiler_v7.stop_event(op) == ncclSuccess);
  CHECK(rows_now().empty());
  CHECK(ncclProfiler_v7.finalize(context) == ncclSuccess);
}

TEST_CASE("a long op's steps never take its own handle: every step counts after the handle ring wrapped",
          "[nccl][proxy][plugin]") {
  proxy::configure("on");
  void* context = nullptr;
  int mask = 0;
  REQUIRE(ncclProfiler_v7.init(&context, 43, &mask, "long-op", 1, 2, 0, nullptr) == ncclSuccess);
  np::EventDescrV7 d{};
  d.type = np::kProxyOp;
  d.proxy_op.pid = static_cast<int32_t>(getpid());
  d.proxy_op.channel_id = 1;
  d.proxy_op.peer = 1;
  d.proxy_op.n_steps = 50000;
  d.proxy_op.is_send = 0;
  void* op = nullptr;
  REQUIRE(ncclProfiler_v7.start_event(context, &op, &d) == ncclSuccess);
  np::StateArgsV7 args{};
  args.proxy_step.trans_size = 100;
  constexpr int kSteps = 40000;  // more than the plugin's ring of handles (32768)
  for (int i = 0; i < kSteps; ++i) {
    np::EventDescrV7 s{};
    s.type = np::kProxyStep;
    s.parent = op;
    s.proxy_step.step = i;
    void* step = nullptr;
    ncclProfiler_v7.start_event(context, &step, &s);
    ncclProfiler_v7.record_event_state(step, np::kProxyStepRecvFlushWait, &args);
    ncclProfiler_v7.stop_event(step);
  }
  auto rows = rows_now();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].second.steps_done == kSteps);
  CHECK(rows[0].second.bytes_done == 100u * kSteps);
  CHECK(rows[0].second.direction == "recv");
  ncclProfiler_v7.stop_event(op);
  CHECK(rows_now().empty());
  CHECK(ncclProfiler_v7.finalize(context) == ncclSuccess);
}

TEST_CASE("rows of ops NCCL never stopped are freed at their communicator's finalize: many comms never fill the table",
          "[nccl][proxy][plugin]") {
  // Communicators aborted or destroyed in the middle of a collective: NCCL stops none of their
  // proxy ops or kernel channels. 64 communicators x 24 such rows is 1536, more than the table's
  // 1024: without the rows freed at finalize the later ones are dropped, and so is every op after.
  proxy::configure("on");
  const uint64_t dropped = counter("profiler_plugin_progress_dropped");
  const uint64_t unstopped = counter("profiler_plugin_progress_unstopped");
  constexpr int kComms = 64, kRowsEach = 24;
  static_assert(kComms * kRowsEach > static_cast<int>(proxy::kRows));
  void* keep = nullptr;  // a communicator that lives on, with one op in flight throughout
  int mask = 0;
  REQUIRE(ncclProfiler_v7.init(&keep, 100, &mask, "lives-on", 1, 2, 0, nullptr) == ncclSuccess);
  np::EventDescrV7 d{};
  d.type = np::kProxyOp;
  d.proxy_op.pid = static_cast<int32_t>(getpid());
  d.proxy_op.n_steps = 8;
  d.proxy_op.peer = 1;
  d.proxy_op.is_send = 1;
  void* kept_op = nullptr;
  REQUIRE(ncclProfiler_v7.start_event(keep, &kept_op, &d) == ncclSuccess);
  for (int k = 0; k < kComms; ++k) {
    void* context = nullptr;
    REQUIRE(ncclProfiler_v7.init(&context, 200 + k, &mask, "aborted", 1, 2, 0, nullptr) == ncclSuccess);
    for (int i = 0; i < kRowsEach; ++i) {
      np::EventDescrV7 e = d;
      e.proxy_op.channel_id = static_cast<uint8_t>(i);
      void* op = nullptr;
      REQUIRE(ncclProfiler_v7.start_event(context, &op, &e) == ncclSuccess);
      REQUIRE(op != nullptr);
      ncclProfiler_v7.record_event_state(op, np::kProxyOpInProgress, nullptr);  // never stopped
    }
    CHECK(rows_now().size() == static_cast<std::size_t>(kRowsEach) + 1);
    CHECK(ncclProfiler_v7.finalize(context) == ncclSuccess);  // ncclCommAbort / ncclCommDestroy
  }
  CHECK(counter("profiler_plugin_progress_dropped") == dropped);
  CHECK(counter("profiler_plugin_progress_unstopped") == unstopped + kComms * kRowsEach);
  // What remains is the live communicator's op, untouched by the others' finalize.
  const auto rows = rows_now();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].second.channel == 0);
  CHECK(ncclProfiler_v7.stop_event(kept_op) == ncclSuccess);
  CHECK(rows_now().empty());
  CHECK(ncclProfiler_v7.finalize(keep) == ncclSuccess);
  CHECK(counter("profiler_plugin_progress_unstopped") == unstopped + kComms * kRowsEach);
}
