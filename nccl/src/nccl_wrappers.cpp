// Interposed NCCL entry points (DESIGN §5). Every wrapper has the exact prototype of nccl.h
// (2.28, and 2.32 for the entry points it added: traintime/nccl/nccl_2_32.h) and calls the real
// function found by RealSymbol. About 600 lines because each of the 33 entry points is written
// out with its prototype; the shared logic is in the templates above them.
//
// NCCL 2.32's *Config collectives (ncclAllReduceConfig ...) do not go through the classic entry
// points (pncclAllReduceConfig calls ncclEnqueueCheck itself), so each is wrapped and counted as
// its classic call. Its one-sided RMA calls (ncclPutSignal, ncclSignal, ncclWaitSignal) are
// counted under their own ops; they run on NCCL's proxy thread and the copy engines, never as an
// NCCL kernel, so they take no sequence number (one that no GPU record ever completes would
// stay in the rank file's in_flight and read as a hang) and nothing waits for their kernel.
// Against an older NCCL these symbols resolve to nothing until called; a caller can only reach
// them by dlsym, and then gets the missing-function answer below.
//
// Rules every wrapper keeps:
//  - The real function's return value is returned unchanged, and errno is what the real call
//    left (our own work before and after it is invisible: errno is saved and restored around it).
//  - No lock and no allocation per call: thread-local state (initial-exec: a load from the
//    thread pointer, no __tls_get_addr call), relaxed atomics in CommCallTable. The thread
//    remembers the last communicator it used (handle, comm_id, entry) until the registry's
//    epoch changes, so a call on it asks the registry nothing. (Only the first sight of a
//    communicator, creation/destruction and a thread's first group take the slow path.)
//  - ncclGroupStart/ncclGroupEnd of a group without members cost a few thread-local updates
//    around the real call: the group's id (one shared counter) is taken at the outermost
//    ncclGroupEnd, and only when the group has members to record.
//  - Only the outermost interposed call on a thread counts: NCCL's entry points call each other
//    through the dynamic symbol (ncclBcast -> ncclBroadcast), and those inner calls pass straight
//    through. ncclBcast is therefore counted once, as "Broadcast" (DESIGN §6 op names).
//  - TRAINTIME_NCCL=0, or before configure(): straight through, nothing recorded; the GPU side
//    still finds NCCL kernels by name.
//  - The real function is the caller's own NCCL (RealSymbol in nccl_resolve.h: the calling
//    object's definition first, so NCCL linked statically into a library loaded RTLD_LOCAL is
//    found), and the communicator's size and rank are asked of that same NCCL.
//  - No real function (no loaded object provides the symbol): ncclSystemError with
//    errno = ENOSYS, warned once and counted in the rank file. This cannot happen to an
//    application that linked against NCCL (the loader would have refused it); it covers code
//    that found our export through dlsym(RTLD_DEFAULT) against an older NCCL lacking the entry
//    point, where failing the call is the only answer that neither crashes nor pretends the
//    work was done.
//
// Counting: a call is counted (calls, bytes, size bucket, sequence number) when it is the
// outermost one, its communicator is registered, its stream is not being captured into a CUDA
// graph, and the real call returned ncclSuccess or ncclInProgress (nonblocking communicators).
// The sequence number is taken before the real call, since the kernel launched inside it must
// carry it; a call that then fails has consumed its number (ops_enqueued counts it), which keeps
// numbers aligned across ranks when every rank fails the same call, the usual case.
// Ops queued in a group are counted when queued; the outermost ncclGroupEnd records the group's
// members in CommCallTable::record_group() and describes the group to the launch callback while
// NCCL launches its kernels. Calls on a capturing stream are not counted here: each replay of
// the captured kernel counts one call on the GPU side (NcclCall::captured).
#include <dlfcn.h>
#include <pthread.h>

#include <cerrno>
#include <cstdlib>

#pragma GCC visibility push(default)
#include <nccl.h>

#include "traintime/nccl/nccl_2_32.h"
#pragma GCC visibility pop

#include "nccl_registry.h"
#include "profiler_plugin.h"
#include "traintime/core/rank_file.h"
#include "nccl_resolve.h"
#include "pending_calls.h"
#include "traintime/core/self_cost.h"
#include "traintime/nccl/nccl_interposer.h"

