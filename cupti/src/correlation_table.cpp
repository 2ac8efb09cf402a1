#include "correlation_table.h"

namespace traintime::cupti {
namespace {

// Every field of LaunchContext is packed into Slot::words; a new field must be packed too.
static_assert(sizeof(core::LaunchContext) == 56, "LaunchContext changed: update the slot packing");

uint32_t round_up_pow2(uint32_t n) {
  uint32_t p = CorrelationTable::kProbe;
  while (p < n && p < (1u << 30)) p <<= 1;
  return p;
}

}  // namespace

CorrelationTable::CorrelationTable(uint32_t capacity)
    : slots_(new Slot[round_up_pow2(capacity)]), mask_(round_up_pow2(capacity) - 1) {}

// Fibonacci hashing: the top bits of id × 2^32/φ, so ids of any stride (a burst, or ids a power
// of two apart) spread over the table; each id's probe window is then consecutive slots.
uint32_t CorrelationTable::home(uint32_t id) const noexcept {
  return static_cast<uint32_t>((uint64_t{id * 0x9E3779B1u} * (uint64_t{mask_} + 1)) >> 32);
}

void CorrelationTable::store(uint32_t id, const core::LaunchContext& ctx) noexcept {
  if (id == kEmpty || id == kBusy) return;
  const uint64_t launch = launches_.fetch_add(1, std::memory_order_relaxed) + 1;
  const uint32_t h = home(id);
  // The probe window's empty slot, else the one holding the oldest launch.
  Slot* victim = nullptr;
  uint32_t victim_tag = kBusy;
  uint64_t oldest = ~uint64_t{0};
  for (uint32_t k = 0; k < kProbe; ++k) {
    Slot& s = slots_[(h + k) & mask_];
    const uint32_t tag = s.tag.load(std::memory_order_acquire);
    if (tag == kBusy) continue;
    const uint64_t age = tag == kEmpty ? 0 : s.launch.load(std::memory_order_relaxed);
    if (age < oldest) {
      oldest = age;
      victim = &s;
      victim_tag = tag;
      if (tag == kEmpty) break;
    }
  }
  if (victim == nullptr ||
      !victim->tag.compare_exchange_strong(victim_tag, kBusy, std::memory_order_acq_rel)) {
    // Other launches are writing this window right now; this context is not kept, and its record
    // (if it ever arrives) is counted as overwritten.
    collisions_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // Fields with release (no fence: TSan does not model atomic_thread_fence), so a reader that
  // sees any field of this write also sees the kBusy tag before it when it re-checks.
  Slot& s = *victim;
  s.launch.store(launch, std::memory_order_release);
  s.words[0].store(uint64_t{ctx.path} | (uint64_t{ctx.step} << 32), std::memory_order_release);
  s.words[1].store(ctx.entry, std::memory_order_release);
  s.words[2].store(uint64_t(ctx.comm_op) | (uint64_t{ctx.comm_captured} << 8) |
                       (uint64_t{ctx.comm_id} << 32),
                   std::memory_order_release);
  s.words[3].store(ctx.comm_seq, std::memory_order_release);
  s.words[4].store(ctx.comm_bytes, std::memory_order_release);
  s.words[5].store(ctx.comm_group, std::memory_order_release);
  s.tag.store(id, std::memory_order_release);
  // The id rate (ids_per_store): every traced API call takes an id, not only launches. The
  // newest id is kept unwrapped to 64 bits (each advance adds its 32-bit step), so the span from
  // the first id stays right after the ids wrap (a long launch-heavy run passes 2^32 API calls);
  // one compare-exchange per launch, as for a plain maximum.
  uint64_t newest = newest_.load(std::memory_order_relaxed);
  for (;;) {
    const auto ahead = static_cast<int32_t>(id - static_cast<uint32_t>(newest));
    if (newest != kEmpty && ahead <= 0) break;  // an older id (another thread's): nothing new
    const uint64_t next = newest == kEmpty ? id : newest + static_cast<uint32_t>(ahead);
    if (newest_.compare_exchange_weak(newest, next, std::memory_order_relaxed)) {
      if (newest == kEmpty) first_.store(id, std::memory_order_relaxed);
      break;
    }
  }
}

double CorrelationTable::ids_per_store() const noexcept {
  const uint64_t n = launches_.load(std::memory_order_relaxed);
  const uint64_t first = first_.load(std::memory_order_relaxed);
  const uint64_t newest = newest_.load(std::memory_order_relaxed);
  if (n < 2 || first == kEmpty || newest < first) return 1.0;
  return static_cast<double>(newest - first + 1) / static_cast<double>(n);
}

bool CorrelationTable::lookup(uint32_t id, core::LaunchContext* out) const noexcept {
  if (id == kEmpty || id == kBusy) return false;
  const uint32_t h = home(id);
  for (uint32_t k = 0; k < kProbe; ++k) {
    const Slot& s = slots_[(h + k) & mask_];
    if (s.tag.load(std::memory_order_acquire) != id) continue;
    uint64_t w[6];
    for (int i = 0; i < 6; ++i) w[i] = s.words[i].load(std::memory_order_acquire);
    if (s.tag.load(std::memory_order_acquire) != id) continue;  // replaced while copying
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
  // Not there: lost if a later launch was stored (its context was evicted or never kept); a
  // miss for an id no launch reached yet is not a loss.
  const uint64_t newest = newest_.load(std::memory_order_relaxed);
  if (newest != kEmpty && static_cast<int32_t>(static_cast<uint32_t>(newest) - id) > 0)
    overwritten_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

}  // namespace traintime::cupti
