// Correlation id -> launch context: bounded, lock-free, never a torn or foreign context.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "correlation_table.h"

using traintime::core::Category;
using traintime::core::kCategoryCount;
using traintime::core::CommOp;
using traintime::core::LaunchContext;
using traintime::cupti::CorrelationTable;

namespace {

// Every field derived from the id, so a reader can tell a torn or foreign entry.
LaunchContext context_for(uint32_t id) {
  LaunchContext c;
  c.path = id * 3 + 1;
  c.step = id / 5;
  c.entry = uint64_t{id} * 7919;
  c.comm.op = static_cast<CommOp>(id % 12);
  c.comm.comm_id = id % 1000;
  c.comm.seq = uint64_t{id} << 20;
  c.comm.bytes = ~uint64_t{id};
  c.comm.group_id = uint64_t{id} * 31;
  c.comm.captured = (id & 1) != 0;
  c.category = static_cast<Category>(id % kCategoryCount);
  return c;
}

bool same(const LaunchContext& a, const LaunchContext& b) {
  return a.path == b.path && a.step == b.step && a.entry == b.entry && a.comm.op == b.comm.op &&
         a.comm.comm_id == b.comm.comm_id && a.comm.seq == b.comm.seq && a.comm.bytes == b.comm.bytes &&
         a.comm.group_id == b.comm.group_id && a.comm.captured == b.comm.captured &&
         a.category == b.category;
}

// The context of the launch that took launch_id is found under id (launch_id itself, or one of
// its nested ids), every field intact.
void require_found(const CorrelationTable& t, uint32_t id, uint32_t launch_id) {
  LaunchContext got;
  REQUIRE(t.lookup(id, &got));
  CHECK(same(got, context_for(launch_id)));
}

}  // namespace

TEST_CASE("a stored context is found under its id with every field intact", "[correlation]") {
  CorrelationTable t(1000);
  CHECK(t.capacity() == 1024);
  for (uint32_t id = 1; id <= 500; ++id) t.store(id, context_for(id));
  for (uint32_t id = 1; id <= 500; ++id) {
    LaunchContext got;
    require_found(t, id, id);
  }
  LaunchContext got;
  CHECK_FALSE(t.lookup(501, &got));
  CHECK_FALSE(t.lookup(0, &got));
  CHECK(t.overwritten() == 0);
}

TEST_CASE("a launch's nested ids share its one slot, visible once it is published",
          "[correlation]") {
  CorrelationTable t(64);
  const uint64_t ticket = t.claim(100, context_for(100));
  REQUIRE(ticket == 1);
  CHECK(t.add_nested(ticket, 101));  // the driver call under the runtime launch
  CHECK(t.add_nested(ticket, 102));
  CHECK_FALSE(t.add_nested(ticket, 103));  // no room: the caller stores it alone
  CHECK_FALSE(t.add_nested(0, 104));       // a launch that was not kept
  CHECK_FALSE(t.add_nested(ticket, 0));
  LaunchContext got;
  CHECK_FALSE(t.lookup(100, &got));  // claimed, not yet published
  CHECK_FALSE(t.lookup(101, &got));
  t.publish(ticket);
  for (uint32_t id : {100u, 101u, 102u}) {
    require_found(t, id, 100);
  }
  CHECK_FALSE(t.lookup(103, &got));
  // The bound is in launches, however many ids each has: 64 launches of three ids each, the
  // first one's ids (claimed above) evicted by the 64th, every other one still found.
  for (uint32_t l = 1; l < 64; ++l) {
    const uint32_t id = 100 + 10 * l;
    const uint64_t k = t.claim(id, context_for(id));
    REQUIRE(t.add_nested(k, id + 1));
    REQUIRE(t.add_nested(k, id + 2));
    t.publish(k);
  }
  for (uint32_t l = 1; l < 64; ++l)
    for (uint32_t d = 0; d < 3; ++d) {
      require_found(t, 100 + 10 * l + d, 100 + 10 * l);
    }
  t.store(5000, context_for(5000));  // the 65th launch takes the first one's slot
  CHECK_FALSE(t.lookup(101, &got));
  CHECK(t.launches() == 65);  // the rest of the chunk held is not counted
  CHECK(t.sequence_end() > 65);
}

