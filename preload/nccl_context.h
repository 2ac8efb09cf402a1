// The NCCL call the current thread is inside, as the interposed wrappers see it (DESIGN §4 rule
// 1, §5). The CUPTI launch callback runs on the launching thread, synchronously inside whatever
// API launched the kernel; when that is an interposed NCCL call, current_nccl_call() describes
// it and the callback copies it into the launch's core::LaunchContext. Nothing here knows CUDA.
//
// Contract with the launch callback (cupti/):
//  - current_nccl_call() is a thread-local read: no lock, no allocation, errno untouched,
//    callable from any thread at any time (also before NCCL was ever called).
//  - It returns nullptr when the thread is not inside an interposed NCCL call, and always when
//    interposition is off (TRAINTIME_NCCL=0): the GPU side then finds comm kernels by name.
//  - The pointee is valid until the callback returns; copy what you need, keep no pointer.
//  - Copy field for field: op -> LaunchContext::comm_op, comm_id -> comm_id, seq -> comm_seq,
//    bytes -> comm_bytes, group_id -> comm_group, captured -> comm_captured.
#pragma once

#include <cstdint>

#include "traintime/core/activity.h"

namespace traintime::rt {

struct NcclCall {
  // A single op: the op itself. Inside the outermost ncclGroupEnd (where NCCL launches the
  // group's kernels): the group's first member (op, comm_id, seq) and bytes = the sum over all
  // members; the members themselves are in CommCallTable::find_group(group_id).
  core::CommOp op = core::CommOp::kNone;
  uint32_t comm_id = 0;  // communicator registry index + 1 (0: communicator unknown)
  uint64_t seq = 0;      // sequence number on the communicator, 1-based (0: captured)
  uint64_t bytes = 0;    // nccl-tests convention (DESIGN §5)
  // Non-zero only inside the outermost ncclGroupEnd: the process-unique id under which the
  // group's members were recorded with record_group() just before the real ncclGroupEnd. (An
  // op queued inside a group launches nothing itself and carries 0 here.)
  uint64_t group_id = 0;
  // The stream was being captured into a CUDA graph: the CPU side did not count the call
  // (seq == 0); each replayed kernel counts as one call on the GPU side.
  bool captured = false;
};

// The interposed NCCL call (or outermost ncclGroupEnd) this thread is inside, else nullptr.
const NcclCall* current_nccl_call() noexcept;

}  // namespace traintime::rt
