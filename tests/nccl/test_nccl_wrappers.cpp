// White-box tests of the NCCL wrappers against a fake libnccl.so.2 and a fake libcuda.so.1 (no
// GPU, no simgpu): return values and errno pass through, what is counted and how, what the
// launch callback would read inside each call, the communicator registry.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "nccl_registry.h"
#include "pending_calls.h"
#include "traintime/nccl/nccl_2_32.h"
#include "traintime/core/rank_file_builder.h"
#include "traintime/nccl/nccl_interposer.h"

extern "C" {
typedef void (*fake_nccl_hook)(const char* function);
void fake_nccl_set_hook(fake_nccl_hook hook);
void fake_nccl_fail(const char* function, ncclResult_t result, int err);
void fake_nccl_clear_failure(void);
int fake_nccl_calls(const char* function);
void fake_cuda_set_capturing(void* stream);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
}

namespace nccl = traintime::nccl;
using traintime::core::CommCallTable;
using traintime::core::CommOp;

namespace {

// What the process side (preload/) would see through the interposer's hooks. The real hooks do
// file and environment work that may leave errno changed: so do these, and the wrappers must
// hide it.
int g_first_calls = 0;
std::atomic<int> g_communicators{0};  // the hook runs on several threads at once
int64_t g_world_rank = -1;
int64_t g_world_size = 0;

const nccl::Hooks kHooks = [] {
  nccl::Hooks h;
  h.on_first_call = [] () noexcept { ++g_first_calls; errno = EBADF; };
  h.on_communicator = [] () noexcept { ++g_communicators; errno = EBADF; };
  h.on_world_rank = [] (int64_t rank, int64_t size) noexcept {
    g_world_rank = rank;
    g_world_size = size;
    errno = EBADF;
  };
  return h;
}();

// The call table the process owns; configured once per test program, as at start-up.
CommCallTable& table() {
  static CommCallTable* t = new CommCallTable();
  return *t;
}

void configure(bool enabled) { nccl::configure(&table(), enabled, kHooks); }

// What the CUPTI launch callback would have read at each simulated kernel launch.
struct Launch {
  std::string function;
  bool inside = false;
  nccl::Call call;
};
std::vector<Launch> g_launches;

void record_launch(const char* function) {
  const nccl::Call* c = nccl::current_call();
  g_launches.push_back(Launch{function, c != nullptr, c != nullptr ? *c : nccl::Call{}});
}

struct Fixture {
  Fixture() {
    g_launches.clear();
    fake_nccl_set_hook(&record_launch);
    fake_nccl_clear_failure();
    fake_cuda_set_capturing(nullptr);
    static const bool configured = (configure(true), true);
    (void)configured;
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
  const uint32_t id = nccl::comm_id_for(comm, nullptr);
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

// `expected` (op, bytes) were called once each, in order, on the fresh communicator `c`: each is
// counted once with its bytes, and the launch inside it saw the call with the next sequence
// number.
void check_one_call_each(ncclComm_t c, const std::vector<std::pair<CommOp, uint64_t>>& expected) {
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
}

}  // namespace

TEST_CASE_METHOD(Fixture, "every op counts one call with nccl-tests bytes and carries its context",
                 "[nccl]") {
  // A fresh configuration, as at start-up: its first counted call activates the process once.
  configure(true);
  g_first_calls = 0;
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
  check_one_call_each(c, expected);
  CHECK(nccl::current_call() == nullptr);
  CHECK(g_first_calls == 1);
}

TEST_CASE_METHOD(Fixture, "NCCL 2.32's *Config collectives count as their classic calls",
                 "[nccl]") {
  ncclComm_t c = make_comm(4, 1);
  const cudaStream_t s = stream_of(0x110);
  char buf[1];
  const int classic_before = fake_nccl_calls("ncclAllReduce");
  auto call = [](auto&& op) {
    errno = EILSEQ;
    REQUIRE(op() == ncclSuccess);
    CHECK(errno == EILSEQ);
  };
  // The configuration is passed through untouched; NULL is NCCL's "plain call".
  const auto* config = reinterpret_cast<const ncclCollConfig_t*>(buf);
  call([&] { return ncclAllReduceConfig(buf, buf, 1000, ncclFloat32, ncclSum, c, s, config); });
  call([&] { return ncclBroadcastConfig(buf, buf, 10, ncclFloat64, 0, c, s, nullptr); });
  call([&] { return ncclReduceConfig(buf, buf, 7, ncclInt8, ncclMax, 0, c, s, config); });
  call([&] { return ncclAllGatherConfig(buf, buf, 100, ncclFloat16, c, s, config); });
  call([&] { return ncclReduceScatterConfig(buf, buf, 50, ncclInt32, ncclSum, c, s, config); });
  call([&] { return ncclAlltoAllConfig(buf, buf, 8, ncclInt64, c, s, config); });
  call([&] { return ncclGatherConfig(buf, buf, 3, ncclFloat32, 0, c, s, config); });
  call([&] { return ncclScatterConfig(buf, buf, 5, ncclUint8, 0, c, s, config); });
  CHECK(fake_nccl_calls("ncclAllReduce") == classic_before);  // the real *Config ran, not ncclX

  const std::vector<std::pair<CommOp, uint64_t>> expected = {
      {CommOp::kAllReduce, 4000}, {CommOp::kBroadcast, 80},      {CommOp::kReduce, 7},
      {CommOp::kAllGather, 800},  {CommOp::kReduceScatter, 800}, {CommOp::kAlltoAll, 256},
      {CommOp::kGather, 48},      {CommOp::kScatter, 20}};
  check_one_call_each(c, expected);
}

TEST_CASE_METHOD(Fixture, "NCCL 2.32's one-sided calls are counted with their own ops and take "
                 "no sequence number", "[nccl]") {
  ncclComm_t c = make_comm(4, 2);
  const cudaStream_t s = stream_of(0x120);
  char buf[1];
  auto* window = reinterpret_cast<ncclWindow_t>(buf);
  errno = EILSEQ;
  REQUIRE(ncclPutSignal(buf, 256, ncclFloat32, 3, window, 64, 0, 0, 0, c, s) == ncclSuccess);
  CHECK(errno == EILSEQ);
  REQUIRE(ncclSignal(1, 0, 0, 0, c, s) == ncclSuccess);
  ncclWaitSignalDesc_t desc{2, 3, 0, 0};
  REQUIRE(ncclWaitSignal(1, &desc, c, s) == ncclSuccess);
  CHECK(errno == EILSEQ);
  CHECK(counts(c, CommOp::kPutSignal).calls == 1);
  CHECK(counts(c, CommOp::kPutSignal).bytes == 1024);
  CHECK(counts(c, CommOp::kSignal).calls == 1);
  CHECK(counts(c, CommOp::kSignal).bytes == 0);
  CHECK(counts(c, CommOp::kWaitSignal).calls == 1);
  CHECK(counts(c, CommOp::kWaitSignal).bytes == 0);
  CHECK(fake_nccl_calls("ncclPutSignal") >= 1);
  // No NCCL kernel ever completes them: a sequence number would read as an op in flight.
  CHECK(enqueued(c) == 0);
  // A collective after them is the communicator's first op.
  REQUIRE(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, c, s) == ncclSuccess);
  REQUIRE(g_launches.size() == 1);
  CHECK(g_launches[0].call.seq == 1);
  // A failed one-sided call passes its result and errno through and is not counted.
  fake_nccl_fail("ncclSignal", ncclRemoteError, ECONNRESET);
  errno = 0;
  CHECK(ncclSignal(1, 0, 0, 0, c, s) == ncclRemoteError);
  CHECK(errno == ECONNRESET);
  CHECK(counts(c, CommOp::kSignal).calls == 1);
  fake_nccl_clear_failure();

