// SIMULATION: the exact expected per-rank result of a sim_train run, computed from the executed
// virtual timeline with sim_train's own labels — independently of traintime's code (its own
// interval union, its own bookkeeping). Definitions: tests/sim/README.md, "The truth file".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "labels.h"

namespace sim_train {

struct Activity {
  int kind = 0;  // simgpu_work_kind
  uint64_t start = 0, end = 0;
  uint64_t bytes = 0;
  uint8_t copy_kind = 0;  // CUpti_ActivityMemcpyKind
  Cat cat = Cat::kUnattributed;
  std::string path;  // region path the work is attributed to ("" for comm)
  std::string comm_op;  // NCCL op for comm work
  uint64_t step = 0;
};

// One NCCL call as sim_train made it (bytes per nccl-tests conventions).
struct CommCall {
  std::string op;
  int comm_size = 0;
  uint64_t bytes = 0;
};

// One device allocation (bytes > 0) or release (bytes < 0) sim_train made, in call order.
struct MemoryOp {
  uint64_t step = 0;  // step markers before the call
  int64_t bytes = 0;
};

struct TruthInput {
  int rank = 0;
  int world_size = 1;
  uint64_t steps = 0;  // tt_step calls (or "step" ranges in --nvtx mode), or loop iterations
  std::string steps_source = "marker";  // what the rank file's steps.source must say
  std::vector<Activity> activities;
  std::vector<CommCall> comm_calls;
  std::vector<MemoryOp> memory_ops;
  bool memory_truth = false;  // --alloc-per-step: the truth has `memory`
  nlohmann::json options;
  nlohmann::json profiler_windows;  // --profiler-window: seen vs expected, copied to the truth
};

// Measure (ns) of the union of half-open intervals [start, end).
uint64_t union_ns(std::vector<std::pair<uint64_t, uint64_t>> intervals);

nlohmann::json compute_truth(const TruthInput& in);

// Device memory in use per step (README "The truth file"): {peak_bytes, in_use_bytes, by_step}.
nlohmann::json memory_truth(const std::vector<MemoryOp>& ops, uint64_t steps);

}  // namespace sim_train
