// The messages of core's counter tables (core_counters.h): each warning's text, made only here.
#include "traintime/core/core_counters.h"

#include "traintime/core/cpu_collectives.h"
#include "traintime/core/region_registry.h"

namespace traintime::core {

std::string last_publish_message(std::string_view what, const ModuleCounters& all) {
  // Every section that counts these spells them alike (TRAINTIME_LAST_PUBLISH_COUNTERS): the
  // GPU table's enum names them for all three.
  std::string text(what);
  if (counter(all, kGpuCounters, GpuCounter::last_publish_missing) == 0)
    text += " are those last published, " +
            std::to_string(counter(all, kGpuCounters, GpuCounter::last_publish_age_ms)) +
            " ms before this file";
  else
    text += " are missing (none had been published yet)";
  return text + ": a lock they need was held by a thread the terminating signal stopped";
}

std::string annotations_last_publish(uint64_t, const ModuleCounters& all) {
  return last_publish_message("the region and step figures", all);
}
std::string gpu_last_publish(uint64_t, const ModuleCounters& all) {
  return last_publish_message("the GPU figures", all);
}
std::string collectives_last_publish(uint64_t, const ModuleCounters& all) {
  return last_publish_message("the CPU-side collectives", all);
}

namespace annotation_messages {
std::string unbalanced_pops(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) + " tt_pop() call(s) with no open region on their thread were ignored";
}
std::string depth_overflows(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) + " region(s) nested deeper than " + std::to_string(ThreadState::kMaxDepth) +
         " were not timed";
}
std::string unknown_range_ends(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) + " tt_range_end() call(s) named no open range (unknown or ended twice)";
}
std::string dropped_names(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) + " region name(s) or path(s) were dropped: table full";
}
}  // namespace annotation_messages

namespace gpu_messages {
std::string late_records(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) +
         " GPU records arrived after their step was folded; counted as isolated intervals "
         "(union figures may overcount by at most their duration)";
}
std::string segmented_steps(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) +
         " times a step exceeded the open-record budget and was folded in segments "
         "(overlaps across a cut are counted twice)";
}
std::string kernel_names_over_cap(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) + " kernel records beyond the kernel-name cap, listed as (other kernels)";
}
std::string region_kernels_over_cap(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) + " kernel records beyond the per-region kernel cap, listed as (other kernels)";
}
std::string group_lookups_missed(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) +
         " NCCL group kernels whose group members were no longer known; counted for the first op";
}
std::string trace_events_dropped(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) + " activities beyond TRAINTIME_TRACE's event cap left out of the trace";
}
}  // namespace gpu_messages

namespace memory_messages {
std::string memory_unknown_frees(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) + " device memory releases were of addresses with no allocation record "
         "(allocated before GPU capture started, or the record was dropped): memory in use may be off";
}
std::string memory_reused_addresses(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) + " device memory allocations reused an address whose release record "
         "was missing: memory in use may be off";
}
}  // namespace memory_messages

namespace collective_messages {
std::string dropped(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) + " collective(s) recorded by traintime.torch were not kept (more than " +
         std::to_string(CpuCollectives::kMaxGroups) +
         " process groups, or no group, sequence number or end time)";
}
}  // namespace collective_messages

namespace {
constexpr CounterTable kAnnotationTables[] = {counter_table(kAnnotationCounters)};
constexpr CounterTable kCollectiveTables[] = {counter_table(kCollectiveCounters)};
}  // namespace

const ModuleFormat kAnnotationsFormat{"annotations", 1, kAnnotationTables, 1};
const ModuleFormat kCollectivesFormat{"collectives", 1, kCollectiveTables, 1};

}  // namespace traintime::core
