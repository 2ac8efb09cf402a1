#include "correlation_table.h"

#include <algorithm>

namespace traintime::cupti {
namespace {

// Every field of LaunchContext is packed into Slot::words; a new field must be packed too.
static_assert(sizeof(core::LaunchContext) == 56, "LaunchContext changed: update the slot packing");

uint32_t round_up_pow2(uint32_t n) {
  uint32_t p = 16;
  while (p < n && p < (1u << 26)) p <<= 1;
  return p;
}

uint64_t stamp_of(uint64_t seq) { return (seq + 1) << 1; }

// a is after b in correlation-id order, across 32-bit wraps.
bool after(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) > 0; }

}  // namespace

CorrelationTable::CorrelationTable(uint32_t capacity)
    : slots_(new Slot[round_up_pow2(capacity)]),
      ids_(new std::atomic<uint32_t>[round_up_pow2(capacity)]()),
      mask_(round_up_pow2(capacity) - 1) {}

uint64_t CorrelationTable::store(uint32_t id, const core::LaunchContext& ctx) noexcept {
  if (id == 0) return 0;  // CUPTI's correlation ids start at 1
  const uint64_t seq = next_.fetch_add(1, std::memory_order_relaxed);
  Slot& s = slots_[seq & mask_];
  const uint64_t stamp = stamp_of(seq);
  uint64_t old = s.stamp.load(std::memory_order_relaxed);
  // The slot holds an older lap's context, unless a writer of that lap is still filling it (it
  // was preempted for a whole lap) or a newer lap already wrote it (this writer was): then this
  // context is not kept and its record, if it arrives, is counted as overwritten.
  if ((old & 1) != 0 || old >= stamp ||
      !s.stamp.compare_exchange_strong(old, stamp | 1, std::memory_order_relaxed)) {
    collisions_.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  // The id column too while the slot is busy: a writer of an older lap can no longer overwrite
  // it. Fields with release (no fence: TSan does not model atomic_thread_fence), so a reader that
  // sees any field of this write also sees the busy stamp before it when it re-checks.
  ids_[seq & mask_].store(id, std::memory_order_relaxed);
  s.words[0].store(uint64_t{id} | (uint64_t{ctx.path} << 32), std::memory_order_release);
  s.words[1].store(uint64_t{ctx.step} | (uint64_t{ctx.comm.comm_id} << 32), std::memory_order_release);
  s.words[2].store(ctx.entry, std::memory_order_release);
  s.words[3].store(uint64_t(ctx.comm.op) | (uint64_t{ctx.comm.captured} << 8),
                   std::memory_order_release);
  s.words[4].store(ctx.comm.seq, std::memory_order_release);
  s.words[5].store(ctx.comm.bytes, std::memory_order_release);
  s.words[6].store(ctx.comm.group_id, std::memory_order_release);
  s.stamp.store(stamp, std::memory_order_release);
  return seq + 1;
}

bool CorrelationTable::read(uint64_t seq, uint32_t id, core::LaunchContext* out) const noexcept {
  const Slot& s = slots_[seq & mask_];
  const uint64_t stamp = stamp_of(seq);
  if (s.stamp.load(std::memory_order_acquire) != stamp) return false;
  const uint64_t w0 = s.words[0].load(std::memory_order_acquire);
  if (static_cast<uint32_t>(w0) != id) return false;
  uint64_t w[6];
  for (int i = 0; i < 6; ++i) w[i] = s.words[i + 1].load(std::memory_order_acquire);
  if (s.stamp.load(std::memory_order_acquire) != stamp) return false;  // rewritten meanwhile
  out->path = static_cast<core::PathId>(w0 >> 32);
  out->step = static_cast<uint32_t>(w[0]);
  out->comm.comm_id = static_cast<uint32_t>(w[0] >> 32);
  out->entry = w[1];
  out->comm.op = static_cast<core::CommOp>(w[2] & 0xff);
  out->comm.captured = ((w[2] >> 8) & 1) != 0;
  out->comm.seq = w[3];
  out->comm.bytes = w[4];
  out->comm.group_id = w[5];
  return true;
}

bool CorrelationTable::id_at(uint64_t seq, uint32_t* id) const noexcept {
  const Slot& s = slots_[seq & mask_];
  const uint64_t stamp = stamp_of(seq);
  if (s.stamp.load(std::memory_order_acquire) != stamp) return false;
  const uint64_t w0 = s.words[0].load(std::memory_order_acquire);
  if (s.stamp.load(std::memory_order_acquire) != stamp) return false;
  *id = static_cast<uint32_t>(w0);
  return true;
}

void CorrelationTable::found(uint64_t seq, uint32_t id) const noexcept {
  cursor_.store(seq + 1, std::memory_order_relaxed);
  // Unwrap the id against the previous one found (records arrive about once a flush, far
  // fewer than 2^31 ids apart), then widen the ranges the id rate is measured over.
  uint64_t unwrapped = uint64_t{1} << 40;
  if (min_seq_.load(std::memory_order_relaxed) != ~uint64_t{0})
    unwrapped = last_unwrapped_.load(std::memory_order_relaxed) +
                static_cast<int64_t>(static_cast<int32_t>(id - last_id_.load(std::memory_order_relaxed)));
  last_id_.store(id, std::memory_order_relaxed);
  last_unwrapped_.store(unwrapped, std::memory_order_relaxed);
  if (unwrapped < min_id_.load(std::memory_order_relaxed)) min_id_.store(unwrapped, std::memory_order_relaxed);
  if (unwrapped > max_id_.load(std::memory_order_relaxed)) max_id_.store(unwrapped, std::memory_order_relaxed);
  if (seq < min_seq_.load(std::memory_order_relaxed)) min_seq_.store(seq, std::memory_order_relaxed);
  if (seq > max_seq_.load(std::memory_order_relaxed)) max_seq_.store(seq, std::memory_order_relaxed);
}

double CorrelationTable::ids_per_store() const noexcept {
  const uint64_t min_seq = min_seq_.load(std::memory_order_relaxed);
  const uint64_t max_seq = max_seq_.load(std::memory_order_relaxed);
  const uint64_t min_id = min_id_.load(std::memory_order_relaxed);
  const uint64_t max_id = max_id_.load(std::memory_order_relaxed);
  if (min_seq == ~uint64_t{0} || max_seq <= min_seq || max_id < min_id) return 1.0;
  return static_cast<double>(max_id - min_id + 1) / static_cast<double>(max_seq - min_seq + 1);
}

bool CorrelationTable::lookup(uint32_t id, core::LaunchContext* out) const noexcept {
  if (id == 0) return false;
  const uint64_t end = next_.load(std::memory_order_acquire);
  const uint64_t begin = end > capacity() ? end - capacity() : 0;
  const uint64_t cursor = std::clamp(cursor_.load(std::memory_order_relaxed), begin, end);
  // The id column names the candidate slots (16 per cache line); read() validates the slot.
  const auto hit = [&](uint64_t q) {
    if (ids_[q & mask_].load(std::memory_order_relaxed) != id || !read(q, id, out)) return false;
    found(q, id);
    return true;
  };
  // Records arrive nearly in launch order: near the slot after the previous hit first, forward
  // then back; then the rest of the live slots, so a context in the table is always found.
  const uint64_t near_end = std::min(end, cursor + kScan);
  const uint64_t near_begin = cursor - std::min(cursor - begin, uint64_t{kScan});
  for (uint64_t q = cursor; q < near_end; ++q)
    if (hit(q)) return true;
  for (uint64_t q = cursor; q > near_begin; --q)
    if (hit(q - 1)) return true;
  for (uint64_t q = near_end; q < end; ++q)
    if (hit(q)) return true;
  for (uint64_t q = near_begin; q > begin; --q)
    if (hit(q - 1)) return true;
  // Not there: lost if a later launch was stored (its context was overwritten or never kept);
  // a miss for an id no launch reached yet is not a loss.
  uint32_t newest = 0;
  for (uint64_t q = end; q > begin && end - q < 8; --q)
    if (id_at(q - 1, &newest)) {
      if (after(newest, id)) overwritten_.fetch_add(1, std::memory_order_relaxed);
      break;
    }
  return false;
}

}  // namespace traintime::cupti
