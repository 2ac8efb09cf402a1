// NVTX ranges become traintime regions (DESIGN §3). The preload's InitializeInjectionNvtx2
// entry point (NVTX_INJECTION64_PATH) hands each NVTX-carrying module's export-table getter to
// inject(), with the region operations the handlers record through; from then on that module's
// NVTX calls reach the regions.
#pragma once

#include <cstdint>
#include <string_view>

#include "traintime/core/section.h"
#include "traintime/core/self_cost.h"

namespace traintime::nvtx {

// NVTX's NvtxGetExportTableFunc_t (nvtxTypes.h), spelt without NVTX's headers.
using GetExportTable = const void* (*)(uint32_t export_table_id);

// What the handlers record through, on the calling thread. Each keeps errno.
struct Regions {
  // Opens the region `name`; returns a token for close(): 0 when nothing was recorded (the
  // profiler is off), otherwise a value that names this region among the thread's open ones.
  uint64_t (*open)(const char* name) noexcept = nullptr;
  // Closes the region `token` names, wherever it sits among the thread's open regions.
  void (*close)(uint64_t token) noexcept = nullptr;
  // Ranges that may end on another thread.
  uint64_t (*range_start)(const char* name) noexcept = nullptr;
  void (*range_end)(uint64_t id) noexcept = nullptr;
};

// Writes traintime's handlers into the calling module's NVTX function tables. The first call
// fixes `regions` and the domains recorded (`domains`: TRAINTIME_NVTX_DOMAINS, already
// validated; core::NvtxDomainFilter) for the process. Returns 1 when handlers were installed
// (NVTX's convention), 0 otherwise. Thread-safe; errno untouched.
int inject(const Regions& regions, std::string_view domains, GetExportTable get_export_table);

// In a fork child, on the forking thread (the only one the child has; the composition root's one
// fork strategy calls it): NVTX starts clean there. The ranges the parent's threads had open
// (push/pop and start/end alike) are forgotten, so a pop or an end of one in the child records
// nothing and never makes the child write a file; untracked_ranges counts from 0. The handlers
// stay installed (NVTX's function tables are inherited with the parent's memory). errno untouched.
void on_fork_child() noexcept;

// NVTX's section of the rank file (core/section.h), empty until handlers were installed:
// counter untracked_ranges, the push ranges opened on a thread beyond the 256 it tracks open at
// once (not regions), with its warning.
core::Section section();

// The handlers' self_cost row so far, into `c` (lock-free): what the marks of self_cost.pct read
// as steps end; with `calls`, the calls counted too. `pair_ticks`: the cost of a pair of clock
// readings (FastClock::pair_ticks).
void cost_so_far(core::CostSoFar& c, uint64_t pair_ticks, bool calls) noexcept;

}  // namespace traintime::nvtx