  // In a group, a one-sided call has no share of the group's kernel.
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclAllReduce(buf, buf, 10, ncclFloat32, ncclSum, c, s) == ncclSuccess);
  REQUIRE(ncclPutSignal(buf, 100, ncclFloat32, 3, window, 0, 0, 0, 0, c, s) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  REQUIRE(g_launches.size() == 2);
  const nccl::Call g = g_launches[1].call;
  CHECK(g.bytes == 40);
  traintime::core::CommGroupRecord rec;
  REQUIRE(nccl::call_table().find_group(g.group_id, rec));
  REQUIRE(rec.count == 1);
  CHECK(rec.members[0].op == CommOp::kAllReduce);
  CHECK(counts(c, CommOp::kPutSignal).calls == 2);
  CHECK(enqueued(c) == 2);
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
  CHECK(nccl::call_table().stable_id(comm_id(a) - 1) != nccl::call_table().stable_id(comm_id(b) - 1));
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
  CHECK(nccl::call_table().stable_id(comm_id(r0) - 1) == nccl::call_table().stable_id(comm_id(r1) - 1));
  CHECK(nccl::entry(comm_id(r0))->origin == nccl::CommOrigin::kInitRank);

  // Each rank splits twice; the n-th split with the same color is the same communicator.
  ncclComm_t a0 = nullptr, a1 = nullptr, b0 = nullptr, b1 = nullptr;
  REQUIRE(ncclCommSplit(r0, 7, 0, &a0, nullptr) == ncclSuccess);
  REQUIRE(ncclCommSplit(r1, 7, 1, &a1, nullptr) == ncclSuccess);
  REQUIRE(ncclCommSplit(r0, 7, 0, &b0, nullptr) == ncclSuccess);
  REQUIRE(ncclCommSplit(r1, 8, 1, &b1, nullptr) == ncclSuccess);
  const uint64_t id_a0 = nccl::call_table().stable_id(comm_id(a0) - 1);  // registered lazily here
  CHECK(nccl::entry(comm_id(a0))->origin == nccl::CommOrigin::kSplit);
  CHECK(nccl::call_table().stable_id(comm_id(a1) - 1) == id_a0);
  CHECK(nccl::call_table().stable_id(comm_id(b0) - 1) != id_a0);  // second split of the parent
  CHECK(nccl::call_table().stable_id(comm_id(b1) - 1) != nccl::call_table().stable_id(comm_id(b0) - 1));  // color
  CHECK(nccl::call_table().stable_id(comm_id(r0) - 1) != id_a0);
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
  const nccl::Call g = g_launches[0].call;  // a copy: later launches grow g_launches
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

TEST_CASE_METHOD(Fixture, "from the first stream capture on, calls ask the driver again even "
                 "while GPU capture watches every capture begin", "[nccl]") {
  ncclComm_t c = make_comm(2, 0);
  const cudaStream_t capturing = stream_of(0xCA98);
  char buf[1];
  nccl::set_capture_watch(true);  // GPU capture started from cuInit
  nccl::note_capture_begin();     // cudaStreamBeginCapture's entry
  fake_cuda_set_capturing(capturing);
  REQUIRE(ncclAllReduce(buf, buf, 32, ncclFloat32, ncclSum, c, capturing) == ncclSuccess);
  CHECK(counts(c, CommOp::kAllReduce).calls == 0);
  REQUIRE(g_launches.size() == 1);
  CHECK(g_launches[0].call.captured);
  // A watch announced after a capture began does not hide it.
  nccl::set_capture_watch(true);
  REQUIRE(ncclAllReduce(buf, buf, 32, ncclFloat32, ncclSum, c, capturing) == ncclSuccess);
  CHECK(counts(c, CommOp::kAllReduce).calls == 0);
  REQUIRE(g_launches.size() == 2);
  CHECK(g_launches[1].call.captured);
}

TEST_CASE_METHOD(Fixture, "TRAINTIME_NCCL=0 passes every call straight through", "[nccl]") {
  ncclComm_t c = make_comm(2, 1);
  configure(false);
  const int before = fake_nccl_calls("ncclAllReduce");
  char buf[1];
  errno = EXDEV;
  REQUIRE(ncclAllReduce(buf, buf, 8, ncclFloat32, ncclSum, c, nullptr) == ncclSuccess);
  CHECK(errno == EXDEV);
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclSend(buf, 1, ncclFloat32, 0, c, nullptr) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  CHECK(fake_nccl_calls("ncclAllReduce") == before + 1);
  configure(true);
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
  CHECK(g_world_rank == 17);
  CHECK(g_world_size == 64);
  make_comm(2, 1);
  CHECK(g_world_rank == 17);
}

TEST_CASE_METHOD(Fixture, "the summary gives CPU-only rows and stable ids without GPU capture",
                 "[nccl]") {
  ncclComm_t c = make_comm(5, 2);  // the only size-5 communicator of this program
  char buf[1];
  REQUIRE(ncclReduceScatter(buf, buf, 25, ncclFloat32, ncclSum, c, nullptr) == ncclSuccess);
  const traintime::core::Identity identity;
  const traintime::core::CpuSummary cpu;
  const traintime::core::RankFile f = traintime::core::build_rank_file(
      identity, cpu, traintime::core::GpuSummary{}, nccl::summary());
  uint64_t rs_calls = 0;
  uint64_t rs_bytes = 0;
  for (const auto& row : f.comm) {
    CHECK(row.gpu_ns == 0);
    CHECK(row.busbw_gbps == 0);  // no GPU time: no bandwidth claimed
    if (row.op == CommOp::kReduceScatter && row.comm_size == 5) {
      rs_calls += row.calls;
      rs_bytes += row.bytes;
    }
  }
  CHECK(rs_calls == 1);
  CHECK(rs_bytes == 25 * 4 * 5);
  std::set<std::pair<std::string, uint32_t>> seen;
  char expected_id[17];
  std::snprintf(expected_id, sizeof expected_id, "%016llx",
                static_cast<unsigned long long>(nccl::call_table().stable_id(comm_id(c) - 1)));
  bool found = false;
  for (const auto& comm : f.communicators) {
    CHECK(comm.id.size() == 16);
    CHECK(comm.id.find_first_not_of("0123456789abcdef") == std::string::npos);
    if (comm.id == expected_id && comm.rank == 2) found = true;
    CHECK(seen.insert({comm.id, comm.rank}).second);  // (id, rank) unique in a rank file
  }
  CHECK(found);
}

TEST_CASE_METHOD(Fixture, "a fork child reconfigured with a fresh table reports none of the "
                 "parent's NCCL calls and is activated by its own first call", "[nccl]") {
  ncclComm_t c = make_comm(6, 0);
  char buf[1];
  REQUIRE(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, c, nullptr) == ncclSuccess);
  REQUIRE(g_first_calls > 0);  // the parent was activated (by this call or an earlier test's)
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // What the preload's fork handler does: a fresh session table, the same hooks.
    static CommCallTable fresh;
    nccl::configure(&fresh, true, kHooks);
    // Exit codes name the failed check (the parent reports them).
    if (!nccl::summary().calls.comms.empty()) _exit(1);  // the parent's calls leaked
    // A child that only calls NCCL must still be activated, or it writes no file.
    const int before = g_first_calls;
    if (ncclAllReduce(buf, buf, 3, ncclFloat32, ncclSum, c, nullptr) != ncclSuccess) _exit(2);
    if (g_first_calls != before + 1) _exit(3);
    if (ncclAllReduce(buf, buf, 3, ncclFloat32, ncclSum, c, nullptr) != ncclSuccess) _exit(2);
    if (g_first_calls != before + 1) _exit(4);  // once, not per call
    const traintime::core::CommSummary mine = nccl::summary();
    if (mine.calls.comms.size() != 1) _exit(5);
    _exit(mine.calls.comms[0].ops[static_cast<size_t>(CommOp::kAllReduce)].bytes == 24 ? 0 : 6);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  INFO("child exit code: 1 parent's calls leaked, 3 not activated, 4 activated twice, "
       "5/6 its own call not counted");
  CHECK(WEXITSTATUS(status) == 0);
  CHECK_FALSE(nccl::summary().calls.comms.empty());
}

TEST_CASE_METHOD(Fixture, "a communicator created through ncclCommInitRank reaches the lazy GPU "
                 "start point", "[nccl]") {
  // The lazy CUPTI start (another tool owns CUDA_INJECTION64_PATH) hangs off on_communicator:
  // a communicator created through a wrapped ncclCommInit* must reach it, and so must one first
  // seen in a call.
  const int before = g_communicators;
  ncclComm_t c = make_comm(7, 3);
  CHECK(g_communicators == before + 1);
  char buf[1];
  const int saved = errno = 42;
  REQUIRE(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, c, nullptr) == ncclSuccess);
  CHECK(errno == saved);
  CHECK(g_communicators == before + 1);  // once per communicator
  ncclComm_t behind = nullptr;
  REQUIRE(pncclCommInitRank(&behind, 2, unique_id(9), 0) == ncclSuccess);
  REQUIRE(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, behind, nullptr) == ncclSuccess);
  CHECK(g_communicators == before + 2);
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
      shared_ids[t] = nccl::comm_id_for(shared, nullptr);
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

