#include "correlation_table.h"

namespace traintime::cupti {
namespace {

// Every field of LaunchContext is packed into Slot::words; a new field must be packed too.
static_assert(sizeof(core::LaunchContext) == 56, "LaunchContext changed: update the slot packing");

uint32_t round_up_pow2(uint32_t n) {
  uint32_t p = 1;
  while (p < n && p < (1u << 30)) p <<= 1;
  return p;
}

}  // namespace

CorrelationTable::CorrelationTable(uint32_t capacity)
    : slots_(new Slot[round_up_pow2(capacity)]), mask_(round_up_pow2(capacity) - 1) {}

void CorrelationTable::store(uint32_t id, const core::LaunchContext& ctx) noexcept {
  if (id == kEmpty || id == kBusy) return;
  Slot& s = slots_[id & mask_];
  if (s.tag.exchange(kBusy, std::memory_order_acq_rel) == kBusy) {
    // Another launch with an id congruent modulo the capacity is being written right now; its
    // entry wins and ours will be reported as overwritten if its record ever arrives.
    collisions_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::atomic_thread_fence(std::memory_order_release);
  s.words[0].store(uint64_t{ctx.path} | (uint64_t{ctx.step} << 32), std::memory_order_relaxed);
  s.words[1].store(ctx.entry, std::memory_order_relaxed);
  s.words[2].store(uint64_t(ctx.comm_op) | (uint64_t{ctx.comm_captured} << 8) |
                       (uint64_t{ctx.comm_id} << 32),
                   std::memory_order_relaxed);
  s.words[3].store(ctx.comm_seq, std::memory_order_relaxed);
  s.words[4].store(ctx.comm_bytes, std::memory_order_relaxed);
  s.words[5].store(ctx.comm_group, std::memory_order_relaxed);
  s.tag.store(id, std::memory_order_release);
}

bool CorrelationTable::lookup(uint32_t id, core::LaunchContext* out) const noexcept {
  if (id == kEmpty || id == kBusy) return false;
  const Slot& s = slots_[id & mask_];
  const uint32_t before = s.tag.load(std::memory_order_acquire);
  uint64_t w[6];
  for (int i = 0; i < 6; ++i) w[i] = s.words[i].load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  const uint32_t after = s.tag.load(std::memory_order_relaxed);
  if (before != id || after != id) {
    const uint32_t seen = after != kBusy ? after : before;
    // A later id in the slot (modulo 2^32 wrap) means our entry was replaced before we got here.
    if (seen != kEmpty && seen != kBusy && static_cast<int32_t>(seen - id) > 0)
      overwritten_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  out->path = static_cast<core::PathId>(w[0]);
  out->step = static_cast<uint32_t>(w[0] >> 32);
  out->entry = w[1];
  out->comm_op = static_cast<core::CommOp>(w[2] & 0xff);
  out->comm_id = static_cast<uint32_t>(w[2] >> 32);
  out->comm_seq = w[3];
  out->comm_bytes = w[4];
  out->comm_group = w[5];
  out->comm_captured = ((w[2] >> 8) & 1) != 0;
  return true;
}

}  // namespace traintime::cupti
