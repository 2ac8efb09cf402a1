#include "traintime/core/comm_stats.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <new>

namespace traintime::core {

std::string communicator_id(uint64_t stable_id) {
  char text[17];
  std::snprintf(text, sizeof text, "%016" PRIx64, stable_id);
  return text;
}

double busbw_factor(CommOp op, uint32_t n) {
  if (n == 0) return 0.0;
  const double dn = static_cast<double>(n);
  switch (op) {
    case CommOp::kAllReduce: return 2.0 * (dn - 1.0) / dn;
    case CommOp::kAllGather:
    case CommOp::kReduceScatter:
    case CommOp::kAlltoAll:
    case CommOp::kGather:
    case CommOp::kScatter: return (dn - 1.0) / dn;
    case CommOp::kBroadcast:
    case CommOp::kReduce:
    case CommOp::kSend:
    case CommOp::kRecv:
    case CommOp::kPutSignal:  // point to point, like Send
    case CommOp::kSignal:     // Signal and WaitSignal move no bytes
    case CommOp::kWaitSignal: return 1.0;
    case CommOp::kUnknown:
    case CommOp::kNone: break;
  }
  return 0.0;
}

uint64_t size_bucket_lo(uint32_t bucket) {
  return bucket == 0 ? 0 : uint64_t{1} << (bucket - 1);
}

namespace {
constexpr uint64_t kTombstone = ~uint64_t{0};
constexpr uint64_t pack_member(CommOp op, uint32_t comm_id) {
  return (static_cast<uint64_t>(comm_id) << 8) | static_cast<uint64_t>(op);
}
uint32_t hash_of(uint64_t key, uint32_t slots) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdULL;
  key ^= key >> 33;
  return static_cast<uint32_t>(key & (slots - 1));
}
}  // namespace

struct CommCallTable::GroupSlot {
  // Seqlock without fences (TSan does not model atomic_thread_fence): odd while a writer fills
  // the slot; fields are stored with release and loaded with acquire, so a reader that sees any
  // field of a newer write also sees that writer's odd version when it re-checks.
  std::atomic<uint64_t> version{0};
  std::atomic<uint64_t> group_id{0};
  std::atomic<uint32_t> count{0};
  std::atomic<bool> merged{false};
  std::array<std::atomic<uint64_t>, CommGroupRecord::kMaxMembers> op_comm{};
  std::array<std::atomic<uint64_t>, CommGroupRecord::kMaxMembers> seq{};
  std::array<std::atomic<uint64_t>, CommGroupRecord::kMaxMembers> bytes{};
};

// The communicators by index and the open-addressing map from handle key to index (a key slot
// of 0 is empty, kTombstone retired); every element starts zero.
struct CommCallTable::Handles {
  std::array<std::atomic<Counters*>, kMaxCommunicators> comms{};
  std::array<std::atomic<uint64_t>, kHashSlots> keys{};
  std::array<std::atomic<uint32_t>, kHashSlots> index{};
};

CommCallTable::CommCallTable() = default;

CommCallTable::~CommCallTable() {
  if (Handles* h = handles()) {
    for (std::atomic<Counters*>& c : h->comms) delete c.load();
    delete h;
  }
  delete[] groups_.load();
}

CommCallTable::GroupSlot* CommCallTable::group_slots() noexcept {
  GroupSlot* g = groups_.load(std::memory_order_acquire);
  if (g != nullptr) return g;
  // Lock-free: two threads recording their first groups together each make one, one wins.
  auto* made = new (std::nothrow) GroupSlot[kGroupSlots];
  if (made == nullptr) return nullptr;
  if (groups_.compare_exchange_strong(g, made, std::memory_order_acq_rel)) return made;
  delete[] made;
  return g;
}

uint32_t CommCallTable::find_communicator(uint64_t handle_key) const noexcept {
  if (handle_key == 0 || handle_key == kTombstone) return kNoComm;
  const Handles* t = handles();
  if (t == nullptr) return kNoComm;
  for (uint32_t probe = 0, h = hash_of(handle_key, kHashSlots); probe < kHashSlots;
       ++probe, h = (h + 1) & (kHashSlots - 1)) {
    uint64_t k = t->keys[h].load(std::memory_order_acquire);
    if (k == 0) return kNoComm;
    if (k == handle_key) return t->index[h].load(std::memory_order_relaxed);
  }
  return kNoComm;
}

