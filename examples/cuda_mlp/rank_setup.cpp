#include "rank_setup.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

#ifdef TT_EXAMPLE_WITH_MPI
#include <mpi.h>
#endif

namespace example {
namespace {

#ifdef TT_EXAMPLE_WITH_MPI
#define MPI_CHECK(expr)                                                                  \
  do {                                                                                   \
    int tt_mpi_rc_ = (expr);                                                             \
    if (tt_mpi_rc_ != MPI_SUCCESS) {                                                     \
      char tt_msg_[MPI_MAX_ERROR_STRING];                                                \
      int tt_len_ = 0;                                                                   \
      MPI_Error_string(tt_mpi_rc_, tt_msg_, &tt_len_);                                   \
      ::example::fail("MPI", #expr, tt_msg_, __FILE__, __LINE__);                        \
    }                                                                                    \
  } while (0)
#else
bool env_int(const char* name, int* out) {
  const char* v = std::getenv(name);
  if (!v || !*v) return false;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > 1 << 24) {
    std::fprintf(stderr, "error: %s='%s' is not a rank number\n", name, v);
    std::exit(1);
  }
  *out = static_cast<int>(x);
  return true;
}

bool from_env(const char* rank, const char* size, const char* local, RankInfo* info) {
  if (!env_int(rank, &info->rank) || !env_int(size, &info->world_size)) return false;
  if (!env_int(local, &info->local_rank)) info->local_rank = info->rank;
  return true;
}

// The file name must be the same on every rank of one job and differ between jobs.
std::string default_id_file() {
  if (const char* f = std::getenv("TT_NCCL_ID_FILE")) return f;
  const char* keys[] = {"TORCHELASTIC_RUN_ID", "OMPI_MCA_ess_base_jobid", "SLURM_JOB_ID",
                        "MASTER_PORT"};
  std::string key = "default";
  for (const char* k : keys) {
    if (const char* v = std::getenv(k)) {
      key = v;
      break;
    }
  }
  return "/tmp/traintime-example-nccl-id." + key;
}

std::string g_id_file;
#endif

}  // namespace

RankInfo init_ranks(int* argc, char*** argv) {
  RankInfo info;
#ifdef TT_EXAMPLE_WITH_MPI
  MPI_CHECK(MPI_Init(argc, argv));
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &info.rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &info.world_size));
  MPI_Comm node;
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, info.rank, MPI_INFO_NULL,
                                &node));
  MPI_CHECK(MPI_Comm_rank(node, &info.local_rank));
  MPI_CHECK(MPI_Comm_free(&node));
  info.launcher = "mpi";
#else
  (void)argc;
  (void)argv;
  if (from_env("RANK", "WORLD_SIZE", "LOCAL_RANK", &info)) {
    info.launcher = "torchrun";
  } else if (from_env("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                      "OMPI_COMM_WORLD_LOCAL_RANK", &info)) {
    info.launcher = "mpirun-env";
  } else if (from_env("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", &info)) {
    info.launcher = "slurm-env";
  } else {
    info = RankInfo{};
    info.launcher = "single";
  }
  if (info.world_size < 1 || info.rank >= info.world_size) {
    std::fprintf(stderr, "error: rank %d is outside a world of %d (launcher %s)\n", info.rank,
                 info.world_size, info.launcher.c_str());
    std::exit(1);
  }
#endif
  error_rank() = info.rank;
  return info;
}

std::string select_device(const RankInfo& ranks) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::fprintf(stderr, "[rank %d] error: no CUDA device is usable (%s)\n", ranks.rank,
                 err == cudaSuccess ? "device count is 0" : cudaGetErrorString(err));
    std::exit(1);
  }
  int dev = ranks.local_rank % count;
  CUDA_CHECK(cudaSetDevice(dev));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  return prop.name;
}

namespace {

ncclUniqueId share_nccl_id(const RankInfo& ranks, const std::string& id_file) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
#ifdef TT_EXAMPLE_WITH_MPI
  (void)id_file;
  if (ranks.rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
#else
  if (ranks.world_size == 1) {
    NCCL_CHECK(ncclGetUniqueId(&id));
    return id;
  }
  g_id_file = id_file.empty() ? default_id_file() : id_file;
  const std::string& path = g_id_file;
  if (ranks.rank == 0) {
    NCCL_CHECK(ncclGetUniqueId(&id));
    // Write then rename, so a reader never sees half an id.
    std::string tmp = path + ".tmp." + std::to_string(getpid());
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f || std::fwrite(&id, sizeof id, 1, f) != 1 || std::fclose(f) != 0 ||
        std::rename(tmp.c_str(), path.c_str()) != 0) {
      std::fprintf(stderr, "[rank 0] error: cannot write the NCCL id to %s: %s\n", path.c_str(),
                   std::strerror(errno));
      std::exit(1);
    }
    return id;
  }
  // A file older than this process (minus launch skew) belongs to an earlier job that died
  // before rank 0 removed it.
  const auto started = std::chrono::system_clock::now() - std::chrono::seconds(30);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (;;) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0 &&
        std::chrono::system_clock::from_time_t(st.st_mtime) >= started) {
      FILE* f = std::fopen(path.c_str(), "rb");
      bool ok = f && std::fread(&id, sizeof id, 1, f) == 1;
      if (f) std::fclose(f);
      if (ok) return id;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr,
                   "[rank %d] error: no NCCL id appeared in %s within 120 s; rank 0 writes it "
                   "there (set TT_NCCL_ID_FILE or --nccl-id-file to a path every rank shares)\n",
                   ranks.rank, path.c_str());
      std::exit(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
#endif
  return id;
}

}  // namespace

ncclComm_t create_communicator(const RankInfo& ranks, const std::string& id_file) {
  ncclUniqueId id = share_nccl_id(ranks, id_file);
  ncclComm_t comm = nullptr;
  NCCL_CHECK(ncclCommInitRank(&comm, ranks.world_size, id, ranks.rank));
#ifndef TT_EXAMPLE_WITH_MPI
  if (ranks.rank == 0 && !g_id_file.empty()) std::remove(g_id_file.c_str());
#endif
  return comm;
}

void finish_ranks() {
#ifdef TT_EXAMPLE_WITH_MPI
  MPI_Finalize();
#endif
}

}  // namespace example