namespace traintime::nccl {
namespace {

using core::CommOp;

// Every interposed entry point, once: its real function is found by RealSymbol under its own
// name, then under NCCL's "p"-prefixed strong alias.
#define TT_NCCL_ENTRY_POINTS(X)                                                               \
  X(ncclAllReduce) X(ncclBroadcast) X(ncclBcast) X(ncclReduce) X(ncclAllGather)               \
  X(ncclReduceScatter) X(ncclAlltoAll) X(ncclGather) X(ncclScatter) X(ncclSend) X(ncclRecv)   \
  X(ncclGroupStart) X(ncclGroupEnd) X(ncclGroupSimulateEnd) X(ncclCommInitRank)               \
  X(ncclCommInitRankConfig) X(ncclCommInitRankScalable) X(ncclCommInitAll) X(ncclCommSplit)   \
  X(ncclCommShrink) X(ncclCommDestroy) X(ncclCommAbort)                                       \
  X(ncclAllReduceConfig) X(ncclBroadcastConfig) X(ncclReduceConfig) X(ncclAllGatherConfig)    \
  X(ncclReduceScatterConfig) X(ncclAlltoAllConfig) X(ncclGatherConfig) X(ncclScatterConfig)   \
  X(ncclPutSignal) X(ncclSignal) X(ncclWaitSignal)

// The real-symbol slot of the wrapper `Wrapper` (constant-initialised: no guard on the hot path).
template <auto Wrapper>
RealSymbol& real_symbol() noexcept;
#define TT_NCCL_REAL_SYMBOL(name)                   \
  template <>                                       \
  RealSymbol& real_symbol<&::name>() noexcept {     \
    static RealSymbol symbol{#name, "p" #name, "libnccl"}; \
    return symbol;                                  \
  }
TT_NCCL_ENTRY_POINTS(TT_NCCL_REAL_SYMBOL)
#undef TT_NCCL_REAL_SYMBOL

// The prologue every wrapper shares: errno as the application left it (put back before the
// real call, so the real call sees and leaves errno exactly as without us) and the real
// function, or nullptr when no loaded object provides it.
// `caller` is the wrapper's return address: the real function is the one the calling object's
// own NCCL provides (nccl_resolve.h).
template <auto Wrapper>
struct Entry {
  using Fn = decltype(Wrapper);
  explicit Entry(const void* caller)
      : fn(reinterpret_cast<Fn>(
            real_symbol<Wrapper>().get(reinterpret_cast<const void*>(Wrapper), caller))) {}
  int entry_errno = errno;
  Fn fn;
};

// Group members of one thread's open group. Allocated at the thread's first outermost
// ncclGroupStart, freed at thread exit; members beyond the capacity are folded into member 0's
// bytes (as CommCallTable::record_group folds what exceeds its own record).
constexpr uint32_t kGroupCapacity = 4096;

// Streams of the open group that will each get a kernel: one per communicator, its first
// stream (NCCL launches a communicator's share of a group on the first stream it was given).
constexpr int kGroupLaunchStreams = 16;
struct GroupLaunch {
  uint32_t comm_id;
  const void* stream;
  const void* comm;
};

struct ThreadState {
  int depth = 0;        // interposed calls active on this thread
  int group_depth = 0;  // the application's ncclGroupStart nesting (outermost calls only)
  bool call_active = false;
  bool call_launched = false;  // a launch callback read `call` while it was active
  Call call;
  GroupLaunch launches[kGroupLaunchStreams] = {};
  int launch_count = 0;
  bool group_nonblocking = false;  // a member's communicator is nonblocking
  uint32_t group_count = 0;
  uint64_t group_bytes = 0;
  bool group_captured = false;
  core::CommGroupMember* members = nullptr;
  // The communicator of this thread's last counted call (comm_id 0: none), valid while
  // comm_epoch() is `epoch`.
  const void* cached_comm = nullptr;
  const CommEntry* cached_entry = nullptr;
  uint32_t cached_comm_id = 0;
  uint32_t cached_epoch = 0;
  // self_cost: calls left until the next one the cold path sees (the first call, then the
  // kCostPhase-th, then every kCostEvery-th), the countdown's length when it was set, and this
  // thread's published count (made at its first call). The wrapper's hot path only counts down.
  uint32_t cost_left = 1;
  uint32_t cost_period = 1;
  core::ThreadCalls::Counter* cost = nullptr;
};

// Initial-exec: libtraintime.so is loaded at start-up (LD_PRELOAD), never by dlopen, and already
// has static TLS (session.h's t_thread_state). Constant-initialised (every member has an
// initialiser), so no access goes through a guard variable, which would itself be a
// __tls_get_addr call.
#if defined(__clang__)
#define TT_CONSTINIT [[clang::require_constant_initialization]]
#else
#define TT_CONSTINIT __constinit
#endif
TT_CONSTINIT thread_local ThreadState t_nccl __attribute__((tls_model("initial-exec")));
#undef TT_CONSTINIT

// What the wrappers cost (self_cost "NCCL wrappers", core/self_cost.h). The hot path of
// run_op, group_start and run_group_end counts down one plain thread-local counter and tests it
// (cost_due): no atomic, no pointer, no clock. When it runs out, the call goes through
// cost_sampled() (noinline, with its own copy of the arguments, so the hot path's arguments stay
// in registers): it publishes the calls the countdown stood for into the thread's counter, and
// from the kCostPhase-th call on, one in kCostEvery runs through timed(), which reads the clock
// around the wrapper and around the real call inside it: the wrapper's own work is the
// difference (two pairs of readings). A thread's calls since its last sampled one are published
// at its next (or read by the thread itself: cost_into at exit), so `calls` may lack up to
// kCostEvery - 1 calls of each other thread still running.
constexpr uint64_t kCostEvery = 64;
core::ThreadCalls g_calls;
core::CostSums g_cost;

inline bool cost_due(ThreadState& t) noexcept { return __builtin_expect(--t.cost_left == 0, 0); }

// The calls the countdown stood for, published; whether this call is one to time.
bool cost_publish(ThreadState& t) noexcept {
  core::ThreadCalls::Counter* c = t.cost;
  if (__builtin_expect(c == nullptr, 0)) {  // the thread's first call: before the wrapper reads errno
    const int saved = errno;
    c = t.cost = g_calls.join();
    errno = saved;
  }
  const uint64_t n = t.cost_period;  // the calls since the last publication, this one included
  uint64_t calls = n;
  if (c != nullptr) {
    calls = c->calls.load(std::memory_order_relaxed) + n;
    c->calls.store(calls, std::memory_order_relaxed);
  }
  // Next stop: the kCostPhase-th call, then every kCostEvery-th (core::cost_timed).
  const uint64_t next = calls < core::kCostPhase ? core::kCostPhase : calls + kCostEvery;
  t.cost_left = t.cost_period = static_cast<uint32_t>(next - calls);
  return core::cost_timed(calls, kCostEvery);
}

// body(real) runs the wrapper with `real` in place of its invoke: the real call timed apart.
template <typename Body, typename Invoke>
ncclResult_t timed(Body&& body, Invoke& invoke) {
  core::FastClock& clock = core::process_clock();
  uint64_t in_real = 0;
  auto real = [&](auto fn) {
    const uint64_t r0 = clock.ticks();
    const ncclResult_t r = invoke(fn);
    in_real += clock.ticks() - r0;
    return r;
  };
  const uint64_t t0 = clock.ticks();
  const ncclResult_t r = body(real);
  const uint64_t d = clock.ticks() - t0;  // the readings leave errno alone
  g_cost.add(d > in_real ? d - in_real : 0, 2);
  return r;
}

// A sampled call: published, then run timed or plain.
template <typename Body, typename Invoke>
__attribute__((noinline, cold)) ncclResult_t cost_sampled(Body body, Invoke invoke) {
  if (cost_publish(t_nccl)) return timed(body, invoke);
  return body(invoke);
}

// comm_id of `comm` (0 when it cannot be registered) and its entry, from the thread's last
// answer while the registry's epoch is unchanged.
uint32_t lookup_comm(ThreadState& t, const void* comm, const void* caller, const CommEntry** ce) {
  const uint32_t epoch = comm_epoch();
  if (comm == t.cached_comm && epoch == t.cached_epoch && t.cached_comm_id != 0) {
    *ce = t.cached_entry;
    return t.cached_comm_id;
  }
  const uint32_t comm_id = comm_id_for(comm, caller);
  *ce = entry(comm_id);
  if (*ce != nullptr) {
    t.cached_comm = comm;
    t.cached_entry = *ce;
    t.cached_comm_id = comm_id;
    t.cached_epoch = epoch;
  }
  return comm_id;
}

std::atomic<uint64_t> g_next_group{0};
pthread_key_t g_members_key;
pthread_once_t g_members_once = PTHREAD_ONCE_INIT;

void free_members(void* p) {
  t_nccl.members = nullptr;
  std::free(p);
}

core::CommGroupMember* group_members(ThreadState& t) {
  if (t.members == nullptr) {
    pthread_once(&g_members_once, [] { pthread_key_create(&g_members_key, free_members); });
    t.members = static_cast<core::CommGroupMember*>(
        std::calloc(kGroupCapacity, sizeof(core::CommGroupMember)));
    if (t.members != nullptr) pthread_setspecific(g_members_key, t.members);
  }
  return t.members;
}

uint64_t type_size(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    case ncclNumTypes: break;
  }
  return 0;  // an unknown type: NCCL rejects the call, nothing is counted
}

// nccl-tests byte conventions (DESIGN §5): the total over ranks for AllGather (sendcount × n),
// ReduceScatter (recvcount × n), AlltoAll, Gather and Scatter (per-peer count × n); the buffer
// for AllReduce, Broadcast, Reduce, Send and Recv.
enum class Extent : uint8_t { kBuffer, kTimesRanks };

// Calls the real function with the application's errno and captures the errno it leaves.
template <typename Real>
ncclResult_t call_real(Real&& real, int entry_errno, int* exit_errno) {
  errno = entry_errno;
  const ncclResult_t r = real();
  *exit_errno = errno;
  return r;
}

bool succeeded(ncclResult_t r) { return r == ncclSuccess || r == ncclInProgress; }

// No loaded object defines the entry point: the program could not have linked without us, so
// this is code that found our export by name (dlsym(RTLD_DEFAULT)) in a process without NCCL,
// or against an older NCCL that lacks it. Failing the call is the only answer that neither
// crashes nor pretends the work was done. Warned once, counted in the rank file.
template <auto Wrapper>
ncclResult_t missing_real() {
  note_missing_real(real_symbol<Wrapper>().name());
  errno = ENOSYS;
  return ncclSystemError;
}

// NCCL 2.32's one-sided calls: no NCCL kernel, no sequence number (see the top of the file).
constexpr bool is_rma(CommOp op) {
  return op == CommOp::kPutSignal || op == CommOp::kSignal || op == CommOp::kWaitSignal;
}

// Whether NCCL launches a kernel for this call: not for a collective on a communicator of one
// rank (a copy at most), not while the stream is captured (the graph's replays launch it), never
// for a one-sided call.
bool launches_kernel(const CommEntry* ce, CommOp op, bool captured) {
  if (ce == nullptr || captured || is_rma(op)) return false;
  return ce->size > 1 || op == CommOp::kSend || op == CommOp::kRecv;
}

// A queued group member: remembers its communicator's first stream, where its kernel will be.
void note_group_launch(ThreadState& t, uint32_t comm_id, const void* stream, const void* comm,
                       bool launches, bool nonblocking) {
  if (!launches) return;
  t.group_nonblocking = t.group_nonblocking || nonblocking;
  for (int i = 0; i < t.launch_count; ++i) {
    if (t.launches[i].comm_id == comm_id) return;
  }
  if (t.launch_count < kGroupLaunchStreams)
    t.launches[t.launch_count++] = GroupLaunch{comm_id, stream, comm};
}

// One collective or point-to-point call. `invoke(fn)` calls the real function `fn`.
template <auto Wrapper, typename Invoke>
__attribute__((always_inline)) inline ncclResult_t op_body(const void* caller, CommOp op, Extent extent, size_t count,
                     ncclDataType_t type, ncclComm_t comm, cudaStream_t stream, Invoke&& invoke);

template <auto Wrapper, typename Invoke>
ncclResult_t run_op(const void* caller, CommOp op, Extent extent, size_t count,
                    ncclDataType_t type, ncclComm_t comm, cudaStream_t stream, Invoke&& invoke) {
  if (cost_due(t_nccl)) {
    return cost_sampled(
        [=](auto& real) { return op_body<Wrapper>(caller, op, extent, count, type, comm, stream, real); }, invoke);
  }
  return op_body<Wrapper>(caller, op, extent, count, type, comm, stream, invoke);
}

template <auto Wrapper, typename Invoke>
__attribute__((always_inline)) inline ncclResult_t op_body(const void* caller, CommOp op, Extent extent, size_t count,
                     ncclDataType_t type, ncclComm_t comm, cudaStream_t stream, Invoke&& invoke) {
  const Entry<Wrapper> e(caller);
  if (e.fn == nullptr) return missing_real<Wrapper>();
  ThreadState& t = t_nccl;
  if (t.depth > 0 || !recording()) {
    errno = e.entry_errno;
    return invoke(e.fn);
  }
  ++t.depth;
  const CommEntry* ce = nullptr;
  const uint32_t comm_id = lookup_comm(t, comm, caller, &ce);
  const bool captured = stream_is_capturing(stream);
  uint64_t bytes = static_cast<uint64_t>(count) * type_size(type);
  if (extent == Extent::kTimesRanks) bytes *= ce != nullptr ? ce->size : 0;
  uint64_t seq = 0;
  if (ce != nullptr && !captured && !is_rma(op)) seq = ce->counters->next_seq();

  t.call = Call{op, captured, comm_id, seq, bytes, 0};
  t.call_active = true;
  t.call_launched = false;
  // A nonblocking communicator's kernel is launched by NCCL's own thread, possibly before the
  // call returns: the call waits for it on its stream from before the real call.
  const bool async_launch = t.group_depth == 0 && launches_kernel(ce, op, captured);
  const bool queued = async_launch && is_nonblocking(comm);
  if (queued) queue_pending(stream, t.call);
  int exit_errno = 0;
  const ncclResult_t r = call_real([&] { return invoke(e.fn); }, e.entry_errno, &exit_errno);
  t.call_active = false;
  if (queued && (t.call_launched || !succeeded(r))) {
    retract_pending(stream, t.call);
  } else if (!queued && async_launch && r == ncclInProgress && !t.call_launched) {
    // First sight of a nonblocking communicator created where we could not see its config.
    note_nonblocking(comm);
    queue_pending(stream, t.call);
  }

  if (succeeded(r)) {
    if (ce == nullptr) {
      count_unregistered_call();
    } else if (!captured) {
      ce->counters->count(op, bytes, seq);
      ce->counters->note_seen(core::kSeenByInterposer);
      note_counted_call();
    }
    // A one-sided call in a group has no share of the group's kernel.
    if (t.group_depth > 0 && ce != nullptr && !is_rma(op)) {
      note_group_launch(t, comm_id, stream, comm, launches_kernel(ce, op, captured),
                        is_nonblocking(comm));
      core::CommGroupMember* m = t.members;
      const core::CommGroupMember member{op, comm_id, seq, bytes};
      if (m != nullptr && t.group_count < kGroupCapacity) {
        m[t.group_count++] = member;
      } else if (m != nullptr) {
        m[0].bytes += bytes;
      }
      t.group_bytes += bytes;
      t.group_captured = t.group_captured || captured;
    }
  }
  --t.depth;
  errno = exit_errno;
  return r;
}

template <auto Wrapper, typename Invoke>
ncclResult_t pass_through(const void* caller, Invoke&& invoke) {
  const Entry<Wrapper> e(caller);
  if (e.fn == nullptr) return missing_real<Wrapper>();
  errno = e.entry_errno;
  return invoke(e.fn);
}

// Communicator lifecycle wrappers: the real call first (outermost or not: a comm created inside
// another NCCL call is still a communicator), then the registry's slow path.
template <auto Wrapper, typename Invoke, typename After>
ncclResult_t run_lifecycle(const void* caller, Invoke&& invoke, After&& after) {
  const Entry<Wrapper> e(caller);
  if (e.fn == nullptr) return missing_real<Wrapper>();
  if (!recording()) {
    errno = e.entry_errno;
    return invoke(e.fn);
  }
  ThreadState& t = t_nccl;
  ++t.depth;
  int exit_errno = 0;
  const ncclResult_t r = call_real([&] { return invoke(e.fn); }, e.entry_errno, &exit_errno);
  --t.depth;
  if (succeeded(r)) after();
  errno = exit_errno;
  return r;
}

// Registry work done before a real call must not leave errno changed for it.
void retire_if_recording(const void* comm) {
  const int saved_errno = errno;
  if (recording()) retire(comm);
  forget_nonblocking(comm);
  errno = saved_errno;
}

// ncclConfig_t.blocking = 0 (NCCL_CONFIG_UNDEF_INT, the initializer's value, means blocking).
bool nonblocking_config(const ncclConfig_t* config) {
  return config != nullptr && config->blocking == 0;
}

uint64_t child_id_if_recording(const void* parent, CommOrigin origin, int color,
                               const void* caller) {
  const int saved_errno = errno;
  const uint64_t id = recording() ? next_child_id(parent, origin, color, caller) : 0;
  errno = saved_errno;
  return id;
}

uint64_t unique_id_hash(const ncclUniqueId* ids, int n) {
  if (ids == nullptr || n <= 0) return 0;
  return hash_bytes(ids, sizeof(ncclUniqueId) * static_cast<size_t>(n));
}

// Ends the application's group on this thread: NCCL decrements its group depth on every
// ncclGroupEnd/ncclGroupSimulateEnd made inside a group, whatever it returns.
template <auto Wrapper, typename Invoke>
__attribute__((always_inline)) inline ncclResult_t group_end_body(const void* caller, bool launches, Invoke&& invoke);

template <auto Wrapper, typename Invoke>
ncclResult_t run_group_end(const void* caller, bool launches, Invoke&& invoke) {
  if (cost_due(t_nccl))
    return cost_sampled([=](auto& real) { return group_end_body<Wrapper>(caller, launches, real); }, invoke);
  return group_end_body<Wrapper>(caller, launches, invoke);
}

template <auto Wrapper, typename Invoke>
__attribute__((always_inline)) inline ncclResult_t group_end_body(const void* caller, bool launches, Invoke&& invoke) {
  const Entry<Wrapper> e(caller);
  if (e.fn == nullptr) return missing_real<Wrapper>();
  ThreadState& t = t_nccl;
  if (t.depth > 0 || !recording() || t.group_depth == 0) {
    errno = e.entry_errno;
    return invoke(e.fn);
  }
  const bool outermost = t.group_depth == 1;
  ++t.depth;
  const bool group_launches = outermost && launches && t.group_count > 0;
  if (group_launches) {
    const core::CommGroupMember& first = t.members[0];
    const uint64_t group_id = next_group_id();
    call_table().record_group(group_id, t.members, t.group_count);
    t.call = Call{first.op, t.group_captured, first.comm_id, first.seq, t.group_bytes, group_id};
    t.call_active = true;
    t.call_launched = false;
  }
  // Nonblocking: NCCL's own thread launches one kernel per communicator of the group, possibly
  // before ncclGroupEnd returns.
  const bool queued = group_launches && t.group_nonblocking;
  if (queued) {
    for (int i = 0; i < t.launch_count; ++i) queue_pending(t.launches[i].stream, t.call);
  }
  int exit_errno = 0;
  const ncclResult_t r = call_real([&] { return invoke(e.fn); }, e.entry_errno, &exit_errno);
  t.call_active = false;
  if (queued && (t.call_launched || !succeeded(r))) {
    for (int i = 0; i < t.launch_count; ++i) retract_pending(t.launches[i].stream, t.call);
  } else if (!queued && group_launches && r == ncclInProgress && !t.call_launched) {
    for (int i = 0; i < t.launch_count; ++i) {
      note_nonblocking(t.launches[i].comm);
      queue_pending(t.launches[i].stream, t.call);
    }
  }
  --t.group_depth;
  if (outermost) {
    t.group_count = 0;
    t.group_bytes = 0;
    t.group_captured = false;
    t.launch_count = 0;
    t.group_nonblocking = false;
  }
  --t.depth;
  errno = exit_errno;
  return r;
}

template <typename Invoke>
__attribute__((always_inline)) inline ncclResult_t group_start_body(const void* caller, Invoke&& invoke) {
  const Entry<&::ncclGroupStart> e(caller);
  if (e.fn == nullptr) return missing_real<&::ncclGroupStart>();
  ThreadState& t = t_nccl;
  if (t.depth > 0 || !recording()) {
    errno = e.entry_errno;
    return invoke(e.fn);
  }
  ++t.depth;
  if (t.group_depth == 0) group_members(t);  // the thread's one allocation, outside NCCL
  int exit_errno = 0;
  const ncclResult_t r = call_real([&] { return invoke(e.fn); }, e.entry_errno, &exit_errno);
  if (r == ncclSuccess) {
    if (t.group_depth++ == 0) {
      t.group_count = 0;
      t.group_bytes = 0;
      t.group_captured = false;
      t.launch_count = 0;
      t.group_nonblocking = false;
    }
  }
  --t.depth;
  errno = exit_errno;
  return r;
}

ncclResult_t group_start(const void* caller) {
  auto invoke = [](auto fn) { return fn(); };
  if (cost_due(t_nccl)) return cost_sampled([=](auto& real) { return group_start_body(caller, real); }, invoke);
  return group_start_body(caller, invoke);
}

// The calls published, and the calling thread's own since its last publication.
uint64_t calls_so_far() noexcept {
  const ThreadState& t = t_nccl;
  return g_calls.total() + (t.cost != nullptr ? t.cost_period - t.cost_left : 0);
}
}  // namespace

void cost_into(core::Section& section) {
  section.cost(core::cost_row("NCCL wrappers", calls_so_far(), kCostEvery, g_cost));
}

void cost_so_far(core::CostSoFar& c, uint64_t pair_ticks, bool calls) noexcept {
  c.at(core::SampledPath::kNccl) = g_cost.so_far(pair_ticks);
  if (calls) c.calls_at(core::SampledPath::kNccl) = calls_so_far();
}

void forget_cost_after_fork() noexcept {
  g_calls.forget();
  g_cost.reset();
  ThreadState& t = t_nccl;
  t.cost = nullptr;
  t.cost_left = t.cost_period = 1;
}

const Call* current_call() noexcept {
  ThreadState& t = t_nccl;
  if (!t.call_active) return plugin::launch_call();  // a launch NCCL's plugin events announced
  t.call_launched = true;  // launched inside the call: nothing waits for NCCL's own thread
  return &t.call;
}

const Call* interposed_call() noexcept { return t_nccl.call_active ? &t_nccl.call : nullptr; }
uint64_t next_group_id() noexcept { return g_next_group.fetch_add(1, std::memory_order_relaxed) + 1; }

}  // namespace traintime::nccl