uint32_t CommCallTable::register_communicator(uint64_t handle_key, uint32_t size, uint32_t rank,
                                              uint64_t stable_id) {
  if (handle_key == 0 || handle_key == kTombstone) return kNoComm;
  std::lock_guard<std::mutex> lock(register_mutex_);
  Handles* t = handles();
  if (t == nullptr) {
    t = new Handles();
    handles_.store(t, std::memory_order_release);
  }
  uint32_t existing = find_communicator(handle_key);
  if (existing != kNoComm) {
    Counters* c = t->comms[existing].load(std::memory_order_acquire);
    uint32_t zero = 0;
    c->size.compare_exchange_strong(zero, size, std::memory_order_relaxed);
    zero = 0;
    c->rank.compare_exchange_strong(zero, rank, std::memory_order_relaxed);
    uint64_t no_id = 0;
    c->stable_id.compare_exchange_strong(no_id, stable_id, std::memory_order_relaxed);
    return existing;
  }
  uint32_t index = count_.load(std::memory_order_relaxed);
  if (index >= kMaxCommunicators) return kNoComm;
  uint32_t h = hash_of(handle_key, kHashSlots);
  // Retired keys stay as tombstones, so at most kMaxCommunicators slots are ever used and an
  // empty slot always exists (kHashSlots = 2 × capacity).
  while (t->keys[h].load(std::memory_order_relaxed) != 0) h = (h + 1) & (kHashSlots - 1);
  auto* c = new Counters();
  c->handle_key = handle_key;
  c->size.store(size, std::memory_order_relaxed);
  c->rank.store(rank, std::memory_order_relaxed);
  c->stable_id.store(stable_id, std::memory_order_relaxed);
  t->comms[index].store(c, std::memory_order_release);
  t->index[h].store(index, std::memory_order_relaxed);
  t->keys[h].store(handle_key, std::memory_order_release);
  count_.store(index + 1, std::memory_order_release);
  return index;
}

void CommCallTable::retire_communicator(uint32_t comm_index) {
  if (comm_index >= kMaxCommunicators) return;
  std::lock_guard<std::mutex> lock(register_mutex_);
  Handles* t = handles();
  Counters* c = t != nullptr ? t->comms[comm_index].load(std::memory_order_acquire) : nullptr;
  if (c == nullptr || c->retired.load(std::memory_order_relaxed)) return;
  c->retired.store(true, std::memory_order_relaxed);
  for (uint32_t h = hash_of(c->handle_key, kHashSlots);; h = (h + 1) & (kHashSlots - 1)) {
    uint64_t k = t->keys[h].load(std::memory_order_relaxed);
    if (k == 0) break;
    if (k == c->handle_key && t->index[h].load(std::memory_order_relaxed) == comm_index) {
      t->keys[h].store(kTombstone, std::memory_order_release);
      break;
    }
  }
}

uint64_t CommCallTable::stable_id(uint32_t comm_index) const noexcept {
  const Counters* c = counters(comm_index);
  return c != nullptr ? c->stable_id.load(std::memory_order_relaxed) : 0;
}

CommCallTable::Counters* CommCallTable::counters(uint32_t comm_index) const noexcept {
  const Handles* t = handles();
  return t != nullptr && comm_index < kMaxCommunicators
             ? t->comms[comm_index].load(std::memory_order_acquire)
             : nullptr;
}

void CommCallTable::note_bad_call() noexcept { bad_calls_.fetch_add(1, std::memory_order_relaxed); }

