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
    r.ledger.mapped(base + i * 2 * kMiB, 2 * kMiB, 100 + i);
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
  r.ledger.mapped(0x1000000, 8 * kMiB, 7);
  r.ledger.released(7, r.at(), &r.events);
  CHECK(r.in_use() == 8 * kMiB);
  // A second mapping of the same memory (e.g. a second address range): both must go.
  r.ledger.mapped(0x9000000, 8 * kMiB, 7);
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
  r.ledger.mapped(0x2000000, 2 * kMiB, 5);
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
  r.ledger.mapped(0x4000000, 2 * kMiB, 999);
  r.ledger.unmapped(0x4000000, 2 * kMiB, r.at(), &r.events);
  r.ledger.released(999, r.at(), &r.events);
  r.ledger.retained(998);
  CHECK(r.events.empty());
  CHECK(r.ledger.foreign_calls() == 4);
  // An unmap of a range holding none of our mappings, next to one that is ours.
  r.ledger.created(1, 2 * kMiB, 0, r.at(), &r.events);
  r.ledger.mapped(0x8000000, 2 * kMiB, 1);
  r.ledger.unmapped(0x8000000 + 2 * kMiB, 2 * kMiB, r.at(), &r.events);
  r.ledger.unmapped(0x8000000 - 2 * kMiB, 2 * kMiB, r.at(), &r.events);
  r.ledger.released(1, r.at(), &r.events);
  CHECK(r.in_use() == 2 * kMiB);
  CHECK(r.ledger.foreign_calls() == 6);
}

TEST_CASE("vmm ledger: a handle value made again after a missed release replaces the old") {
  Run r;
  r.ledger.created(3, 4 * kMiB, 0, r.at(), &r.events);
  r.ledger.mapped(0x3000000, 4 * kMiB, 3);
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

TEST_CASE("vmm ledger: random call sequences agree with a brute-force count of live handles") {
  // The model: every handle's references and the mappings naming it; a handle's memory is in use
  // from its creation until both are gone. The calls are the ones a driver accepts: map only a
  // referenced handle at a free address, unmap whole mappings, release a referenced handle.
  std::mt19937_64 rng(20261127);
  for (int round = 0; round < 50; ++round) {
    Run r;
    struct Live {
      uint64_t bytes;
      uint32_t refs;
    };
    std::map<uint64_t, Live> handles;                              // handle -> model
    std::map<uint64_t, std::pair<uint64_t, uint64_t>> mappings;     // address -> (bytes, handle)
    uint64_t next_handle = 1, next_address = 1 << 30;
    auto model_in_use = [&] {
      uint64_t sum = 0;
      for (const auto& [h, l] : handles) sum += l.bytes;
      return sum;
    };
    auto forget_if_unused = [&](uint64_t h) {
      auto it = handles.find(h);
      if (it == handles.end() || it->second.refs > 0) return;
      for (const auto& [a, m] : mappings)
        if (m.second == h) return;
      handles.erase(it);
    };
    for (int op = 0; op < 400; ++op) {
      const uint64_t pick = rng() % 6;
      std::vector<uint64_t> referenced;
      for (const auto& [h, l] : handles)
        if (l.refs > 0) referenced.push_back(h);
      if (pick == 0 || referenced.empty()) {
        const uint64_t bytes = (1 + rng() % 8) * kMiB;
        handles[next_handle] = {bytes, 1};
        r.ledger.created(next_handle++, bytes, 0, r.at(), &r.events);
      } else if (pick == 1) {
        const uint64_t h = referenced[rng() % referenced.size()];
        mappings[next_address] = {handles[h].bytes, h};
        r.ledger.mapped(next_address, handles[h].bytes, h);
        next_address += 64 * kMiB;
      } else if (pick == 2 && !mappings.empty()) {
        // One to three neighbouring mappings in one unmap.
        auto first = std::next(mappings.begin(), static_cast<long>(rng() % mappings.size()));
        auto last = first;
        for (uint64_t n = rng() % 3; n > 0 && std::next(last) != mappings.end(); --n) ++last;
        const uint64_t from = first->first, to = last->first + last->second.first;
        std::vector<uint64_t> touched;
        const auto stop = std::next(last);
        for (auto it = first; it != stop;) {
          touched.push_back(it->second.second);
          it = mappings.erase(it);
        }
        for (uint64_t h : touched) forget_if_unused(h);
        r.ledger.unmapped(from, to - from, r.at(), &r.events);
      } else if (pick == 3) {
        const uint64_t h = referenced[rng() % referenced.size()];
        ++handles[h].refs;
        r.ledger.retained(h);
      } else {
        const uint64_t h = referenced[rng() % referenced.size()];
        --handles[h].refs;
        forget_if_unused(h);
        r.ledger.released(h, r.at(), &r.events);
      }
      REQUIRE(r.in_use() == model_in_use());
      REQUIRE(r.ledger.live() == handles.size());
    }
    CHECK(r.ledger.foreign_calls() == 0);
  }
}
