// The one place a rank file is put together (DESIGN §6): each module's typed summary mapped onto
// the "traintime/1" schema. Pure function of its inputs: the order in which the modules started
// or were asked cannot change the output.
#pragma once

#include "traintime/core/rank_file.h"
#include "traintime/core/summaries.h"

namespace traintime::core {

// - identity fields and warnings first, then the warnings of `modules` in their order, then the
//   CPU, GPU and NCCL sections' warnings in that order;
// - modules: every section's counters (cpu.section, gpu.section, comm.section and each of
//   `modules`) under its name, sections without counters left out; two sections of one name
//   add up key by key;
// - regions: CPU rows joined with GPU rows by PathId; GPU rows of paths with no CPU row are
//   appended with their name from cpu.path_names;
// - categories (every category present) and memcpy (HtoD, DtoH, DtoD, PtoP always present);
// - steps: the CPU part with the GPU totals, detail (wall_ns from the CPU side when known),
//   partial_final_step;
// - comm rows per (op, comm size): CPU calls/bytes from comm.calls, GPU time from gpu.comm,
//   algbw = bytes / gpu_ns, busbw with busbw_factor(); rows of kernels found by name have
//   comm_size 0 and bytes_known false;
// - communicators: one per CommCallTable index seen by either side, `id` = the table's stable
//   id as 16 lower-case hex digits, ops_enqueued from the CPU side, ops_completed and recent
//   from the GPU side.
// - module_data: each section's data as it is (nvml's gpu_health), written by its module;
// - steps.detail[].gpu_health: the nvml summary's step rows joined with the steps; its section
//   after the NCCL one.
// `modules` are the sections of the modules with nothing to join (NVTX, the null template, the
// next API family), in the order the composition root registered them: a new module adds a
// section there, never a parameter here.
RankFile build_rank_file(const Identity& identity, const CpuSummary& cpu, const GpuSummary& gpu,
                         const CommSummary& comm, const std::vector<Section>& modules,
                         const HealthSummary& health);
// The same with no GPU health.
RankFile build_rank_file(const Identity& identity, const CpuSummary& cpu, const GpuSummary& gpu,
                         const CommSummary& comm, const std::vector<Section>& modules);
// The same with no module sections.
RankFile build_rank_file(const Identity& identity, const CpuSummary& cpu, const GpuSummary& gpu,
                         const CommSummary& comm);

}  // namespace traintime::core
