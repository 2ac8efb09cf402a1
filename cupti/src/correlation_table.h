// Correlation id -> launch context, written on the application's launching thread inside the
// launch callback and read by the processing thread when the activity record arrives (DESIGN §4).
//
// Fixed size, lock-free, allocation-free after construction, laid out for the caches. Every
// launch has a sequence number and is written to slot seq % capacity, one 64-byte line per
// context. The numbers are handed out in chunks (kChunk consecutive launches, one aligned segment
// of the table) from one counter: a launching thread takes a chunk and its segment at once (a
// fetch_add and a compare-exchange on the segment's owner word, once per chunk) and then fills
// the chunk's slots alone, with plain stores and no locked instruction per launch (each of those
// drained the store buffer: most of the launch callback's own time). So consecutive launches of
// a thread fill consecutive lines, the launching thread streams through the table and the
// processing thread, whose records arrive nearly in launch order, streams behind it. Slots are
// indexed by launch, not by correlation id: real CUPTI numbers every traced API call, so ids
// advance several times faster than launches and by an amount the tool does not control, but the
// id rate never shrinks the table.
//
// The bound: a context is overwritten only by the launch capacity() sequence numbers after it,
// whatever the id rate (the segment is owned by one writer at a time, and a writer takes a
// segment only for a chunk newer than every chunk that had it). Sequence numbers run ahead of
// launches by the chunks launching threads still hold (fewer than kChunk each) and by chunks given
// up (below), so in launches the bound is capacity() less about kChunk per launching thread. A
// thread whose chunk fell more than stale_after_ numbers behind the counter (it stopped
// launching a while) gives the rest of it up before its next launch instead of storing under an
// old number that the window is about to pass, so a context it stores has at least capacity() -
// stale_after_ - kChunk numbers to live; the activity buffers are sized with the table so that
// records arrive well before that (capture_tuning.h, kLaunchesInFlight). A chunk is given up by
// publishing its unused slots empty (id 0: no lookup matches it) and releasing the segment; a
// chunk whose segment is still held (its owner stopped part way through it a lap ago, or was
// preempted) is skipped and marked so (its launches never come). A thread that exits gives its
// chunk back (give_back()).
//
// Finding an id: the slot after the reader's previous hit first (inline), then the next launch of
// each of the last few chunks the reader's hits left (threads launching at once fill chunks apart,
// and records arrive in time order: two threads' alternating records cost a scan each without them,
// 60 times an inline hit). Then a column of the ids by slot (4 bytes each, 16 to a cache line, also
// written in launch order) is scanned from the slot after the previous hit, forward then back, and
// where the record is far out of order, over every other live slot, so a context in the table is
// always found. That pass goes band by band (kBand launches each): a band whose every launch is
// published (or already overwritten, or in a skipped chunk) gets, once, the range of the ids it
// holds and the lowest id of each of its sub-blocks (kSubBlock launches), and a band whose range
// excludes the id is skipped unread. So a miss reads one word per band and the bands still being
// written (a band with a chunk a thread still holds is one), not the whole column. A context stored
// late under an old id (its thread preempted between CUPTI's id and the store) widens its own
// band's range and is still found.
//
// The floor: from those summaries the reader also keeps a lower bound of the live window's ids,
// recomputed by a lookup that missed near its cursor whenever the window has moved: the lowest id
// of the launches from the window's start (and the chunk's worth before it, whose launches may
// still be in their slots) up to its first band not complete (a launch not yet published), exact to
// the launch at the window's start (the first sub-block is read from the id columns, the rest of
// its band from the sub-block minima, the later bands from their ranges), and kept only when those
// are at least capacity() / 2 launches. An id below it is a loss decided in one comparison, so a
// reader that fell behind, meeting one record evicted a moment ago after another, pays almost
// nothing per record and catches up (with a floor of whole bands, each record evicted since the
// last band cost a scan of the table, and a reader at the window's start never caught up). So the
// one context that test misses while fewer than capacity() newer launches were stored is one whose
// thread took its id before each of at least capacity() / 2 other launches took theirs, and stored
// it after them all (preempted between CUPTI's id and the store while half a table of launches went
// by): counted lost, as a context evicted after capacity() launches is. (Stored before them but
// under a later number is not possible: the launches under earlier numbers that took their ids
// later are the rest of the chunks other threads held, at most kChunk each: fewer than half the
// table with up to capacity() / (2 x kChunk) launching threads, 128 in the capture's table.)
//
// A slot is filled as a seqlock keyed by the sequence number: its stamp set to "being written", the
// fields stored with release, the stamp set to the sequence number (published); the reader
// validates the stamp before and after copying, so it never returns a torn or a foreign context
// (and one writer per segment at a time means no two writes of a slot overlap). A lookup that finds
// nothing for an id older than the newest found or stored is counted as overwritten() and reported.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>

