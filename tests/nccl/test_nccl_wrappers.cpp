// White-box tests of the NCCL wrappers against a fake libnccl.so.2 and a fake libcuda.so.1 (no
// GPU, no simgpu): return values and errno pass through, what is counted and how, what the
// launch callback would read inside each call, the communicator registry.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "nccl_context.h"
#include "nccl_registry.h"
#include "runtime_double.h"

extern "C" {
typedef void (*fake_nccl_hook)(const char* function);
void fake_nccl_set_hook(fake_nccl_hook hook);
void fake_nccl_fail(const char* function, ncclResult_t result, int err);
void fake_nccl_clear_failure(void);
int fake_nccl_calls(const char* function);
void fake_cuda_set_capturing(void* stream);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
}

namespace rt = traintime::rt;
namespace nccl = traintime::rt::nccl;
using traintime::core::CommCallTable;
using traintime::core::CommOp;

namespace {

// What the CUPTI launch callback would have read at each simulated kernel launch.
struct Launch {
  std::string function;
  bool inside = false;
  rt::NcclCall call;
};
std::vector<Launch> g_launches;

void record_launch(const char* function) {
  const rt::NcclCall* c = rt::current_nccl_call();
  g_launches.push_back(Launch{function, c != nullptr, c != nullptr ? *c : rt::NcclCall{}});
}

struct Fixture {
  Fixture() {
    g_launches.clear();
    fake_nccl_set_hook(&record_launch);
    fake_nccl_clear_failure();
    fake_cuda_set_capturing(nullptr);
    rt::testing::g_config.nccl = true;
    rt::testing::g_active = true;
  }
  ~Fixture() { fake_nccl_set_hook(nullptr); }
};

ncclUniqueId unique_id(unsigned char tag) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  static unsigned counter = 0;
  id.internal[0] = static_cast<char>(tag);
  const unsigned n = ++counter;
  std::memcpy(id.internal + 1, &n, sizeof n);
  return id;
}

ncclComm_t make_comm(int nranks, int rank, const ncclUniqueId& id) {
  ncclComm_t comm = nullptr;
  REQUIRE(ncclCommInitRank(&comm, nranks, id, rank) == ncclSuccess);
  REQUIRE(comm != nullptr);
  return comm;
}

ncclComm_t make_comm(int nranks, int rank) { return make_comm(nranks, rank, unique_id(1)); }

uint32_t comm_id(ncclComm_t comm) {
  const uint32_t id = nccl::comm_id_for(comm);
  REQUIRE(id != 0);
  return id;
}

CommCallTable::OpCounts counts(ncclComm_t comm, CommOp op) {
  const auto snap = nccl::call_table().snapshot();
  const auto* cs = snap.find(comm_id(comm) - 1);
  REQUIRE(cs != nullptr);
  return cs->ops[static_cast<size_t>(op)];
}

uint64_t enqueued(ncclComm_t comm) {
  const auto snap = nccl::call_table().snapshot();
  return snap.find(comm_id(comm) - 1)->ops_enqueued;
}

cudaStream_t stream_of(uintptr_t v) { return reinterpret_cast<cudaStream_t>(v); }

}  // namespace

