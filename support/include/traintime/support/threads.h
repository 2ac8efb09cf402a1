// Every thread traintime starts is started here, so each one gets the same start (STYLE 16,
// DESIGN §2), and whatever every thread of ours needs later is added in one place:
//   - a name, tt-<what> (at most 15 characters, the kernel's limit), as /proc/PID/task/*/comm
//     shows it to top -H, gdb and py-spy;
//   - its CPU time accounted for (own_thread_cpu: the rank file's self_cost.threads), from its
//     own CPU clock while it runs and from its last reading once it has ended;
//   - the application's asynchronous signals blocked from its first instruction: a SIGTERM the
//     application handles, or a timer's SIGALRM, never runs a handler on a thread of ours (our
//     own handler there would wait for the rank-file writer while that thread may hold what the
//     writer needs). The synchronous ones stay deliverable: SIGABRT, SIGSEGV, SIGBUS, SIGFPE,
//     SIGILL, SIGTRAP and SIGSYS are raised on the thread that aborts or faults, and one of them
//     sent to a thread that blocks it (tgkill) would stay pending for ever. SIGKILL and SIGSTOP
//     cannot be blocked; glibc's own signals (thread cancellation, setxid) are never blocked.
// The thread that starts one keeps its own mask (it is set to ours only while the thread is
// made) and its errno.
#pragma once

#include <signal.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <thread>
#include <vector>

#include "traintime/core/lock_order.h"
#include "traintime/core/rank_file.h"

namespace traintime::support {

// Each thread traintime starts.
enum class OwnThread : uint8_t {
  kCupti,     // tt-cupti: the CUPTI adapter's processing thread (cupti/src/processing_thread.cpp)
  kWriter,    // tt-writer: the rank file on a terminating signal (preload/exit_hooks.cpp)
  kSnapshot,  // tt-snapshot: periodic snapshots and the Prometheus file (preload/exit_hooks.cpp)
  kHang,      // tt-hang: the always-current record and the hang watchdog (preload/hang_watchdog.cpp)
  kNvml,      // tt-nvml: the GPU health sampler (nvml/src/nvml_sampler.cpp)
};
inline constexpr std::size_t kOwnThreadCount = 5;

// The thread's name: "tt-cupti", "tt-writer", "tt-snapshot", "tt-hang", "tt-nvml".
std::string_view thread_name(OwnThread which) noexcept;

// The mask every thread of ours runs with: every signal blocked but the synchronous ones above.
void own_thread_mask(sigset_t* mask) noexcept;

// Runs fn on a new thread of ours. Throws std::system_error, as std::thread does, when no thread
// can be had (a process limit), or std::bad_alloc.
std::thread start_thread(OwnThread which, std::function<void()> fn);

// The same, detached: false when the thread could not be started. Never throws.
bool start_detached(OwnThread which, std::function<void()> fn) noexcept;

// The CPU time of the threads of ours, by name, in OwnThread order: every kind started in this
// process image (the threads of one name summed, those that ended included). A live thread is
// read from its CPU clock (pthread_getcpuclockid). `deadline`: a terminating signal's write does
// not wait for the accounting's leaf lock past it (core/lock_order.h; then nothing: empty).
std::vector<core::ThreadCost> own_thread_cpu(const core::Deadline& deadline = core::Deadline::never());

// A fork child: the parent's threads are not in it (none of ours runs there until the child
// starts its own). Called on the forking thread, the child's only one.
void forget_own_threads_after_fork() noexcept;

}  // namespace traintime::support
