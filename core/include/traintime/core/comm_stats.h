// The NCCL model of DESIGN §5, pure C++: nccl-tests bandwidth factors, message-size buckets,
// and the CPU-side call table the interposed NCCL wrappers feed on their hot path.
//
// Who writes what:
//  - preload/ NCCL wrappers (any application thread): register_communicator / find_communicator
//    when they meet a communicator, then per outermost call next_seq() and on_call(); at the
//    outermost ncclGroupEnd, record_group() with the group's members before the group's kernels
//    are launched, and put the group id into LaunchContext::comm.group_id (via the launch callback).
//  - GpuAggregator (the activity thread): find_group() while ingesting a group kernel.
//  - The rank-file assembly: snapshot() goes into CommSummary, and build_rank_file() joins its CPU
//    call counts with the GPU time of GpuAggregator::summary() in one place.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "traintime/core/activity.h"
#include "traintime/core/nccl_kernel_name.h"

namespace traintime::core {

// nccl-tests bus-bandwidth factor (busbw = algbw × factor) for a communicator of n ranks:
//   AllReduce                                  2(n−1)/n
//   AllGather, ReduceScatter, AlltoAll         (n−1)/n   (bytes = total size, nccl-tests style)
//   Gather, Scatter                            (n−1)/n   (as nccl-tests' gather/scatter tests)
//   Broadcast, Reduce, Send, Recv              1
//   unknown op, kNone, or n == 0 (size unknown, by-name fallback)    0: no busbw can be claimed
// For n == 1 the formulas give 0 for the (n−1)/n family, as nccl-tests prints, and 1 for the
// rest; with one rank NCCL moves no data between GPUs, so treat busbw as meaningless there.
double busbw_factor(CommOp op, uint32_t n);

// A communicator's stable id (CommCallTable::stable_id) as the rank file names it
// (communicators[].id, proxy_progress[].communicator): 16 lower-case hex digits.
std::string communicator_id(uint64_t stable_id);

// Power-of-two message-size histogram: bucket 0 holds 0-byte calls, bucket b ≥ 1 holds bytes in
// [2^(b−1), 2^b); the last bucket is open-ended.
inline constexpr uint32_t kSizeBuckets = 48;
inline uint32_t size_bucket(uint64_t bytes) {
  if (bytes == 0) return 0;
  const uint32_t b = 64u - static_cast<uint32_t>(__builtin_clzll(bytes));  // in [2^(b-1), 2^b)
  return b < kSizeBuckets - 1 ? b : kSizeBuckets - 1;
}
uint64_t size_bucket_lo(uint32_t bucket);  // smallest size in the bucket

inline constexpr std::size_t kCommOpCount = static_cast<std::size_t>(CommOp::kUnknown) + 1;

// One op of a NCCL group (between ncclGroupStart and the outermost ncclGroupEnd).
struct CommGroupMember {
  CommOp op = CommOp::kNone;
  uint32_t comm_id = 0;  // communicator index + 1 (0: unknown)
  uint64_t seq = 0;      // sequence number on that communicator (0: captured into a graph)
  uint64_t bytes = 0;    // nccl-tests convention
};

// Group kernels: NCCL launches the kernels of a group at ncclGroupEnd, one kernel per
// communicator/stream, each running all the grouped ops of that communicator. The launch
// context only names the first member, so the wrappers record the whole group here and the
// aggregator splits each group kernel's duration across the members in proportion to their
// bytes (equally when every member has 0 bytes). A kernel cannot be matched to the members of
// its own communicator from the record alone, so a group that spans several communicators has
// every kernel split over all members: per-communicator time inside such groups is approximate,
// the total is exact.
struct CommGroupRecord {
  static constexpr uint32_t kMaxMembers = 16;
  uint64_t group_id = 0;
  uint32_t count = 0;  // members stored (≤ kMaxMembers)
  // Members beyond kMaxMembers are merged into a stored member with the same (comm_id, op) when
  // there is one (bytes added, highest seq kept), else their bytes are added to member 0.
  bool merged = false;
  std::array<CommGroupMember, kMaxMembers> members{};
};

// Per-(communicator, op) call counters. Hot path lock-free: relaxed atomics only, no allocation
// after register_communicator(). Capacity is fixed; what does not fit is counted, never blocks.
class CommCallTable {
 public:
  static constexpr uint32_t kMaxCommunicators = 1024;
  static constexpr uint32_t kNoComm = 0xffffffffu;
  static constexpr uint32_t kGroupSlots = 1024;  // ring of recent groups, indexed by group id

  CommCallTable();
  ~CommCallTable();
  CommCallTable(const CommCallTable&) = delete;
  CommCallTable& operator=(const CommCallTable&) = delete;

