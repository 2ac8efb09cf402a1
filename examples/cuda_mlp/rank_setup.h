// Who am I in the job, which GPU is mine, and how the ranks agree on one NCCL unique id.
//
// Two builds of rank_setup.cpp exist. With TT_EXAMPLE_WITH_MPI (the *_mpi programs) ranks come
// from MPI and the id travels by MPI_Bcast. Without it (the plain programs, which need no MPI
// library at run time) ranks come from the launcher's environment — torchrun's RANK, WORLD_SIZE,
// LOCAL_RANK, then Open MPI's OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK}, then Slurm's — and the id
// travels through a file in a directory every rank can read.
#pragma once

#include <string>

#include <nccl.h>

namespace example {

struct RankInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string launcher;  // "mpi", "torchrun", "mpirun-env", "slurm-env" or "single"
};

// Reads the rank; initialises MPI in the MPI build. Call first thing in main().
RankInfo init_ranks(int* argc, char*** argv);

// Picks the GPU local_rank (modulo the visible count) and returns its name.
std::string select_device(const RankInfo& ranks);

// Creates the world communicator: rank 0 makes the NCCL unique id and every rank gets it (MPI
// build: MPI_Bcast; otherwise through `id_file`, "" picking $TT_NCCL_ID_FILE, else
// /tmp/traintime-example-nccl-id.<job key>). The file is removed once rank 0's communicator
// exists: init is collective, so every rank has read it, and a later job cannot pick up a
// stale id.
ncclComm_t create_communicator(const RankInfo& ranks, const std::string& id_file);

// Finalises MPI in the MPI build.
void finish_ranks();

}  // namespace example
