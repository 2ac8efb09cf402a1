// VmmLedger: the physical memory of CUDA VMM allocations (cuMemCreate .. freed once no reference
// and no mapping is left), on hand-computed call sequences, through the MemoryTracker.
#include <catch2/catch.hpp>

#include <iterator>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "traintime/core/memory_tracker.h"
#include "traintime/core/vmm_ledger.h"

using traintime::core::MemoryEvent;
using traintime::core::MemoryTracker;
using traintime::core::VmmLedger;

namespace {

constexpr uint64_t kMiB = 1ull << 20;

// The ledger's events applied to a tracker; in_use() after each call.
struct Run {
  VmmLedger ledger;
  MemoryTracker tracker;
  std::vector<MemoryEvent> events;
  uint64_t t = 0;
  uint64_t step = 0;

  VmmLedger::At at() { return {++t, step}; }
  void map(uint64_t address, uint64_t bytes, uint64_t handle) {
    ledger.mapped(address, bytes, handle, at(), &events);
  }
  uint64_t in_use() {
    for (const MemoryEvent& e : events) tracker.add(e);
    events.clear();
    const auto s = tracker.summary();
    return s.run.present ? s.run.in_use_bytes : 0;
  }
  uint64_t peak() {
    in_use();
    return tracker.summary().run.peak_bytes;
  }
};

}  // namespace

TEST_CASE("vmm ledger: PyTorch's expandable segment grows and shrinks by mapped handles") {
  Run r;
  // Reserve once (not seen), then map 2 MiB pages one handle each.
  constexpr uint64_t base = 0x7f0000000000;
  for (uint64_t i = 0; i < 3; ++i) {
    r.ledger.created(100 + i, 2 * kMiB, 0, r.at(), &r.events);
    r.map(base + i * 2 * kMiB, 2 * kMiB, 100 + i);
  }
  CHECK(r.in_use() == 6 * kMiB);
  // Shrink: the last page is unmapped, then its handle released: freed at the release.
  r.ledger.unmapped(base + 4 * kMiB, 2 * kMiB, r.at(), &r.events);
  CHECK(r.in_use() == 6 * kMiB);  // the handle still holds it
  r.ledger.released(102, r.at(), &r.events);
  CHECK(r.in_use() == 4 * kMiB);
  // Everything goes with one unmap over the whole range, then the releases.
  r.ledger.unmapped(base, 4 * kMiB, r.at(), &r.events);
  CHECK(r.in_use() == 4 * kMiB);
  r.ledger.released(100, r.at(), &r.events);
  r.ledger.released(101, r.at(), &r.events);
  CHECK(r.in_use() == 0);
  CHECK(r.peak() == 6 * kMiB);
  CHECK(r.ledger.allocations() == 3);
  CHECK(r.ledger.live() == 0);
  CHECK(r.ledger.foreign_calls() == 0);
}

TEST_CASE("vmm ledger: a handle released right after mapping is freed at the unmap") {
  Run r;
  r.ledger.created(7, 8 * kMiB, 1, r.at(), &r.events);
  r.map(0x1000000, 8 * kMiB, 7);
  r.ledger.released(7, r.at(), &r.events);
  CHECK(r.in_use() == 8 * kMiB);
  // A second mapping of the same memory (e.g. a second address range): both must go.
  r.map(0x9000000, 8 * kMiB, 7);
  r.ledger.unmapped(0x1000000, 8 * kMiB, r.at(), &r.events);
  CHECK(r.in_use() == 8 * kMiB);
  r.ledger.unmapped(0x9000000, 8 * kMiB, r.at(), &r.events);
  CHECK(r.in_use() == 0);
  const auto s = r.tracker.summary();
  REQUIRE(s.run.devices.size() == 1);
  CHECK(s.run.devices[0].cuda_device == 1);
  CHECK(s.run.devices[0].peak_bytes == 8 * kMiB);
}

TEST_CASE("vmm ledger: a retained handle needs one release per reference") {
  Run r;
  r.ledger.created(5, 2 * kMiB, 0, r.at(), &r.events);
  r.map(0x2000000, 2 * kMiB, 5);
  r.ledger.retained(5);  // cuMemRetainAllocationHandle on the mapped address
  r.ledger.unmapped(0x2000000, 2 * kMiB, r.at(), &r.events);
  r.ledger.released(5, r.at(), &r.events);
  CHECK(r.in_use() == 2 * kMiB);
  r.ledger.released(5, r.at(), &r.events);
  CHECK(r.in_use() == 0);
  // A release too many names a handle that is gone.
  r.ledger.released(5, r.at(), &r.events);
  CHECK(r.ledger.foreign_calls() == 1);
  CHECK(r.in_use() == 0);
}