TEST_CASE("calls of a nonblocking communicator wait per stream, in order, for their kernels", "[nccl]") {
  nccl::reset_pending();
  int stream_a = 0;
  int stream_b = 0;
  nccl::Call out;
  CHECK_FALSE(nccl::take_pending_call(&stream_a, &out));
  nccl::queue_pending(&stream_a, nccl::Call{CommOp::kAllReduce, false, 1, 1, 64, 0});
  nccl::queue_pending(&stream_b, nccl::Call{CommOp::kBroadcast, false, 2, 1, 8, 0});
  nccl::queue_pending(&stream_a, nccl::Call{CommOp::kAllGather, false, 1, 2, 32, 0});
  nccl::queue_pending(nullptr, nccl::Call{CommOp::kReduce, false, 3, 1, 4, 0});  // default stream
  REQUIRE(nccl::take_pending_call(&stream_a, &out));
  CHECK((out.op == CommOp::kAllReduce && out.seq == 1));
  REQUIRE(nccl::take_pending_call(&stream_a, &out));
  CHECK((out.op == CommOp::kAllGather && out.seq == 2));
  CHECK_FALSE(nccl::take_pending_call(&stream_a, &out));
  REQUIRE(nccl::take_pending_call(nullptr, &out));
  CHECK(out.op == CommOp::kReduce);
  REQUIRE(nccl::take_pending_call(&stream_b, &out));
  CHECK(out.op == CommOp::kBroadcast);
  nccl::reset_pending();
}

