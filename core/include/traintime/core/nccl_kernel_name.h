// Recognising NCCL's device kernels by name (DESIGN §4 rule 1, §5 fallback): when NCCL is linked
// statically the wrappers never run, and the kernel name is all that says "communication".
#pragma once

#include <string_view>

#include "traintime/core/activity.h"

namespace traintime::core {

// True for NCCL device kernels in every spelling CUPTI shows:
//   ncclDevKernel_AllReduce_Sum_f32_RING_LL                       (NCCL >= 2.19, plain)
//   ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)   (demangled)
//   _Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE (mangled)
//   ncclKernel_AllReduce_RING_LL_Sum_float                         (NCCL < 2.19)
//   ncclSymkDevKernel_ReduceScatter_LL_sum_bf16                    (symmetric-memory kernels)
// with an optional leading "void ". The identifier must start the name (after those prefixes), so
// a user kernel that merely mentions "nccl" is not taken for communication.
bool is_nccl_kernel(std::string_view name);

// The collective a NCCL kernel runs, from its name: AllReduce, AllGather, Broadcast, Reduce,
// ReduceScatter. SendRecv and Generic kernels give kUnknown (AlltoAll, Gather, Scatter, Send
// and Recv all run as SendRecv), as does a name that is not a NCCL kernel.
CommOp comm_op_from_kernel_name(std::string_view name);

}  // namespace traintime::core
