// The CUDA-event side of a validation run, written as JSON for scripts/compare_events.py.
// Host-only C++ (compiled by the host compiler, not nvcc) so that nlohmann_json stays out of
// device code.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace example {

struct RegionTiming {
  std::string path;                // traintime region path, e.g. "forward" or "backward/comm"
  std::vector<double> per_step_ms;  // one CUDA-event interval per timed step
};

struct CommSizeTiming {
  uint64_t bytes = 0;  // nccl-tests "size": the total buffer (AllGather: output, ReduceScatter: input)
  uint64_t calls = 0;  // every call made at this size, warm-up included
  double total_ms = 0;  // CUDA-event time of all those calls
  double min_ms = 0;    // fastest timed call
};

struct CommOpTiming {
  std::string op;  // spelled as in traintime's comm rows: AllReduce, AllGather, ...
  std::vector<CommSizeTiming> sizes;
};

struct EventsReport {
  std::string program;
  int rank = 0;
  int world_size = 1;
  std::string launcher;
  std::string device;
  std::string timing;  // how and when the events were read
  int steps = 0;
  int warmup_steps = 0;
  std::vector<std::pair<std::string, int64_t>> config_numbers;
  std::vector<std::pair<std::string, std::string>> config_strings;
  std::vector<RegionTiming> regions;
  std::vector<CommOpTiming> comm;
  std::vector<std::string> notes;
};

// Replaces every "%r" in `pattern` with the rank.
std::string expand_rank(const std::string& pattern, int rank);

// Writes the report; returns false (after printing why) when the file cannot be written.
bool write_events_json(const std::string& path, const EventsReport& report);

}  // namespace example
