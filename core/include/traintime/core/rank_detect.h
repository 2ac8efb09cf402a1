// Which rank this process is, and which job it belongs to, from the launcher's environment
// (DESIGN §6). Pure functions of an EnvLookup so every launcher can be tested without launching.
#pragma once

#include <cstdint>
#include <string>

#include "traintime/core/config.h"

namespace traintime::core {

struct RankInfo {
  int64_t rank = 0;
  int64_t world_size = 1;
  std::string source;          // the rank variable used ("RANK", "SLURM_PROCID", ...); "" if none
  bool from_launcher = false;  // false: no launcher variable was usable (rank 0 of 1)
};

// The innermost launcher wins, so torchrun under srun or mpirun reports torchrun's rank:
//   RANK / WORLD_SIZE                                   torchrun, torch.distributed.launch
//   OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE         Open MPI mpirun
//   PMIX_RANK / (OMPI_COMM_WORLD_SIZE, else SLURM_NTASKS)  PMIx launchers (srun --mpi=pmix, prterun);
//                                                       PMIx exports no size variable
//   PMI_RANK / PMI_SIZE                                 MPICH Hydra, Intel MPI, srun --mpi=pmi2
//   SLURM_PROCID / SLURM_NTASKS                         srun
// A source whose rank or size is missing, not a decimal integer, negative, a size of 0 or a
// rank >= size is skipped and the next one is tried. None usable: rank 0 of a world of 1 (the
// preload may later learn the rank from a world-sized NCCL communicator).
RankInfo detect_rank(const EnvLookup& env);

// The job id shared by every rank of one launch: SLURM_JOB_ID, TORCHELASTIC_RUN_ID (unless it
// is torchrun's placeholder "none"), the Open MPI job id (OMPI_MCA_ess_base_jobid, exported by
// Open MPI 4.1; OMPI_MCA_orte_ess_jobid in older releases), then TRAINTIME_JOB_ID (which the
// preload sets in the first process of a launch so its children share it). "" when none is set.
std::string detect_job_id(const EnvLookup& env);

// A new job id for the first process of a launch: UTC time, pid and random bits, e.g.
// "20261122T063212Z-4242-9f3ac1d7". Only [0-9A-Za-z-] so it is safe in file names.
std::string generate_job_id();

}  // namespace traintime::core