TEST_CASE("a call that launched on its own thread is taken back from its stream's queue", "[nccl]") {
  nccl::reset_pending();
  int stream = 0;
  const nccl::Call first{CommOp::kAllReduce, false, 1, 7, 64, 0};
  const nccl::Call second{CommOp::kAllReduce, false, 1, 8, 64, 0};
  nccl::queue_pending(&stream, first);
  nccl::queue_pending(&stream, second);
  nccl::retract_pending(&stream, first);
  nccl::Call out;
  REQUIRE(nccl::take_pending_call(&stream, &out));
  CHECK(out.seq == 8);
  CHECK_FALSE(nccl::take_pending_call(&stream, &out));
  nccl::reset_pending();
}

TEST_CASE("a full stream queue drops its oldest call and counts it", "[nccl]") {
  nccl::reset_pending();
  int stream = 0;
  const uint64_t dropped_before = nccl::pending_dropped();
  for (uint64_t seq = 1; seq <= nccl::kPendingDepth + 2; ++seq)
    nccl::queue_pending(&stream, nccl::Call{CommOp::kAllReduce, false, 1, seq, 4, 0});
  CHECK(nccl::pending_dropped() - dropped_before == 2);
  nccl::Call out;
  REQUIRE(nccl::take_pending_call(&stream, &out));
  CHECK(out.seq == 3);
  nccl::reset_pending();
}
