// The NCCL call the current thread is inside, as the interposed wrappers see it (DESIGN §4 rule
// 1, §5). The CUPTI launch callback runs on the launching thread, synchronously inside whatever
// API launched the kernel; when that is an interposed NCCL call, current_nccl_call() describes
// it and the callback copies it into the launch's core::LaunchContext. Nothing here knows CUDA.
//
// Contract with the launch callback (cupti/):
//  - current_nccl_call() is a thread-local read: no lock, no allocation, errno untouched,
//    callable from any thread at any time (also before NCCL was ever called).
//  - It returns nullptr when the thread is not inside an interposed NCCL call that launches
//    work, and when TRAINTIME_NCCL=0 (the GPU side then finds comm kernels by name).
//  - The pointee is valid until the callback returns; copy what you need, keep no pointer.
//  - Copy op -> LaunchContext::comm_op, comm_id -> comm_id, seq -> comm_seq,
//    bytes -> comm_bytes. group_id/group_members describe a kernel launched at ncclGroupEnd
//    (see below); captured says the call was enqueued into a CUDA graph being captured.
#pragma once

#include <cstdint>

#include "traintime/core/activity.h"

namespace traintime::rt {

// One op enqueued between ncclGroupStart and the outermost ncclGroupEnd.
struct NcclGroupMember {
  core::CommOp op = core::CommOp::kNone;
  uint32_t comm_id = 0;  // communicator registry index + 1 (0: unknown communicator)
  uint64_t seq = 0;      // sequence number of the op on its communicator (1-based; 0: captured)
  uint64_t bytes = 0;    // nccl-tests convention (DESIGN §5)
};

struct NcclCall {
  // For a single op: the op itself. For the ncclGroupEnd that launches a group's kernels:
  // the group's first member (op, comm_id, seq) with bytes = the sum over all members, so a
  // consumer that only reads these four fields still attributes the kernel to comm and to a
  // real communicator.
  core::CommOp op = core::CommOp::kNone;
  uint32_t comm_id = 0;
  uint64_t seq = 0;
  uint64_t bytes = 0;
  // Non-zero while inside the outermost ncclGroupEnd: process-unique id of the group (1, 2, ...).
  // group_members[0..group_count) lists every op of the group in call order; it is valid
  // during the callback only. group_count == 0 for a call outside a group. A group larger
  // than the fixed per-thread capacity lists its first kNcclGroupCapacity members and sets
  // group_truncated (group_count then counts all of them).
  uint64_t group_id = 0;
  uint32_t group_count = 0;
  bool group_truncated = false;
  const NcclGroupMember* group_members = nullptr;
  // True when the op's stream was being captured into a CUDA graph: the CPU side did not count
  // it (seq == 0, nothing enqueued); the GPU side counts one call per replay of the node.
  bool captured = false;
};

inline constexpr uint32_t kNcclGroupCapacity = 256;

// The interposed NCCL call (or outermost ncclGroupEnd) this thread is inside, else nullptr.
const NcclCall* current_nccl_call() noexcept;

}  // namespace traintime::rt
