// The rank file of an aggregator's GPU work alone, built the way the preload builds every rank
// file (core::build_rank_file), for tests that check the aggregator through the schema's fields.
#pragma once

#include <functional>
#include <string>

#include "traintime/core/gpu_aggregator.h"
#include "traintime/core/rank_file_builder.h"

namespace traintime::core::testing {

inline RankFile gpu_rank_file(const GpuAggregator& agg,
                              const std::function<std::string(PathId)>& path_name,
                              uint64_t steps_completed,
                              const CommCallTable::Snapshot* calls = nullptr) {
  const GpuSummary gpu = agg.summary(steps_completed);
  CpuSummary cpu;
  for (const GpuSummary::Region& r : gpu.regions) {
    if (r.path >= cpu.path_names.size()) cpu.path_names.resize(r.path + 1);
    cpu.path_names[r.path] = path_name(r.path);
  }
  CommSummary comm;
  if (calls != nullptr) comm.calls = *calls;
  return build_rank_file(Identity{}, cpu, gpu, comm);
}

}  // namespace traintime::core::testing