#include "traintime/core/activity.h"

namespace traintime::cupti {

class CorrelationTable {
 public:
  // How far the reader scans either side of its cursor before it scans the whole table.
  static constexpr uint32_t kScan = 64;
  // Launches per band of the id ranges that let a miss skip most of the table (fewer in a table
  // smaller than this).
  static constexpr uint32_t kBand = 256;

  // Launches a thread claims at once (fewer in a small table: a sixteenth of it).
  static constexpr uint32_t kChunk = 64;

  // capacity is rounded up to a power of two (at least 16).
  explicit CorrelationTable(uint32_t capacity);

  // A launching thread's chunk of sequence numbers: the caller keeps one per thread for this
  // table, zero-initialised, and passes it to every claim and store the thread makes.
  struct Writer {
    uint64_t next = 0;  // the next sequence number of the chunk held
    uint64_t end = 0;   // its end: next == end, none held
  };

  // Hot path: no lock, no allocation, errno untouched; no locked instruction but once a chunk.
  // Returns 1 + the launch sequence number the context was kept under (its ticket), 0 when it
  // was not kept (id 0, or no chunk could be had).
  uint64_t store(Writer& w, uint32_t correlation_id, const core::LaunchContext& ctx) noexcept {
    const uint64_t ticket = claim(w, correlation_id, ctx);
    publish(ticket);
    return ticket;
  }

  // One launch, several correlation ids: a runtime launch's nested driver call (and its own
  // runtime entry point under it) joins the same context. claim() fills the launch's slot and
  // keeps it unpublished, add_nested() adds up to kNestedIds more ids to it, publish() makes it
  // visible: one slot for the whole launch, however many of its ids are kept, so nested ids do
  // not shrink the table's bound. The slot is the claiming thread's alone until published (no
  // other writer, no reader takes it), so the nested ids need no atomic read-modify-write. A
  // record cannot arrive before its launch's innermost call: the launch callback publishes at
  // that call's entry (the driver's), or at the outer call's exit when there is none. claim()
  // may give up a stale chunk (its unused slots published empty and its segment released), so
  // it is called with no claimed slot of this writer unpublished; a claim while one is open (an
  // id that did not fit in its launch's slot) is claim_beside(), which keeps the chunk.
  static constexpr uint32_t kNestedIds = 2;
  uint64_t claim(Writer& w, uint32_t correlation_id, const core::LaunchContext& ctx) noexcept {
    if (correlation_id == 0) return 0;  // CUPTI's correlation ids start at 1
    if (__builtin_expect(w.next == w.end || stale(w), 0)) {
      if (!take_chunk(w)) return 0;
    }
    return fill(w.next++, correlation_id, ctx);
  }
  uint64_t claim_beside(Writer& w, uint32_t correlation_id,
                        const core::LaunchContext& ctx) noexcept {
    if (correlation_id == 0) return 0;
    if (w.next == w.end && !take_chunk(w)) return 0;
    return fill(w.next++, correlation_id, ctx);
  }
  // For a table with one writing thread (tests, replays, benchmarks): the table's own Writer.
  uint64_t claim(uint32_t correlation_id, const core::LaunchContext& ctx) noexcept {
    return claim(solo_, correlation_id, ctx);
  }
  uint64_t store(uint32_t correlation_id, const core::LaunchContext& ctx) noexcept {
    return store(solo_, correlation_id, ctx);
  }
  // False when not kept: ticket 0, id 0, or kNestedIds nested ids already (store it alone).
  bool add_nested(uint64_t ticket, uint32_t correlation_id) noexcept {
    if (ticket == 0 || correlation_id == 0) return false;
    std::atomic<uint64_t>& n = nested_[(ticket - 1) & mask_];
    const uint64_t held = n.load(std::memory_order_relaxed);  // this thread's own slot
    if (static_cast<uint32_t>(held) == 0) {
      n.store(held | correlation_id, std::memory_order_release);
    } else if ((held >> 32) == 0) {
      n.store(held | (uint64_t{correlation_id} << 32), std::memory_order_release);
    } else {
      return false;
    }
    return true;
  }
  // The last launch of a chunk, published, frees its segment for the chunk a lap later.
  void publish(uint64_t ticket) noexcept {
    if (ticket == 0) return;
    slots_[(ticket - 1) & mask_].stamp.store(stamp_of(ticket - 1), std::memory_order_release);
    if ((ticket & (chunk_ - 1)) == 0) release_segment((ticket - 1) >> chunk_shift_);
  }
  // A thread that launches no more (its exit) gives the rest of its chunk up, so its segment is
  // free for the next lap. No claimed slot of w may be unpublished.
  void give_back(Writer& w) noexcept {
    if (w.next != w.end) give_up(w);
    if (w.end != 0) writers_.fetch_sub(1, std::memory_order_relaxed);
    w = Writer{};
  }

