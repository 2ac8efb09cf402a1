// libtraintime.so as NCCL's profiler plugin (NCCL >= 2.23): the tables NCCL looks up
// (ncclProfiler_v3 ... ncclProfiler_v7, exported), how NCCL is made to find them, and the
// plugin of the user's that traintime chains to.
//
// Registration (setup(), once per process at configure()): NCCL loads one profiler plugin, named
// by NCCL_PROFILER_PLUGIN (from the environment, else from NCCL's configuration files:
// NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf, which NCCL applies only to variables not
// set), else libnccl-profiler.so on the loader path, else the profiler the net plugin exports.
//  - NCCL_PROFILER_PLUGIN=none (wherever set): nothing is done; NCCL loads no plugin.
//  - No plugin anywhere: NCCL_PROFILER_PLUGIN=STATIC_PLUGIN is set, so NCCL looks in the process
//    itself and finds traintime's tables.
//  - The user's plugin: traintime loads it itself (as NCCL would), sets STATIC_PLUGIN and passes
//    the user's plugin every call NCCL makes, with its own activation mask and its own event
//    handles, so it sees what it would see without traintime. When it cannot be chained (no
//    version traintime can call, or it cannot be loaded), traintime steps aside and warns once:
//    NCCL then loads it as before, and traintime counts through interposition alone.
// NCCL older than 2.23 never reads the variable: everything works as without the plugin.
//
// Thread safety: setup() runs once, before any communicator exists. The tables' callbacks run
// on NCCL's threads (the application's, NCCL's proxy thread, its host-stream callbacks).
#pragma once

#include <cstdint>
#include <string>

#include "traintime/core/section.h"
#include "traintime/core/summaries.h"
#include "traintime/nccl/nccl_interposer.h"
#include "traintime/nccl/profiler_plugin_api.h"

namespace traintime::nccl {
// The interposed NCCL call this thread is inside (nccl_wrappers.cpp), as the wrapper counted it
// (seq 0 when captured into a graph), else nullptr: its calls are counted there, not from the
// plugin's events. No side effect (unlike current_call()).
const Call* interposed_call() noexcept;
// A process-unique group id for CommCallTable::record_group (shared with the wrappers' groups).
uint64_t next_group_id() noexcept;
}  // namespace traintime::nccl

namespace traintime::nccl::plugin {

namespace detail {
// Initial-exec __thread (as nccl_wrappers.cpp's t_nccl): libtraintime.so is loaded at start-up,
// so a read is a load from the thread pointer, with no __tls_get_addr call and no
// initialisation check (the launch callback reads it at every launch outside an NCCL call).
struct LaunchThread {
  bool active;
  Call call;
};
extern __thread LaunchThread t_launch __attribute__((tls_model("initial-exec")));
}  // namespace detail

// The NCCL call whose kernel this thread is launching, as the plugin's KernelLaunch event
// brackets it, when no interposed call is active (NCCL bound inside its object): the launch
// callback joins the kernel to it as it does to an interposed call. One thread-local read.
inline const Call* launch_call() noexcept { return detail::t_launch.active ? &detail::t_launch.call : nullptr; }


// The user's plugin traintime passes calls to (loaded by setup()); version 0 when none.
struct Chained {
  int version = 0;
  const void* table = nullptr;  // np::PluginV<version>
  void* lib = nullptr;
};
const Chained& chained() noexcept;

// Decides and arranges how NCCL finds the plugin (see above). `enabled`: TRAINTIME_NCCL is on.
// A plugin named in NCCL_PROFILER_PLUGIN is loaded here; with none named, the loader-path search
// (libnccl-profiler.so, the net plugin's profiler) is made by resolve_chained().
void setup(bool enabled) noexcept;

// At NCCL's first init of traintime's plugin, before anything is passed on: the user's plugin
// NCCL would have found on the loader path, chained. Once; later calls return at once.
void resolve_chained() noexcept;

// The plugin's counters in the nccl section of the rank file.
void add_to_summary(core::Section& section);
// Communicators NCCL initialised the plugin for (0: NCCL never loaded it).
uint64_t inits() noexcept;

// TRAINTIME_NCCL_KERNEL_CH, from the nccl module's configure() (kernel_ch_times.h); in a fork
// child the parent's kernel-channel times are forgotten too.
void set_kernel_ch_request(const std::string& setting, bool fork_child) noexcept;
// The GPU times NCCL's own timers gave (CommSummary::KernelCh).
void add_kernel_ch_times(core::CommSummary::KernelCh& out);

}  // namespace traintime::nccl::plugin
