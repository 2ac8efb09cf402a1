#include "correlation_table.h"

#include <algorithm>
#include <cstddef>

namespace traintime::cupti {
namespace {

// Slot::words hold a LaunchContext as it lies in memory (read() copies the words into one): a
// new or moved field must change the packing in claim() too. Little-endian, as the words are.
static_assert(sizeof(core::LaunchContext) == 56, "LaunchContext changed: update the slot packing");
static_assert(offsetof(core::LaunchContext, path) == 0 && offsetof(core::LaunchContext, step) == 4 &&
              offsetof(core::LaunchContext, entry) == 8 && offsetof(core::LaunchContext, comm) == 16);
static_assert(offsetof(core::CommContext, op) == 0 && offsetof(core::CommContext, captured) == 1 &&
              offsetof(core::CommContext, comm_id) == 4 && offsetof(core::CommContext, seq) == 8 &&
              offsetof(core::CommContext, bytes) == 16 && offsetof(core::CommContext, group_id) == 24 &&
              offsetof(core::LaunchContext, category) == 48);
static_assert(sizeof(core::CommOp) == 1 && sizeof(bool) == 1 && sizeof(core::Category) == 1);
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "Slot::words are little-endian");

// A sixteenth of a small table at most: the floor's argument (correlation_table.h) needs the
// chunks a few threads hold to be far fewer launches than half the table.
uint32_t chunk_for(uint32_t capacity) { return std::min(CorrelationTable::kChunk, capacity / 16); }

uint32_t round_up_pow2(uint32_t n) {
  uint32_t p = 16;
  while (p < n && p < (1u << 26)) p <<= 1;
  return p;
}

// Whether this CPU has PREFETCHW (CPUID 0x80000001 ECX bit 8: every AMD64 CPU, Intel since
// Broadwell). Asked once, at the first table's construction.
bool cpu_has_prefetchw() {
#if defined(__x86_64__)
  uint32_t eax = 0x80000000u, ebx = 0, ecx = 0, edx = 0;
  __asm__("cpuid" : "+a"(eax), "=b"(ebx), "=c"(ecx), "=d"(edx));
  if (eax < 0x80000001u) return false;
  eax = 0x80000001u;
  ecx = 0;
  __asm__("cpuid" : "+a"(eax), "=b"(ebx), "+c"(ecx), "=d"(edx));
  return (ecx >> 8) & 1u;
#else
  return false;
#endif
}

// Asks for a cache line in the exclusive state, ahead of a write: PREFETCHW where the CPU has
// it, else an ordinary prefetch for writing (the compiler's choice of instruction).
inline void prefetch_for_write(const void* p, bool prefetchw) {
#if defined(__x86_64__)
  if (prefetchw) {
    __asm__ volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
    return;
  }
#endif
  (void)prefetchw;
  __builtin_prefetch(p, 1, 3);
}

// a is after b in correlation-id order, across 32-bit wraps.
bool after(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) > 0; }

}  // namespace

CorrelationTable::CorrelationTable(uint32_t capacity)
    : slots_(new Slot[round_up_pow2(capacity)]),
      ids_(new std::atomic<uint32_t>[round_up_pow2(capacity)]()),
      nested_(new std::atomic<uint64_t>[round_up_pow2(capacity)]()),
      bands_(new Band[2 * (round_up_pow2(capacity) / std::min(kBand, round_up_pow2(capacity)))]),
      owners_(new std::atomic<uint64_t>[round_up_pow2(capacity) / chunk_for(round_up_pow2(capacity))]()),
      skipped_(new std::atomic<uint64_t>[round_up_pow2(capacity) / chunk_for(round_up_pow2(capacity))]()),
      mask_(round_up_pow2(capacity) - 1),
      chunk_(chunk_for(round_up_pow2(capacity))),
      chunk_shift_(static_cast<uint32_t>(__builtin_ctz(chunk_))),
      segment_mask_(round_up_pow2(capacity) / chunk_ - 1),
      // An eighth of the table: a context stored under a chunk that old still has 7/8 of the
      // table's launches to live, less the chunks other threads hold.
      stale_after_(std::max<uint64_t>(chunk_, round_up_pow2(capacity) / 8)),
      lookback_(kLookbackChunks * chunk_),
      band_index_mask_(2 * (round_up_pow2(capacity) / std::min(kBand, round_up_pow2(capacity))) - 1),
      band_size_(std::min(kBand, round_up_pow2(capacity))),
      band_shift_(static_cast<uint32_t>(__builtin_ctz(band_size_))),
      prefetchw_(cpu_has_prefetchw()) {}

