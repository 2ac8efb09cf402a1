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

// Picks the GPU local_rank (modulo the visible count) and returns its index.
int select_device(const RankInfo& ranks);

// Rank 0 creates the id; every rank returns the same one. `id_file` is used by the file exchange
// only: "" picks $TT_NCCL_ID_FILE, else /tmp/traintime-example-nccl-id.<job key>.
ncclUniqueId share_nccl_id(const RankInfo& ranks, const std::string& id_file);

// Called by rank 0 once its communicator exists: every rank has read the id by then (init is
// collective), so the file can go and a later job cannot pick up a stale id.
void forget_nccl_id(const RankInfo& ranks);

// Finalises MPI in the MPI build.
void finish_ranks();

}  // namespace example
