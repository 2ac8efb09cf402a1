// Registry of the NCCL communicators this process uses (DESIGN §5, issue 5 item 2), on top of
// core::CommCallTable, which owns the handle -> index map and the per-communicator counters.
//
// Communicators are registered lazily, on the first interposed call that names them, by asking
// the real ncclCommCount/ncclCommUserRank, so every way of creating one is covered (including
// entry points traintime does not wrap). The creation wrappers only add what a lazy lookup
// cannot know: a stable id that is the same on every rank of the communicator.
//
// Stable id (16 hex digits in the rank file's `communicators[].id`), by how the communicator
// was created:
//   ncclCommInitRank / InitRankConfig / InitRankScalable   hash of the ncclUniqueId(s)
//   ncclCommSplit / ncclCommShrink                         hash of (parent id, n-th split or
//                                                          shrink of that parent, color)
//   ncclCommInitAll                                        hash of (n-th InitAll of the
//                                                          process, ndev)
//   anything else (first seen in a call)                   hash of (order of first sight, size):
//                                                          stable per process only
// The id names the communicator, so every member rank reports the same id; within one rank
// file (id, rank) is unique, even for the communicators of one ncclCommInitAll. Two
// communicators of the same size always get different ids and different indices.
//
// The stable ids themselves live in core::CommCallTable (call_table().stable_id(index)); the
// entry here keeps what the wrappers need on their hot path.
//
// Threading: comm_id_for() and entry() are lock-free once a communicator is registered.
// Registration, creation notes and retirement take one mutex, off the hot path. A destroyed
// communicator's handle is retired, so a new communicator that malloc places at the same address
// gets a new entry; the old one keeps its counters.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "traintime/core/comm_stats.h"
#include "traintime/nccl/nccl_interposer.h"

namespace traintime::nccl {

inline constexpr uint32_t kMaxCommunicators = core::CommCallTable::kMaxCommunicators;

enum class CommOrigin : uint8_t { kInitRank, kInitAll, kSplit, kShrink, kFirstSeen };

struct CommEntry {
  uint32_t size = 0;
  uint32_t rank = 0;
  CommOrigin origin = CommOrigin::kFirstSeen;
  core::CommCallTable::Counters* counters = nullptr;  // its counters in call_table()
};

// Whether wrappers record (configure() said enabled). One relaxed load.
extern std::atomic<bool> g_recording;
inline bool recording() noexcept { return g_recording.load(std::memory_order_relaxed); }
// The table configure() gave. Only valid while recording() (or after it was once true).
core::CommCallTable& call_table() noexcept;
// A call was counted: runs the on_first_call hook configure() gave on the first one since
// configure() (a fork child's reconfiguration starts over). errno is preserved. Inline: every
// later call costs one relaxed load.
extern std::atomic<bool> g_first_call_pending;  // set by configure(), cleared by the first call
void note_first_counted_call() noexcept;
inline void note_counted_call() noexcept {
  if (g_first_call_pending.load(std::memory_order_relaxed)) note_first_counted_call();
}

// comm_id (table index + 1) of `comm`, registering it on first sight; 0 when it cannot be
// registered (null handle, the real size/rank query fails, e.g. a nonblocking communicator that
// is not ready yet, or the table is full). The size and rank are asked of the NCCL that
// `caller` (the wrapper's return address) belongs to, the one that made `comm`. errno is
// preserved.
uint32_t comm_id_for(const void* comm, const void* caller) noexcept;

// The entry of a comm_id returned above, else nullptr. Entries never change once published.
const CommEntry* entry(uint32_t comm_id) noexcept;

// Changes whenever a handle may stop naming the communicator it named (a retirement, a fork
// child's reconfiguration), never otherwise: an answer of comm_id_for() and entry() remembered
// together with the epoch read before asking stays right while the epoch is unchanged, which
// lets a wrapper keep the communicator it last used per thread instead of hashing its handle.
// One acquire load. Never 0.
extern std::atomic<uint32_t> g_comm_epoch;
inline uint32_t comm_epoch() noexcept { return g_comm_epoch.load(std::memory_order_acquire); }

// Creation wrappers, after the real call succeeded (or returned ncclInProgress).
// Size and rank known from the arguments: registers now.
void note_created(const void* comm, uint32_t size, uint32_t rank, uint64_t stable_id,
                  CommOrigin origin) noexcept;
// Size and rank not known yet (split, shrink): remembered until the first use registers it.
void note_child(const void* comm, uint64_t stable_id, CommOrigin origin) noexcept;
// Stable id for the child that this split/shrink call of `parent` creates. Called once per
// call on every rank of the parent (NCCL requires all of them to call, NCCL_SPLIT_NOCOLOR
// included), so the n-th split of a parent has the same id on every rank.
uint64_t next_child_id(const void* parent, CommOrigin origin, int color,
                       const void* caller) noexcept;
// Stable id of the n-th ncclCommInitAll of this process.
uint64_t next_init_all_id(int ndev) noexcept;
// Before ncclCommDestroy / ncclCommAbort: the handle stops naming its entry.
void retire(const void* comm) noexcept;

// 64-bit FNV-1a, the hash behind every stable id.
uint64_t hash_bytes(const void* data, size_t n, uint64_t seed = 0xcbf29ce484222325ULL) noexcept;

// A call whose real function no loaded object provides (it returned ncclSystemError): counted
// for the rank file's warnings and warned about once per entry point. errno is preserved.
void note_missing_real(const char* function) noexcept;

// Calls made on communicators that could not be registered (counted nowhere else).
void count_unregistered_call() noexcept;
uint64_t unregistered_calls() noexcept;

// nccl_wrappers.cpp: the wrappers' self_cost row into the section; a fork child (configure())
// forgets the parent's counts.
void cost_into(core::Section& section);
void forget_cost_after_fork() noexcept;

}  // namespace traintime::nccl