namespace tn = traintime::nccl;
// The code that called the wrapper: it picks which NCCL the call belongs to.
#define TT_CALLER __builtin_return_address(0)
using traintime::core::CommOp;
using tn::Extent;

extern "C" {

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return tn::run_op<&ncclAllReduce>(TT_CALLER, CommOp::kAllReduce, Extent::kBuffer, count, datatype, comm, stream,
      [=](auto fn) { return fn(sendbuff, recvbuff, count, datatype, op, comm, stream); });
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return tn::run_op<&ncclBroadcast>(TT_CALLER, CommOp::kBroadcast, Extent::kBuffer, count, datatype, comm, stream,
      [=](auto fn) { return fn(sendbuff, recvbuff, count, datatype, root, comm, stream); });
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream) {
  return tn::run_op<&ncclBcast>(TT_CALLER, CommOp::kBroadcast, Extent::kBuffer, count, datatype, comm, stream,
      [=](auto fn) { return fn(buff, count, datatype, root, comm, stream); });
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream) {
  return tn::run_op<&ncclReduce>(TT_CALLER, CommOp::kReduce, Extent::kBuffer, count, datatype, comm, stream,
      [=](auto fn) { return fn(sendbuff, recvbuff, count, datatype, op, root, comm, stream); });
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return tn::run_op<&ncclAllGather>(TT_CALLER, CommOp::kAllGather, Extent::kTimesRanks, sendcount, datatype,
      comm, stream, [=](auto fn) { return fn(sendbuff, recvbuff, sendcount, datatype, comm, stream); });
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return tn::run_op<&ncclReduceScatter>(TT_CALLER, CommOp::kReduceScatter, Extent::kTimesRanks, recvcount,
      datatype, comm, stream,
      [=](auto fn) { return fn(sendbuff, recvbuff, recvcount, datatype, op, comm, stream); });
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return tn::run_op<&ncclAlltoAll>(TT_CALLER, CommOp::kAlltoAll, Extent::kTimesRanks, count, datatype, comm,
      stream, [=](auto fn) { return fn(sendbuff, recvbuff, count, datatype, comm, stream); });
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return tn::run_op<&ncclGather>(TT_CALLER, CommOp::kGather, Extent::kTimesRanks, count, datatype, comm, stream,
      [=](auto fn) { return fn(sendbuff, recvbuff, count, datatype, root, comm, stream); });
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return tn::run_op<&ncclScatter>(TT_CALLER, CommOp::kScatter, Extent::kTimesRanks, count, datatype, comm, stream,
      [=](auto fn) { return fn(sendbuff, recvbuff, count, datatype, root, comm, stream); });
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return tn::run_op<&ncclSend>(TT_CALLER, CommOp::kSend, Extent::kBuffer, count, datatype, comm, stream,
      [=](auto fn) { return fn(sendbuff, count, datatype, peer, comm, stream); });
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return tn::run_op<&ncclRecv>(TT_CALLER, CommOp::kRecv, Extent::kBuffer, count, datatype, comm, stream,
      [=](auto fn) { return fn(recvbuff, count, datatype, peer, comm, stream); });
}

