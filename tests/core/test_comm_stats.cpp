#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpu_rank_file.h"
#include "traintime/core/comm_stats.h"
#include "traintime/core/gpu_aggregator.h"

using namespace traintime::core;

TEST_CASE("busbw factors follow nccl-tests for every op and communicator size", "[comm]") {
  // AllReduce 2(n-1)/n
  CHECK(busbw_factor(CommOp::kAllReduce, 1) == Approx(0.0));
  CHECK(busbw_factor(CommOp::kAllReduce, 2) == Approx(1.0));
  CHECK(busbw_factor(CommOp::kAllReduce, 4) == Approx(1.5));
  CHECK(busbw_factor(CommOp::kAllReduce, 8) == Approx(1.75));
  // (n-1)/n family
  for (CommOp op : {CommOp::kAllGather, CommOp::kReduceScatter, CommOp::kAlltoAll, CommOp::kGather,
                    CommOp::kScatter}) {
    INFO(std::string(comm_op_name(op)));
    CHECK(busbw_factor(op, 1) == Approx(0.0));
    CHECK(busbw_factor(op, 2) == Approx(0.5));
    CHECK(busbw_factor(op, 4) == Approx(0.75));
    CHECK(busbw_factor(op, 8) == Approx(0.875));
  }
  for (CommOp op : {CommOp::kBroadcast, CommOp::kReduce, CommOp::kSend, CommOp::kRecv,
                    CommOp::kPutSignal, CommOp::kSignal, CommOp::kWaitSignal}) {
    INFO(std::string(comm_op_name(op)));
    for (uint32_t n : {1u, 2u, 4u, 8u}) CHECK(busbw_factor(op, n) == Approx(1.0));
  }
  CHECK(busbw_factor(CommOp::kUnknown, 4) == 0.0);
  CHECK(busbw_factor(CommOp::kAllReduce, 0) == 0.0);  // size unknown
}

TEST_CASE("an op read back from its rank-file spelling is the op that was written", "[comm]") {
  for (uint8_t i = 0; i < kCommOpCount; ++i) {
    const auto op = static_cast<CommOp>(i);
    INFO(std::string(comm_op_name(op)));
    CHECK(comm_op_from_name(comm_op_name(op)) == op);
  }
  CHECK(comm_op_from_name("AllReduce") == CommOp::kAllReduce);
  CHECK(comm_op_from_name("allreduce") == CommOp::kUnknown);  // spellings are exact
  CHECK(comm_op_from_name("Barrier") == CommOp::kUnknown);
  CHECK(comm_op_from_name("") == CommOp::kNone);
}

TEST_CASE("message sizes fall into power-of-two buckets", "[comm]") {
  CHECK(size_bucket(0) == 0);
  CHECK(size_bucket(1) == 1);
  CHECK(size_bucket(2) == 2);
  CHECK(size_bucket(3) == 2);
  CHECK(size_bucket(4) == 3);
  CHECK(size_bucket(1024) == 11);
  CHECK(size_bucket(2047) == 11);
  CHECK(size_bucket_lo(11) == 1024);
  CHECK(size_bucket_lo(0) == 0);
  CHECK(size_bucket(~uint64_t{0}) == kSizeBuckets - 1);
}

