// A module's runtime half (Darshan's module registration): how the composition root configures,
// starts and stops it, and where its section of the rank file comes from. Every module -- cupti,
// nccl, nvml, nvtx, null and the next API family -- defines one `const core::Module kModule` in
// its namespace and is listed once in modules/include/traintime/modules/module_table.h; the
// root (preload/session.cpp) walks that table: configure in table order (at start-up and again
// in a fork child), start at the process's first GPU launch, stop in the reverse order from its
// one exit path (finish). No module registers an exit hook of its own.
//
// A module knows only core/ (and support/): what it needs of the process comes in the
// ModuleHost, plain function pointers the root fills; joins across modules (regions x GPU work,
// NCCL calls x their kernels) are the root's functions behind those pointers and its rank-file
// builder, never one module calling another.
#pragma once

#include <cstdint>
#include <string>

#include "traintime/core/activity.h"
#include "traintime/core/comm_stats.h"
#include "traintime/core/config.h"
#include "traintime/core/lock_order.h"
#include "traintime/core/module_format.h"
#include "traintime/core/section.h"
#include "traintime/core/self_cost.h"

namespace traintime::core {

// What the root offers every module. Each pointer is set (lock-free, errno untouched unless
// said otherwise); a module takes what it needs.
struct ModuleHost {
  const Config* config = nullptr;
  // Configured again in a fork child, on the forking thread (the only one the child has): the
  // module starts clean there, forgetting what the parent's threads had open, so nothing of the
  // parent's ends in the child's counts or makes the child write a file.
  bool fork_child = false;
  CommCallTable* comm_table = nullptr;  // the session's NCCL call table (nccl fills it)
  // The process has something to write (a counted call): activates it. Called with errno saved.
  void (*on_first_record)() noexcept = nullptr;
  // The process's first GPU launch (after CUDA initialised): activates it, re-registers the
  // root's exit hook so it runs before CUDA's own atexit teardown, and starts the modules.
  // Called once, by the cupti module's launch callback.
  void (*on_first_gpu_launch)() noexcept = nullptr;
  // A new NCCL communicator: where GPU capture may start lazily (DESIGN §2).
  void (*on_communicator)() noexcept = nullptr;
  // A communicator's rank and size, for a process with no launcher rank.
  void (*on_world_rank)(int64_t rank, int64_t world_size) noexcept = nullptr;
  uint32_t (*steps_completed)() noexcept = nullptr;  // tt_step calls so far (lock-free)
  // The name of a region path (slow: trace dump and fixtures only; never under a module's lock).
  std::string (*path_name)(PathId path) = nullptr;
  // The joins of GPU work with what launched it (the cupti module keeps a copy of this host).
  // Attribution context for work the calling thread launches now: region, step, entry, the
  // region's category and the NCCL call it is inside, written to *out (every field). Called in
  // every launch callback: lock-free, no allocation, errno untouched. Written in place, not
  // returned: the launch callback keeps it in thread-local storage, and copying a just-built
  // context there stalls on store forwarding at every launch.
  void (*launch_context)(LaunchContext* out) noexcept = nullptr;
  // An NCCL kernel launched while its thread is in no NCCL call (nonblocking communicators:
  // NCCL launches from a thread it creates): fills ctx's comm fields with the call waiting for
  // it on `stream` and returns true, else false. Lock-free when nothing waits. May be null.
  bool (*pending_comm_call)(const void* stream, LaunchContext* ctx) noexcept = nullptr;
  // Whether any NCCL call waits for such a kernel (one relaxed load, called on every kernel
  // launch made outside an NCCL call): only then is pending_comm_call's name check made. Null:
  // pending_comm_call is never called.
  bool (*comm_calls_waiting)() noexcept = nullptr;
  // The members of the NCCL group recorded under group_id (the NCCL call table's find_group),
  // for splitting a group kernel's time: true and *out filled when found. Lock-free; called on
  // the processing thread, with no lock held, for group kernels only. May be null (group
  // kernels then count for their first op).
  bool (*comm_group)(uint64_t group_id, CommGroupRecord* out) noexcept = nullptr;
  // Stream capture, for the NCCL wrappers (nccl_interposer.h, set_capture_watch): a capture
  // begins (called at the entry of cudaStreamBeginCapture* / cuStreamBeginCapture*), and
  // whether every capture begin is seen (true once subscribed from cuInit on; false when capture
  // stops). Lock-free. May be null.
  void (*on_capture_begin)() noexcept = nullptr;
  void (*capture_watch)(bool watching) noexcept = nullptr;
  // Steps detected without a marker (core/step_feed.h): `ended` of them have ended, as the
  // processing thread learned it (a buffer ingested; several steps may end at once), called with
  // no lock of the adapter's held, each time the count grows. What a marker's step end does for
  // the preload's marks (self_cost.pct): self_cost's step window moves as with tt_step.
  // Lock-free. May be null.
  void (*on_detected_steps)(uint64_t ended) noexcept = nullptr;
  // Steps detected without a marker, for what is sampled by time (GPU health): the GPU activity
  // clock now (false: no capture), and the step at such a time (core::StepAt). Take the GPU
  // capture's lock: never call them under a lock of one's own.
  bool (*gpu_clock_ns)(uint64_t* ns) noexcept = nullptr;
  StepAt (*step_at)(uint64_t ns, uint64_t* step) noexcept = nullptr;
};

struct Module {
  // Its data format: its id (format->name, rank file modules.<name>), the version of its part of
  // the file and its counters (module_format.h).
  const ModuleFormat* format = nullptr;
  // At start-up, before the application's threads run, and in a fork child (host.fork_child).
  void (*configure)(const ModuleHost& host) = nullptr;
  // At the process's first GPU launch (a module that waits for CUDA: NVML). Null: none.
  void (*start)() noexcept = nullptr;
  // From finish(), in the reverse of the table order, before the final file's summaries are
  // taken. At exit (`signal` false): stop its threads and hand in everything it holds. On a
  // terminating signal: only what ends by `deadline`; false when what it holds could not all be
  // handed in (the file then says so). Null: nothing to stop.
  bool (*stop)(const char* reason, bool signal, const Deadline& deadline) = nullptr;
  // Its section of the rank file, for a module with nothing to join (null, nvtx, the next API
  // family). Null for a module whose typed summary the root's builder joins (cupti, nccl, nvml).
  Section (*section)() = nullptr;
  // The time its hot paths took so far (core/self_cost.h CostSoFar: the slot of each of its
  // paths), for self_cost's step window: read at step ends (rarely: every ~1 ms of steps) and
  // when a file is written; with `calls` the sampled paths' call counts too. Lock-free,
  // noexcept. Null: the module times no hot path.
  void (*cost_so_far)(CostSoFar& c, uint64_t pair_ticks, bool calls) noexcept = nullptr;
};

}  // namespace traintime::core