TEST_CASE("ids that advance by thousands per launch keep every pending context", "[correlation]") {
  // CUPTI numbers every traced API call: a launch-heavy loop moves the ids far faster than the
  // launches. 256 launches 1024 ids apart in a 1024-slot table: indexed by id, all would share
  // one slot; keyed by id with eviction by launch age, all stay until their records arrive.
  CorrelationTable t(1024);
  for (uint32_t k = 0; k < 256; ++k) t.store(7 + 1024 * k, context_for(7 + 1024 * k));
  for (uint32_t k = 0; k < 256; ++k) {
    require_found(t, 7 + 1024 * k, 7 + 1024 * k);
  }
  CHECK(t.overwritten() == 0);
  CHECK(t.ids_per_store() == Approx((255.0 * 1024 + 1) / 256).epsilon(1e-9));  // ids spanned / launches
}

TEST_CASE("the id rate stays right when the 32-bit correlation ids wrap", "[correlation]") {
  // A long launch-heavy run passes 2^32 traced API calls: the rate must count across the wrap,
  // not from the first id to the (numerically smaller) newest one.
  CorrelationTable t(64);
  LaunchContext got;
  for (uint32_t id : {0xFFFFFFF0u, 0xFFFFFFF8u, 0x00000010u}) {  // the last 0x20 ids after the first
    t.store(id, context_for(id));
    REQUIRE(t.lookup(id, &got));
  }
  CHECK(t.launches() == 3);
  CHECK(t.ids_per_store() == Approx((0x20 + 1) / 3.0).epsilon(1e-9));
  // An out-of-order (older) id from another thread spans nothing new.
  t.store(0xFFFFFFFCu, context_for(4));
  REQUIRE(t.lookup(0xFFFFFFFCu, &got));
  CHECK(t.ids_per_store() == Approx((0x20 + 1) / 4.0).epsilon(1e-9));
}

TEST_CASE("a context is evicted only by newer launches, and its loss is counted", "[correlation]") {
  CorrelationTable t(16);
  t.store(3, context_for(3));
  for (uint32_t id = 100; id < 100 + 64; ++id) t.store(id, context_for(id));  // 4x the capacity
  LaunchContext got;
  CHECK_FALSE(t.lookup(3, &got));
  CHECK(t.overwritten() == 1);
  REQUIRE(t.lookup(163, &got));  // the newest is always there
  CHECK(same(got, context_for(163)));
  // An id no launch has reached yet is a miss, not a loss.
  CHECK_FALSE(t.lookup(500, &got));
  CHECK(t.overwritten() == 1);
}

TEST_CASE("a context stays for exactly capacity launches, whatever the id rate and order",
          "[correlation]") {
  // Ids that jump by up to a million per launch, looked up in a shuffled order (the reader's
  // cursor does not help): every context of the last capacity launches is found intact, and the
  // one capacity launches back is lost and counted.
  constexpr uint32_t kCap = 64;
  CorrelationTable t(kCap);
  std::mt19937 rng(7);
  std::vector<uint32_t> ids;
  uint32_t id = 0xFFF00000u;
  for (int k = 0; k < 1000; ++k) {
    id += 1 + rng() % (k % 3 == 0 ? 1000000u : 3u);  // wraps the 32-bit ids along the way
    if (id == 0) id = 1;
    ids.push_back(id);
    REQUIRE(t.store(id, context_for(id)) == ids.size());  // kept, as launch number k
    if (ids.size() < kCap + 1) continue;
    std::vector<uint32_t> live(ids.end() - kCap, ids.end());
    std::shuffle(live.begin(), live.end(), rng);
    LaunchContext got;
    for (uint32_t l : live) {
      require_found(t, l, l);
    }
    const uint64_t lost = t.overwritten();
    CHECK_FALSE(t.lookup(ids[ids.size() - kCap - 1], &got));
    CHECK(t.overwritten() == lost + 1);
  }
  CHECK(t.store_collisions() == 0);
}

TEST_CASE("records of interleaved buffers, newest first, are all found", "[correlation]") {
  // Two launching threads' buffers arrive one after the other: the reader's cursor jumps back.
  CorrelationTable t(1024);
  for (uint32_t id = 1; id <= 1000; ++id) t.store(id, context_for(id));
  LaunchContext got;
  for (uint32_t id = 1000; id >= 1; id -= 2) REQUIRE(t.lookup(id, &got));
  for (uint32_t id = 1; id <= 1000; id += 2) REQUIRE(t.lookup(id, &got));
  CHECK(t.overwritten() == 0);
}

