// Calls whose kernels NCCL launches after the call returned (nonblocking communicators): NCCL's
// ncclGroupEnd creates a thread that launches them after returning ncclInProgress, and on that
// thread current_call() is empty. Each such call is queued on the stream its kernel will be
// launched on (the communicator's first stream in a group), in enqueue order, and the launch
// callback of an NCCL kernel launched with no call on its thread takes the oldest one of its
// stream (docs/attribution.md, "NCCL kernels and their calls").
//
// Lock-free exit when nothing is queued (one relaxed load); otherwise a spin lock per stream,
// held for a copy. Fixed memory: kStreams streams, kDepth calls each; a full queue drops its
// oldest call (counted), whose kernel then takes the next one's — the cost of bounded memory.
#pragma once

#include <atomic>
#include <cstdint>

#include "traintime/nccl/nccl_interposer.h"

namespace traintime::nccl {

inline constexpr int kPendingStreams = 64;
inline constexpr uint32_t kPendingDepth = 32;

// Queues `call` on `stream`. errno untouched.
void queue_pending(const void* stream, const Call& call) noexcept;

// take_pending_call() (nccl_interposer.h) is the reading side.

// Removes `call` from `stream`'s queue if it is still there (queued before a call that then
// launched on the calling thread, or failed).
void retract_pending(const void* stream, const Call& call) noexcept;

// Nonblocking communicators (created with config.blocking = 0, or seen returning
// ncclInProgress): their calls are queued before the real call, since NCCL's thread may launch
// the kernel before the call returns. One relaxed load when there are none.
void note_nonblocking(const void* comm) noexcept;
extern std::atomic<int> g_nonblocking_count;  // live nonblocking communicators noted
bool is_nonblocking_noted(const void* comm) noexcept;
inline bool is_nonblocking(const void* comm) noexcept {
  if (g_nonblocking_count.load(std::memory_order_acquire) == 0 || comm == nullptr) return false;
  return is_nonblocking_noted(comm);
}
void forget_nonblocking(const void* comm) noexcept;

// Calls dropped because their stream's queue was full, or because more than kPendingStreams
// streams had calls queued.
uint64_t pending_dropped() noexcept;

// Empties every queue (fork child).
void reset_pending() noexcept;

}  // namespace traintime::nccl