  // True and *out filled (every field) when the entry for correlation_id is present; when not,
  // *out may have been written (a copy that did not validate) and means nothing. Any thread
  // may call it; the cursor it keeps is a hint, so one reader (the processing thread) is the
  // fast case.
  bool lookup(uint32_t correlation_id, core::LaunchContext* out) const noexcept {
    // The common case, inline: the record of the launch after the previous hit, read straight
    // from its slot (read() checks the slot's own id; the id column is for the scans). Id 0
    // never matches: no slot is published under it. A slot that holds the id and validates is
    // live, so the floor (a shortcut for misses) is not needed. Before the first hit the cursor
    // is kNoHit, past every slot.
    const uint64_t q = cursor_.load(std::memory_order_relaxed);
    if (q < seen_end_.load(std::memory_order_relaxed) && read(q, correlation_id, false, out)) {
      found_next(q, correlation_id);
      return true;
    }
    return lookup_scan(correlation_id, out);
  }

  uint32_t capacity() const { return mask_ + 1; }
  // Its memory, fixed at construction (self_cost.memory): the slots, the id and nested-id
  // columns, the bands and the segments' owners.
  size_t bytes() const noexcept {
    const size_t n = capacity();
    const size_t segments = size_t{segment_mask_} + 1;
    return n * (sizeof(Slot) + sizeof(uint32_t) + sizeof(uint64_t)) +
           2 * (n / std::min<size_t>(kBand, n)) * sizeof(Band) + 2 * segments * sizeof(uint64_t);
  }
  // Lookups that found no context for an id older than the newest stored.
  uint64_t overwritten() const { return overwritten_.load(std::memory_order_relaxed); }
  // Claims not kept: no chunk could be had in kTakeTries tries, each one's segment still held by
  // a thread that stopped part way through it a lap before, or already used by a newer lap.
  uint64_t store_collisions() const { return collisions_.load(std::memory_order_relaxed); }
  // Lookups settled neither at the reader's cursor nor at the next launch of another recent
  // chunk (a launching thread's), which scanned the table; and of those, the ones that went on
  // past the slots near the cursor and the floor, to the bands.
  uint64_t scans() const { return scans_.load(std::memory_order_relaxed); }
  uint64_t full_scans() const { return full_scans_.load(std::memory_order_relaxed); }
  // Chunks skipped so (their launches went to the next chunk; none is lost by it).
  uint64_t chunks_skipped() const { return skipped_chunks_.load(std::memory_order_relaxed); }
  // Correlation ids per launch (1.0 until two contexts were found), measured by the reader over
  // the contexts it found: the ids they span, counted across 32-bit wraps, per launch spanned.
  double ids_per_store() const noexcept;
  // Launch contexts stored (launch callbacks seen), including those lost to collisions: the
  // sequence numbers handed out less those given up and those of the chunks held not yet filled
  // (read from their slots' stamps, so exact when no thread is launching meanwhile).
  uint64_t launches() const noexcept;
  // Sequence numbers handed out: the window of live contexts is the capacity() before it.
  uint64_t sequence_end() const { return next_.load(std::memory_order_relaxed); }