TEST_CASE("a reader that fell behind is told of each loss, and late stores under old ids are found",
          "[correlation]") {
  // Records of launches long evicted arrive in order (the processing thread fell more than
  // capacity launches behind): each is a counted loss. Meanwhile one context was stored late
  // under an old id (its thread was preempted between CUPTI's id and the store), in the middle of
  // launches with far newer ids: the id ranges that let misses skip bands must still cover it.
  constexpr uint32_t kCap = 4096;
  CorrelationTable t(kCap);
  for (uint32_t id = 1; id <= 3 * kCap; ++id) t.store(id, context_for(id));
  uint32_t id = 3 * kCap;
  for (int k = 0; k < 2000; ++k) {
    ++id;
    t.store(id, context_for(id));
  }
  const uint32_t late = 5;  // evicted long ago, stored again by a late launch
  t.store(late, context_for(late));
  for (int k = 0; k < 2000; ++k) {
    ++id;
    t.store(id, context_for(id));
  }
  LaunchContext got;
  // The last kCap launches: the late one and the kCap - 1 newest ids. The ids between are gone;
  // one lookup of each, oldest first.
  const uint32_t oldest_live = id - kCap + 2;
  uint64_t misses = 0;
  for (uint32_t old = 6; old < oldest_live; ++old) {
    CHECK_FALSE(t.lookup(old, &got));
    ++misses;
  }
  CHECK(t.overwritten() == misses);
  require_found(t, late, late);
  // Every live context is still found, in any order, and the ids past the newest are no loss.
  std::vector<uint32_t> live;
  for (uint32_t l = oldest_live; l <= id; ++l) live.push_back(l);
  std::mt19937 rng(3);
  std::shuffle(live.begin(), live.end(), rng);
  for (uint32_t l : live) {
    require_found(t, l, l);
  }
  CHECK_FALSE(t.lookup(id + 1, &got));
  CHECK(t.overwritten() == misses);
}

TEST_CASE("the live window's floor rejects only evicted ids: the oldest live ones are still found",
          "[correlation]") {
  // The window starts inside a band, part of which is already overwritten. Misses below the window set the floor; the floor must not pass the
  // oldest live id (the ones a reader that fell behind needs first), nor reject ids that
  // arrive out of order within the window, however many misses came first.
  constexpr uint32_t kCap = 1024;
  CorrelationTable t(kCap);
  uint32_t id = 0;
  for (int k = 0; k < 5 * 1024 + 100; ++k) {
    id += 2;  // two ids per launch, as runtime and driver calls take
    t.store(id, context_for(id));
  }
  const uint32_t oldest_live = id - 2 * (kCap - 1);
  LaunchContext got;
  uint64_t misses = 0;
  for (uint32_t old = 2; old < oldest_live; old += 2, ++misses) CHECK_FALSE(t.lookup(old, &got));
  CHECK(t.overwritten() == misses);
  // Oldest first, then newest first: every live context, exactly once each, still found.
  for (uint32_t l = oldest_live; l <= id; l += 2) {
    require_found(t, l, l);
  }
  for (uint32_t l = id; l >= oldest_live; l -= 2) REQUIRE(t.lookup(l, &got));
  // More launches move the window on: ids now evicted are losses, the live ones are found.
  for (int k = 0; k < 300; ++k) {
    id += 2;
    t.store(id, context_for(id));
  }
  CHECK_FALSE(t.lookup(oldest_live, &got));
  CHECK(t.overwritten() == misses + 1);
  require_found(t, id - 2 * (kCap - 1), id - 2 * (kCap - 1));
  // An id never stored and newer than every stored one is not a loss.
  CHECK_FALSE(t.lookup(id + 1, &got));
  CHECK(t.overwritten() == misses + 1);
}

TEST_CASE("band id ranges hold across the 32-bit wrap of the correlation ids", "[correlation]") {
  CorrelationTable t(1024);
  std::vector<uint32_t> ids;
  uint32_t id = 0xFFFFF000u;
  for (int k = 0; k < 3000; ++k) {
    id += 3;
    if (id == 0) id = 1;
    ids.push_back(id);
    t.store(id, context_for(id));
  }
  LaunchContext got;
  CHECK_FALSE(t.lookup(ids[0], &got));  // a miss: every complete band gets its range
  std::vector<uint32_t> live(ids.end() - 1024, ids.end());
  std::mt19937 rng(5);
  std::shuffle(live.begin(), live.end(), rng);
  for (uint32_t l : live) {
    require_found(t, l, l);
  }
}