TEST_CASE_METHOD(Fixture, "every op counts one call with nccl-tests bytes and carries its context",
                 "[nccl]") {
  ncclComm_t c = make_comm(4, 1);
  const cudaStream_t s = stream_of(0x100);
  char buf[1];
  // Each call also checks that errno comes back as the application left it (the first counted
  // call of the process activates the runtime, whose double changes errno).
  auto call = [](auto&& op) {
    errno = EILSEQ;
    REQUIRE(op() == ncclSuccess);
    CHECK(errno == EILSEQ);
  };
  call([&] { return ncclAllReduce(buf, buf, 1000, ncclFloat32, ncclSum, c, s); });
  call([&] { return ncclBroadcast(buf, buf, 10, ncclFloat64, 0, c, s); });
  call([&] { return ncclReduce(buf, buf, 7, ncclInt8, ncclMax, 0, c, s); });
  call([&] { return ncclAllGather(buf, buf, 100, ncclFloat16, c, s); });
  call([&] { return ncclReduceScatter(buf, buf, 50, ncclInt32, ncclSum, c, s); });
  call([&] { return ncclAlltoAll(buf, buf, 8, ncclInt64, c, s); });
  call([&] { return ncclGather(buf, buf, 3, ncclFloat32, 0, c, s); });
  call([&] { return ncclScatter(buf, buf, 5, ncclUint8, 0, c, s); });
  call([&] { return ncclSend(buf, 9, ncclBfloat16, 2, c, s); });
  call([&] { return ncclRecv(buf, 11, ncclFloat8e4m3, 2, c, s); });

  // (op, bytes): the buffer for AllReduce/Broadcast/Reduce/Send/Recv, the total over the 4
  // ranks for AllGather, ReduceScatter, AlltoAll, Gather and Scatter.
  const std::vector<std::pair<CommOp, uint64_t>> expected = {
      {CommOp::kAllReduce, 4000},    {CommOp::kBroadcast, 80}, {CommOp::kReduce, 7},
      {CommOp::kAllGather, 800},     {CommOp::kReduceScatter, 800},
      {CommOp::kAlltoAll, 256},      {CommOp::kGather, 48},    {CommOp::kScatter, 20},
      {CommOp::kSend, 18},           {CommOp::kRecv, 11}};
  REQUIRE(g_launches.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("op #" << i);
    const auto [op, bytes] = expected[i];
    CHECK(counts(c, op).calls == 1);
    CHECK(counts(c, op).bytes == bytes);
    CHECK(g_launches[i].inside);
    CHECK(g_launches[i].call.op == op);
    CHECK(g_launches[i].call.bytes == bytes);
    CHECK(g_launches[i].call.comm_id == comm_id(c));
    CHECK(g_launches[i].call.seq == i + 1);
    CHECK(g_launches[i].call.group_id == 0);
    CHECK_FALSE(g_launches[i].call.captured);
  }
  CHECK(enqueued(c) == expected.size());
  CHECK(rt::current_nccl_call() == nullptr);
  CHECK(rt::testing::g_marked > 0);
}

TEST_CASE_METHOD(Fixture, "ncclBcast is counted once, as Broadcast", "[nccl]") {
  ncclComm_t c = make_comm(2, 0);
  const int bcast_before = fake_nccl_calls("ncclBcast");
  const int broadcast_before = fake_nccl_calls("ncclBroadcast");
  char buf[1];
  REQUIRE(ncclBcast(buf, 64, ncclFloat32, 0, c, stream_of(0x100)) == ncclSuccess);
  // The fake really went through ncclBroadcast (via the dynamic symbol, so via our wrapper).
  CHECK(fake_nccl_calls("ncclBcast") == bcast_before + 1);
  CHECK(fake_nccl_calls("ncclBroadcast") == broadcast_before + 1);
  CHECK(counts(c, CommOp::kBroadcast).calls == 1);
  CHECK(counts(c, CommOp::kBroadcast).bytes == 256);
  CHECK(enqueued(c) == 1);
  REQUIRE(g_launches.size() == 1);
  CHECK(g_launches[0].call.op == CommOp::kBroadcast);
  CHECK(g_launches[0].call.seq == 1);
}

TEST_CASE_METHOD(Fixture, "a failing real call's return value and errno pass through unchanged",
                 "[nccl]") {
  ncclComm_t c = make_comm(2, 1);
  char buf[1];
  struct Case {
    const char* function;
    ncclResult_t result;
    int err;
  };
  for (const Case k : {Case{"ncclAllReduce", ncclSystemError, EIO},
                       Case{"ncclSend", ncclRemoteError, ECONNRESET},
                       Case{"ncclAllGather", ncclInvalidArgument, 0},
                       Case{"ncclGroupEnd", ncclInternalError, ENOMEM},
                       Case{"ncclCommInitRank", ncclUnhandledCudaError, EBUSY}}) {
    INFO(k.function);
    fake_nccl_fail(k.function, k.result, k.err);
    errno = 12345;
    ncclResult_t r = ncclSuccess;
    const std::string f = k.function;
    if (f == "ncclAllReduce") r = ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, c, nullptr);
    if (f == "ncclSend") r = ncclSend(buf, 1, ncclFloat32, 0, c, nullptr);
    if (f == "ncclAllGather") r = ncclAllGather(buf, buf, 1, ncclFloat32, c, nullptr);
    if (f == "ncclGroupEnd") {
      REQUIRE(ncclGroupStart() == ncclSuccess);
      errno = 12345;
      r = ncclGroupEnd();
    }
    if (f == "ncclCommInitRank") {
      ncclComm_t unused = nullptr;
      r = ncclCommInitRank(&unused, 2, unique_id(2), 0);
    }
    const int err = errno;
    CHECK(r == k.result);
    CHECK(err == k.err);
    fake_nccl_clear_failure();
  }
  // Failed calls enqueue nothing, so they are not counted.
  CHECK(counts(c, CommOp::kAllReduce).calls == 0);
  CHECK(counts(c, CommOp::kSend).calls == 0);
  CHECK(counts(c, CommOp::kAllGather).calls == 0);
}