  // Flushes by launch count. CUPTI hands a thread's partly filled activity buffer over only at a
  // flush: the records of a thread that launches rarely beside a launch-bound one (NCCL's thread,
  // a prefetch thread) wait for it while the other thread's launches move the window on. So the
  // window asks for a flush itself: once the sequence has moved flush_every() numbers since the
  // last flushed() (a quarter of the table, so a record the flush delivers has three quarters of
  // the table's launches left to arrive in), the thread that takes the chunk crossing that mark
  // calls hook(arg), once per mark, out of the launch path's common case (at a chunk). The hook is
  // set before any launch and never changed; flushed() is called after every flush, whatever
  // asked for it, and arms the next mark.
  using FlushHook = void (*)(void* arg);
  void set_flush_hook(FlushHook hook, void* arg) noexcept {
    flush_hook_ = hook;
    flush_arg_ = arg;
    flushed();
  }
  void flushed() noexcept {
    flush_due_.store(next_.load(std::memory_order_relaxed) + flush_every(), std::memory_order_relaxed);
  }
  uint64_t flush_every() const noexcept { return capacity() / 4; }
  // Flushes asked for by launch count.
  uint64_t flushes_asked() const { return flushes_asked_.load(std::memory_order_relaxed); }

  // Threads holding chunks: each launching thread holds one from its first launch to its exit
  // (give_back()), so the sequence runs up to a chunk per thread ahead of the launches stored, and
  // the floor's argument (above) holds for up to max_writers() of them. More at once, and lookups
  // go on without the floor (a loss is then decided by a scan of the table, not one comparison)
  // and the window is that much shorter in launches: counted, for the warning that says so.
  uint32_t max_writers() const noexcept { return capacity() / (2 * chunk_); }
  // The most threads that held chunks at once.
  uint64_t writers_peak() const { return writers_peak_.load(std::memory_order_relaxed); }
  // Of overwritten(): the records that arrived late while the reader kept up (its previous hit
  // was inside the window), so their buffer, not the reader, was behind.
  uint64_t overwritten_late() const { return overwritten_late_.load(std::memory_order_relaxed); }

 private:
  // Fills slot seq (the writer's own: its chunk's) and returns its ticket, unpublished.
  uint64_t fill(uint64_t seq, uint32_t correlation_id, const core::LaunchContext& ctx) noexcept;
  // w's chunk fell stale_after_ or more sequence numbers behind the counter.
  bool stale(const Writer& w) const noexcept {
    return next_.load(std::memory_order_relaxed) - w.end >= stale_after_;
  }
  // Gives up w's chunk if it holds one, then takes a new one and its segment: false when
  // kTakeTries chunks in a row could not be had (their segments held or used by a newer lap).
  static constexpr int kTakeTries = 4;
  bool take_chunk(Writer& w) noexcept;
  // The unused slots of w's chunk published empty, its segment released.
  void give_up(Writer& w) noexcept;
  void release_segment(uint64_t chunk) noexcept {
    owners_[chunk & segment_mask_].store((chunk + 1) << 1, std::memory_order_release);
  }
  // Slot seq is in a chunk that was skipped (its launches never come in this lap).
  bool in_skipped_chunk(uint64_t seq) const noexcept {
    const uint64_t chunk = seq >> chunk_shift_;
    return skipped_[chunk & segment_mask_].load(std::memory_order_acquire) == chunk + 1;
  }

  // Slot::stamp: 0 never written; (seq + 1) << 1 published; that | 1 being written.
  // Slot::words: the LaunchContext's bytes as its 7 words lie in memory (correlation_table.cpp
  // checks the offsets), so read() copies a context in 7 loads and 7 stores, nothing unpacked;
  // the correlation id in the high half of the last word (the context's padding there).
  struct alignas(64) Slot {
    std::atomic<uint64_t> stamp{0};
    std::atomic<uint64_t> words[7] = {};
  };
  static_assert(sizeof(Slot) == 64, "one launch context per cache line");
  static constexpr int kIdWord = 6;  // words[kIdWord] >> 32 is the correlation id