void CommCallTable::record_group(uint64_t group_id, const CommGroupMember* members,
                                 uint32_t count) noexcept {
  if (group_id == 0 || (members == nullptr && count > 0)) return;
  GroupSlot* slots = group_slots();
  if (slots == nullptr) {
    groups_lost_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  GroupSlot& s = slots[group_id % kGroupSlots];
  uint64_t v = s.version.load(std::memory_order_relaxed);
  if ((v & 1) != 0 ||
      !s.version.compare_exchange_strong(v, v + 1, std::memory_order_acquire,
                                         std::memory_order_relaxed)) {
    groups_lost_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // Build the record locally first: merging beyond capacity needs to read what is stored.
  CommGroupRecord r;
  for (uint32_t i = 0; i < count; ++i) {
    const CommGroupMember& m = members[i];
    if (r.count < CommGroupRecord::kMaxMembers) {
      r.members[r.count++] = m;
      continue;
    }
    r.merged = true;
    uint32_t into = 0;
    for (uint32_t j = 0; j < r.count; ++j)
      if (r.members[j].op == m.op && r.members[j].comm_id == m.comm_id) {
        into = j;
        break;
      }
    CommGroupMember& t = r.members[into];
    t.bytes += m.bytes;
    if (t.op == m.op && t.comm_id == m.comm_id) t.seq = std::max(t.seq, m.seq);
  }
  s.group_id.store(group_id, std::memory_order_release);
  s.count.store(r.count, std::memory_order_release);
  s.merged.store(r.merged, std::memory_order_release);
  for (uint32_t i = 0; i < r.count; ++i) {
    s.op_comm[i].store(pack_member(r.members[i].op, r.members[i].comm_id),
                       std::memory_order_release);
    s.seq[i].store(r.members[i].seq, std::memory_order_release);
    s.bytes[i].store(r.members[i].bytes, std::memory_order_release);
  }
  s.version.store(v + 2, std::memory_order_release);
}

bool CommCallTable::find_group(uint64_t group_id, CommGroupRecord& out) const noexcept {
  const GroupSlot* slots = groups_.load(std::memory_order_acquire);
  if (group_id == 0 || slots == nullptr) return false;
  const GroupSlot& s = slots[group_id % kGroupSlots];
  uint64_t v1 = s.version.load(std::memory_order_acquire);
  if ((v1 & 1) != 0) return false;
  CommGroupRecord r;
  r.group_id = s.group_id.load(std::memory_order_acquire);
  r.count = std::min(s.count.load(std::memory_order_acquire), CommGroupRecord::kMaxMembers);
  r.merged = s.merged.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < r.count; ++i) {
    uint64_t oc = s.op_comm[i].load(std::memory_order_acquire);
    r.members[i].op = static_cast<CommOp>(oc & 0xff);
    r.members[i].comm_id = static_cast<uint32_t>(oc >> 8);
    r.members[i].seq = s.seq[i].load(std::memory_order_acquire);
    r.members[i].bytes = s.bytes[i].load(std::memory_order_acquire);
  }
  if (s.version.load(std::memory_order_relaxed) != v1 || r.group_id != group_id) return false;
  out = r;
  return true;
}

CommCallTable::Snapshot CommCallTable::snapshot() const {
  Snapshot snap;
  uint32_t n = count_.load(std::memory_order_acquire);
  snap.comms.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    const Counters* c = counters(i);
    CommSnapshot& s = snap.comms[i];
    s.index = i;
    if (c == nullptr) continue;
    s.handle_key = c->handle_key;
    s.size = c->size.load(std::memory_order_relaxed);
    s.rank = c->rank.load(std::memory_order_relaxed);
    s.stable_id = c->stable_id.load(std::memory_order_relaxed);
    s.retired = c->retired.load(std::memory_order_relaxed);
    s.ops_enqueued = c->seq.load(std::memory_order_relaxed);
    s.seen_by = c->seen_by.load(std::memory_order_relaxed);
    for (const Counters::Enqueued& e : c->enqueued) {
      const uint64_t seq = e.seq.load(std::memory_order_acquire);
      if (seq == 0) continue;
      const auto op = static_cast<CommOp>(e.op.load(std::memory_order_acquire));
      const uint64_t bytes = e.bytes.load(std::memory_order_acquire);
      if (e.seq.load(std::memory_order_acquire) != seq) continue;  // rewritten meanwhile
      s.recent_enqueued.push_back({seq, op, bytes});
    }
    std::sort(s.recent_enqueued.begin(), s.recent_enqueued.end(),
              [](const CommSnapshot::Enqueued& a, const CommSnapshot::Enqueued& b) { return a.seq < b.seq; });
    for (std::size_t o = 0; o < kCommOpCount; ++o) {
      const Counters::Op& own = c->ops[o];
      const Counters::Op& shared = c->shared_ops[o];
      OpCounts& dst = s.ops[o];
      for (uint32_t b = 0; b < kSizeBuckets; ++b) {
        dst.bucket_calls[b] = own.bucket_calls[b].load(std::memory_order_relaxed) +
                              shared.bucket_calls[b].load(std::memory_order_relaxed);
        dst.bucket_bytes[b] = own.bucket_bytes[b].load(std::memory_order_relaxed) +
                              shared.bucket_bytes[b].load(std::memory_order_relaxed);
        dst.calls += dst.bucket_calls[b];
        dst.bytes += dst.bucket_bytes[b];
      }
    }
  }
  snap.calls_without_communicator = bad_calls_.load(std::memory_order_relaxed);
  return snap;
}

std::size_t CommCallTable::bytes() const noexcept {
  std::size_t n = sizeof(*this);
  if (handles() != nullptr) n += sizeof(Handles);
  if (groups_.load(std::memory_order_acquire) != nullptr) n += kGroupSlots * sizeof(GroupSlot);
  return n;
}

}  // namespace traintime::core