TEST_CASE_METHOD(Fixture, "errno that the real call leaves alone stays the application's",
                 "[nccl]") {
  // A communicator the wrappers never saw created takes the slow path on its first call
  // (registry mutex, real size/rank queries) and the fake driver sets errno when asked about
  // the stream: none of that may show.
  ncclComm_t c = nullptr;
  REQUIRE(pncclCommInitRank(&c, 3, unique_id(3), 2) == ncclSuccess);
  char buf[1];
  errno = ENOTTY;
  REQUIRE(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, c, stream_of(0x200)) == ncclSuccess);
  CHECK(errno == ENOTTY);
  errno = EDOM;
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclSend(buf, 1, ncclFloat32, 0, c, stream_of(0x200)) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  CHECK(errno == EDOM);
  errno = ERANGE;
  REQUIRE(ncclCommDestroy(c) == ncclSuccess);
  CHECK(errno == ERANGE);
}

TEST_CASE_METHOD(Fixture, "a communicator created behind the wrappers is registered on first use",
                 "[nccl]") {
  ncclComm_t c = nullptr;
  REQUIRE(pncclCommInitRank(&c, 3, unique_id(4), 2) == ncclSuccess);
  char buf[1];
  REQUIRE(ncclAllGather(buf, buf, 10, ncclFloat32, c, nullptr) == ncclSuccess);
  const nccl::CommEntry* e = nccl::entry(comm_id(c));
  REQUIRE(e != nullptr);
  CHECK(e->size == 3);
  CHECK(e->rank == 2);
  CHECK(e->origin == nccl::CommOrigin::kFirstSeen);
  CHECK(counts(c, CommOp::kAllGather).bytes == 10 * 4 * 3);
  REQUIRE(ncclCommDestroy(c) == ncclSuccess);
}

TEST_CASE_METHOD(Fixture, "two communicators of the same size are kept apart", "[nccl]") {
  ncclComm_t a = make_comm(2, 0);
  ncclComm_t b = make_comm(2, 1);
  char buf[1];
  REQUIRE(ncclAllReduce(buf, buf, 10, ncclFloat32, ncclSum, a, nullptr) == ncclSuccess);
  REQUIRE(ncclAllReduce(buf, buf, 20, ncclFloat32, ncclSum, b, nullptr) == ncclSuccess);
  REQUIRE(ncclAllReduce(buf, buf, 20, ncclFloat32, ncclSum, b, nullptr) == ncclSuccess);
  CHECK(comm_id(a) != comm_id(b));
  CHECK(nccl::entry(comm_id(a))->stable_id != nccl::entry(comm_id(b))->stable_id);
  CHECK(counts(a, CommOp::kAllReduce).calls == 1);
  CHECK(counts(a, CommOp::kAllReduce).bytes == 40);
  CHECK(counts(b, CommOp::kAllReduce).calls == 2);
  CHECK(counts(b, CommOp::kAllReduce).bytes == 160);
  CHECK(enqueued(a) == 1);
  CHECK(enqueued(b) == 2);
}

