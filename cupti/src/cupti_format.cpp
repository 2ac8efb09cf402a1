// The cupti module's format (cupti_format.h): each warning's text, made only here. Its section
// also holds the GPU aggregator's and the memory tracker's counters (core/core_counters.h).
#include "traintime/cupti/cupti_format.h"

#include <cstdio>

#include "traintime/core/core_counters.h"

namespace traintime::cupti {

using core::counter;
using core::ModuleCounters;

std::string messages::memory_missing_context(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) + " device memory records had no launch context: counted in the step of "
         "the record before them";
}
std::string messages::overwritten(uint64_t n, const ModuleCounters& all) {
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.1f",
                static_cast<double>(counter(all, kCounters, Counter::correlation_ids_per_1000_launches)) / 1000.0);
  const uint64_t late = counter(all, kCounters, Counter::overwritten_late);
  const uint64_t peak = counter(all, kCounters, Counter::launching_threads_peak);
  const uint64_t bound = counter(all, kCounters, Counter::launching_threads_bound);
  std::string why;
  if (late > 0)
    why = std::to_string(late) + " came in buffers that reached traintime late while it kept up with the "
          "launches (CUPTI hands a thread's partly filled buffer over only at a flush, asked for at least every " +
          std::to_string(counter(all, kCounters, Counter::launch_flush_every)) + " launches)";
  if (late < n)
    why += (why.empty() ? "" : "; ") + std::to_string(n - late) +
           " arrived after the processing thread had fallen behind the launches";
  if (bound > 0 && peak > bound)
    why += "; " + std::to_string(peak) + " threads launched at once, more than the " + std::to_string(bound) +
           " the table is sized for";
  return std::to_string(n) + " activity record(s) arrived after " +
         std::to_string(counter(all, kCounters, Counter::launch_slots)) +
         " newer launches had taken their launch context's place (correlation ids: " + rate +
         " per launch): " + why;
}
std::string messages::launching_threads_over_bound(uint64_t n, const ModuleCounters& all) {
  const uint64_t slots = counter(all, kCounters, Counter::launch_slots);
  const uint64_t bound = counter(all, kCounters, Counter::launching_threads_bound);
  return std::to_string(counter(all, kCounters, Counter::launching_threads_peak)) + " threads held launch-context chunks at once, " +
         std::to_string(n) + " more than the " + std::to_string(bound) +
         " the table is sized for (each holds up to " + std::to_string(bound > 0 ? slots / (2 * bound) : 0) +
         " of its " + std::to_string(slots) +
         " slots ahead): records were joined without the table's loss shortcut, and its window was "
         "shorter in launches";
}
std::string messages::missing_context(uint64_t n, const ModuleCounters& all) {
  return std::to_string(n) + " GPU activities had no launch context (counted as unattributed); " +
         std::to_string(counter(all, kCounters, Counter::overwritten)) +
         " of them because later launches reused their correlation slot before the record arrived";
}
std::string messages::no_timestamps(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) + " GPU activity records carried no timestamps and were skipped";
}
std::string messages::incomplete_buffers(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) +
         " activity buffers ended in an incomplete record (work still running at the forced flush)";
}
std::string messages::store_collisions(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) + " launch contexts were not stored because two launches raced for one slot";
}
std::string messages::graph_nodes_refused(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) +
         " CUDA graph nodes exceeded the node table; their kernels use the graph launch's region";
}
std::string messages::dropped_records(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) +
         " GPU activity records were dropped (by CUPTI, or unread in scratch buffers while the "
         "buffer pool was exhausted): GPU times undercount";
}
std::string messages::buffer_requests_refused(uint64_t n, const ModuleCounters& all) {
  return std::to_string(n) + " CUPTI buffer requests refused (pool of " +
         std::to_string(counter(all, kCounters, Counter::buffer_count)) + " x " + std::to_string(counter(all, kCounters, Counter::buffer_kib)) +
         " KiB exhausted; raise TRAINTIME_BUFFER_COUNT): their records were dropped";
}

namespace {
constexpr core::CounterTable kTables[] = {core::counter_table(core::kGpuCounters),
                                          core::counter_table(core::kMemoryCounters),
                                          core::counter_table(kCounters)};
}  // namespace
const core::ModuleFormat kFormat{"cupti", 1, kTables, 3};

}  // namespace traintime::cupti