  // Slow path (mutex, allocates once per communicator). handle_key identifies the communicator
  // (e.g. the ncclComm_t address; 0 is invalid); stable_id is the name that matches across
  // ranks (nccl/ derives it; written as 16 hex digits in communicators[].id). Registering a live
  // key again returns its index (and fills size/rank/stable_id if they were 0). Returns kNoComm
  // when the table is full or key == 0. The index is stable for the process;
  // LaunchContext::comm_id = index + 1. The stable ids live here and nowhere else.
  uint32_t register_communicator(uint64_t handle_key, uint32_t size, uint32_t rank,
                                 uint64_t stable_id = 0);
  // Lock-free lookup of a registered, not retired key; kNoComm when unknown.
  uint32_t find_communicator(uint64_t handle_key) const noexcept;
  // The stable id registered for comm_index (0 for a bad index or none given).
  uint64_t stable_id(uint32_t comm_index) const noexcept;
  // ncclCommDestroy/Abort: the handle may be reused by a new communicator, which then gets a new
  // index. The retired communicator's counters stay in the snapshot.
  void retire_communicator(uint32_t comm_index);

  static constexpr uint32_t kEnqueuedRing = 16;
  // One communicator's live counters. Made at its registration and kept for the table's life,
  // so a caller may keep the pointer: the NCCL registry keeps it with the communicator's entry,
  // and the wrapper's two uses below are inline, with no index lookup.
  struct Counters {
    // An op's calls and bytes are the sums of its buckets, computed by snapshot(). They must stay
    // exact when threads share a communicator, and locked read-modify-writes were most of the
    // wrapper's own work: so the first thread that calls on the communicator owns `ops` and bumps
    // them with plain loads and stores (it is their only writer), and any other thread adds to
    // `shared_ops` with atomic adds. snapshot() sums both.
    struct Op {
      std::array<std::atomic<uint64_t>, kSizeBuckets> bucket_calls{};
      std::array<std::atomic<uint64_t>, kSizeBuckets> bucket_bytes{};
    };
    uint64_t handle_key = 0;
    std::atomic<uint32_t> size{0};
    std::atomic<uint32_t> rank{0};
    std::atomic<uint64_t> stable_id{0};
    std::atomic<bool> retired{false};
    std::atomic<uint64_t> seq{0};
    std::atomic<uint64_t> owner{0};  // the owning thread's thread pointer; 0 until the first call
    std::array<Op, kCommOpCount> ops;
    std::array<Op, kCommOpCount> shared_ops;
    // Ring of the last calls enqueued, slot = seq % kEnqueuedRing: op and bytes are stored before
    // the seq that makes them valid (release), and a reader re-checks the seq after copying them.
    struct Enqueued {
      std::atomic<uint64_t> seq{0};
      std::atomic<uint8_t> op{0};
      std::atomic<uint64_t> bytes{0};
    };
    std::array<Enqueued, kEnqueuedRing> enqueued;
    // Which paths saw this communicator's calls: kSeenByInterposer, kSeenByPlugin (NCCL's
    // profiler plugin events), both. Written as the rank file's comm[].seen_by.
    std::atomic<uint8_t> seen_by{0};
    // Hot path: one relaxed load once the bits are set.
    void note_seen(uint8_t bits) noexcept {
      if ((seen_by.load(std::memory_order_relaxed) & bits) != bits) seen_by.fetch_or(bits, std::memory_order_relaxed);
    }

    // Hot path: the call's sequence number on this communicator, 1, 2, ... Unique while, as
    // NCCL requires, no two threads use one communicator at the same time: so the increment needs
    // no locked instruction (which would be a third of the wrapper's cost). Atomic only for the
    // snapshot's concurrent read.
    uint64_t next_seq() noexcept {
      const uint64_t s = seq.load(std::memory_order_relaxed) + 1;
      seq.store(s, std::memory_order_relaxed);
      return s;
    }
    // Hot path: one outermost NCCL call (op < kCommOpCount). Lock-free, allocation-free. A
    // non-zero `call_seq` (its next_seq()) also enters it in the ring of the last kEnqueuedRing
    // calls enqueued, from which the rank file says what is still in flight.
    void count(CommOp op, uint64_t bytes, uint64_t call_seq) noexcept {
      const auto oi = static_cast<std::size_t>(op);
      const uint32_t b = size_bucket(bytes);
      // The thread pointer names the calling thread (a thread that exited leaves its pointer to
      // no one, so a new thread that gets it is the only writer again).
      const auto me = reinterpret_cast<uint64_t>(__builtin_thread_pointer());
      uint64_t own = owner.load(std::memory_order_relaxed);
      if (own == 0 && owner.compare_exchange_strong(own, me, std::memory_order_relaxed)) own = me;
      if (own == me) {
        Op& o = ops[oi];
        o.bucket_calls[b].store(o.bucket_calls[b].load(std::memory_order_relaxed) + 1,
                                std::memory_order_relaxed);
        o.bucket_bytes[b].store(o.bucket_bytes[b].load(std::memory_order_relaxed) + bytes,
                                std::memory_order_relaxed);
      } else {
        Op& o = shared_ops[oi];
        o.bucket_calls[b].fetch_add(1, std::memory_order_relaxed);
        o.bucket_bytes[b].fetch_add(bytes, std::memory_order_relaxed);
      }
      if (call_seq != 0) {
        Enqueued& e = enqueued[call_seq % kEnqueuedRing];
        e.seq.store(0, std::memory_order_relaxed);  // invalid while op and bytes change
        e.op.store(static_cast<uint8_t>(oi), std::memory_order_release);
        e.bytes.store(bytes, std::memory_order_release);
        e.seq.store(call_seq, std::memory_order_release);
      }
    }
  };
  // The counters of comm_index, or null for an out-of-range or unregistered index.
  Counters* counters(uint32_t comm_index) const noexcept;