TEST_CASE_METHOD(Fixture, "ranks of one communicator get the same stable id, split children too",
                 "[nccl]") {
  // Two ranks of one communicator (same unique id), as two processes would see it.
  const ncclUniqueId id = unique_id(5);
  ncclComm_t r0 = make_comm(4, 0, id);
  ncclComm_t r1 = make_comm(4, 1, id);
  CHECK(comm_id(r0) != comm_id(r1));
  CHECK(nccl::entry(comm_id(r0))->stable_id == nccl::entry(comm_id(r1))->stable_id);
  CHECK(nccl::entry(comm_id(r0))->origin == nccl::CommOrigin::kInitRank);

  // Each rank splits twice; the n-th split with the same color is the same communicator.
  ncclComm_t a0 = nullptr, a1 = nullptr, b0 = nullptr, b1 = nullptr;
  REQUIRE(ncclCommSplit(r0, 7, 0, &a0, nullptr) == ncclSuccess);
  REQUIRE(ncclCommSplit(r1, 7, 1, &a1, nullptr) == ncclSuccess);
  REQUIRE(ncclCommSplit(r0, 7, 0, &b0, nullptr) == ncclSuccess);
  REQUIRE(ncclCommSplit(r1, 8, 1, &b1, nullptr) == ncclSuccess);
  const uint64_t id_a0 = nccl::entry(comm_id(a0))->stable_id;  // registered lazily here
  CHECK(nccl::entry(comm_id(a0))->origin == nccl::CommOrigin::kSplit);
  CHECK(nccl::entry(comm_id(a1))->stable_id == id_a0);
  CHECK(nccl::entry(comm_id(b0))->stable_id != id_a0);  // second split of the parent
  CHECK(nccl::entry(comm_id(b1))->stable_id != nccl::entry(comm_id(b0))->stable_id);  // color
  CHECK(nccl::entry(comm_id(r0))->stable_id != id_a0);
}

TEST_CASE_METHOD(Fixture, "group ops are counted one by one and the group kernel names them all",
                 "[nccl]") {
  ncclComm_t c = make_comm(8, 3);
  const uint64_t seq_before = enqueued(c);
  char buf[1];
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclGroupStart() == ncclSuccess);  // nested: only the outermost end launches
  REQUIRE(ncclAllReduce(buf, buf, 100, ncclFloat32, ncclSum, c, nullptr) == ncclSuccess);
  REQUIRE(ncclSend(buf, 10, ncclFloat32, 4, c, nullptr) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  REQUIRE(ncclRecv(buf, 10, ncclFloat32, 4, c, nullptr) == ncclSuccess);
  CHECK(g_launches.empty());
  REQUIRE(ncclGroupEnd() == ncclSuccess);

  CHECK(counts(c, CommOp::kAllReduce).calls == 1);
  CHECK(counts(c, CommOp::kSend).calls == 1);
  CHECK(counts(c, CommOp::kRecv).calls == 1);
  CHECK(enqueued(c) == seq_before + 3);
  REQUIRE(g_launches.size() == 1);
  const rt::NcclCall& g = g_launches[0].call;
  CHECK(g_launches[0].function == "ncclGroupEnd");
  CHECK(g.group_id != 0);
  CHECK(g.op == CommOp::kAllReduce);  // the first member
  CHECK(g.seq == seq_before + 1);
  CHECK(g.bytes == 400 + 40 + 40);  // the whole group
  traintime::core::CommGroupRecord rec;
  REQUIRE(nccl::call_table().find_group(g.group_id, rec));
  REQUIRE(rec.count == 3);
  CHECK(rec.members[0].op == CommOp::kAllReduce);
  CHECK(rec.members[1].op == CommOp::kSend);
  CHECK(rec.members[2].op == CommOp::kRecv);
  CHECK(rec.members[2].bytes == 40);
  CHECK(rec.members[2].seq == seq_before + 3);
  CHECK(rec.members[2].comm_id == comm_id(c));

  // The next group gets a new id; a call after the group is a plain call again.
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclSend(buf, 1, ncclFloat32, 4, c, nullptr) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  REQUIRE(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, c, nullptr) == ncclSuccess);
  REQUIRE(g_launches.size() == 3);
  CHECK(g_launches[1].call.group_id > g.group_id);
  CHECK(g_launches[2].call.group_id == 0);
}

