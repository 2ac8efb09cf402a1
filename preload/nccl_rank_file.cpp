// The NCCL part of the rank file (DESIGN §6 `comm`, `communicators`): the CPU call table meets
// the GPU time in core::GpuAggregator::fill (called by the GPU capture's filler with
// call_table().snapshot()); this filler adds what only the preload knows and covers processes
// without GPU capture.
#include "nccl_rank_file.h"

#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <string>

#include "nccl_registry.h"
#include "runtime.h"
#include "traintime/core/gpu_aggregator.h"

namespace traintime::rt::nccl {
namespace {

std::atomic<bool> g_filler_added{false};
// The process whose NCCL calls the call table holds: a fork child inherits the parent's counts
// and must not report them as its own.
std::atomic<pid_t> g_owner_pid{0};

// GpuAggregator names a communicator by its table index ("0", "1", ...); the registry's
// stable id is the name that matches across ranks.
void name_communicators(core::RankFile& f) {
  for (core::Communicator& c : f.communicators) {
    if (c.id.empty() || c.id.size() > 9 ||
        c.id.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    const auto index = static_cast<uint32_t>(std::stoul(c.id));
    if (const CommEntry* e = entry(index + 1)) {
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016" PRIx64, e->stable_id);
      c.id = hex;
    }
  }
}

}  // namespace

void fill_rank_file(core::RankFile& f) {
  if (getpid() != g_owner_pid.load(std::memory_order_relaxed)) return;
  const core::CommCallTable::Snapshot snap = call_table().snapshot();
  if (snap.comms.empty()) return;
  if (f.comm.empty() && f.communicators.empty()) {
    // No GPU capture merged the call table (TRAINTIME_CUPTI=0, capture unavailable): the CPU
    // counts alone, through the same aggregation code fed no GPU records (gpu_ns = 0, so no
    // bandwidth is claimed).
    const core::GpuAggregator cpu_only;
    core::RankFile scratch;
    cpu_only.fill(scratch, [](core::PathId) { return std::string(); }, 0, &snap);
    f.comm = std::move(scratch.comm);
    f.communicators = std::move(scratch.communicators);
  }
  name_communicators(f);
  if (const uint64_t n = unregistered_calls()) {
    f.warnings.push_back(std::to_string(n) +
                         " NCCL call(s) on a communicator whose size and rank could not be read "
                         "were not counted");
  }
  if (snap.calls_without_communicator > 0) {
    f.warnings.push_back(std::to_string(snap.calls_without_communicator) +
                         " NCCL call(s) beyond the communicator table's capacity were not counted");
  }
  if (const uint64_t n = call_table().groups_lost()) {
    f.warnings.push_back(std::to_string(n) +
                         " NCCL group(s) could not be recorded (two threads raced for one slot); "
                         "their kernels count for the group's first op");
  }
}

void add_filler_once() noexcept {
  if (g_filler_added.exchange(true, std::memory_order_acq_rel)) return;
  g_owner_pid.store(getpid(), std::memory_order_relaxed);
  add_rank_file_filler(&fill_rank_file);
}

}  // namespace traintime::rt::nccl
