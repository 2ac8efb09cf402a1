// A tiny stand-in for libnccl.so.2 (real SONAME and nccl.h prototypes) for the white-box wrapper
// test: no GPU, no simgpu. It moves no data. Each entry point records that it ran, may call a
// test hook (where the real NCCL would launch a kernel), and returns the result the test chose,
// setting errno the way a failing system call inside NCCL would. It has NCCL 2.32's *Config
// collectives and one-sided calls, but no ncclCommShrink (the test of a missing entry point).
#include <nccl.h>

#include "traintime/nccl/nccl_2_32.h"

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>

struct ncclComm {
  int nranks;
  int rank;
  bool live;
};

extern "C" {

// Test controls (not part of NCCL).
typedef void (*fake_nccl_hook)(const char* function);
__attribute__((visibility("default"))) void fake_nccl_set_hook(fake_nccl_hook hook);
__attribute__((visibility("default"))) void fake_nccl_fail(const char* function, ncclResult_t result,
                                                           int err);
__attribute__((visibility("default"))) void fake_nccl_clear_failure(void);
__attribute__((visibility("default"))) int fake_nccl_calls(const char* function);

}  // extern "C"

namespace {

// A pool, so a destroyed communicator's address is handed out again, as malloc does.
ncclComm g_pool[256];
fake_nccl_hook g_hook = nullptr;
std::string g_fail_function;
ncclResult_t g_fail_result = ncclSuccess;
int g_fail_errno = 0;
struct Count {
  const char* name;
  int calls;
};
Count g_counts[64];
int g_distinct = 0;
std::mutex g_counts_mutex;            // the threaded test calls from several threads
thread_local int g_group_depth = 0;  // NCCL's group state is per thread too

void count(const char* function) {
  std::lock_guard<std::mutex> lock(g_counts_mutex);
  for (int i = 0; i < g_distinct; ++i) {
    if (std::strcmp(g_counts[i].name, function) == 0) {
      ++g_counts[i].calls;
      return;
    }
  }
  if (g_distinct < 64) g_counts[g_distinct++] = Count{function, 1};
}

// Runs the body of one entry point: the hook (the "launch"), then the chosen result.
ncclResult_t run(const char* function, bool launches) {
  count(function);
  if (launches && g_hook != nullptr) g_hook(function);
  if (g_fail_function == function) {
    errno = g_fail_errno;
    return g_fail_result;
  }
  return ncclSuccess;
}

ncclComm* new_comm(int nranks, int rank) {
  std::lock_guard<std::mutex> lock(g_counts_mutex);
  for (ncclComm& c : g_pool) {
    if (!c.live) {
      c = ncclComm{nranks, rank, true};
      return &c;
    }
  }
  return nullptr;
}

bool in_group() { return g_group_depth > 0; }

}  // namespace

extern "C" {

void fake_nccl_set_hook(fake_nccl_hook hook) { g_hook = hook; }
void fake_nccl_fail(const char* function, ncclResult_t result, int err) {
  g_fail_function = function;
  g_fail_result = result;
  g_fail_errno = err;
}
void fake_nccl_clear_failure(void) { g_fail_function.clear(); }
int fake_nccl_calls(const char* function) {
  std::lock_guard<std::mutex> lock(g_counts_mutex);
  for (int i = 0; i < g_distinct; ++i) {
    if (std::strcmp(g_counts[i].name, function) == 0) return g_counts[i].calls;
  }
  return 0;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  std::memset(uniqueId, 0x5a, sizeof(*uniqueId));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId, int rank) {
  const ncclResult_t r = run("ncclCommInitRank", false);
  if (r != ncclSuccess) return r;
  *comm = new_comm(nranks, rank);
  return *comm != nullptr ? ncclSuccess : ncclSystemError;
}

// The strong alias a PROFAPI build exports: lets the test create a communicator that the
// wrappers never see being created (it must then be registered lazily).
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId, int rank) {
  *comm = new_comm(nranks, rank);
  return *comm != nullptr ? ncclSuccess : ncclSystemError;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int, ncclComm_t* newcomm, ncclConfig_t*) {
  const ncclResult_t r = run("ncclCommSplit", false);
  if (r != ncclSuccess) return r;
  // Halves, keeping the parent's rank modulo the half: enough for the registry's purposes.
  const int half = (comm->nranks + 1) / 2;
  *newcomm = color == NCCL_SPLIT_NOCOLOR ? nullptr : new_comm(half, comm->rank % half);
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  const ncclResult_t r = run("ncclCommDestroy", false);
  if (comm != nullptr) comm->live = false;
  return r;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  const ncclResult_t r = run("ncclCommAbort", false);
  if (comm != nullptr) comm->live = false;
  return r;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (comm == nullptr || !comm->live) return ncclInvalidArgument;
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (comm == nullptr || !comm->live) return ncclInvalidArgument;
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                           cudaStream_t) {
  return run("ncclAllReduce", !in_group());
}