  static uint64_t stamp_of(uint64_t seq) noexcept { return (seq + 1) << 1; }  // odd: being written
  // Whether a slot's nested-id word (two 32-bit halves, 0: none) holds id.
  static bool nests(uint64_t nested, uint32_t id) noexcept {
    return static_cast<uint32_t>(nested) == id || static_cast<uint32_t>(nested >> 32) == id;
  }
  // Copies slot seq if it holds correlation_id (as its own id, or nested: one of its nested
  // ids), validated against concurrent rewrites. Inline: lookup()'s common case is this.
  bool read(uint64_t seq, uint32_t id, bool nested, core::LaunchContext* out) const noexcept {
    const Slot& s = slots_[seq & mask_];
    const uint64_t stamp = stamp_of(seq);
    if (s.stamp.load(std::memory_order_acquire) != stamp) return false;
    const uint64_t w6 = s.words[kIdWord].load(std::memory_order_acquire);
    if (nested) {
      if (!nests(nested_[seq & mask_].load(std::memory_order_acquire), id)) return false;
    } else if (static_cast<uint32_t>(w6 >> 32) != id) {
      return false;
    }
    // Each word goes straight into *out (a load and a store, no unpacking): held in registers
    // until the stamp re-check, most of them spilled to the stack and back in the processing
    // loop, and a copy through a local array stalled on store forwarding. *out means nothing
    // until this returns true, so a copy the re-check rejects may be left in it.
    auto* bytes = reinterpret_cast<unsigned char*>(out);
    const auto copy = [&](int i) {  // called six times below: a loop of atomic loads stays a loop
      const uint64_t w = s.words[i].load(std::memory_order_acquire);
      std::memcpy(bytes + 8 * i, &w, 8);
    };
    copy(0);
    copy(1);
    copy(2);
    copy(3);
    copy(4);
    copy(5);
    const uint64_t category = w6 & 0xff;  // the padding after it left zero, not the id
    std::memcpy(bytes + 8 * kIdWord, &category, 8);
    if (s.stamp.load(std::memory_order_acquire) != stamp) return false;  // rewritten meanwhile
    return true;
  }
  bool lookup_scan(uint32_t id, core::LaunchContext* out) const noexcept;  // all but the cursor
  // The correlation id stored under seq, if published (for the newest and oldest live ids).
  bool id_at(uint64_t seq, uint32_t* id) const noexcept;
  // After a hit at seq: the cursor, the next record's line asked for, and the id unwrapped
  // (returned; *delta: its step from the previous hit's).
  uint64_t record_hit(uint64_t seq, uint32_t id, int32_t* delta) const noexcept {
    cursor_.store(seq + 1, std::memory_order_relaxed);
    // The next record's context is most likely a launch or two on (a runtime launch stores two):
    // its line is asked for now, while this record is ingested.
    __builtin_prefetch(&slots_[(seq + 2) & mask_]);
    // Unwrap the id against the previous one found (records arrive about once a flush, far
    // fewer than 2^31 ids apart; the low half of the last unwrapped id is that id itself, see
    // last_unwrapped_).
    const uint64_t last = last_unwrapped_.load(std::memory_order_relaxed);
    *delta = static_cast<int32_t>(id - static_cast<uint32_t>(last));
    const uint64_t unwrapped = last + static_cast<int64_t>(*delta);
    last_unwrapped_.store(unwrapped, std::memory_order_relaxed);
    return unwrapped;
  }
  // A hit found by a scan: the ranges the id rate is measured over widened both ways.
  void found(uint64_t seq, uint32_t id) const noexcept {
    int32_t delta = 0;
    const uint64_t unwrapped = record_hit(seq, id, &delta);
    if (unwrapped < min_id_.load(std::memory_order_relaxed)) min_id_.store(unwrapped, std::memory_order_relaxed);
    if (unwrapped > max_id_.load(std::memory_order_relaxed)) max_id_.store(unwrapped, std::memory_order_relaxed);
    if (seq < min_seq_.load(std::memory_order_relaxed)) min_seq_.store(seq, std::memory_order_relaxed);
    if (seq > max_seq_.load(std::memory_order_relaxed)) max_seq_.store(seq, std::memory_order_relaxed);
  }
  // A hit at the cursor (nearly every hit), inline. The cursor is set only by a hit, so one
  // came before this one, at seq - 1, and the ranges hold it: seq cannot lower the sequence
  // range, an id after that hit's can only raise the id range's top, one before it only lower
  // its bottom.
  void found_next(uint64_t seq, uint32_t id) const noexcept {
    int32_t delta = 0;
    const uint64_t unwrapped = record_hit(seq, id, &delta);
    if (delta >= 0) {
      if (unwrapped > max_id_.load(std::memory_order_relaxed)) max_id_.store(unwrapped, std::memory_order_relaxed);
    } else if (unwrapped < min_id_.load(std::memory_order_relaxed)) {
      min_id_.store(unwrapped, std::memory_order_relaxed);
    }
    if (seq > max_seq_.load(std::memory_order_relaxed)) max_seq_.store(seq, std::memory_order_relaxed);
  }
  // The id range of band `first` (see Band), if it has one.
  bool band_range(uint64_t first, uint64_t* range) const noexcept;
  // Band [first, first + band size) has an id range and `id` is outside it.
  bool band_excludes(uint64_t first, uint32_t id) const noexcept;
  // Gives band `first` its id range if every launch of it is published or overwritten (one
  // thread at a time; another finding it busy goes on scanning).
  void summarize(uint64_t first) const noexcept;
  // Launch q, its slot's stamp read as `stamp`, is neither published nor overwritten nor in a
  // skipped chunk: its band cannot complete yet.
  bool pending(uint64_t q, uint64_t stamp) const noexcept;
  // The band entry of the band that starts at sequence number `first`.
  struct Band;
  Band& band_at(uint64_t first) const noexcept {
    return bands_[(first >> band_shift_) & band_index_mask_];
  }
  // id is below the floor (by at most kFloorReach), and the floor holds (max_writers()).
  bool below_floor(uint32_t id) const noexcept;
  // A loss found by a lookup, counted (overwritten(), and overwritten_late() when the reader's
  // previous hit is inside the window: seen, the newest sequence number it read).
  void count_loss(uint64_t seen) const noexcept;
  // A writer's first chunk: one more thread holds chunks.
  void count_writer() noexcept;
  // A chunk taken from `first` on crossed the flush mark: the hook, once per mark.
  void flush_due(uint64_t first) noexcept;
  static constexpr uint32_t kFloorReach = 1u << 30;
  // The floor of the window of the capacity() numbers before end, kept in floor_ (bit 32 set:
  // valid) for that window's start (floor_begin_): the lowest id of its launches up to its first
  // band not complete, exact to the launch at its start (its band's sub-block minima and the ids
  // of its own sub-block from its start on), so an id evicted since the window last moved is
  // rejected too: a reader that fell behind meets one evicted record after another, and each one
  // the floor missed cost a scan of the table.
  void compute_floor(uint64_t end) const noexcept;
  // Band `first`'s lowest id at or after sub-block k, as a span above its range's low (false: no
  // range).
  bool band_sub_min(uint64_t first, uint32_t k, uint32_t* low, uint32_t* above) const noexcept;

