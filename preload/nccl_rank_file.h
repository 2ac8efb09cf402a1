// The NCCL rows of the rank file. The GPU capture's filler owns the GpuAggregator and must pass
// the call table into it, so CPU counts and GPU time meet in one place:
//
//   aggregator.set_comm_table(&rt::nccl::call_table());                 // before ingesting
//   const auto calls = rt::nccl::call_table().snapshot();               // in its filler
//   aggregator.fill(f, path_name, steps_completed, &calls);
//
// fill_rank_file() (registered as a filler at the first communicator this process meets, i.e.
// after NCCL initialised CUDA, hence after the GPU capture's filler) then replaces the
// aggregator's per-process communicator names by the registry's stable ids, adds the NCCL
// warnings, and fills comm/communicators from CPU counts alone when no GPU capture did.
#pragma once

#include "traintime/core/rank_file.h"

namespace traintime::rt::nccl {

void fill_rank_file(core::RankFile& f);

// Registers fill_rank_file with the runtime, once per process.
void add_filler_once() noexcept;

}  // namespace traintime::rt::nccl
