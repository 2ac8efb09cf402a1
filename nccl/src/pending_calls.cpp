#include "pending_calls.h"

#include <atomic>
#include <thread>

namespace traintime::nccl {
namespace {

struct StreamQueue {
  std::atomic<uintptr_t> key{0};  // stream + 1 (the legacy default stream is nullptr); 0 = free
  std::atomic_flag busy = ATOMIC_FLAG_INIT;
  uint32_t head = 0;  // under busy
  uint32_t tail = 0;
  Call calls[kPendingDepth];
};

StreamQueue g_queues[kPendingStreams];
std::atomic<int64_t> g_queued{0};
std::atomic<uint64_t> g_dropped{0};

uintptr_t key_of(const void* stream) { return reinterpret_cast<uintptr_t>(stream) + 1; }

StreamQueue* find(uintptr_t key, bool create) {
  for (StreamQueue& q : g_queues) {
    uintptr_t k = q.key.load(std::memory_order_acquire);
    if (k == key) return &q;
    if (k == 0) {
      if (!create) return nullptr;  // slots fill in order: the key is not further on
      if (q.key.compare_exchange_strong(k, key, std::memory_order_acq_rel) || k == key) return &q;
    }
  }
  return nullptr;
}

class Hold {
 public:
  explicit Hold(StreamQueue& q) : q_(q) {
    while (q_.busy.test_and_set(std::memory_order_acquire)) std::this_thread::yield();
  }
  ~Hold() { q_.busy.clear(std::memory_order_release); }
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;

 private:
  StreamQueue& q_;
};

}  // namespace

void queue_pending(const void* stream, const Call& call) noexcept {
  StreamQueue* q = find(key_of(stream), true);
  if (q == nullptr) {
    g_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Hold hold(*q);
  if (q->tail - q->head == kPendingDepth) {
    ++q->head;
    g_queued.fetch_sub(1, std::memory_order_relaxed);
    g_dropped.fetch_add(1, std::memory_order_relaxed);
  }
  q->calls[q->tail++ % kPendingDepth] = call;
  g_queued.fetch_add(1, std::memory_order_relaxed);
}

bool calls_waiting() noexcept { return g_queued.load(std::memory_order_relaxed) > 0; }

bool take_pending_call(const void* stream, Call* out) noexcept {
  if (!calls_waiting()) return false;
  StreamQueue* q = find(key_of(stream), false);
  if (q == nullptr) return false;
  Hold hold(*q);
  if (q->head == q->tail) return false;
  *out = q->calls[q->head++ % kPendingDepth];
  g_queued.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

void retract_pending(const void* stream, const Call& call) noexcept {
  StreamQueue* q = find(key_of(stream), false);
  if (q == nullptr) return;
  Hold hold(*q);
  for (uint32_t i = q->tail; i != q->head; --i) {
    const Call& c = q->calls[(i - 1) % kPendingDepth];
    if (c.comm_id != call.comm_id || c.seq != call.seq || c.group_id != call.group_id) continue;
    for (uint32_t j = i - 1; j + 1 != q->tail; ++j) q->calls[j % kPendingDepth] = q->calls[(j + 1) % kPendingDepth];
    --q->tail;
    g_queued.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
}

constexpr int kMaxNonblocking = 256;
std::atomic<const void*> g_nonblocking[kMaxNonblocking];
std::atomic<int> g_nonblocking_count{0};

void note_nonblocking(const void* comm) noexcept {
  if (comm == nullptr || is_nonblocking(comm)) return;
  for (std::atomic<const void*>& slot : g_nonblocking) {
    const void* expected = nullptr;
    if (slot.compare_exchange_strong(expected, comm, std::memory_order_acq_rel)) {
      g_nonblocking_count.fetch_add(1, std::memory_order_release);
      return;
    }
  }
  // More live nonblocking communicators than slots: its calls are queued only once they return
  // ncclInProgress, which NCCL's thread may outrun (counted with the dropped calls).
  g_dropped.fetch_add(1, std::memory_order_relaxed);
}

bool is_nonblocking_noted(const void* comm) noexcept {
  for (const std::atomic<const void*>& slot : g_nonblocking)
    if (slot.load(std::memory_order_relaxed) == comm) return true;
  return false;
}

void forget_nonblocking(const void* comm) noexcept {
  if (comm == nullptr || g_nonblocking_count.load(std::memory_order_acquire) == 0) return;
  for (std::atomic<const void*>& slot : g_nonblocking) {
    const void* expected = comm;
    if (slot.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel)) {
      g_nonblocking_count.fetch_sub(1, std::memory_order_release);
      return;
    }
  }
}

uint64_t pending_dropped() noexcept { return g_dropped.load(std::memory_order_relaxed); }

void reset_pending() noexcept {
  // Only what was used: slots fill in order, and writing the untouched ones would fault in
  // every page of the queues in each process that starts (most never make an NCCL call).
  for (StreamQueue& q : g_queues) {
    if (q.key.load(std::memory_order_relaxed) == 0) break;
    q.busy.clear(std::memory_order_relaxed);
    q.head = q.tail = 0;
    q.key.store(0, std::memory_order_relaxed);
  }
  if (g_queued.load(std::memory_order_relaxed) != 0) g_queued.store(0, std::memory_order_relaxed);
  if (g_nonblocking_count.load(std::memory_order_relaxed) != 0) {
    for (std::atomic<const void*>& slot : g_nonblocking) slot.store(nullptr, std::memory_order_relaxed);
    g_nonblocking_count.store(0, std::memory_order_relaxed);
  }
}

}  // namespace traintime::nccl