TEST_CASE("vmm ledger: imported and unseen handles are not counted") {
  Run r;
  // An imported handle (another process's memory) mapped and unmapped: nothing of ours.
  r.map(0x4000000, 2 * kMiB, 999);
  r.ledger.unmapped(0x4000000, 2 * kMiB, r.at(), &r.events);
  r.ledger.released(999, r.at(), &r.events);
  r.ledger.retained(998);
  CHECK(r.events.empty());
  CHECK(r.ledger.foreign_calls() == 4);
  // An unmap of a range holding none of our mappings, next to one that is ours.
  r.ledger.created(1, 2 * kMiB, 0, r.at(), &r.events);
  r.map(0x8000000, 2 * kMiB, 1);
  r.ledger.unmapped(0x8000000 + 2 * kMiB, 2 * kMiB, r.at(), &r.events);
  r.ledger.unmapped(0x8000000 - 2 * kMiB, 2 * kMiB, r.at(), &r.events);
  r.ledger.released(1, r.at(), &r.events);
  CHECK(r.in_use() == 2 * kMiB);
  CHECK(r.ledger.foreign_calls() == 6);
}

TEST_CASE("vmm ledger: a handle value made again after a missed release replaces the old") {
  Run r;
  r.ledger.created(3, 4 * kMiB, 0, r.at(), &r.events);
  r.map(0x3000000, 4 * kMiB, 3);
  // Its unmap and release were missed; the driver hands out handle 3 again.
  r.ledger.created(3, 2 * kMiB, 0, r.at(), &r.events);
  CHECK(r.in_use() == 2 * kMiB);
  r.ledger.released(3, r.at(), &r.events);
  CHECK(r.in_use() == 0);  // the old mapping does not keep the new allocation alive
  CHECK(r.ledger.live() == 0);
}

TEST_CASE("vmm ledger: handles and device addresses of equal value are kept apart") {
  // A cudaMalloc record at address 0x10 and a VMM handle 0x10 on one device.
  MemoryTracker t;
  MemoryEvent a{1, 0x10, 100, 0, 0, false};
  MemoryEvent h{2, 0x10, 1000, 0, 0, false};
  h.handle = true;
  t.add(a);
  t.add(h);
  MemoryEvent free_a{3, 0x10, 0, 0, 0, true};
  t.add(free_a);
  const auto s = t.summary();
  CHECK(s.run.in_use_bytes == 1000);
  CHECK(s.run.peak_bytes == 1100);
  traintime::core::Section section;
  t.count_into(section);
  CHECK(section.counters.counters.at("memory_reused_addresses") == 0);
}

TEST_CASE("vmm ledger: events carry the step and time of the call that made them") {
  Run r;
  r.step = 4;
  r.ledger.created(9, kMiB, 2, r.at(), &r.events);
  REQUIRE(r.events.size() == 1);
  CHECK(r.events[0].step == 4);
  CHECK(r.events[0].timestamp_ns == 1);
  CHECK(r.events[0].device == 2);
  CHECK(r.events[0].handle);
  CHECK_FALSE(r.events[0].release);
  r.step = 6;
  r.ledger.released(9, r.at(), &r.events);
  REQUIRE(r.events.size() == 2);
  CHECK(r.events[1].step == 6);
  CHECK(r.events[1].release);
  CHECK(r.events[1].bytes == kMiB);
}

TEST_CASE("vmm ledger: a mapping over one whose unmap was missed frees the memory it alone kept") {
  Run r;
  // An expandable segment's page: mapped, its handle released (the mapping keeps it alive).
  r.ledger.created(1, 2 * kMiB, 0, r.at(), &r.events);
  r.map(0x5000000, 2 * kMiB, 1);
  r.ledger.released(1, r.at(), &r.events);
  CHECK(r.in_use() == 2 * kMiB);
  // Its cuMemUnmap was missed; the segment grows again at the same address with a new page.
  r.ledger.created(2, 4 * kMiB, 0, r.at(), &r.events);
  r.map(0x5000000, 4 * kMiB, 2);
  CHECK(r.in_use() == 4 * kMiB);  // handle 1 had no reference and no mapping left: freed
  CHECK(r.ledger.live() == 1);
  r.ledger.released(2, r.at(), &r.events);
  r.ledger.unmapped(0x5000000, 4 * kMiB, r.at(), &r.events);
  CHECK(r.in_use() == 0);
  CHECK(r.ledger.live() == 0);
  CHECK(r.ledger.foreign_calls() == 0);
}