TEST_CASE_METHOD(Fixture, "calls on a stream being captured into a graph are left to the replays",
                 "[nccl]") {
  ncclComm_t c = make_comm(2, 0);
  const cudaStream_t capturing = stream_of(0xCA97);
  fake_cuda_set_capturing(capturing);
  char buf[1];
  REQUIRE(ncclAllReduce(buf, buf, 32, ncclFloat32, ncclSum, c, capturing) == ncclSuccess);
  CHECK(counts(c, CommOp::kAllReduce).calls == 0);
  CHECK(enqueued(c) == 0);
  REQUIRE(g_launches.size() == 1);
  CHECK(g_launches[0].call.captured);
  CHECK(g_launches[0].call.seq == 0);
  CHECK(g_launches[0].call.bytes == 128);
  CHECK(g_launches[0].call.comm_id == comm_id(c));
  // The same call on another stream counts.
  REQUIRE(ncclAllReduce(buf, buf, 32, ncclFloat32, ncclSum, c, stream_of(0x300)) == ncclSuccess);
  CHECK(counts(c, CommOp::kAllReduce).calls == 1);
  CHECK(g_launches[1].call.seq == 1);
}

TEST_CASE_METHOD(Fixture, "TRAINTIME_NCCL=0 passes every call straight through", "[nccl]") {
  ncclComm_t c = make_comm(2, 1);
  rt::testing::g_config.nccl = false;
  const int before = fake_nccl_calls("ncclAllReduce");
  char buf[1];
  errno = EXDEV;
  REQUIRE(ncclAllReduce(buf, buf, 8, ncclFloat32, ncclSum, c, nullptr) == ncclSuccess);
  CHECK(errno == EXDEV);
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclSend(buf, 1, ncclFloat32, 0, c, nullptr) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  CHECK(fake_nccl_calls("ncclAllReduce") == before + 1);
  rt::testing::g_config.nccl = true;
  CHECK(counts(c, CommOp::kAllReduce).calls == 0);
  CHECK(counts(c, CommOp::kSend).calls == 0);
  REQUIRE(g_launches.size() == 2);
  CHECK_FALSE(g_launches[0].inside);
  CHECK_FALSE(g_launches[1].inside);
}

TEST_CASE_METHOD(Fixture, "a destroyed communicator's reused address is a new communicator",
                 "[nccl]") {
  ncclComm_t first = make_comm(2, 0);
  char buf[1];
  REQUIRE(ncclAllReduce(buf, buf, 8, ncclFloat32, ncclSum, first, nullptr) == ncclSuccess);
  const uint32_t first_id = comm_id(first);
  REQUIRE(ncclCommDestroy(first) == ncclSuccess);
  ncclComm_t second = make_comm(4, 3);
  REQUIRE(second == first);  // the fake's pool hands the address out again, as malloc may
  REQUIRE(ncclAllReduce(buf, buf, 8, ncclFloat32, ncclSum, second, nullptr) == ncclSuccess);
  CHECK(comm_id(second) != first_id);
  CHECK(nccl::entry(comm_id(second))->size == 4);
  const auto snap = nccl::call_table().snapshot();
  CHECK(snap.find(first_id - 1)->retired);
  CHECK(snap.find(first_id - 1)->ops[static_cast<size_t>(CommOp::kAllReduce)].calls == 1);
  CHECK(snap.find(comm_id(second) - 1)->ops[static_cast<size_t>(CommOp::kAllReduce)].calls == 1);
  REQUIRE(ncclCommAbort(second) == ncclSuccess);
}

TEST_CASE_METHOD(Fixture, "an entry point the loaded NCCL lacks fails without crashing",
                 "[nccl]") {
  // The fake has no ncclCommShrink (as NCCL < 2.27): only code that found our export through
  // dlsym could call it, and it must get an error, not a jump to nowhere.
  ncclComm_t c = make_comm(2, 0);
  ncclComm_t child = nullptr;
  errno = 0;
  CHECK(ncclCommShrink(c, nullptr, 0, &child, nullptr, 0) == ncclSystemError);
  CHECK(errno == ENOSYS);
  CHECK(child == nullptr);
}

TEST_CASE_METHOD(Fixture, "the largest communicator gives the rank and world size", "[nccl]") {
  make_comm(64, 17);  // larger than every other communicator of this test program
  CHECK(rt::testing::g_comm_rank == 17);
  CHECK(rt::testing::g_comm_world == 64);
  make_comm(2, 1);
  CHECK(rt::testing::g_comm_rank == 17);
}

