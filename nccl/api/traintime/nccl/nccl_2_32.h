// <nccl.h> and the entry points NCCL 2.32 added that launch work, for an older nccl.h (the
// CUDA 13 toolkit ships NCCL 2.28's). Prototypes as in NCCL 2.32.3's own nccl.h (PyPI
// nvidia-nccl-cu12 2.32.3, include/nccl.h); with a 2.32 or newer nccl.h this adds nothing.
//
// Used by the wrappers (nccl/src/nccl_wrappers.cpp) and by the test doubles of NCCL (simgpu's
// libnccl, the white-box fake), so all three agree on one declaration.
#pragma once

#include <nccl.h>

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 32, 0)
extern "C" {

// Per-call configuration of the *Config collectives: only passed through by pointer here
// (NULL means the plain call), so its layout (ncclCollConfig_v23200) is not repeated.
typedef struct ncclCollConfig_v23200 ncclCollConfig_t;

// ncclWaitSignal's descriptor, as in 2.32's nccl.h.
typedef struct {
  int opCnt;   // number of signal operations to wait for
  int peer;    // peer the signals come from
  int sigIdx;  // signal index
  int ctx;     // context
} ncclWaitSignalDesc_t;

ncclResult_t ncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                                 ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                 cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count,
                                 ncclDataType_t datatype, int root, ncclComm_t comm,
                                 cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                              ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                              cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount,
                                 ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                 const ncclCollConfig_t* config);
ncclResult_t ncclReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount,
                                     ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                     cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclAlltoAllConfig(const void* sendbuff, void* recvbuff, size_t count,
                                ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                const ncclCollConfig_t* config);
ncclResult_t ncclGatherConfig(const void* sendbuff, void* recvbuff, size_t count,
                              ncclDataType_t datatype, int root, ncclComm_t comm,
                              cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclScatterConfig(const void* sendbuff, void* recvbuff, size_t count,
                               ncclDataType_t datatype, int root, ncclComm_t comm,
                               cudaStream_t stream, const ncclCollConfig_t* config);

// One-sided RMA on a registered window (ncclCommWindowRegister).
ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                           ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                           unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
                            cudaStream_t stream);

}  // extern "C"
#endif