uint64_t CorrelationTable::fill(uint64_t seq, uint32_t id, const core::LaunchContext& ctx) noexcept {
  Slot& s = slots_[seq & mask_];
  // The slot this thread will most likely fill kPrefetchAhead launches from now was last written
  // a lap ago and read since by the processing thread: without this, the stores below wait for
  // the line to come back from the other core at every launch (most of a launch's cost on a
  // two-core machine). Asked for now, it is exclusive here by then.
  prefetch_for_write(&slots_[(seq + kPrefetchAhead) & mask_], prefetchw_);
  prefetch_for_write(&ids_[(seq + kIdsPerLine) & mask_], prefetchw_);
  // This writer holds the slot's segment (take_chunk): no other writes the slot until it is
  // released, after this launch is published. Being written, then the fields with release (no
  // fence: TSan does not model atomic_thread_fence), so a reader that sees any field of this
  // write also sees the busy stamp before it when it re-checks.
  s.stamp.store(stamp_of(seq) | 1, std::memory_order_relaxed);
  ids_[seq & mask_].store(id, std::memory_order_relaxed);
  s.words[0].store(uint64_t{ctx.path} | (uint64_t{ctx.step} << 32), std::memory_order_release);
  s.words[1].store(ctx.entry, std::memory_order_release);
  s.words[2].store(uint64_t(ctx.comm.op) | (uint64_t{ctx.comm.captured} << 8) |
                       (uint64_t{ctx.comm.comm_id} << 32),
                   std::memory_order_release);
  s.words[3].store(ctx.comm.seq, std::memory_order_release);
  s.words[4].store(ctx.comm.bytes, std::memory_order_release);
  s.words[5].store(ctx.comm.group_id, std::memory_order_release);
  s.words[kIdWord].store(uint64_t(ctx.category) | (uint64_t{id} << 32), std::memory_order_release);
  nested_[seq & mask_].store(0, std::memory_order_release);
  return seq + 1;
}