// NCCL 2.32: each *Config collective is its classic call plus a per-call configuration, and
// is counted as that call.
ncclResult_t ncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                                 ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                 cudaStream_t stream, const ncclCollConfig_t* config) {
  return tn::run_op<&ncclAllReduceConfig>(TT_CALLER, CommOp::kAllReduce, Extent::kBuffer, count, datatype, comm,
      stream, [=](auto fn) { return fn(sendbuff, recvbuff, count, datatype, op, comm, stream, config); });
}

ncclResult_t ncclBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count,
                                 ncclDataType_t datatype, int root, ncclComm_t comm,
                                 cudaStream_t stream, const ncclCollConfig_t* config) {
  return tn::run_op<&ncclBroadcastConfig>(TT_CALLER, CommOp::kBroadcast, Extent::kBuffer, count, datatype, comm,
      stream, [=](auto fn) { return fn(sendbuff, recvbuff, count, datatype, root, comm, stream, config); });
}

ncclResult_t ncclReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                              ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                              cudaStream_t stream, const ncclCollConfig_t* config) {
  return tn::run_op<&ncclReduceConfig>(TT_CALLER, CommOp::kReduce, Extent::kBuffer, count, datatype, comm, stream,
      [=](auto fn) { return fn(sendbuff, recvbuff, count, datatype, op, root, comm, stream, config); });
}