TEST_CASE("vmm ledger: a handle still referenced survives losing its mapping to a missed unmap") {
  Run r;
  r.ledger.created(1, 2 * kMiB, 0, r.at(), &r.events);
  r.map(0x6000000, 2 * kMiB, 1);
  r.ledger.created(2, 2 * kMiB, 0, r.at(), &r.events);
  r.map(0x6000000, 2 * kMiB, 2);  // handle 1's unmap was missed; it is still referenced
  CHECK(r.in_use() == 4 * kMiB);
  r.ledger.released(1, r.at(), &r.events);  // its last reference: freed now
  CHECK(r.in_use() == 2 * kMiB);
}

TEST_CASE("vmm ledger: calls seen twice change nothing the first did not") {
  Run r;
  r.ledger.created(4, 8 * kMiB, 0, r.at(), &r.events);
  r.map(0x7000000, 8 * kMiB, 4);
  r.ledger.released(4, r.at(), &r.events);
  // The same cuMemMap reported again: its own memory is not freed by it.
  r.map(0x7000000, 8 * kMiB, 4);
  CHECK(r.in_use() == 8 * kMiB);
  CHECK(r.ledger.live() == 1);
  // A repeated release names a handle with no reference left: foreign, nothing changes.
  r.ledger.released(4, r.at(), &r.events);
  CHECK(r.ledger.foreign_calls() == 1);
  CHECK(r.in_use() == 8 * kMiB);
  r.ledger.unmapped(0x7000000, 8 * kMiB, r.at(), &r.events);
  CHECK(r.in_use() == 0);
  // A repeated unmap finds nothing of ours.
  r.ledger.unmapped(0x7000000, 8 * kMiB, r.at(), &r.events);
  CHECK(r.ledger.foreign_calls() == 2);
  CHECK(r.in_use() == 0);
  CHECK(r.peak() == 8 * kMiB);
}

namespace {

// One VMM call as the driver accepted it.
struct Call {
  enum Kind { kCreate, kRetain, kRelease, kMap, kUnmap } kind;
  uint64_t handle = 0;
  uint64_t address = 0;
  uint64_t bytes = 0;
};

// Handles by their references and the mappings naming them, in the driver's terms: memory is in
// use from its creation until no reference and no mapping is left. Fed every call the driver
// accepted, it is the truth; fed what a ledger saw (calls missed, calls seen twice), it is the
// brute-force count of what the ledger documents for those: a create of a handle value still
// held replaces the old allocation, a map at an address still held replaces the mapping there,
// a call naming an unknown handle (or a released one) or a range holding no mapping is foreign.
struct Model {
  struct Handle {
    uint64_t bytes = 0;
    uint32_t refs = 0;
  };
  std::map<uint64_t, Handle> handles;
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> mappings;  // address -> (bytes, handle)
  uint64_t foreign = 0;