TEST_CASE("NCCL 2.28 kernel names are recognised in every spelling", "[comm][names]") {
  CHECK(is_nccl_kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL"));
  CHECK(is_nccl_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"));
  CHECK(is_nccl_kernel("void ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"));
  CHECK(is_nccl_kernel("_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE"));
  CHECK(is_nccl_kernel("ncclDevKernel_SendRecv"));
  CHECK(is_nccl_kernel("ncclDevKernel_Generic"));
  CHECK(is_nccl_kernel("ncclKernel_AllReduce_RING_LL_Sum_float"));
  CHECK(is_nccl_kernel("ncclSymkDevKernel_ReduceScatter_LL_sum_bf16"));
  CHECK(is_nccl_kernel("ncclSymkDevKernel_AllGather_LLMC(ncclSymkDevWorkArgs4K)"));
  CHECK_FALSE(is_nccl_kernel("ampere_sgemm_128x64_nn"));
  CHECK_FALSE(is_nccl_kernel("my_ncclDevKernel_AllReduce"));
  CHECK_FALSE(is_nccl_kernel("ncclDevKernelArgsStorage"));
  CHECK_FALSE(is_nccl_kernel(""));
}

TEST_CASE("collective op is parsed from NCCL kernel names where the name says", "[comm][names]") {
  CHECK(comm_op_from_kernel_name("ncclDevKernel_AllReduce_Sum_bf16_RING_LL") == CommOp::kAllReduce);
  CHECK(comm_op_from_kernel_name("_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE") ==
        CommOp::kAllReduce);
  CHECK(comm_op_from_kernel_name("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)") ==
        CommOp::kAllGather);
  CHECK(comm_op_from_kernel_name("ncclDevKernel_Broadcast_RING_LL") == CommOp::kBroadcast);
  CHECK(comm_op_from_kernel_name("ncclDevKernel_Reduce_Sum_f16_RING_LL") == CommOp::kReduce);
  CHECK(comm_op_from_kernel_name("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL") == CommOp::kReduceScatter);
  CHECK(comm_op_from_kernel_name("ncclSymkDevKernel_ReduceScatter_LL_sum_bf16") == CommOp::kReduceScatter);
  CHECK(comm_op_from_kernel_name("ncclKernel_AllGather_RING_LL_Sum_int8_t") == CommOp::kAllGather);
  // AlltoAll, Gather, Scatter, Send and Recv all run as SendRecv: the name cannot say which.
  CHECK(comm_op_from_kernel_name("ncclDevKernel_SendRecv") == CommOp::kUnknown);
  CHECK(comm_op_from_kernel_name("ncclDevKernel_Generic") == CommOp::kUnknown);
  CHECK(comm_op_from_kernel_name("ampere_sgemm_128x64_nn") == CommOp::kUnknown);
}

TEST_CASE("call table registers communicators and counts calls per op", "[comm][table]") {
  CommCallTable t;
  uint32_t a = t.register_communicator(0x1000, 4, 1);
  uint32_t b = t.register_communicator(0x2000, 4, 3);  // same size, kept apart
  CHECK(a == 0);
  CHECK(b == 1);
  CHECK(t.register_communicator(0x1000, 4, 1) == a);
  CHECK(t.find_communicator(0x1000) == a);
  CHECK(t.find_communicator(0x2000) == b);
  CHECK(t.find_communicator(0x3000) == CommCallTable::kNoComm);
  CHECK(t.register_communicator(0, 4, 0) == CommCallTable::kNoComm);
  CHECK(t.next_seq(a) == 1);
  CHECK(t.next_seq(a) == 2);
  CHECK(t.next_seq(b) == 1);
  CHECK(t.next_seq(99) == 0);
  t.on_call(a, CommOp::kAllReduce, 1000);
  t.on_call(a, CommOp::kAllReduce, 3000);
  t.on_call(b, CommOp::kBroadcast, 0);
  t.on_call(77, CommOp::kAllReduce, 5);  // never registered
  auto snap = t.snapshot();
  REQUIRE(snap.comms.size() == 2);
  const auto& ar = snap.comms[a].ops[static_cast<std::size_t>(CommOp::kAllReduce)];
  CHECK(ar.calls == 2);
  CHECK(ar.bytes == 4000);
  CHECK(ar.bucket_calls[size_bucket(1000)] == 1);  // [512,1024)
  CHECK(ar.bucket_calls[size_bucket(3000)] == 1);  // [2048,4096)
  CHECK(ar.bucket_bytes[size_bucket(3000)] == 3000);
  CHECK(snap.comms[a].ops_enqueued == 2);
  CHECK(snap.comms[b].rank == 3);
  CHECK(snap.comms[b].ops[static_cast<std::size_t>(CommOp::kBroadcast)].bucket_calls[0] == 1);
  CHECK(snap.calls_without_communicator == 1);
}

TEST_CASE("a retired communicator's handle can be reused by a new one", "[comm][table]") {
  CommCallTable t;
  uint32_t a = t.register_communicator(0xabc, 2, 0);
  t.on_call(a, CommOp::kAllReduce, 8);
  t.retire_communicator(a);
  CHECK(t.find_communicator(0xabc) == CommCallTable::kNoComm);
  uint32_t b = t.register_communicator(0xabc, 8, 5);
  CHECK(b != a);
  CHECK(t.find_communicator(0xabc) == b);
  auto snap = t.snapshot();
  CHECK(snap.comms[a].retired);
  CHECK(snap.comms[a].ops[static_cast<std::size_t>(CommOp::kAllReduce)].calls == 1);
  CHECK(snap.comms[b].size == 8);
}

TEST_CASE("call counters are exact under concurrent callers", "[comm][table]") {
  CommCallTable t;
  uint32_t c = t.register_communicator(0x42, 8, 0);
  // NCCL forbids issuing operations on one communicator from two threads at once, so threads
  // that share it take turns (here a mutex) for the call itself: sequence numbers stay unique
  // across them. The counters must stay exact even when the counting overlaps, as it does here.
  std::mutex turn;
  std::vector<std::vector<uint64_t>> seqs(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      for (int k = 0; k < 50000; ++k) {
        {
          std::lock_guard<std::mutex> lock(turn);
          seqs[i].push_back(t.next_seq(c));
        }
        t.on_call(c, CommOp::kAllGather, 16);
      }
    });
  for (auto& th : threads) th.join();
  std::vector<uint64_t> all;
  for (const auto& v : seqs) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  CHECK(std::adjacent_find(all.begin(), all.end()) == all.end());
  CHECK(all.front() == 1);
  CHECK(all.back() == 200000);
  auto snap = t.snapshot();
  CHECK(snap.comms[c].ops_enqueued == 200000);
  CHECK(snap.comms[c].ops[static_cast<std::size_t>(CommOp::kAllGather)].calls == 200000);
  CHECK(snap.comms[c].ops[static_cast<std::size_t>(CommOp::kAllGather)].bytes == 3200000);
}

TEST_CASE("group records are found by id until the ring overwrites them", "[comm][group]") {
  CommCallTable t;
  CommGroupMember m[2] = {{CommOp::kSend, 1, 5, 300}, {CommOp::kRecv, 1, 6, 100}};
  t.record_group(3, m, 2);
  CommGroupRecord r;
  REQUIRE(t.find_group(3, r));
  CHECK(r.count == 2);
  CHECK(r.members[1].op == CommOp::kRecv);
  CHECK(r.members[1].seq == 6);
  CHECK(r.members[0].bytes == 300);
  CHECK_FALSE(t.find_group(4, r));
  t.record_group(3 + CommCallTable::kGroupSlots, m, 1);  // same slot, newer group
  CHECK_FALSE(t.find_group(3, r));
  CHECK(t.find_group(3 + CommCallTable::kGroupSlots, r));
}

TEST_CASE("a group larger than the record merges members by communicator and op",
          "[comm][group]") {
  CommCallTable t;
  std::vector<CommGroupMember> m;
  for (uint32_t i = 0; i < 20; ++i) m.push_back({i % 2 ? CommOp::kRecv : CommOp::kSend, 1, i + 1, 10});
  t.record_group(1, m.data(), static_cast<uint32_t>(m.size()));
  CommGroupRecord r;
  REQUIRE(t.find_group(1, r));
  CHECK(r.count == CommGroupRecord::kMaxMembers);
  CHECK(r.merged);
  uint64_t total = 0;
  for (uint32_t i = 0; i < r.count; ++i) total += r.members[i].bytes;
  CHECK(total == 200);  // no bytes lost
  CHECK(r.members[0].bytes == 10 + 20);  // two more Sends merged into the first Send
  CHECK(r.members[1].bytes == 10 + 20);
}

namespace {
std::string name_of(PathId p) { return "p" + std::to_string(p); }

LaunchContext nccl_ctx(CommOp op, uint32_t comm_id, uint64_t seq, uint64_t bytes) {
  LaunchContext c;
  c.comm.op = op;
  c.comm.comm_id = comm_id;
  c.comm.seq = seq;
  c.comm.bytes = bytes;
  return c;
}

GpuActivity nccl_kernel(uint64_t start, uint64_t end,
                        std::string_view name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL") {
  GpuActivity a;
  a.start_ns = start;
  a.end_ns = end;
  a.name = name;
  return a;
}

const CommRow* row(const RankFile& f, CommOp op, uint32_t size) {
  for (const auto& r : f.comm)
    if (r.op == op && r.comm_size == size) return &r;
  return nullptr;
}
}  // namespace

TEST_CASE("comm rows join CPU calls and bytes with GPU time; bandwidths from the factors",
          "[comm][aggregator]") {
  CommCallTable t;
  uint32_t c = t.register_communicator(0x10, 4, 0, 0xabcdef0123);
  GpuAggregator agg;
  // Two AllReduces of 1000 and 3000 bytes taking 100 and 300 ns on the GPU.
  for (uint64_t bytes : {1000u, 3000u}) {
    uint64_t seq = t.next_seq(c);
    t.on_call(c, CommOp::kAllReduce, bytes);
    uint64_t start = seq * 1000;
    agg.ingest(nccl_kernel(start, start + bytes / 10), nccl_ctx(CommOp::kAllReduce, c + 1, seq, bytes),
               Category::kOther);
  }
  auto snap = t.snapshot();
  RankFile f = testing::gpu_rank_file(agg, name_of, 1, &snap);
  const CommRow* r = row(f, CommOp::kAllReduce, 4);
  REQUIRE(r != nullptr);
  CHECK(r->calls == 2);
  CHECK(r->bytes == 4000);
  CHECK(r->bytes_known);
  CHECK(r->gpu_ns == 400);
  CHECK(r->algbw_gbps == Approx(10.0));  // 4000 B / 400 ns = 10 B/ns = 10 GB/s
  CHECK(r->busbw_gbps == Approx(15.0));  // × 2(4−1)/4
  REQUIRE(r->sizes.size() == 2);
  CHECK(r->sizes[0].lo_bytes == 512);
  CHECK(r->sizes[0].calls == 1);
  CHECK(r->sizes[0].gpu_ns == 100);
  CHECK(r->sizes[1].lo_bytes == 2048);
  CHECK(r->sizes[1].gpu_ns == 300);
  REQUIRE(f.communicators.size() == 1);
  const Communicator& cm = f.communicators[0];
  CHECK(cm.id == "000000abcdef0123");  // the stable id, never the table index
  CHECK(cm.size == 4);
  CHECK(cm.ops_enqueued == 2);
  CHECK(cm.ops_completed == 2);
  REQUIRE(cm.recent.size() == 2);
  CHECK(cm.recent[1].seq == 2);
  CHECK(cm.recent[1].op == CommOp::kAllReduce);
  CHECK(cm.recent[1].bytes == 3000);
  CHECK(cm.recent[1].gpu_start_ns == 2000);
  CHECK(cm.recent[1].gpu_end_ns == 2300);
}

TEST_CASE("two communicators of different sizes give separate rows", "[comm][aggregator]") {
  CommCallTable t;
  uint32_t c2 = t.register_communicator(0x1, 2, 0);
  uint32_t c8 = t.register_communicator(0x2, 8, 0);
  GpuAggregator agg;
  t.on_call(c2, CommOp::kAllGather, 800);
  agg.ingest(nccl_kernel(0, 100, "ncclDevKernel_AllGather_RING_LL"),
             nccl_ctx(CommOp::kAllGather, c2 + 1, t.next_seq(c2), 800), Category::kOther);
  t.on_call(c8, CommOp::kAllGather, 800);
  agg.ingest(nccl_kernel(200, 400, "ncclDevKernel_AllGather_RING_LL"),
             nccl_ctx(CommOp::kAllGather, c8 + 1, t.next_seq(c8), 800), Category::kOther);
  auto snap = t.snapshot();
  RankFile f = testing::gpu_rank_file(agg, name_of, 1, &snap);
  const CommRow* r2 = row(f, CommOp::kAllGather, 2);
  const CommRow* r8 = row(f, CommOp::kAllGather, 8);
  REQUIRE(r2 != nullptr);
  REQUIRE(r8 != nullptr);
  CHECK(r2->busbw_gbps == Approx(8.0 * 0.5));    // 800/100 × (2−1)/2
  CHECK(r8->busbw_gbps == Approx(4.0 * 0.875));  // 800/200 × (8−1)/8
  CHECK(f.communicators.size() == 2);
}

TEST_CASE("without interposition NCCL kernels are found by name, bytes unknown",
          "[comm][aggregator]") {
  GpuAggregator agg;
  LaunchContext none;
  none.path = 1;
  agg.ingest(nccl_kernel(0, 50, "ncclDevKernel_AllGather_RING_LL"), none, Category::kBackward);
  agg.ingest(nccl_kernel(100, 130, "ncclDevKernel_SendRecv"), none, Category::kBackward);
  agg.ingest(nccl_kernel(200, 220, "ncclDevKernel_SendRecv"), none, Category::kBackward);
  RankFile f = testing::gpu_rank_file(agg, name_of, 1);
  CHECK(f.categories[Category::kComm].gpu_busy_ns == 100);
  CHECK(f.categories[Category::kBackward].count == 0);
  const CommRow* ag = row(f, CommOp::kAllGather, 0);
  REQUIRE(ag != nullptr);
  CHECK(ag->calls == 1);
  CHECK_FALSE(ag->bytes_known);
  CHECK(ag->gpu_ns == 50);
  CHECK(ag->busbw_gbps == 0.0);
  const CommRow* unk = row(f, CommOp::kUnknown, 0);
  REQUIRE(unk != nullptr);
  CHECK(unk->calls == 2);
  CHECK(unk->gpu_ns == 50);
}

TEST_CASE("a group kernel's time is split across its members by bytes", "[comm][group]") {
  CommCallTable t;
  uint32_t c = t.register_communicator(0x7, 2, 0);
  uint64_t s1 = t.next_seq(c), s2 = t.next_seq(c);
  t.on_call(c, CommOp::kSend, 300);
  t.on_call(c, CommOp::kRecv, 100);
  CommGroupMember m[2] = {{CommOp::kSend, c + 1, s1, 300}, {CommOp::kRecv, c + 1, s2, 100}};
  t.record_group(9, m, 2);
  GpuAggregator agg;
  agg.split_groups(true);
  LaunchContext ctx = nccl_ctx(CommOp::kSend, c + 1, s1, 400);
  ctx.comm.group_id = 9;
  agg.ingest(nccl_kernel(1000, 1100, "ncclDevKernel_SendRecv"), ctx, Category::kOther);
  // The ingest asked nobody for the members: the kernel waits, and its owner looks its group up
  // (with no lock of its own held, in the CUPTI adapter) and hands it back.
  std::vector<GpuAggregator::PendingGroupKernel> pending;
  agg.take_pending_groups(&pending);
  REQUIRE(pending.size() == 1);
  CHECK(pending[0].comm.group_id == 9);
  CHECK(pending[0].dur == 100);
  CommGroupRecord group;
  REQUIRE(t.find_group(pending[0].comm.group_id, group));
  agg.add_group_kernel(pending[0], &group);
  agg.take_pending_groups(&pending);
  CHECK(pending.empty());
  auto snap = t.snapshot();
  RankFile f = testing::gpu_rank_file(agg, name_of, 1, &snap);
  const CommRow* send = row(f, CommOp::kSend, 2);
  const CommRow* recv = row(f, CommOp::kRecv, 2);
  REQUIRE(send != nullptr);
  REQUIRE(recv != nullptr);
  CHECK(send->gpu_ns == 75);
  CHECK(recv->gpu_ns == 25);
  CHECK(send->calls == 1);
  CHECK(recv->calls == 1);
  CHECK(f.categories[Category::kComm].gpu_busy_ns == 100);
  REQUIRE(f.communicators.size() == 1);
  CHECK(f.communicators[0].ops_completed == 2);
  CHECK(f.communicators[0].recent.size() == 2);
}

TEST_CASE("a group kernel whose group fell out of the table counts for the first op", "[comm][group]") {
  GpuAggregator agg;
  agg.split_groups(true);
  LaunchContext ctx = nccl_ctx(CommOp::kSend, 1, 1, 400);
  ctx.comm.group_id = 12;
  agg.ingest(nccl_kernel(0, 100, "ncclDevKernel_SendRecv"), ctx, Category::kOther);
  CHECK(row(testing::gpu_rank_file(agg, name_of, 1), CommOp::kSend, 0) == nullptr);  // pending
  std::vector<GpuAggregator::PendingGroupKernel> pending;
  agg.take_pending_groups(&pending);
  REQUIRE(pending.size() == 1);
  agg.add_group_kernel(pending[0], nullptr);
  RankFile f = testing::gpu_rank_file(agg, name_of, 1);
  const CommRow* send = row(f, CommOp::kSend, 0);
  REQUIRE(send != nullptr);
  CHECK(send->gpu_ns == 100);
}

TEST_CASE("a group kernel whose group is unknown counts for the first op", "[comm][group]") {
  GpuAggregator agg;  // no call table
  LaunchContext ctx = nccl_ctx(CommOp::kSend, 1, 1, 400);
  ctx.comm.group_id = 12;
  agg.ingest(nccl_kernel(0, 100, "ncclDevKernel_SendRecv"), ctx, Category::kOther);
  RankFile f = testing::gpu_rank_file(agg, name_of, 1);
  const CommRow* send = row(f, CommOp::kSend, 0);
  REQUIRE(send != nullptr);
  CHECK(send->gpu_ns == 100);
}

TEST_CASE("NCCL work captured into a CUDA graph counts one call per replayed kernel",
          "[comm][aggregator]") {
  CommCallTable t;
  uint32_t c = t.register_communicator(0x9, 2, 0);
  GpuAggregator agg;
  LaunchContext ctx = nccl_ctx(CommOp::kAllReduce, c + 1, 0, 2048);
  ctx.comm.captured = true;
  for (uint64_t replay = 0; replay < 3; ++replay)
    agg.ingest(nccl_kernel(replay * 1000, replay * 1000 + 100), ctx, Category::kOther);
  auto snap = t.snapshot();
  RankFile f = testing::gpu_rank_file(agg, name_of, 1, &snap);
  const CommRow* r = row(f, CommOp::kAllReduce, 2);
  REQUIRE(r != nullptr);
  CHECK(r->calls == 3);
  CHECK(r->bytes == 6144);
  CHECK(r->gpu_ns == 300);
  CHECK(r->algbw_gbps == Approx(6144.0 / 300.0));
}

TEST_CASE("the recent-collective ring keeps the newest entries only", "[comm][bounded]") {
  AggregatorOptions o;
  o.recent_collectives = 4;
  GpuAggregator agg(o);
  for (uint64_t seq = 1; seq <= 10; ++seq)
    agg.ingest(nccl_kernel(seq * 100, seq * 100 + 10), nccl_ctx(CommOp::kAllReduce, 1, seq, 64),
               Category::kOther);
  // seq 3 arriving late must not evict the newer seq 7 from its slot (3 % 4 == 7 % 4).
  agg.ingest(nccl_kernel(300, 310), nccl_ctx(CommOp::kAllReduce, 1, 3, 64), Category::kOther);
  RankFile f = testing::gpu_rank_file(agg, name_of, 1);
  REQUIRE(f.communicators.size() == 1);
  const auto& recent = f.communicators[0].recent;
  REQUIRE(recent.size() == 4);
  CHECK(recent[0].seq == 7);
  CHECK(recent[3].seq == 10);
  CHECK(f.communicators[0].ops_completed == 10);
}

TEST_CASE("a group read while being rewritten is either whole or refused", "[comm][group][table]") {
  CommCallTable t;
  std::atomic<bool> stop{false};
  constexpr uint64_t kGroups = 20000;
  std::thread writer([&] {
    CommGroupMember m[CommGroupRecord::kMaxMembers];
    for (uint64_t g = 1; g <= kGroups; ++g) {
      uint32_t n = static_cast<uint32_t>(g % CommGroupRecord::kMaxMembers) + 1;
      for (uint32_t i = 0; i < n; ++i) m[i] = {CommOp::kSend, 1, g, g};  // every field says g
      t.record_group(g, m, n);
    }
    stop = true;
  });
  uint64_t found = 0, torn = 0;
  while (!stop) {
    for (uint64_t g = 1; g <= kGroups; g += 97) {
      CommGroupRecord r;
      if (!t.find_group(g, r)) continue;
      ++found;
      bool whole = r.group_id == g && r.count == (g % CommGroupRecord::kMaxMembers) + 1;
      for (uint32_t i = 0; i < r.count; ++i)
        whole = whole && r.members[i].seq == g && r.members[i].bytes == g;
      if (!whole) ++torn;
    }
  }
  writer.join();
  CHECK(torn == 0);
  CommGroupRecord last;
  CHECK(t.find_group(kGroups, last));
  (void)found;
}