bool CorrelationTable::take_chunk(Writer& w) noexcept {
  if (w.next != w.end) give_up(w);  // stale
  if (w.end == 0) count_writer();
  for (int tries = 0; tries < kTakeTries; ++tries) {
    const uint64_t first = next_.fetch_add(chunk_, std::memory_order_relaxed);
    // On next_'s line, which the fetch_add just made this core's: no other line touched.
    if (__builtin_expect(first + chunk_ > flush_due_.load(std::memory_order_relaxed), 0)) flush_due(first);
    const uint64_t chunk = first >> chunk_shift_;
    std::atomic<uint64_t>& owner = owners_[chunk & segment_mask_];
    const uint64_t mine = (chunk + 1) << 1;
    uint64_t old = owner.load(std::memory_order_relaxed);
    // Free, and last taken by an older chunk (a writer that took its number a lap ago and was
    // preempted before taking the segment finds it used by the newer lap). Acquire: the older
    // chunk's stores to these slots happen before this chunk's.
    if ((old & 1) == 0 && old < mine &&
        owner.compare_exchange_strong(old, mine | 1, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
      w.next = first;
      w.end = first + chunk_;
      if (!stale(w)) return true;
      give_up(w);  // preempted between the number and the segment while the window moved on
      continue;
    }
    // Held by the writer of an older chunk that stopped part way through it, or used by a newer
    // lap: its launches never come, which the bands are told (summarize() counts it done).
    skipped_[chunk & segment_mask_].store(chunk + 1, std::memory_order_release);
    given_up_.fetch_add(chunk_, std::memory_order_relaxed);
    skipped_chunks_.fetch_add(1, std::memory_order_relaxed);
  }
  collisions_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void CorrelationTable::count_writer() noexcept {
  const uint64_t n = writers_.fetch_add(1, std::memory_order_relaxed) + 1;
  uint64_t peak = writers_peak_.load(std::memory_order_relaxed);
  while (n > peak && !writers_peak_.compare_exchange_weak(peak, n, std::memory_order_relaxed)) {
  }
}

void CorrelationTable::flush_due(uint64_t first) noexcept {
  uint64_t due = flush_due_.load(std::memory_order_relaxed);
  // One thread per mark calls the hook; the mark is armed again by flushed() after the flush.
  if (first + chunk_ <= due || !flush_due_.compare_exchange_strong(due, ~uint64_t{0}, std::memory_order_relaxed))
    return;
  flushes_asked_.fetch_add(1, std::memory_order_relaxed);
  if (flush_hook_ != nullptr) flush_hook_(flush_arg_);
}

void CorrelationTable::count_loss(uint64_t seen) const noexcept {
  overwritten_.fetch_add(1, std::memory_order_relaxed);
  const uint64_t last = cursor_.load(std::memory_order_relaxed);
  if (last != kNoHit && last + capacity() >= seen) overwritten_late_.fetch_add(1, std::memory_order_relaxed);
}

void CorrelationTable::give_up(Writer& w) noexcept {
  // Each unused slot published empty (id 0, which no lookup matches), so its band can complete;
  // the last one releases the segment.
  given_up_.fetch_add(w.end - w.next, std::memory_order_relaxed);
  for (uint64_t seq = w.next; seq < w.end; ++seq) {
    Slot& s = slots_[seq & mask_];
    s.stamp.store(stamp_of(seq) | 1, std::memory_order_relaxed);
    ids_[seq & mask_].store(0, std::memory_order_relaxed);
    nested_[seq & mask_].store(0, std::memory_order_release);
    s.words[kIdWord].store(0, std::memory_order_release);
    publish(seq + 1);
  }
  w.next = w.end;
}

uint64_t CorrelationTable::launches() const noexcept {
  uint64_t unfilled = 0;
  for (uint64_t segment = 0; segment <= segment_mask_; ++segment) {
    const uint64_t owner = owners_[segment].load(std::memory_order_acquire);
    if ((owner & 1) == 0) continue;  // not held
    const uint64_t first = ((owner >> 1) - 1) << chunk_shift_;
    for (uint64_t q = first; q < first + chunk_; ++q)  // being written counts as filled
      if (slots_[q & mask_].stamp.load(std::memory_order_relaxed) < stamp_of(q)) ++unfilled;
  }
  return next_.load(std::memory_order_relaxed) - given_up_.load(std::memory_order_relaxed) - unfilled;
}

bool CorrelationTable::id_at(uint64_t seq, uint32_t* id) const noexcept {
  const Slot& s = slots_[seq & mask_];
  const uint64_t stamp = stamp_of(seq);
  if (s.stamp.load(std::memory_order_acquire) != stamp) return false;
  const uint64_t w = s.words[kIdWord].load(std::memory_order_acquire);
  if (s.stamp.load(std::memory_order_acquire) != stamp) return false;
  *id = static_cast<uint32_t>(w >> 32);
  return *id != 0;  // 0: a slot given up empty
}

double CorrelationTable::ids_per_store() const noexcept {
  const uint64_t min_seq = min_seq_.load(std::memory_order_relaxed);
  const uint64_t max_seq = max_seq_.load(std::memory_order_relaxed);
  const uint64_t min_id = min_id_.load(std::memory_order_relaxed);
  const uint64_t max_id = max_id_.load(std::memory_order_relaxed);
  if (min_seq == ~uint64_t{0} || max_seq <= min_seq || max_id < min_id) return 1.0;
  return static_cast<double>(max_id - min_id + 1) / static_cast<double>(max_seq - min_seq + 1);
}

bool CorrelationTable::band_range(uint64_t first, uint64_t* range) const noexcept {
  const Band& b = band_at(first);
  if (b.first.load(std::memory_order_acquire) != first + 1) return false;
  *range = b.range.load(std::memory_order_acquire);
  return b.first.load(std::memory_order_relaxed) == first + 1;  // not rewritten meanwhile
}

bool CorrelationTable::band_excludes(uint64_t first, uint32_t id) const noexcept {
  uint64_t range = 0;
  if (!band_range(first, &range)) return false;
  return static_cast<uint32_t>(id - static_cast<uint32_t>(range)) > static_cast<uint32_t>(range >> 32);
}

bool CorrelationTable::below_floor(uint32_t id) const noexcept {
  if (writers_peak_.load(std::memory_order_relaxed) > max_writers()) return false;
  const uint64_t floor = floor_.load(std::memory_order_relaxed);
  // Within kFloorReach below it: a floor left from long ago never rejects ids that wrapped.
  return (floor >> 32) != 0 && static_cast<uint32_t>(floor) - id - 1 < kFloorReach;
}

bool CorrelationTable::pending(uint64_t q, uint64_t stamp) const noexcept {
  if (stamp > (stamp_of(q) | 1) || stamp == stamp_of(q)) return false;  // overwritten, published
  return !(stamp < stamp_of(q) && in_skipped_chunk(q));  // a skipped chunk's never comes
}

void CorrelationTable::summarize(uint64_t first) const noexcept {
  // The launch that kept this band from completing last time, still not published: it is not
  // complete yet (one line read, not the band's up to that launch: misses ask at every lookup
  // while a thread holds a chunk in the newest band).
  const uint64_t waiting = waiting_for_.load(std::memory_order_relaxed);
  if (waiting > first && waiting <= first + band_size_ &&
      pending(waiting - 1, slots_[(waiting - 1) & mask_].stamp.load(std::memory_order_acquire)))
    return;
  if (summarizing_.exchange(true, std::memory_order_acquire)) return;
  Band& b = band_at(first);
  // Bands are summarized while in the live window, which only moves forward: a newer band in
  // this place stays.
  bool complete = b.first.load(std::memory_order_relaxed) < first + 1;
  uint32_t ref = 0;
  bool any = false;
  int64_t lo = 0, hi = 0;
  constexpr int64_t kNone = INT64_MAX;
  int64_t sub_lo[kBand / kSubBlock];
  for (int64_t& v : sub_lo) v = kNone;
  for (uint64_t q = first; complete && q < first + band_size_; ++q) {
    const uint64_t stamp = slots_[q & mask_].stamp.load(std::memory_order_acquire);
    if (pending(q, stamp)) {
      complete = false;  // not yet published (claimed, being written, or not reached): later
      waiting_for_.store(q + 1, std::memory_order_relaxed);
      break;
    }
    if (stamp != stamp_of(q)) continue;  // overwritten by a newer launch, or a skipped chunk's
    // The id store precedes the stamp's release; a newer launch's id read here instead (the slot
    // rewritten since) only widens the range.
    const uint64_t nested = nested_[q & mask_].load(std::memory_order_relaxed);
    const uint32_t ids[] = {ids_[q & mask_].load(std::memory_order_relaxed),
                            static_cast<uint32_t>(nested), static_cast<uint32_t>(nested >> 32)};
    for (const uint32_t id : ids) {
      if (id == 0) continue;  // no nested id
      if (!any) ref = id;
      any = true;
      const int64_t d = static_cast<int32_t>(id - ref);
      lo = std::min(lo, d);
      hi = std::max(hi, d);
      int64_t& sub = sub_lo[(q - first) / kSubBlock];
      sub = std::min(sub, d);
    }
  }
  // Ids more than 2^30 apart in one band (never seen: launches are not that sparse) are not
  // summarized, as ranges across a wrap would be ambiguous; the band is then always scanned.
  if (complete && any && hi - lo < (int64_t{1} << 30)) {
    const uint32_t low = ref + static_cast<uint32_t>(lo);
    b.first.store(0, std::memory_order_relaxed);
    b.range.store(uint64_t{low} | (static_cast<uint64_t>(hi - lo) << 32), std::memory_order_release);
    for (uint32_t k = 0; k < band_size_ / kSubBlock; ++k)
      b.sub[k].store(static_cast<uint32_t>((sub_lo[k] == kNone ? hi : sub_lo[k]) - lo),
                     std::memory_order_release);
    b.first.store(first + 1, std::memory_order_release);
  }
  summarizing_.store(false, std::memory_order_release);
}

bool CorrelationTable::band_sub_min(uint64_t first, uint32_t k, uint32_t* low,
                                    uint32_t* above) const noexcept {
  const Band& b = band_at(first);
  if (b.first.load(std::memory_order_acquire) != first + 1) return false;
  const uint64_t range = b.range.load(std::memory_order_acquire);
  uint32_t m = static_cast<uint32_t>(range >> 32);
  for (uint32_t i = k; i < band_size_ / kSubBlock; ++i)
    m = std::min(m, b.sub[i].load(std::memory_order_acquire));
  *low = static_cast<uint32_t>(range);
  *above = m;
  return b.first.load(std::memory_order_relaxed) == first + 1;  // not rewritten meanwhile
}

void CorrelationTable::compute_floor(uint64_t end) const noexcept {
  // The window of the bound is the capacity() numbers before end; a chunk's worth before it too,
  // whose launches may still be in their slots (a writer's chunk not yet filled: one writer's
  // last capacity() launches are all found).
  const uint64_t live = end > capacity() ? end - capacity() : 0;
  floor_begin_.store(live, std::memory_order_relaxed);
  floor_.store(0, std::memory_order_relaxed);
  const uint64_t from = live > chunk_ ? live - chunk_ : 0;
  // [from, split): read from the id columns (a slot rewritten since holds a newer id, which only
  // raises the minimum); from split on: the bands' summaries (those slots are not rewritten before
  // end passes them by capacity()).
  const uint64_t split = (live + kSubBlock - 1) / kSubBlock * kSubBlock;
  const uint64_t band0 = split >> band_shift_ << band_shift_;
  if (band0 + band_size_ > end) return;
  // The complete bands after split's, up to the first not complete: once per band the window
  // moves.
  if (rest_band_.load(std::memory_order_acquire) != band0 + 1) {
    uint32_t ref = 0;
    bool any = false;
    int64_t lo = 0;
    uint64_t first = band0 + band_size_;
    for (; first + band_size_ <= end; first += band_size_) {
      uint64_t range = 0;
      if (!band_range(first, &range)) {
        summarize(first);
        // A launch not yet published (a chunk a thread holds, or a store under way): the floor
        // covers the bands before it, if they are enough (below).
        if (!band_range(first, &range)) break;
      }
      const uint32_t low = static_cast<uint32_t>(range);
      if (!any) ref = low;
      any = true;
      lo = std::min<int64_t>(lo, static_cast<int32_t>(low - ref));
    }
    rest_.store(any ? (uint64_t{1} << 32) | (ref + static_cast<uint32_t>(lo)) : 0,
                std::memory_order_relaxed);
    rest_end_.store(first, std::memory_order_relaxed);
    rest_band_.store(band0 + 1, std::memory_order_release);  // after rest_ and rest_end_
  }
  // Only a floor over at least half a table: an id below them all, stored by a live launch, was
  // taken before every launch of [live, rest_end_) took its id, and stored after them (or, under
  // a later number, before the rest of other threads' chunks: fewer, correlation_table.h); over
  // fewer launches that is not a long delay (a launch just after them whose thread took its id a
  // few launches earlier than theirs would be rejected).
  if (rest_end_.load(std::memory_order_relaxed) < live + capacity() / 2) return;
  uint32_t low = 0, above = 0;
  const auto k = static_cast<uint32_t>((split - band0) / kSubBlock);
  if (!band_sub_min(band0, k, &low, &above)) {
    summarize(band0);
    if (!band_sub_min(band0, k, &low, &above)) return;
  }
  int64_t lo = above;  // relative to split's band's low
  for (uint64_t q = from; q < split; ++q) {
    const uint64_t nested = nested_[q & mask_].load(std::memory_order_relaxed);
    for (const uint32_t id : {ids_[q & mask_].load(std::memory_order_relaxed),
                              static_cast<uint32_t>(nested), static_cast<uint32_t>(nested >> 32)})
      if (id != 0) lo = std::min<int64_t>(lo, static_cast<int32_t>(id - low));
  }
  const uint64_t rest = rest_.load(std::memory_order_relaxed);
  if ((rest >> 32) != 0) lo = std::min<int64_t>(lo, static_cast<int32_t>(static_cast<uint32_t>(rest) - low));
  floor_.store((uint64_t{1} << 32) | (low + static_cast<uint32_t>(lo)), std::memory_order_relaxed);
}

bool CorrelationTable::lookup_scan(uint32_t id, core::LaunchContext* out) const noexcept {
  if (id == 0) return false;
  // Below the live window's lowest id: a loss, decided without reading the table.
  if (below_floor(id)) {
    count_loss(seen_end_.load(std::memory_order_relaxed));
    return false;
  }
  // The id column names the candidate slots (16 per cache line); read() validates the slot.
  const uint64_t seen = seen_end_.load(std::memory_order_relaxed);
  const uint64_t last = cursor_.load(std::memory_order_relaxed);
  const auto holds = [&](uint64_t q) {
    bool nested = false;
    if (ids_[q & mask_].load(std::memory_order_relaxed) != id) {
      if (!nests(nested_[q & mask_].load(std::memory_order_relaxed), id)) return false;
      nested = true;
    }
    return read(q, id, nested, out);
  };
  // Threads launching at once fill chunks apart, and records arrive in time order: the record
  // after a hit is often the next launch of another thread's chunk. The next launch of each of
  // the last few chunks the reader left is kept (streams_), and looked at first; the chunk it
  // leaves for one of them takes its place.
  for (auto& stream : streams_) {
    const uint64_t q = stream.load(std::memory_order_relaxed);
    if (q < seen && holds(q)) {
      found(q, id);
      stream.store(last, std::memory_order_relaxed);
      return true;
    }
  }
  scans_.fetch_add(1, std::memory_order_relaxed);
  const auto hit = [&](uint64_t q) {
    if (!holds(q)) return false;
    found(q, id);
    if (q != last && last != kNoHit) {
      const uint64_t k = next_stream_.load(std::memory_order_relaxed);
      streams_[k % kStreams].store(last, std::memory_order_relaxed);
      next_stream_.store(k + 1, std::memory_order_relaxed);
    }
    return true;
  };
  // Records arrive nearly in launch order: first forward from the previous hit, up to the newest
  // launch the reader saw last, without reading next_ (the launching threads' counter: a read on
  // every record would take its cache line from them at every launch). read() validates the
  // slot, so a window seen earlier is as safe as a fresh one.
  const uint64_t start = last == kNoHit ? 0 : last;  // no hit yet: from the first slot
  for (uint64_t q = start, e = std::min(seen, q + kScan); q < e; ++q)
    if (hit(q)) return true;
  const uint64_t end = next_.load(std::memory_order_acquire);
  if (end > seen) seen_end_.store(end, std::memory_order_relaxed);
  // The counter runs ahead of the launches stored by the chunks threads hold, so the capacity()
  // numbers before it are not all filled yet: the launches before them are still in their slots
  // (read() tells a slot's launch by its stamp, so looking there is safe).
  const uint64_t reach = capacity() + lookback_;
  const uint64_t begin = end > reach ? end - reach : 0;
  const uint64_t cursor = std::clamp(start, begin, end);
  // Records arrive nearly in launch order: near the slot after the previous hit first, forward
  // then back; then the rest of the live slots, so a context in the table is always found.
  const uint64_t near_end = std::min(end, cursor + kScan);
  const uint64_t near_begin = cursor - std::min(cursor - begin, uint64_t{kScan});
  for (uint64_t q = cursor; q < near_end; ++q)
    if (hit(q)) return true;
  for (uint64_t q = cursor; q > near_begin; --q)
    if (hit(q - 1)) return true;
  // Not near: the floor, recomputed once the window has moved on (here, not on every pass through
  // the slow path, so a reader that keeps up never pays for it: a few lines read, the bands' ones
  // once per band), may settle it.
  if ((end > capacity() ? end - capacity() : 0) != floor_begin_.load(std::memory_order_relaxed)) {
    compute_floor(end);
    if (below_floor(id)) {
      count_loss(end);
      return false;
    }
  }
  full_scans_.fetch_add(1, std::memory_order_relaxed);
  // The rest, band by band: [lo, hi) of the band that starts at `first`, unless its id range
  // excludes the id (a band wholly in the live window gets its range the first time).
  const auto band = [&](uint64_t first, uint64_t lo, uint64_t hi, bool backward) {
    if (lo >= hi || band_excludes(first, id)) return false;
    if (first + band_size_ <= end) {
      summarize(first);
      if (band_excludes(first, id)) return false;
    }
    if (backward) {
      for (uint64_t q = hi; q > lo; --q)
        if (hit(q - 1)) return true;
    } else {
      for (uint64_t q = lo; q < hi; ++q)
        if (hit(q)) return true;
    }
    return false;
  };
  const uint64_t bsize = band_size_;
  for (uint64_t first = near_end - near_end % bsize; first < end; first += bsize)
    if (band(first, std::max(first, near_end), std::min(first + bsize, end), false)) return true;
  for (uint64_t first = near_begin - near_begin % bsize; first + bsize > begin; first -= bsize) {
    if (band(first, std::max(first, begin), std::min(first + bsize, near_begin), true)) return true;
    if (first == 0) break;
  }
  // Not there: lost if a later launch was stored (its context was overwritten or never kept);
  // a miss for an id no launch reached yet is not a loss. A later launch: one this reader found
  // already (the newest id it found), or the first of one of the last chunks handed out (a
  // chunk is filled from its first number; the rest of the chunks threads hold may not be).
  const bool any_found = min_seq_.load(std::memory_order_relaxed) != ~uint64_t{0};
  bool lost = any_found && after(static_cast<uint32_t>(max_id_.load(std::memory_order_relaxed)), id);
  uint32_t newest = 0;
  for (uint64_t k = 1; !lost && k <= kLookbackChunks && k * chunk_ <= end - begin; ++k)
    if (id_at(end - k * chunk_, &newest)) {
      lost = after(newest, id);
      break;
    }
  if (lost) count_loss(end);
  return false;
}

}  // namespace traintime::cupti