TEST_CASE_METHOD(Fixture, "the rank-file filler writes CPU-only rows and stable ids", "[nccl]") {
  ncclComm_t c = make_comm(5, 2);  // the only size-5 communicator of this program
  char buf[1];
  REQUIRE(ncclReduceScatter(buf, buf, 25, ncclFloat32, ncclSum, c, nullptr) == ncclSuccess);
  REQUIRE(rt::testing::g_filler != nullptr);
  traintime::core::RankFile f;
  rt::testing::g_filler(f);
  uint64_t rs_calls = 0;
  uint64_t rs_bytes = 0;
  for (const auto& row : f.comm) {
    CHECK(row.gpu_ns == 0);
    CHECK(row.busbw_gbps == 0);  // no GPU time: no bandwidth claimed
    if (row.op == "ReduceScatter" && row.comm_size == 5) {
      rs_calls += row.calls;
      rs_bytes += row.bytes;
    }
  }
  CHECK(rs_calls == 1);
  CHECK(rs_bytes == 25 * 4 * 5);
  std::set<std::pair<std::string, uint32_t>> seen;
  char expected_id[17];
  std::snprintf(expected_id, sizeof expected_id, "%016llx",
                static_cast<unsigned long long>(nccl::entry(comm_id(c))->stable_id));
  bool found = false;
  for (const auto& comm : f.communicators) {
    CHECK(comm.id.size() == 16);
    CHECK(comm.id.find_first_not_of("0123456789abcdef") == std::string::npos);
    if (comm.id == expected_id && comm.rank == 2) found = true;
    CHECK(seen.insert({comm.id, comm.rank}).second);  // (id, rank) unique in a rank file
  }
  CHECK(found);
}

TEST_CASE_METHOD(Fixture, "a fork child does not report the parent's NCCL calls as its own",
                 "[nccl]") {
  ncclComm_t c = make_comm(6, 0);
  char buf[1];
  REQUIRE(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, c, nullptr) == ncclSuccess);
  REQUIRE(rt::testing::g_filler != nullptr);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    traintime::core::RankFile f;
    rt::testing::g_filler(f);
    _exit(f.comm.empty() && f.communicators.empty() ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  traintime::core::RankFile parent;
  rt::testing::g_filler(parent);
  CHECK_FALSE(parent.comm.empty());
}

TEST_CASE_METHOD(Fixture, "threads calling at once count exactly and register a handle once",
                 "[nccl]") {
  // Each thread drives its own communicator (NCCL forbids sharing one between threads at once),
  // first seen concurrently, with plain and grouped calls; all threads also race to register
  // one shared handle.
  fake_nccl_set_hook(nullptr);  // g_launches is not thread-safe
  constexpr int kThreads = 4;
  constexpr int kCalls = 500;
  ncclComm_t shared = nullptr;
  REQUIRE(pncclCommInitRank(&shared, 7, unique_id(6), 3) == ncclSuccess);
  ncclComm_t own[kThreads];
  for (ncclComm_t& c : own) REQUIRE(pncclCommInitRank(&c, 7, unique_id(6), 1) == ncclSuccess);
  uint32_t shared_ids[kThreads] = {};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      shared_ids[t] = nccl::comm_id_for(shared);
      char buf[1];
      for (int i = 0; i < kCalls; ++i) {
        ncclAllReduce(buf, buf, 3, ncclFloat32, ncclSum, own[t], nullptr);
        ncclGroupStart();
        ncclSend(buf, 2, ncclFloat32, 0, own[t], nullptr);
        ncclRecv(buf, 2, ncclFloat32, 0, own[t], nullptr);
        ncclGroupEnd();
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    CHECK(shared_ids[t] == shared_ids[0]);
    CHECK(counts(own[t], CommOp::kAllReduce).calls == kCalls);
    CHECK(counts(own[t], CommOp::kAllReduce).bytes == kCalls * 12);
    CHECK(counts(own[t], CommOp::kSend).calls == kCalls);
    CHECK(counts(own[t], CommOp::kRecv).bytes == kCalls * 8);
    CHECK(enqueued(own[t]) == 3 * kCalls);
  }
  CHECK(shared_ids[0] != 0);
}