  // One outermost NCCL call on comm_index (see Counters::count); a bad index or op is counted
  // as a call without a communicator.
  void on_call(uint32_t comm_index, CommOp op, uint64_t bytes, uint64_t seq = 0) noexcept {
    Counters* c = counters(comm_index);
    if (c == nullptr || static_cast<std::size_t>(op) >= kCommOpCount) return note_bad_call();
    c->count(op, bytes, seq);
  }
  void note_bad_call() noexcept;
  // The call's sequence number on comm_index (see Counters::next_seq); 0 for a bad index.
  uint64_t next_seq(uint32_t comm_index) noexcept {
    Counters* c = counters(comm_index);
    return c != nullptr ? c->next_seq() : 0;
  }

  // Hot path (once per outermost ncclGroupEnd): remember the group's members under group_id
  // (non-zero, unique, increasing) until kGroupSlots later groups overwrite it. Lock-free
  // (seqlock per slot); if two threads race for one slot the later one is not recorded.
  void record_group(uint64_t group_id, const CommGroupMember* members, uint32_t count) noexcept;
  // Copy of the group if it is still in the ring and not being written; false otherwise.
  bool find_group(uint64_t group_id, CommGroupRecord& out) const noexcept;
  uint64_t groups_lost() const noexcept { return groups_lost_.load(std::memory_order_relaxed); }

  struct OpCounts {
    uint64_t calls = 0;
    uint64_t bytes = 0;
    std::array<uint64_t, kSizeBuckets> bucket_calls{};
    std::array<uint64_t, kSizeBuckets> bucket_bytes{};
  };
  struct CommSnapshot {
    uint32_t index = 0;
    uint64_t handle_key = 0;
    uint32_t size = 0;
    uint32_t rank = 0;
    uint64_t stable_id = 0;
    bool retired = false;
    uint64_t ops_enqueued = 0;  // sequence numbers handed out
    uint8_t seen_by = 0;        // Counters::seen_by
    std::array<OpCounts, kCommOpCount> ops{};  // indexed by CommOp
    // The last calls enqueued (at most kEnqueuedRing), oldest first.
    struct Enqueued {
      uint64_t seq = 0;
      CommOp op = CommOp::kNone;
      uint64_t bytes = 0;
    };
    std::vector<Enqueued> recent_enqueued;
  };
  struct Snapshot {
    std::vector<CommSnapshot> comms;  // by index
    uint64_t calls_without_communicator = 0;  // on_call with a bad index (table full)
    const CommSnapshot* find(uint32_t comm_index) const {
      return comm_index < comms.size() ? &comms[comm_index] : nullptr;
    }
  };
  // Consistent per counter (relaxed reads), not across counters: fine for periodic snapshots.
  Snapshot snapshot() const;
  // Its memory (self_cost.memory "call table"): itself, and the handle map and group ring once
  // made.
  std::size_t bytes() const noexcept;

 private:
  struct GroupSlot;
  static constexpr uint32_t kHashSlots = 2 * kMaxCommunicators;

  struct Handles;
  // The handle map and the group ring are made at first use (the first registration, the first
  // recorded group), not at construction: every process under the preload builds a table, and
  // most never see a communicator (DESIGN §9, inert process). Published once, never replaced.
  Handles* handles() const noexcept { return handles_.load(std::memory_order_acquire); }
  GroupSlot* group_slots() noexcept;
  std::mutex register_mutex_;
  std::atomic<uint32_t> count_{0};
  std::atomic<Handles*> handles_{nullptr};
  std::atomic<GroupSlot*> groups_{nullptr};
  std::atomic<uint64_t> bad_calls_{0};
  std::atomic<uint64_t> groups_lost_{0};
};

}  // namespace traintime::core
