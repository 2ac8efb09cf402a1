// The nccl module's format (nccl_format.h): each warning's text, made only here.
#include "traintime/nccl/nccl_format.h"

namespace traintime::nccl {

using core::ModuleCounters;

std::string messages::missing_real(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) +
         " NCCL call(s) found no NCCL function in the process and returned ncclSystemError; "
         "load the NCCL the program was built with";
}
std::string messages::unregistered(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) +
         " NCCL call(s) on a communicator whose size and rank could not be read were not counted";
}
std::string messages::pending_dropped(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) +
         " NCCL call(s) launched later by NCCL's own thread could not wait for their kernel "
         "(queue full); some kernels may be linked to a later call";
}
std::string messages::children_unnamed(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) + " communicator(s) made by ncclCommSplit/Shrink were not used before " +
         std::to_string(kMaxPending) + " newer ones: their ids are per process, not the same on every rank";
}
std::string messages::calls_without_communicator(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) + " NCCL call(s) beyond the communicator table's capacity were not counted";
}
std::string messages::groups_lost(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) +
         " NCCL group(s) could not be recorded (two threads raced for one slot); their kernels "
         "count for the group's first op";
}
std::string messages::profiler_plugin_chained_init_failures(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) +
         " communicator(s): the chained NCCL profiler plugin's init failed; it sees no events "
         "of those communicators, as it would see none without traintime";
}
std::string messages::profiler_plugin_progress_dropped(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) +
         " NCCL proxy operation(s) or kernel channel(s) found the progress table full and are missing "
         "from proxy_progress (the hang report may not name every channel)";
}

std::string messages::profiler_plugin_kernel_ch_lost(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) +
         " NCCL kernel(s) still ran when 512 newer ones had been planned, or had more than 64 tasks: "
         "NCCL's kernel-channel timers of those collectives were not kept (their GPU time is missing "
         "where CUPTI did not capture)";
}

namespace {
constexpr core::CounterTable kTables[] = {core::counter_table(kCounters)};
}  // namespace
const core::ModuleFormat kFormat{"nccl", 1, kTables, 1};

}  // namespace traintime::nccl