TEST_CASE("a launch whose thread took its id a few launches early is found after a late first miss",
          "[correlation]") {
  // The interleaving a preempted reader meets, in a table of one band (kBand == capacity).
  // Thread B takes id 2650 and stores it as launch 255, the last of band 0; thread A took 2645
  // just before B took its id, but stores only after B, as launch 256. 254 launches follow, so
  // A's context has fewer than capacity newer launches and must be found. The reader misses
  // first when the window starts at launch 255 (it was off its core while the launches went by):
  // that miss computes the floor of the window. Band 0's only live launch then is B's, and a
  // floor of band 0's range alone (2650) rejected A's 2645 as lost.
  constexpr uint32_t kCap = 256;
  CorrelationTable t(kCap);
  for (uint32_t s = 0; s < 255; ++s) t.store(100 + 10 * s, context_for(100 + 10 * s));
  t.store(2650, context_for(2650));  // B: launch 255
  t.store(2645, context_for(2645));  // A: launch 256, its id taken before B's
  for (uint32_t s = 257; s < 511; ++s) t.store(100 + 10 * s, context_for(100 + 10 * s));
  REQUIRE(t.sequence_end() == 512);  // one writer: launch n is sequence number n
  LaunchContext got;
  CHECK_FALSE(t.lookup(100, &got));  // launch 0: overwritten by launch 256, a loss
  CHECK(t.overwritten() == 1);
  require_found(t, 2645, 2645);
  require_found(t, 2650, 2650);
  CHECK(t.overwritten() == 1);
}

TEST_CASE("a thread that stops part way through its chunk holds up no other launch", "[correlation]") {
  // Thread A (an autograd worker between backward passes) launches 3 kernels and goes quiet
  // holding the rest of its chunk; thread B launches for five laps of the table. B skips A's
  // segment each lap and loses none of its own contexts to it. A, back, gives up its stale chunk
  // and stores in a fresh one; when A's thread exits its segment is free again.
  constexpr uint32_t kCap = 1024;
  CorrelationTable t(kCap);
  CorrelationTable::Writer a, b;
  for (uint32_t id = 1; id <= 3; ++id) REQUIRE(t.store(a, id, context_for(id)) == id);
  std::vector<uint32_t> ids;
  uint32_t id = 100;
  for (uint32_t k = 0; k < 5 * kCap; ++k, id += 2) {
    REQUIRE(t.store(b, id, context_for(id)) != 0);
    ids.push_back(id);
  }
  CHECK(t.chunks_skipped() == 5);  // once a lap: A's segment
  CHECK(t.store_collisions() == 0);
  CHECK(t.launches() == 3 + 5 * kCap);  // neither the skipped chunks nor the rest of A's count
  LaunchContext got;
  // Every one of B's last kCap - kChunk launches (the lap's numbers less A's chunk) is found.
  for (size_t k = ids.size() - (kCap - CorrelationTable::kChunk); k < ids.size(); ++k) {
    require_found(t, ids[k], ids[k]);
  }
  CHECK(t.overwritten() == 0);
  // A's first three contexts are more than a table old: gone, a counted loss, and a late one:
  // the reader had kept up with B's launches.
  CHECK_FALSE(t.lookup(2, &got));
  CHECK(t.overwritten() == 1);
  CHECK(t.overwritten_late() == 1);
  // A launches again: its chunk is stale, so it takes a fresh one (the newest numbers).
  const uint64_t before = t.sequence_end();
  const uint64_t ticket = t.store(a, id, context_for(id));
  CHECK(ticket > before);
  require_found(t, id, id);
  // A's thread exits: the rest of its chunk is given back, and B's next lap skips nothing.
  t.give_back(a);
  const uint64_t skipped = t.chunks_skipped();
  for (uint32_t k = 0; k < kCap; ++k) {
    id += 2;
    t.store(b, id, context_for(id));
  }
  CHECK(t.chunks_skipped() == skipped);
}

