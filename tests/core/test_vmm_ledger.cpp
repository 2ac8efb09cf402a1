// VmmLedger: the physical memory of CUDA VMM allocations (cuMemCreate .. freed once no reference
// and no mapping is left), on hand-computed call sequences, through the MemoryTracker.
#include <catch2/catch.hpp>

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
