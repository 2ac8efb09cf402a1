// Each collective's GPU time from NCCL's own timers: the profiler plugin's kernel-channel
// (KernelCh) events, one per channel of a task (Coll or P2p event), whose GPU timestamps are the
// channel's start and, in its KernelChStop state, its stop. A collective's span is its first
// channel's start to its last channel's stop.
//
// What it gives the rank file (CommSummary::KernelCh): per (communicator, op) GPU time and per
// communicator the ring of recent collectives and the last sequence number completed, as CUPTI's
// records give them. The root's builder takes these when CUPTI did not capture (held by another
// tool, refused, off), and puts each collective's KernelCh time beside CUPTI's when it did.
//
// The tasks of one kernel (NCCL's Group event: a communicator's share of an ncclGroupEnd) are
// one kernel: its span is the union of its tasks' channels, and it is split across the tasks'
// calls in proportion to their bytes (equally when none has bytes), as the GPU aggregator splits a
// group kernel seen through CUPTI. Grouped Send and Recv thus share their kernel's time, and
// every member's recent[] row carries the kernel's span.
//
// When KernelCh is requested (set_request(), then wanted() at NCCL's first init of the plugin):
// TRAINTIME_NCCL_KERNEL_CH=1 always, 0 never, auto unless NCCL says it is 2.31.x (ncclGetVersion),
// where KernelCh slows small collectives (NVIDIA/nccl issue 2355). A NCCL that cannot be asked
// (bound inside its object) is taken as not 2.31.
//
// Threads: open_group/add_member/close_group run where NCCL plans the kernel (the calling thread
// or NCCL's host-stream callback), channel_done on NCCL's proxy thread. Lock-free except the
// completion of a whole kernel (one mutex, off the calling thread) and summary().
#pragma once

#include <cstdint>
#include <string>

#include "traintime/core/section.h"
#include "traintime/core/summaries.h"
#include "traintime/nccl/nccl_interposer.h"

namespace traintime::nccl::plugin::kernel_ch {

// TRAINTIME_NCCL_KERNEL_CH ("auto", "1", "0"; anything else warns once and means auto). At
// configure(), before any communicator.
void set_request(const std::string& setting) noexcept;
// Whether traintime asks NCCL for KernelCh events: decided once, at NCCL's first init of the
// plugin (NCCL is loaded by then).
bool wanted() noexcept;

// Where a task's channels are accumulated: a kernel slot and the task's place in it. serial 0:
// not tracked.
// Trivial (no member initialisers: take one as `Place{}`), so the plugin's static event-handle
// tables that hold one need no constructor run at load: a process that never loads NCCL never
// touches their pages (the inert-process budget).
struct Place {
  uint64_t serial;
  uint32_t member;
};

// The Group event's start: a kernel whose tasks follow. Returns its serial (0: not tracked).
uint64_t open_group() noexcept;
// A task of the kernel `serial`: its call (call.seq 0: not counted, e.g. captured into a graph)
// and the channels NCCL said it runs on.
Place add_member(uint64_t serial, const Call& call, unsigned channels) noexcept;
// The Group event's stop: no more tasks.
void close_group(uint64_t serial) noexcept;
// One channel of the task at `p` stopped: its GPU start and stop (ns, NCCL's GPU timer).
void channel_done(const Place& p, uint64_t start_ns, uint64_t stop_ns) noexcept;

// In a fork child (the nccl module's configure()): the parent's times and open kernels are
// forgotten (left allocated: a parent's thread may have held the lock at the fork).
void forget_after_fork() noexcept;

// The times so far (every collective whose channels all stopped).
void add_to(core::CommSummary::KernelCh& out);
// Its counters into the nccl section (kernel_ch requested, collectives timed, NCCL's version).
void add_counters(core::Section& section);

}  // namespace traintime::nccl::plugin::kernel_ch
