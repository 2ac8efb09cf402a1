// SIMULATION: the constants of the virtual timeline, in one place (tests/sim/README.md lists them).
#pragma once

#include <cstdint>
#include <vector>

namespace simgpu {

// Virtual clocks start here (a 2023 Unix time in ns) so timestamps look like CUPTI's.
inline constexpr uint64_t kTimeBase = 1'700'000'000'000'000'000ull;
// Host cost of one traced API call; a runtime call that nests a driver call costs both.
inline constexpr uint64_t kRuntimeApiCostNs = 1500;
inline constexpr uint64_t kDriverApiCostNs = 500;
// CUPTI's own overhead records (CUPTI_ACTIVITY_KIND_OVERHEAD): what one flush of the activity
// buffers and one full command buffer take of the calling thread's time.
inline constexpr uint64_t kBufferFlushOverheadNs = 3000;
inline constexpr uint64_t kCommandBufferFullOverheadNs = 20000;
// From a launch call to the moment the GPU could start the work.
inline constexpr uint64_t kLaunchLatencyNs = 2000;
// Memory model: fixed latency plus bytes over bandwidth (bytes per ns = GB/s).
inline constexpr uint64_t kCopyLatencyNs = 1000;
inline constexpr uint64_t kHostDeviceBytesPerNs = 25;  // HtoD / DtoH over PCIe-like link
inline constexpr uint64_t kDeviceBytesPerNs = 1000;    // DtoD and memset
// The legacy default stream's id and the first id given to created streams (CUPTI-like).
inline constexpr uint32_t kDefaultStreamId = 7;
inline constexpr uint32_t kFirstStreamId = 13;

// The process's rank from the launcher's environment (RANK, OMPI_COMM_WORLD_RANK, ...).
int rank_from_env();
// "rank:factor,rank:factor" -> factors indexed by rank (missing ranks: 1.0).
// "RANK:VALUE,..." as a vector indexed by rank; ranks not listed read `unlisted`.
std::vector<double> parse_slowdown(const char* spec, double unlisted = 1.0);

// Raises a resource event through the fake CUPTI's hooks (libcuda.so.1 internal).
void raise_resource(int event, void* context, void* handle, void* graph);

inline uint64_t copy_duration_ns(uint64_t bytes, bool host_involved) {
  const uint64_t bw = host_involved ? kHostDeviceBytesPerNs : kDeviceBytesPerNs;
  return kCopyLatencyNs + (bytes + bw - 1) / bw;
}

}  // namespace simgpu