ncclResult_t ncclAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount,
                                 ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                 const ncclCollConfig_t* config) {
  return tn::run_op<&ncclAllGatherConfig>(TT_CALLER, CommOp::kAllGather, Extent::kTimesRanks, sendcount,
      datatype, comm, stream,
      [=](auto fn) { return fn(sendbuff, recvbuff, sendcount, datatype, comm, stream, config); });
}

ncclResult_t ncclReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount,
                                     ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                     cudaStream_t stream, const ncclCollConfig_t* config) {
  return tn::run_op<&ncclReduceScatterConfig>(TT_CALLER, CommOp::kReduceScatter, Extent::kTimesRanks,
      recvcount, datatype, comm, stream,
      [=](auto fn) { return fn(sendbuff, recvbuff, recvcount, datatype, op, comm, stream, config); });
}

ncclResult_t ncclAlltoAllConfig(const void* sendbuff, void* recvbuff, size_t count,
                                ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                const ncclCollConfig_t* config) {
  return tn::run_op<&ncclAlltoAllConfig>(TT_CALLER, CommOp::kAlltoAll, Extent::kTimesRanks, count, datatype,
      comm, stream, [=](auto fn) { return fn(sendbuff, recvbuff, count, datatype, comm, stream, config); });
}

ncclResult_t ncclGatherConfig(const void* sendbuff, void* recvbuff, size_t count,
                              ncclDataType_t datatype, int root, ncclComm_t comm,
                              cudaStream_t stream, const ncclCollConfig_t* config) {
  return tn::run_op<&ncclGatherConfig>(TT_CALLER, CommOp::kGather, Extent::kTimesRanks, count, datatype, comm,
      stream, [=](auto fn) { return fn(sendbuff, recvbuff, count, datatype, root, comm, stream, config); });
}