  void forget_if_unused(uint64_t h) {
    const auto it = handles.find(h);
    if (it == handles.end() || it->second.refs > 0) return;
    for (const auto& [address, m] : mappings)
      if (m.second == h) return;
    handles.erase(it);
  }
  void apply(const Call& c) {
    const auto h = handles.find(c.handle);
    switch (c.kind) {
      case Call::kCreate:
        for (auto m = mappings.begin(); m != mappings.end();)
          m = m->second.second == c.handle ? mappings.erase(m) : std::next(m);
        handles[c.handle] = {c.bytes, 1};
        break;
      case Call::kRetain:
        if (h == handles.end()) ++foreign;
        else ++h->second.refs;
        break;
      case Call::kRelease:
        if (h == handles.end() || h->second.refs == 0) {
          ++foreign;
        } else {
          --h->second.refs;
          forget_if_unused(c.handle);
        }
        break;
      case Call::kMap: {
        if (h == handles.end()) {
          ++foreign;
          break;
        }
        const auto old = mappings.find(c.address);
        const uint64_t replaced = old != mappings.end() ? old->second.second : 0;
        mappings[c.address] = {c.bytes, c.handle};
        if (replaced != 0) forget_if_unused(replaced);
        break;
      }
      case Call::kUnmap: {
        std::vector<uint64_t> touched;
        for (auto m = mappings.lower_bound(c.address); m != mappings.end() && m->first < c.address + c.bytes;) {
          touched.push_back(m->second.second);
          m = mappings.erase(m);
        }
        if (touched.empty()) ++foreign;
        for (uint64_t t : touched) forget_if_unused(t);
        break;
      }
    }
  }
  uint64_t in_use() const {
    uint64_t sum = 0;
    for (const auto& [handle, state] : handles) sum += state.bytes;
    return sum;
  }
};

void deliver(Run& r, const Call& c) {
  switch (c.kind) {
    case Call::kCreate: r.ledger.created(c.handle, c.bytes, 0, r.at(), &r.events); break;
    case Call::kRetain: r.ledger.retained(c.handle); break;
    case Call::kRelease: r.ledger.released(c.handle, r.at(), &r.events); break;
    case Call::kMap: r.map(c.address, c.bytes, c.handle); break;
    case Call::kUnmap: r.ledger.unmapped(c.address, c.bytes, r.at(), &r.events); break;
  }
}

// The next call a driver accepts in state `truth`: map only a referenced handle at a free
// address (often one unmapped before, as a growing segment reuses its range), unmap whole
// neighbouring mappings, retain or release a referenced handle.
Call next_call(std::mt19937_64& rng, const Model& truth, std::vector<uint64_t>* free_addresses,
               uint64_t* next_handle, uint64_t* next_address) {
  std::vector<uint64_t> referenced;
  for (const auto& [h, state] : truth.handles)
    if (state.refs > 0) referenced.push_back(h);
  const uint64_t pick = rng() % 6;
  if (pick == 0 || referenced.empty()) return {Call::kCreate, (*next_handle)++, 0, (1 + rng() % 8) * kMiB};
  const uint64_t h = referenced[rng() % referenced.size()];
  if (pick == 1) {
    uint64_t address = *next_address;
    if (!free_addresses->empty() && rng() % 2 == 0) {
      const std::size_t i = rng() % free_addresses->size();
      address = (*free_addresses)[i];
      free_addresses->erase(free_addresses->begin() + static_cast<long>(i));
    } else {
      *next_address += 64 * kMiB;
    }
    return {Call::kMap, h, address, truth.handles.at(h).bytes};
  }
  if (pick == 2 && !truth.mappings.empty()) {
    // One to three neighbouring mappings in one unmap.
    auto first = std::next(truth.mappings.begin(), static_cast<long>(rng() % truth.mappings.size()));
    auto last = first;
    for (uint64_t n = rng() % 3; n > 0 && std::next(last) != truth.mappings.end(); --n) ++last;
    for (auto it = first; it != std::next(last); ++it) free_addresses->push_back(it->first);
    return {Call::kUnmap, 0, first->first, last->first + last->second.first - first->first};
  }
  return {pick == 3 ? Call::kRetain : Call::kRelease, h, 0, 0};
}

}  // namespace

TEST_CASE("vmm ledger: random driver call sequences agree with a brute-force count of live handles, "
          "with calls missed and calls seen twice") {
  std::mt19937_64 rng(20261127);
  // (missed, seen twice) in percent: every call seen once first (the ledger then matches the
  // driver itself), then with calls lost and repeated as a callback can be.
  for (const auto& [missed_pct, twice_pct] : {std::pair{0, 0}, std::pair{10, 0}, std::pair{0, 10}, std::pair{8, 8}}) {
    for (int round = 0; round < 30; ++round) {
      INFO("missed " << missed_pct << "%, seen twice " << twice_pct << "%, round " << round);
      Run r;
      Model truth, seen;
      std::vector<uint64_t> free_addresses;
      uint64_t next_handle = 1, next_address = 1 << 30;
      for (int op = 0; op < 400; ++op) {
        const Call c = next_call(rng, truth, &free_addresses, &next_handle, &next_address);
        truth.apply(c);
        const uint64_t roll = rng() % 100;
        const int times = roll < static_cast<uint64_t>(missed_pct) ? 0
                          : roll < static_cast<uint64_t>(missed_pct + twice_pct) ? 2 : 1;
        for (int k = 0; k < times; ++k) {
          deliver(r, c);
          seen.apply(c);
          INFO("call " << op << " (kind " << c.kind << ", handle " << c.handle << ", address " << c.address << ")");
          REQUIRE(r.in_use() == seen.in_use());
          REQUIRE(r.ledger.live() == seen.handles.size());
          REQUIRE(r.ledger.foreign_calls() == seen.foreign);
        }
        if (missed_pct == 0 && twice_pct == 0) REQUIRE(r.in_use() == truth.in_use());
      }
      if (missed_pct == 0 && twice_pct == 0) CHECK(r.ledger.foreign_calls() == 0);
    }
  }
}