  std::unique_ptr<Slot[]> slots_;
  std::unique_ptr<std::atomic<uint32_t>[]> ids_;  // the id column: ids_[seq % capacity]
  // The nested ids of each slot's launch, two 32-bit halves (0: none), written while claimed.
  std::unique_ptr<std::atomic<uint64_t>[]> nested_;
  // Id range of the band of launches first .. first + band_size_ - 1, kept at
  // band_at(first), two entries per band's place in the table (so the oldest band, partly
  // overwritten, and the newest one, being written there, have one each): `first` is its first
  // sequence number + 1 (0: none,
  // or being rewritten), `range` its lowest id (low half) and the span up to its highest (high
  // half), across 32-bit wraps, `sub` each sub-block's (kSubBlock launches) lowest id as a span
  // above the low (the band's span where the sub-block has none). A seqlock: first, then range
  // and sub, then first again.
  static constexpr uint32_t kSubBlock = 16;  // one line of the id column
  struct Band {
    std::atomic<uint64_t> first{0};
    std::atomic<uint64_t> range{0};
    std::atomic<uint32_t> sub[kBand / kSubBlock] = {};
  };
  std::unique_ptr<Band[]> bands_;
  // Per segment (chunk_ slots, chunk number % segments): owners_ holds (chunk + 1) << 1 of the
  // last chunk that took it, | 1 while that chunk's writer holds it (0: never taken); skipped_
  // holds chunk + 1 of the last chunk skipped there.
  std::unique_ptr<std::atomic<uint64_t>[]> owners_;
  std::unique_ptr<std::atomic<uint64_t>[]> skipped_;
  uint32_t mask_;
  uint32_t chunk_;        // a power of two, kChunk or a quarter of the table
  uint32_t chunk_shift_;  // log2(chunk_)
  uint32_t segment_mask_; // segments - 1
  uint64_t stale_after_;  // a chunk this many numbers behind the counter is given up (stale())
  // Lookups also search the lookback_ numbers before the last capacity(): the chunks of up to
  // kLookbackChunks launching threads, not yet filled, leave that many launches older than the
  // window in their slots.
  static constexpr uint64_t kLookbackChunks = 4;
  uint64_t lookback_;
  uint32_t band_index_mask_;  // entries in bands_ - 1
  uint32_t band_size_;   // a power of two
  uint32_t band_shift_;  // log2(band_size_)
  // fill() asks for slot seq + kPrefetchAhead to be made exclusive (eight launches ahead), with
  // PREFETCHW where the CPU has it.
  static constexpr uint64_t kPrefetchAhead = 8;
  static constexpr uint64_t kIdsPerLine = 16;  // the id column's line a line ahead, likewise
  bool prefetchw_;
  alignas(64) mutable std::atomic<bool> summarizing_{false};
  alignas(64) std::atomic<uint64_t> next_{0};  // the next chunk's first sequence number
  std::atomic<uint64_t> collisions_{0};
  std::atomic<uint64_t> given_up_{0};        // sequence numbers of chunks given up or skipped
  std::atomic<uint64_t> skipped_chunks_{0};
  std::atomic<uint64_t> flush_due_{~uint64_t{0}};  // the flush mark: never, until a hook is set
  Writer solo_;  // claim(id, ctx) and store(id, ctx): one writing thread
  FlushHook flush_hook_ = nullptr;
  void* flush_arg_ = nullptr;
  // Written at a thread's first launch and exit only: apart from the launch path's lines. The
  // reader reads writers_peak_ (whether the floor holds) on a miss.
  alignas(64) std::atomic<uint64_t> writers_{0};
  std::atomic<uint64_t> writers_peak_{0};
  std::atomic<uint64_t> flushes_asked_{0};
  // Reader side, on its own line: the writers never touch it.
  // The slot after the last hit; kNoHit before the first (no slot: the inline case needs a hit
  // before it, and lookup_scan starts from slot 0 then).
  static constexpr uint64_t kNoHit = ~uint64_t{0};
  alignas(64) mutable std::atomic<uint64_t> cursor_{kNoHit};
  // The next launch of each of the last kStreams chunks the reader's hits left for another (the
  // launches of other threads: lookup_scan), kNoHit where none; next_stream_ counts replacements.
  static constexpr uint32_t kStreams = 4;
  mutable std::atomic<uint64_t> streams_[kStreams] = {kNoHit, kNoHit, kNoHit, kNoHit};
  mutable std::atomic<uint64_t> next_stream_{0};
  mutable std::atomic<uint64_t> seen_end_{0};  // next_ as the reader last read it
  mutable std::atomic<uint64_t> overwritten_{0};
  mutable std::atomic<uint64_t> overwritten_late_{0};
  mutable std::atomic<uint64_t> scans_{0};
  mutable std::atomic<uint64_t> full_scans_{0};
  mutable std::atomic<uint64_t> waiting_for_{0};  // 1 + the launch the last summarize() stopped at
  // The live window's lowest id (low half; bit 32: valid), and the first band it was computed for.
  mutable std::atomic<uint64_t> floor_{0};
  mutable std::atomic<uint64_t> floor_begin_{~uint64_t{0}};
  // The lowest id of the complete bands after the floor's window's first band, up to the first
  // band not complete (bit 32: any), recomputed once that first band changes (rest_band_: its
  // first number + 1); rest_end_: the end of the bands it covers.
  mutable std::atomic<uint64_t> rest_{0};
  mutable std::atomic<uint64_t> rest_band_{0};
  mutable std::atomic<uint64_t> rest_end_{0};
  // Id rate: ids unwrapped to 64 bits, each against the previous one found, and the range of
  // ids and sequence numbers the found contexts span (only differences are used). The first
  // found unwraps against 2^40, whose low half is a "previous id" of 0: it becomes 2^40 plus
  // its own id read as signed, so no later one goes below 0 or needs a first-time test, and
  // the low half of every unwrapped id is the id itself (no separate last id to keep).
  mutable std::atomic<uint64_t> last_unwrapped_{uint64_t{1} << 40};
  mutable std::atomic<uint64_t> min_id_{~uint64_t{0}}, max_id_{0};
  mutable std::atomic<uint64_t> min_seq_{~uint64_t{0}}, max_seq_{0};
};

}  // namespace traintime::cupti