ncclResult_t ncclScatterConfig(const void* sendbuff, void* recvbuff, size_t count,
                               ncclDataType_t datatype, int root, ncclComm_t comm,
                               cudaStream_t stream, const ncclCollConfig_t* config) {
  return tn::run_op<&ncclScatterConfig>(TT_CALLER, CommOp::kScatter, Extent::kTimesRanks, count, datatype, comm,
      stream, [=](auto fn) { return fn(sendbuff, recvbuff, count, datatype, root, comm, stream, config); });
}

// NCCL 2.32's one-sided calls: PutSignal's bytes are its local buffer (count × element size,
// as Send); Signal and WaitSignal move none.
ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                           ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                           unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  return tn::run_op<&ncclPutSignal>(TT_CALLER, CommOp::kPutSignal, Extent::kBuffer, count, datatype, comm, stream,
      [=](auto fn) {
        return fn(localbuff, count, datatype, peer, peerWin, peerWinOffset, sigIdx, ctx, flags, comm, stream);
      });
}

ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                        cudaStream_t stream) {
  return tn::run_op<&ncclSignal>(TT_CALLER, CommOp::kSignal, Extent::kBuffer, 0, ncclInt8, comm, stream,
      [=](auto fn) { return fn(peer, sigIdx, ctx, flags, comm, stream); });
}

ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
                            cudaStream_t stream) {
  return tn::run_op<&ncclWaitSignal>(TT_CALLER, CommOp::kWaitSignal, Extent::kBuffer, 0, ncclInt8, comm, stream,
      [=](auto fn) { return fn(nDesc, signalDescs, comm, stream); });
}

