// Communicator registry: CommCallTable's lock-free handle lookup on the hot path; first sight,
// creation notes and destruction under one mutex.
#include "nccl_registry.h"

#include <nccl.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <mutex>

#include "nccl_rank_file.h"
#include "nccl_resolve.h"
#include "runtime.h"

namespace traintime::rt::nccl {
namespace {

struct PendingChild {
  const void* handle = nullptr;
  uint64_t stable_id = 0;
  CommOrigin origin = CommOrigin::kSplit;
};
constexpr size_t kMaxPending = 64;

// Constant-initialised (zeroed .bss, constexpr constructors only): usable from any thread at
// any time, never destroyed at exit.
struct Registry {
  std::array<CommEntry, kMaxCommunicators> entries{};
  std::array<std::atomic<bool>, kMaxCommunicators> published{};
  std::array<uint32_t, kMaxCommunicators> children_made{};  // splits/shrinks per parent
  std::array<PendingChild, kMaxPending> pending{};
  std::mutex mutex;  // every writer
  uint32_t first_seen = 0;
  uint32_t init_alls = 0;
  uint32_t largest_size = 0;
  std::atomic<uint64_t> unregistered{0};
};
Registry g_registry;

RealSymbol g_comm_count{"ncclCommCount", "pncclCommCount"};
RealSymbol g_comm_user_rank{"ncclCommUserRank", "pncclCommUserRank"};

uint64_t key_of(const void* comm) { return reinterpret_cast<uint64_t>(comm); }

uint64_t mix(uint64_t a, uint64_t b) {
  const uint64_t words[2] = {a, b};
  return hash_bytes(words, sizeof(words));
}

// Under g_registry.mutex. Returns the comm_id, 0 when the table is full.
uint32_t publish(const void* comm, uint32_t size, uint32_t rank, uint64_t stable_id,
                 CommOrigin origin) {
  Registry& r = g_registry;
  const uint32_t index = call_table().register_communicator(key_of(comm), size, rank);
  if (index >= kMaxCommunicators) return 0;
  if (!r.published[index].load(std::memory_order_relaxed)) {
    r.entries[index] = CommEntry{size, rank, stable_id, origin};
    r.published[index].store(true, std::memory_order_release);
    add_filler_once();
    if (size > r.largest_size) {
      // The rank in the largest communicator is the rank in the world when no launcher
      // variable said (the runtime prefers a launcher's rank over this one).
      r.largest_size = size;
      set_rank_from_communicator(rank, size);
    }
  }
  return index + 1;
}

}  // namespace

core::CommCallTable& call_table() noexcept {
  static core::CommCallTable* table = new core::CommCallTable();
  return *table;
}

uint64_t hash_bytes(const void* data, size_t n, uint64_t seed) noexcept {
  uint64_t h = seed;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint32_t comm_id_for(const void* comm) noexcept {
  if (comm == nullptr) return 0;
  const uint32_t index = call_table().find_communicator(key_of(comm));
  if (index < kMaxCommunicators && g_registry.published[index].load(std::memory_order_acquire)) {
    return index + 1;
  }

  const int saved_errno = errno;
  uint32_t comm_id = 0;
  using QueryFn = ncclResult_t (*)(const ncclComm_t, int*);
  auto count_fn = reinterpret_cast<QueryFn>(g_comm_count.get(nullptr));
  auto rank_fn = reinterpret_cast<QueryFn>(g_comm_user_rank.get(nullptr));
  int size = 0;
  int rank = 0;
  auto handle = static_cast<ncclComm_t>(const_cast<void*>(comm));
  // Outside the mutex: the real queries may block briefly (ncclCommEnsureReady).
  if (count_fn != nullptr && rank_fn != nullptr && count_fn(handle, &size) == ncclSuccess &&
      rank_fn(handle, &rank) == ncclSuccess && size > 0 && rank >= 0 && rank < size) {
    Registry& r = g_registry;
    std::lock_guard<std::mutex> lock(r.mutex);
    uint64_t stable_id = 0;
    CommOrigin origin = CommOrigin::kFirstSeen;
    for (PendingChild& p : r.pending) {
      if (p.handle == comm) {
        stable_id = p.stable_id;
        origin = p.origin;
        p = PendingChild{};
        break;
      }
    }
    if (origin == CommOrigin::kFirstSeen) {
      stable_id = mix(uint64_t{0x5EE4} << 32 | ++r.first_seen, static_cast<uint64_t>(size));
    }
    comm_id = publish(comm, static_cast<uint32_t>(size), static_cast<uint32_t>(rank), stable_id,
                      origin);
  }
  // Outside the mutex: a lazy CUPTI subscription takes the capture's own locks.
  gpu_start_point();
  errno = saved_errno;
  return comm_id;
}

const CommEntry* entry(uint32_t comm_id) noexcept {
  if (comm_id == 0 || comm_id > kMaxCommunicators) return nullptr;
  if (!g_registry.published[comm_id - 1].load(std::memory_order_acquire)) return nullptr;
  return &g_registry.entries[comm_id - 1];
}

void note_created(const void* comm, uint32_t size, uint32_t rank, uint64_t stable_id,
                  CommOrigin origin) noexcept {
  if (comm == nullptr || size == 0 || rank >= size) return;
  const int saved_errno = errno;
  {
    std::lock_guard<std::mutex> lock(g_registry.mutex);
    publish(comm, size, rank, stable_id, origin);
  }
  errno = saved_errno;
}

void note_child(const void* comm, uint64_t stable_id, CommOrigin origin) noexcept {
  if (comm == nullptr) return;
  Registry& r = g_registry;
  std::lock_guard<std::mutex> lock(r.mutex);
  for (PendingChild& p : r.pending) {
    if (p.handle == nullptr || p.handle == comm) {
      p = PendingChild{comm, stable_id, origin};
      return;
    }
  }
  // More than kMaxPending children not used yet: this one gets a first-seen id.
}

uint64_t next_child_id(const void* parent, CommOrigin origin, int color) noexcept {
  const uint32_t parent_id = comm_id_for(parent);
  Registry& r = g_registry;
  std::lock_guard<std::mutex> lock(r.mutex);
  uint64_t parent_stable = 0;
  uint64_t nth = 0;
  if (parent_id != 0) {
    parent_stable = r.entries[parent_id - 1].stable_id;
    nth = ++r.children_made[parent_id - 1];
  }
  const uint64_t kind = origin == CommOrigin::kShrink ? 2 : 1;
  return mix(mix(parent_stable, kind << 32 | nth), static_cast<uint32_t>(color));
}

uint64_t next_init_all_id(int ndev) noexcept {
  std::lock_guard<std::mutex> lock(g_registry.mutex);
  return mix(uint64_t{0xA11} << 32 | ++g_registry.init_alls, static_cast<uint32_t>(ndev));
}

void retire(const void* comm) noexcept {
  if (comm == nullptr) return;
  const uint32_t index = call_table().find_communicator(key_of(comm));
  if (index < kMaxCommunicators) call_table().retire_communicator(index);
  std::lock_guard<std::mutex> lock(g_registry.mutex);
  for (PendingChild& p : g_registry.pending) {
    if (p.handle == comm) p = PendingChild{};
  }
}

void count_unregistered_call() noexcept {
  g_registry.unregistered.fetch_add(1, std::memory_order_relaxed);
}

uint64_t unregistered_calls() noexcept {
  return g_registry.unregistered.load(std::memory_order_relaxed);
}

}  // namespace traintime::rt::nccl
