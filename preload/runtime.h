// The process-wide profiler state, as the other parts of libtraintime.so see it (CUPTI adapter,
// NCCL wrappers, NVTX injection). Everything here is safe to call from any thread at any time,
// including before the first record and in a process that never records.
//
// Lifecycle (DESIGN §2, §6): the constructor only reads config and environment. The first
// record (a region, a step, or mark_recorded()) activates the process: exit and signal hooks
// are installed and the rank file will be written at exit. A fork child starts clean.
#pragma once

#include <cstdint>
#include <string>

#include "traintime/core/activity.h"
#include "traintime/core/category.h"
#include "traintime/core/config.h"
#include "traintime/core/rank_file.h"

namespace traintime::rt {

// Profiling is on in this process: the library is initialised and TRAINTIME_DISABLE is not set.
// Lock-free.
bool active();

// Attribution context for work the calling thread launches now (DESIGN §4 rules 2-4): its
// innermost open region, else the innermost region of the step thread, else kNoPath; the
// number of tt_step calls so far; the region entry serial. Lock-free, no allocation, errno
// untouched. comm_* fields are left zero (the NCCL side fills them).
core::LaunchContext launch_context();

// This process has something to write (GPU work, an NCCL call): activates it like a region does.
void mark_recorded();

// Lock-free; kOther for kNoPath or unknown ids.
core::Category category_of(core::PathId path);
// "step/forward/layer3"; empty for kNoPath. Takes a copy, so not for hot paths.
std::string path_string(core::PathId path);

// The configuration parsed once at start-up.
const core::Config& config();

// Rank learnt from a world-sized NCCL communicator; used only when no launcher variable gave
// the rank (DESIGN §6).
void set_rank_from_communicator(int64_t rank, int64_t world_size);

// Called, in registration order, every time a rank file or snapshot is assembled, after the
// CPU parts are filled in. At most 16 fillers; registration is safe from static constructors.
using RankFileFiller = void (*)(core::RankFile&);
void add_rank_file_filler(RankFileFiller filler);

// Called once, in registration order, before the final write (normal exit or terminating
// signal; never for snapshots). `reason` is the rank file's exit_reason ("exit",
// "signal SIGTERM"). Runs on an ordinary thread, never inside a signal handler. At most 16.
using ShutdownHook = void (*)(const char* reason);
void add_shutdown_hook(ShutdownHook hook);

// True when CUDA_INJECTION64_PATH names this library (set by it, or inherited from a parent
// process running it), so InitializeInjection will be called when CUDA initialises. False when
// another tool owns the variable or TRAINTIME_CUPTI=0: GPU capture must then subscribe lazily.
bool cuda_injection_owned();

// Where GPU capture may start lazily when the driver will never call InitializeInjection
// (another tool owns CUDA_INJECTION64_PATH, DESIGN §2): every tt_step and the first NCCL call on
// each communicator. One relaxed load once capture is decided; errno untouched.
void gpu_start_point() noexcept;

}  // namespace traintime::rt