TEST_CASE("the window asks for a flush once a quarter of it has gone by since the last flush",
          "[correlation]") {
  // CUPTI hands a thread's partly filled buffer over only at a flush: the table asks for one by
  // launch count, once per mark, whichever thread crosses it, and each flush arms the next mark.
  constexpr uint32_t kCap = 1024;
  CorrelationTable t(kCap);
  int asked = 0;
  t.set_flush_hook([](void* n) { ++*static_cast<int*>(n); }, &asked);
  REQUIRE(t.flush_every() == kCap / 4);
  CorrelationTable::Writer a, b;
  uint32_t id = 1;
  for (; id <= kCap / 4; ++id) t.store(a, id, context_for(id));
  CHECK(asked == 0);  // a quarter stored, the mark not passed
  t.store(b, id, context_for(id));  // another thread's chunk crosses it
  ++id;
  CHECK(asked == 1);
  for (uint32_t k = 0; k < kCap; ++k, ++id) t.store(a, id, context_for(id));
  CHECK(asked == 1);  // once per mark: the flush it asked for has not come
  CHECK(t.flushes_asked() == 1);
  t.flushed();
  const uint64_t from = t.sequence_end();
  for (; t.sequence_end() <= from + kCap / 4; ++id) t.store(a, id, context_for(id));
  CHECK(asked == 2);
  // A flush for any other reason (time, steps) moves the mark too.
  t.flushed();
  for (uint32_t k = 0; k < kCap / 8; ++k, ++id) t.store(a, id, context_for(id));
  t.flushed();
  for (uint32_t k = 0; k < kCap / 8; ++k, ++id) t.store(a, id, context_for(id));
  CHECK(asked == 2);
}

TEST_CASE("a record lost while the reader kept up is told apart from one lost behind it",
          "[correlation]") {
  // A rarely launching thread's record arrives after its context left the window while the reader
  // had found every launch of the busy thread: a late buffer, not a reader that fell behind.
  constexpr uint32_t kCap = 1024;
  CorrelationTable t(kCap);
  CorrelationTable::Writer busy, rare;
  LaunchContext got;
  t.store(rare, 1, context_for(1));
  uint32_t id = 10;
  for (uint32_t k = 0; k < kCap / 2; ++k, ++id) t.store(busy, id, context_for(id));
  t.store(rare, 2, context_for(2));  // its stale chunk given up: its segment free for the next lap
  for (uint32_t k = 0; k < 3 * kCap; ++k, ++id) {
    t.store(busy, id, context_for(id));
    REQUIRE(t.lookup(id, &got));
  }
  CHECK_FALSE(t.lookup(1, &got));
  CHECK(t.overwritten() == 1);
  CHECK(t.overwritten_late() == 1);
  // A reader that fell behind: it meets the busy thread's records a table and more too late.
  CorrelationTable behind(kCap);
  for (uint32_t k = 1; k <= 3 * kCap; ++k) behind.store(k, context_for(k));
  for (uint32_t k = 1; k <= kCap; ++k) CHECK_FALSE(behind.lookup(k, &got));
  CHECK(behind.overwritten() == kCap);
  CHECK(behind.overwritten_late() == 0);
}

TEST_CASE("threads holding chunks are counted, and above the bound no live context is lost",
          "[correlation]") {
  // Each launching thread holds a chunk until it exits; the floor (one comparison for a loss)
  // holds for up to max_writers() of them. More at once: counted, and lookups go on without the
  // floor, so every context in the window is still found and every evicted one still a loss.
  constexpr uint32_t kCap = 1024;
  CorrelationTable t(kCap);
  const uint32_t bound = t.max_writers();
  REQUIRE(bound == kCap / (2 * CorrelationTable::kChunk));
  std::vector<CorrelationTable::Writer> writers(bound + 3);
  // Each idle thread's one launch, a busy thread's chunk after each (they launched at different
  // times), so no lap meets more held segments in a row than a chunk takes tries.
  std::vector<uint32_t> idle_ids, newest;
  uint32_t id = 1;
  for (auto& w : writers) {
    REQUIRE(t.store(w, id, context_for(id)) != 0);
    idle_ids.push_back(id++);
    for (uint32_t k = 0; k < CorrelationTable::kChunk; ++k, ++id)
      REQUIRE(t.store(writers[0], id, context_for(id)) != 0);
  }
  CHECK(t.writers_peak() == bound + 3);
  t.give_back(writers.back());
  CHECK(t.writers_peak() == bound + 3);  // the most at once
  LaunchContext got;
  for (uint32_t k = 0; k < 3 * kCap; ++k, ++id) {
    REQUIRE(t.store(writers[k % 2], id, context_for(id)) != 0);
    newest.push_back(id);
  }
  CHECK(t.store_collisions() == 0);
  // The busy threads' last launches (the window less the segments the idle threads hold and the
  // busy ones' own chunks) are all found, in any order; the idle threads' single launches, long
  // out of the window, are counted losses.
  const size_t live = kCap / 8;  // 9 idle segments of 16 held: 5 a lap are the busy ones
  std::mt19937 rng(5);
  std::vector<uint32_t> tail(newest.end() - static_cast<std::ptrdiff_t>(live), newest.end());
  std::shuffle(tail.begin(), tail.end(), rng);
  for (uint32_t l : tail) require_found(t, l, l);
  for (size_t w = 2; w < bound + 2; ++w) CHECK_FALSE(t.lookup(idle_ids[w], &got));
  CHECK(t.overwritten() == bound);
  // A thread that exits and launches again (another thread reusing the Writer) counts again.
  t.store(writers.back(), id, context_for(id));
  CHECK(t.writers_peak() == bound + 3);
}

