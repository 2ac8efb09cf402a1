// Stands in for libtorch_cuda.so of a PyTorch source build: NCCL linked into it statically
// (here the fake NCCL's code, compiled into this library) and its entry points exported, the
// library loaded RTLD_LOCAL by Python. Its own calls go through the PLT to the first definition
// in the global scope: traintime's wrappers, which must hand them back to this library's NCCL.
#include <nccl.h>

extern "C" __attribute__((visibility("default"))) int static_nccl_host_run(void) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 10;
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, 4, id, 2) != ncclSuccess) return 11;
  static float buffer[1024];
  for (int i = 0; i < 3; ++i) {
    if (ncclAllReduce(buffer, buffer, 1024, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess) {
      return 12;
    }
  }
  if (ncclGroupStart() != ncclSuccess) return 13;
  if (ncclAllGather(buffer, buffer, 256, ncclFloat32, comm, nullptr) != ncclSuccess) return 14;
  if (ncclGroupEnd() != ncclSuccess) return 15;
  if (ncclCommDestroy(comm) != ncclSuccess) return 16;
  return 0;
}