ncclResult_t ncclGroupStart() { return tn::group_start(TT_CALLER); }

ncclResult_t ncclGroupEnd() {
  return tn::run_group_end<&ncclGroupEnd>(TT_CALLER, true, [](auto fn) { return fn(); });
}

// Ends the group without launching it. Its ops were counted when queued: simulated groups
// (tuning code) inflate calls/bytes; see docs.
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  return tn::run_group_end<&ncclGroupSimulateEnd>(TT_CALLER, false, [=](auto fn) { return fn(simInfo); });
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return tn::run_lifecycle<&ncclCommInitRank>(TT_CALLER,
      [&](auto fn) { return fn(comm, nranks, commId, rank); },
      [&] {
        if (comm == nullptr) return;
        tn::note_created(*comm, static_cast<uint32_t>(nranks), static_cast<uint32_t>(rank),
                         tn::unique_id_hash(&commId, 1), tn::CommOrigin::kInitRank);
      });
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  return tn::run_lifecycle<&ncclCommInitRankConfig>(TT_CALLER,
      [&](auto fn) { return fn(comm, nranks, commId, rank, config); },
      [&] {
        if (comm == nullptr) return;
        if (tn::nonblocking_config(config)) tn::note_nonblocking(*comm);
        tn::note_created(*comm, static_cast<uint32_t>(nranks), static_cast<uint32_t>(rank),
                         tn::unique_id_hash(&commId, 1), tn::CommOrigin::kInitRank);
      });
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config) {
  return tn::run_lifecycle<&ncclCommInitRankScalable>(TT_CALLER,
      [&](auto fn) { return fn(newcomm, nranks, myrank, nId, commIds, config); },
      [&] {
        if (newcomm == nullptr) return;
        if (tn::nonblocking_config(config)) tn::note_nonblocking(*newcomm);
        tn::note_created(*newcomm, static_cast<uint32_t>(nranks), static_cast<uint32_t>(myrank),
                         tn::unique_id_hash(commIds, nId), tn::CommOrigin::kInitRank);
      });
}

ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  return tn::run_lifecycle<&ncclCommInitAll>(TT_CALLER,
      [&](auto fn) { return fn(comm, ndev, devlist); },
      [&] {
        if (comm == nullptr || ndev <= 0) return;
        const uint64_t id = tn::next_init_all_id(ndev);
        for (int i = 0; i < ndev; ++i) {
          tn::note_created(comm[i], static_cast<uint32_t>(ndev), static_cast<uint32_t>(i), id,
                           tn::CommOrigin::kInitAll);
        }
      });
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  // The child's id is taken before the call so every rank numbers its splits alike, whatever
  // the call returns on this rank.
  const uint64_t id = tn::child_id_if_recording(comm, tn::CommOrigin::kSplit, color, TT_CALLER);
  return tn::run_lifecycle<&ncclCommSplit>(TT_CALLER,
      [&](auto fn) { return fn(comm, color, key, newcomm, config); },
      [&] {
        if (newcomm == nullptr) return;
        // A split without a config inherits the parent's blocking mode (nccl.h).
        if (config != nullptr ? tn::nonblocking_config(config) : tn::is_nonblocking(comm))
          tn::note_nonblocking(*newcomm);
        tn::note_child(*newcomm, id, tn::CommOrigin::kSplit);
      });
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  const uint64_t id = tn::child_id_if_recording(comm, tn::CommOrigin::kShrink, 0, TT_CALLER);
  return tn::run_lifecycle<&ncclCommShrink>(TT_CALLER,
      [&](auto fn) { return fn(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags); },
      [&] {
        if (newcomm == nullptr) return;
        if (config != nullptr ? tn::nonblocking_config(config) : tn::is_nonblocking(comm))
          tn::note_nonblocking(*newcomm);
        tn::note_child(*newcomm, id, tn::CommOrigin::kShrink);
      });
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  // Retired before the call: once NCCL frees the communicator its address may be reused.
  tn::retire_if_recording(comm);
  return tn::pass_through<&ncclCommDestroy>(TT_CALLER, [&](auto fn) { return fn(comm); });
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  tn::retire_if_recording(comm);
  return tn::pass_through<&ncclCommAbort>(TT_CALLER, [&](auto fn) { return fn(comm); });
}

}  // extern "C"