TEST_CASE("a reader far behind counts each loss and finds every live context around chunks "
          "held, skipped and given back", "[correlation]") {
  // Bands with a chunk skipped (its segment held) and one given back (published empty) complete
  // and get their id ranges; evicted ids are each a counted loss, the live ones all found.
  constexpr uint32_t kCap = 4096;
  CorrelationTable t(kCap);
  CorrelationTable::Writer a, b;
  uint32_t id = 1;
  t.store(a, id++, context_for(1));  // A holds the rest of its chunk
  for (uint32_t k = 0; k < 3 * kCap; ++k, ++id) t.store(b, id, context_for(id));
  t.give_back(a);  // A exits: the rest of its chunk published empty
  for (uint32_t k = 0; k < kCap; ++k, ++id) t.store(b, id, context_for(id));
  LaunchContext got;
  const uint32_t newest = id - 1;
  uint64_t misses = 0;
  for (uint32_t old = 2; old < newest - 3 * kCap; ++old, ++misses) CHECK_FALSE(t.lookup(old, &got));
  CHECK(t.overwritten() == misses);
  for (uint32_t l = newest - (kCap - 2 * CorrelationTable::kChunk); l <= newest; ++l) {
    require_found(t, l, l);
  }
}

TEST_CASE("a reader at the window's start rejects each id evicted since without a scan",
          "[correlation]") {
  // The processing thread back from a stall reads its records in launch order just behind the
  // window while the launching thread goes on: every record it reads was evicted a moment ago.
  // Each must be a counted loss decided by the floor, not a scan of the table (which, a hundred
  // times a record's cost, kept such a reader behind for good).
  constexpr uint32_t kCap = 16384;
  CorrelationTable t(kCap);
  uint32_t id = 0;
  const auto launch = [&] {
    id += 2;  // a runtime launch's id and its driver call's
    const uint64_t ticket = t.claim(id - 1, context_for(id - 1));
    t.add_nested(ticket, id);
    t.publish(ticket);
  };
  for (uint32_t k = 0; k < 2 * kCap; ++k) launch();
  LaunchContext got;
  REQUIRE(t.lookup(id - 1, &got));  // a hit: the reader's cursor
  // The launch just before the window of the last kCap launches (and the rest of a chunk):
  // evicted a moment ago, as is every one the reader reads after it.
  uint32_t record = id - 2 * (kCap + CorrelationTable::kChunk) - 1;
  constexpr uint32_t kRecords = 20000;
  for (uint32_t r = 0; r < kRecords; ++r, record += 2) {
    CHECK_FALSE(t.lookup(record, &got));
    launch();  // the window moves on by one launch per record: the reader never reaches it
  }
  CHECK(t.overwritten() == kRecords);
  CHECK(t.full_scans() < kRecords / 50);
  // The live ones are all still found.
  for (uint32_t l = id - 2 * (kCap - CorrelationTable::kChunk) + 1; l < id; l += 2) {
    require_found(t, l, l);
  }
}