ncclResult_t ncclBroadcast(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                           cudaStream_t) {
  return run("ncclBroadcast", !in_group());
}

// As NCCL does: the deprecated in-place form calls the public ncclBroadcast, through the
// dynamic symbol (so an interposer sees a nested call).
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream) {
  ::count("ncclBcast");
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t,
                        cudaStream_t) {
  return run("ncclReduce", !in_group());
}

ncclResult_t ncclAllGather(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) {
  return run("ncclAllGather", !in_group());
}

ncclResult_t ncclReduceScatter(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                               ncclComm_t, cudaStream_t) {
  return run("ncclReduceScatter", !in_group());
}

ncclResult_t ncclAlltoAll(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) {
  return run("ncclAlltoAll", !in_group());
}

ncclResult_t ncclGather(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                        cudaStream_t) {
  return run("ncclGather", !in_group());
}

ncclResult_t ncclScatter(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                         cudaStream_t) {
  return run("ncclScatter", !in_group());
}

ncclResult_t ncclSend(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
  return run("ncclSend", !in_group());
}

ncclResult_t ncclRecv(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
  return run("ncclRecv", !in_group());
}

// NCCL 2.32: pncclXConfig enqueues by itself (ncclEnqueueCheck), not through ncclX.
ncclResult_t ncclAllReduceConfig(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                 ncclComm_t, cudaStream_t, const ncclCollConfig_t*) {
  return run("ncclAllReduceConfig", !in_group());
}

ncclResult_t ncclBroadcastConfig(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                                 cudaStream_t, const ncclCollConfig_t*) {
  return run("ncclBroadcastConfig", !in_group());
}

ncclResult_t ncclReduceConfig(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int,
                              ncclComm_t, cudaStream_t, const ncclCollConfig_t*) {
  return run("ncclReduceConfig", !in_group());
}

ncclResult_t ncclAllGatherConfig(const void*, void*, size_t, ncclDataType_t, ncclComm_t,
                                 cudaStream_t, const ncclCollConfig_t*) {
  return run("ncclAllGatherConfig", !in_group());
}

ncclResult_t ncclReduceScatterConfig(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                     ncclComm_t, cudaStream_t, const ncclCollConfig_t*) {
  return run("ncclReduceScatterConfig", !in_group());
}

ncclResult_t ncclAlltoAllConfig(const void*, void*, size_t, ncclDataType_t, ncclComm_t,
                                cudaStream_t, const ncclCollConfig_t*) {
  return run("ncclAlltoAllConfig", !in_group());
}

ncclResult_t ncclGatherConfig(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                              cudaStream_t, const ncclCollConfig_t*) {
  return run("ncclGatherConfig", !in_group());
}

ncclResult_t ncclScatterConfig(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                               cudaStream_t, const ncclCollConfig_t*) {
  return run("ncclScatterConfig", !in_group());
}

// One-sided calls: NCCL's proxy thread and the copy engines do the work, no kernel is launched.
ncclResult_t ncclPutSignal(const void*, size_t, ncclDataType_t, int, ncclWindow_t, size_t, int,
                           int, unsigned int, ncclComm_t, cudaStream_t) {
  return run("ncclPutSignal", false);
}

ncclResult_t ncclSignal(int, int, int, unsigned int, ncclComm_t, cudaStream_t) {
  return run("ncclSignal", false);
}

ncclResult_t ncclWaitSignal(int, ncclWaitSignalDesc_t*, ncclComm_t, cudaStream_t) {
  return run("ncclWaitSignal", false);
}

ncclResult_t ncclGroupStart() {
  const ncclResult_t r = run("ncclGroupStart", false);
  if (r == ncclSuccess) ++g_group_depth;
  return r;
}

ncclResult_t ncclGroupEnd() {
  if (g_group_depth == 0) return ncclInvalidUsage;
  // The group's kernels launch at the outermost end.
  const ncclResult_t r = run("ncclGroupEnd", g_group_depth == 1);
  --g_group_depth;
  return r;
}

}  // extern "C"
