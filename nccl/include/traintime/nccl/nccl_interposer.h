// The NCCL interposer as the rest of libtraintime.so sees it (DESIGN §5). It depends on core/
// only: what it needs from the process comes in through configure(); what it knows goes out
// through current_call() (read by the launch context) and summary() (read by the rank-file
// assembler). It never writes into another module's output.
//
// current_call() contract with the launch callback:
//  - a thread-local read: no lock, no allocation, errno untouched, callable from any thread at
//    any time (also before NCCL was ever called);
//  - nullptr when the thread is not inside an interposed NCCL call, and always when
//    interposition is off (TRAINTIME_NCCL=0): the GPU side then finds comm kernels by name;
//  - the pointee is valid until the callback returns: copy what you need, keep no pointer.
#pragma once

#include <cstdint>

#include "traintime/core/activity.h"
#include "traintime/core/comm_stats.h"
#include "traintime/core/self_cost.h"
#include "traintime/core/summaries.h"

namespace traintime::nccl {

// The NCCL call the calling thread is inside (core/activity.h): the launch callback copies it
// whole into its launch context.
using Call = core::CommContext;

// What the interposer needs from the process. Each hook may be null; each is called outside
// the interposer's locks, from the application thread making the NCCL call, and must keep errno.
struct Hooks {
  // The first call counted in this process: it now has something to write.
  void (*on_first_call)() noexcept = nullptr;
  // A communicator was registered (created through a wrapped ncclCommInit*, or first seen in a
  // call). GPU capture may start lazily here when the driver never called InitializeInjection.
  void (*on_communicator)() noexcept = nullptr;
  // The rank within the largest communicator registered so far (the world rank, when no
  // launcher variable says).
  void (*on_world_rank)(int64_t rank, int64_t world_size) noexcept = nullptr;
};

// Starts (or, in a fork child, restarts) recording into `table`, which the caller owns and
// never destroys while wrappers may run. With enabled == false every wrapper passes straight
// through. Until the first call, nothing is recorded. Not thread-safe against itself: called at
// start-up and in the fork child handler.
void configure(core::CommCallTable* table, bool enabled, const Hooks& hooks) noexcept;

// The interposed NCCL call (or outermost ncclGroupEnd) this thread is inside, else nullptr.
const Call* current_call() noexcept;

// Stream capture (CUDA graphs). A call on a stream being captured is not counted (its replays
// are, on the GPU side), so each counted call asks the driver whether its stream is capturing
// (cuStreamIsCapturing), which costs more than the rest of the wrapper. GPU capture, when it
// sees every capture begin in the process (subscribed to cudaStreamBeginCapture* and
// cuStreamBeginCapture* since cuInit), says so with set_capture_watch(true), and the wrappers
// then skip the question until note_capture_begin(): from the first capture on, they ask on
// every call again, for the rest of the process. set_capture_watch(false) (capture stopped, or
// its subscription may have been lost) makes them ask again too; so does configure(). Both
// lock-free, callable from any thread.
void set_capture_watch(bool watching) noexcept;
void note_capture_begin() noexcept;

// For a launch of an NCCL kernel made with no interposed call on its thread: the oldest call
// still waiting for its kernel on `stream`, removed from the queue; false when there is none.
// Calls wait there when NCCL returned ncclInProgress without launching inside the call
// (nonblocking communicators: NCCL launches from a thread it creates). One relaxed load when
// nothing waits; errno untouched.
bool take_pending_call(const void* stream, Call* out) noexcept;

// Whether any call waits for its kernel (one relaxed load): lets the launch callback skip the
// kernel-name check on the launches of a process with no nonblocking communicator in flight.
bool calls_waiting() noexcept;

// A collective has been in flight on this rank past half of TRAINTIME_HANG_SEC (the watchdog):
// with TRAINTIME_NCCL_PROXY_STEPS=auto, NCCL's per-step proxy events are asked for the
// collectives enqueued next, so a hang that follows reports bytes per channel and peer. Lock-free.
void suspect_hang() noexcept;
// This rank waited in a collective far beyond its op's recent durations (core/straggler_sign.h,
// the watchdog): the same, for a straggler among its peers. Lock-free.
void suspect_straggler() noexcept;

// The call table's snapshot (stable ids included) and the interposer's section ("nccl"): its
// counters (calls that found no NCCL, calls on communicators it could not register, groups
// lost, table overflow), each with its warning. Empty when nothing was recorded.
core::CommSummary summary();

// The wrappers' self_cost row so far, into `c` (lock-free): what the marks of self_cost.pct read
// as steps end; with `calls`, the calls counted too. `pair_ticks`: the cost of a pair of clock
// readings (FastClock::pair_ticks).
void cost_so_far(core::CostSoFar& c, uint64_t pair_ticks, bool calls) noexcept;

}  // namespace traintime::nccl