TEST_CASE("records of threads launching at once are found where their chunks go on, not by scans",
          "[correlation]") {
  // Three threads launch in turn (a training thread, an autograd worker, NCCL's own thread), each
  // into its own chunk, and their records arrive in time order: each record's launch is a chunk
  // away from the previous one's. The reader keeps where each recent chunk goes on: it scans only
  // when a thread starts a new chunk.
  constexpr uint32_t kCap = 16384;
  CorrelationTable t(kCap);
  CorrelationTable::Writer writers[3];
  std::vector<uint32_t> ids;
  uint32_t id = 1;
  for (uint32_t k = 0; k < 3 * 1024; ++k, id += 2) {
    const uint64_t ticket = t.claim(writers[k % 3], id, context_for(id));
    t.add_nested(ticket, id + 1);
    t.publish(ticket);
    ids.push_back(id);
  }
  for (const uint32_t l : ids) {
    require_found(t, l, l);
  }
  // A new chunk per thread every kChunk of its launches: 3 x 16 chunks, each found by one scan
  // (the first record, with no hit before it, too).
  CHECK(t.scans() <= 3 * 1024 / CorrelationTable::kChunk + 1);
  CHECK(t.full_scans() == 0);
}

namespace {

// One writer's recent stores for the reader: (sequence number << 32) | id, newest last, with
// flags in the sequence number's place: kNestedFlag for an id nested in the launch of id - 1,
// kLateFlag for a context stored late under its id (see the test). The sequence number keeps its
// low 30 bits (kSeqMask); the reader restores the rest from the launch count (seq()).
struct Published {
  static constexpr uint32_t kKeep = 1024;
  static constexpr uint64_t kNestedFlag = uint64_t{1} << 31;
  static constexpr uint64_t kLateFlag = uint64_t{1} << 30;
  static constexpr uint64_t kSeqMask = kLateFlag - 1;
  std::atomic<uint64_t> entries[kKeep] = {};
  std::atomic<uint32_t> count{0};
  void add(uint64_t seq, uint32_t id, uint64_t flags = 0) {
    const uint32_t n = count.load(std::memory_order_relaxed);
    entries[n % kKeep].store((((seq & kSeqMask) | flags) << 32) | id, std::memory_order_relaxed);
    count.store(n + 1, std::memory_order_release);
  }
  // The sequence number of entry e, read when `launches` had been taken: the latest one at most
  // that has e's low bits (an entry is far fewer than 2^30 launches old). A long run passes 2^30
  // launches, where the sequence number's bits would otherwise turn into the flags (every
  // context "late", and from 2^31 every id "nested": judged against the wrong launch).
  static uint64_t seq(uint64_t e, uint64_t launches) {
    return launches - 1 - ((launches - 1 - (e >> 32)) & kSeqMask);
  }
};

// Binds the calling thread to one CPU (where it cannot, the thread stays where it was).
void run_on(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

}  // namespace

TEST_CASE("the concurrency test's record of a store keeps its launch past 2^31 launches",
          "[correlation]") {
  // A run of a minute or two passes 2^31 launches. The record once kept the whole sequence
  // number under the flags: from 2^30 launches on every context read as late, from 2^31 on
  // every id as nested, and the context found for it was judged against the launch before
  // (counted as a foreign context, though the table had returned the right one).
  static Published p;  // 8 KiB: not on the stack
  const uint64_t seq = (uint64_t{1} << 31) + (uint64_t{1} << 30) + 5;
  p.add(seq, 1000);
  p.add(seq + 1, 1001, Published::kNestedFlag);
  const uint64_t plain = p.entries[0].load(), nested = p.entries[1].load();
  CHECK(((plain >> 32) & (Published::kNestedFlag | Published::kLateFlag)) == 0);
  CHECK(((nested >> 32) & Published::kNestedFlag) != 0);
  CHECK(Published::seq(plain, seq + 100) == seq);
  CHECK(Published::seq(nested, seq + 2) == seq + 1);
  CHECK(Published::seq(plain, seq + 1) == seq);  // read right after it was stored
}

TEST_CASE("concurrent launches and lookups: no torn or foreign context, none lost in the bound",
          "[correlation]") {
  // Small table: writers lap it thousands of times while the reader reads, one of them far
  // ahead of the reader, one slow (yielding between launches). Every lookup is judged against
  // the bound: a context not found while fewer than capacity launches followed it is a loss
  // inside the bound; a found one must be intact. The one exception correlation_table.h states
  // is not judged: a context whose writer was delayed between taking the id and storing while
  // half a table of launches were stored (which the sanitizers' scheduling makes common); it
  // must still be intact when found. On a loaded machine the threads share few cores, and the
  // scheduler may queue them all on one (then no lookup overlaps a store): the reader and the
  // fast writer run on two different CPUs, the other writers anywhere; the reader yields when no
  // launch came since its last look, so the writers get to run, and it reads until it has seen
  // enough (with a generous limit that a stalled machine alone reaches).
  constexpr uint32_t kCap = 256;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  REQUIRE(pthread_getaffinity_np(pthread_self(), sizeof allowed, &allowed) == 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  CorrelationTable t(kCap);
  std::atomic<uint32_t> next{1};
  std::atomic<bool> stop{false};
  Published published[3];
  std::vector<std::thread> writers;
  for (int w = 0; w < 3; ++w)
    writers.emplace_back([&, w] {
      if (w == 0 && cpus.size() >= 2) run_on(cpus[1]);
      CorrelationTable::Writer writer;  // this thread's chunk
      while (!stop.load(std::memory_order_relaxed)) {
        // Mixed id rates; writer 0 launches as a runtime launch does, its nested driver call's
        // id (id + 1, which no other writer takes) added to the same slot.
        const uint64_t launched = t.sequence_end();
        const uint32_t id = next.fetch_add(2 + static_cast<uint32_t>(w) * 5);
        const auto late = [&](uint64_t kept) {
          return kept - 1 >= launched + kCap / 2 ? Published::kLateFlag : 0;
        };
        if (w == 0) {
          const uint64_t kept = t.claim(writer, id, context_for(id));
          const bool nested = t.add_nested(kept, id + 1);
          t.publish(kept);
          if (kept != 0) published[w].add(kept - 1, id, late(kept));
          if (nested) published[w].add(kept - 1, id + 1, Published::kNestedFlag | late(kept));
        } else {
          const uint64_t kept = t.store(writer, id, context_for(id));
          if (kept != 0) published[w].add(kept - 1, id, late(kept));
        }
        if (w == 2) std::this_thread::yield();
      }
      t.give_back(writer);
    });
  uint64_t lookups = 0, overlapped_hits = 0, lost_in_bound = 0, lost_late = 0, bad = 0,
           beyond_bound = 0;
  std::mt19937 rng(11);
  if (cpus.size() >= 2) run_on(cpus[0]);  // after starting the writers: they keep every CPU
  const auto limit = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  uint64_t looked_at = 0;  // launches when the reader last checked for new ones
  while (overlapped_hits < 2000 || beyond_bound < 100 || t.launches() <= 100 * kCap) {
    if (lookups % 256 == 0) {
      const uint64_t launches = t.launches();
      if (launches == looked_at) std::this_thread::yield();  // nothing new: let a writer run
      looked_at = launches;
      if (std::chrono::steady_clock::now() > limit) break;
    }
    Published& p = published[rng() % 3];
    const uint32_t n = p.count.load(std::memory_order_acquire);
    if (n == 0) continue;
    // Mostly recent entries, sometimes ones from up to kKeep stores of that writer back.
    const uint32_t age = rng() % 4 == 0 ? rng() % std::min(n, Published::kKeep) : rng() % std::min(n, 8u);
    const uint64_t e = p.entries[(n - 1 - age) % Published::kKeep].load(std::memory_order_relaxed);
    const auto id = static_cast<uint32_t>(e);
    const uint32_t launch_id = (e >> 32) & Published::kNestedFlag ? id - 1 : id;
    const uint64_t before = t.sequence_end();
    const uint64_t seq = Published::seq(e, before);
    LaunchContext got;
    const bool found = t.lookup(id, &got);
    const uint64_t after = t.sequence_end();
    ++lookups;
    if (found) {
      if (!same(got, context_for(launch_id))) ++bad;
      if (after > before) ++overlapped_hits;  // writers stored while this lookup ran
    } else if ((e >> 32) & Published::kLateFlag) {
      ++lost_late;  // the stated exception
    } else if (after <= seq + kCap) {
      ++lost_in_bound;  // the launch capacity launches later had not even been claimed
    } else {
      ++beyond_bound;
    }
  }
  stop = true;
  for (auto& w : writers) w.join();
  pthread_setaffinity_np(pthread_self(), sizeof allowed, &allowed);  // as before, for other tests
  INFO(lookups << " lookups, " << t.launches() << " launches; " << lost_late
               << " lookups of late-stored contexts found nothing (not judged)");
  CHECK(bad == 0);
  CHECK(lost_in_bound == 0);
  // The reads really overlapped the writes (they cannot on one CPU), and contexts really fell
  // out of the bound.
  if (cpus.size() >= 2) CHECK(overlapped_hits >= 2000);
  CHECK(beyond_bound >= 100);
  CHECK(t.launches() > 100 * kCap);
}
