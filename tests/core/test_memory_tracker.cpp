// MemoryTracker: device memory in use per step from allocation and release records, on
// hand-computed sequences (docs/schema.md "memory").
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "traintime/core/memory_tracker.h"

using traintime::core::MemoryEvent;
using traintime::core::MemoryFigures;
using traintime::core::MemorySummary;
using traintime::core::MemoryTracker;
using traintime::core::Section;

namespace {

MemoryEvent alloc(uint64_t t, uint64_t step, uint64_t address, uint64_t bytes, uint32_t device = 0) {
  return {t, address, bytes, step, device, false};
}
MemoryEvent release(uint64_t t, uint64_t step, uint64_t address, uint32_t device = 0) {
  return {t, address, 0, step, device, true};
}

uint64_t counter(const Section& s, const char* key) {
  const auto it = s.counters.counters.find(key);
  return it == s.counters.counters.end() ? ~uint64_t{0} : it->second;
}

}  // namespace

TEST_CASE("memory tracker: peaks and end-of-step use across step boundaries") {
  MemoryTracker t;
  // Step 0: +100 at A, +50 at B, -A: peak 150, ends at 50.
  t.add(alloc(10, 0, 0xA, 100));
  t.add(alloc(20, 0, 0xB, 50));
  t.add(release(30, 0, 0xA));
  // Step 1: no record. Step 2: +30 at C, -B, +10 at D: starts at 50, peak 80, ends at 40.
  t.add(alloc(40, 2, 0xC, 30));
  t.add(release(50, 2, 0xB));
  t.add(alloc(60, 2, 0xD, 10));
  const MemorySummary s = t.summary();
  REQUIRE(s.run.present);
  CHECK(s.run.peak_bytes == 150);
  CHECK(s.run.in_use_bytes == 40);
  REQUIRE(s.steps.size() == 2);
  CHECK(s.steps[0].first == 0);
  CHECK(s.steps[0].second.peak_bytes == 150);
  CHECK(s.steps[0].second.in_use_bytes == 50);
  CHECK(s.steps[1].first == 2);
  CHECK(s.steps[1].second.peak_bytes == 80);
  CHECK(s.steps[1].second.in_use_bytes == 40);
  // The live figure of each step: step 1 holds step 0's 50, step 3 step 2's 40.
  uint64_t peak = 0;
  CHECK((t.step_peak(0, &peak) && peak == 150));
  CHECK((t.step_peak(1, &peak) && peak == 50));
  CHECK((t.step_peak(2, &peak) && peak == 80));
  CHECK((t.step_peak(3, &peak) && peak == 40));

  // Rows for detail steps 0..3: step 1 carries step 0's 50 (peak = in use), step 3 step 2's 40.
  const std::vector<MemoryFigures> rows = s.rows_for({0, 1, 2, 3});
  REQUIRE(rows.size() == 4);
  for (const MemoryFigures& r : rows) REQUIRE(r.present);
  CHECK((rows[1].peak_bytes == 50 && rows[1].in_use_bytes == 50));
  CHECK((rows[2].peak_bytes == 80 && rows[2].in_use_bytes == 40));
  CHECK((rows[3].peak_bytes == 40 && rows[3].in_use_bytes == 40));
  REQUIRE(rows[3].devices.size() == 1);
  CHECK(rows[3].devices[0].peak_bytes == 40);
}

TEST_CASE("memory tracker: records are applied in timestamp order, whatever the buffer order") {
  MemoryTracker t;
  // Another thread's buffer delivered first: the release (t=30) before its allocation (t=10).
  t.add(release(30, 0, 0xA));
  t.add(alloc(40, 0, 0xB, 7));
  t.add(alloc(10, 0, 0xA, 100));
  const MemorySummary s = t.summary();
  CHECK(s.run.peak_bytes == 100);
  CHECK(s.run.in_use_bytes == 7);
  Section sec{"cupti"};
  t.count_into(sec);
  CHECK(counter(sec, "memory_unknown_frees") == 0);
  CHECK(counter(sec, "memory_records") == 3);
  CHECK(sec.warnings.empty());
}

TEST_CASE("memory tracker: before the end only complete steps are applied, so early events of an "
          "open step do not push late records of an earlier step forward") {
  MemoryTracker t;
  // Step 0's records are in. Step 1's VMM event (t=25) came at once; step 1's own CUPTI record
  // (t=20, +30) is still in a buffer CUPTI holds.
  t.add(alloc(10, 0, 0xA, 100));
  t.add(release(15, 0, 0xA));
  MemoryEvent vmm = alloc(25, 1, 0x1, 1000);
  vmm.handle = true;
  t.add(vmm);
  t.set_complete_below(1);
  const MemorySummary mid = t.summary(false);
  CHECK(mid.complete_below == 1);
  CHECK((mid.run.present && mid.run.peak_bytes == 100 && mid.run.in_use_bytes == 0));
  const std::vector<MemoryFigures> mid_rows = mid.rows_for({0, 1});
  CHECK((mid_rows[0].present && mid_rows[0].peak_bytes == 100));
  CHECK_FALSE(mid_rows[1].present);  // still open: no figures yet, not carried ones
  // The live figure of a complete step applies that step only.
  uint64_t peak = 0;
  REQUIRE(t.step_peak(0, &peak));
  CHECK(peak == 100);
  // The late record arrives; at the end every record counts in its own step, in time order.
  t.add(alloc(20, 1, 0xB, 30));
  MemoryEvent vmm_free = release(40, 2, 0x1);
  vmm_free.handle = true;
  t.add(vmm_free);
  const MemorySummary end = t.summary();
  CHECK(end.complete_below == UINT64_MAX);
  const std::vector<MemoryFigures> rows = end.rows_for({0, 1, 2});
  for (const MemoryFigures& r : rows) REQUIRE(r.present);
  CHECK((rows[1].peak_bytes == 1030 && rows[1].in_use_bytes == 1030));
  CHECK((rows[2].peak_bytes == 1030 && rows[2].in_use_bytes == 30));
  CHECK(end.run.peak_bytes == 1030);
}

TEST_CASE("memory tracker: held records of open steps are bounded, then applied anyway") {
  MemoryTracker t;
  t.set_complete_below(0);  // nothing is ever complete: everything is held
  for (uint64_t i = 0; i < MemoryTracker::kMaxHeld; ++i) t.add(alloc(i + 1, 3, 0x1000 + i, 1));
  // The last add reached the bound: all of them were applied.
  CHECK(t.records() == MemoryTracker::kMaxHeld);
  const MemorySummary s = t.summary(false);
  CHECK(s.run.in_use_bytes == MemoryTracker::kMaxHeld);
}

TEST_CASE("memory tracker: a release of an unknown address is counted and changes nothing") {
  MemoryTracker t;
  t.add(alloc(10, 0, 0xA, 100));
  t.add(release(20, 0, 0xF));        // allocated before capture started
  t.add(release(30, 1, 0xA));
  t.add(alloc(40, 1, 0xA, 60));      // the address reused: fine, it was released
  t.add(alloc(50, 1, 0xA, 20));      // reused again without a release record
  const MemorySummary s = t.summary();
  CHECK(s.run.peak_bytes == 100);
  CHECK(s.run.in_use_bytes == 20);
  REQUIRE(s.steps.size() == 2);
  CHECK(s.steps[1].second.peak_bytes == 100);  // starts at 100, drops to 0, then 60, then 20
  CHECK(s.steps[1].second.in_use_bytes == 20);
  Section sec{"cupti"};
  t.count_into(sec);
  CHECK(counter(sec, "memory_unknown_frees") == 1);
  CHECK(counter(sec, "memory_reused_addresses") == 1);
  CHECK(sec.warnings.size() == 2);
}

TEST_CASE("memory tracker: two devices, the rank's peak is the peak of their sum") {
  MemoryTracker t;
  // Device 0 peaks at 100 early, device 1 at 80 later; together never above 130.
  t.add(alloc(10, 0, 0xA, 100, 0));
  t.add(alloc(20, 0, 0xB, 30, 1));   // sum 130
  t.add(release(30, 0, 0xA, 0));     // sum 30
  t.add(alloc(40, 0, 0xC, 50, 1));   // device 1 at 80, sum 80
  t.add(alloc(45, 0, 0xA, 8, 1));    // the same address on another device: its own allocation
  const MemorySummary s = t.summary();
  CHECK(s.run.peak_bytes == 130);
  CHECK(s.run.in_use_bytes == 88);
  REQUIRE(s.run.devices.size() == 2);
  CHECK((s.run.devices[0].cuda_device == 0 && s.run.devices[0].peak_bytes == 100 && s.run.devices[0].in_use_bytes == 0));
  CHECK((s.run.devices[1].cuda_device == 1 && s.run.devices[1].peak_bytes == 88 && s.run.devices[1].in_use_bytes == 88));
  REQUIRE(s.steps.size() == 1);
  const MemoryFigures& f = s.steps[0].second;
  CHECK(f.peak_bytes == 130);  // not 100 + 88
  REQUIRE(f.devices.size() == 2);
  CHECK(f.devices[0].peak_bytes == 100);
  CHECK(f.devices[1].peak_bytes == 88);
}

TEST_CASE("memory tracker: nothing seen, nothing present; rows before the first record are empty") {
  MemoryTracker t;
  CHECK_FALSE(t.summary().run.present);
  uint64_t peak = 0;
  CHECK_FALSE(t.step_peak(0, &peak));
  t.add(alloc(10, 3, 0xA, 5));
  CHECK_FALSE(t.step_peak(2, &peak));  // applied by step_peak itself
  CHECK((t.step_peak(3, &peak) && peak == 5));
  const MemorySummary s = t.summary();
  const std::vector<MemoryFigures> rows = s.rows_for({2, 3, 4});
  CHECK_FALSE(rows[0].present);
  CHECK((rows[1].present && rows[1].peak_bytes == 5));
  CHECK((rows[2].present && rows[2].in_use_bytes == 5));
}

TEST_CASE("memory tracker: only the last steps are kept, later rows still start from the old state") {
  MemoryTracker t(2);
  t.add(alloc(10, 0, 0xA, 10));
  t.add(alloc(20, 1, 0xB, 20));
  t.add(alloc(30, 2, 0xC, 40));
  const MemorySummary s = t.summary();
  REQUIRE(s.steps.size() == 2);
  CHECK(s.steps[0].first == 1);
  CHECK(s.steps[1].second.peak_bytes == 70);
  CHECK(s.run.peak_bytes == 70);
}

TEST_CASE("memory tracker: the address map agrees with std::map through collisions and deletions") {
  // Addresses on a few home slots (multiples of a large power of two hash close together in a
  // small table), address 0, re-insertions and erasures of absent addresses, across growth.
  std::mt19937_64 rng(7);
  traintime::core::AddressMap m;
  std::map<uint64_t, uint64_t> want;
  for (int i = 0; i < 200'000; ++i) {
    const uint64_t address = (rng() % 3 == 0) ? (rng() % 64) << 40 : rng() % 700;
    const uint64_t bytes = rng() % 1000 + 1;
    switch (rng() % 3) {
      case 0: {
        const auto [held, inserted] = m.insert(address, bytes);
        const auto [it, fresh] = want.try_emplace(address, bytes);
        REQUIRE(inserted == fresh);
        REQUIRE(*held == it->second);
        break;
      }
      case 1:
        m.erase(address);
        want.erase(address);
        break;
      default: {
        const uint64_t* held = m.find(address);
        const auto it = want.find(address);
        REQUIRE((held != nullptr) == (it != want.end()));
        if (held) REQUIRE(*held == it->second);
      }
    }
    REQUIRE(m.size() == want.size());
  }
  for (const auto& [address, bytes] : want) {
    const uint64_t* held = m.find(address);
    REQUIRE(held != nullptr);
    CHECK(*held == bytes);
  }
}

TEST_CASE("memory tracker: random records on two devices against a brute-force count") {
  // In-use and peak figures of the run and of every step, the unknown frees and the reused
  // addresses, recomputed here record by record in timestamp order with std::map.
  std::mt19937_64 rng(11);
  for (int round = 0; round < 20; ++round) {
    MemoryTracker t(1000);
    std::vector<MemoryEvent> events;
    uint64_t step = 0;
    for (uint64_t ts = 1; ts <= 3000; ++ts) {
      if (rng() % 50 == 0) ++step;
      const uint32_t device = static_cast<uint32_t>(rng() % 2);
      const uint64_t address = 0x1000 * (rng() % 300);
      events.push_back(rng() % 2 ? alloc(ts, step, address, rng() % 5000 + 1, device)
                                 : release(ts, step, address, device));
    }
    // Reference, in timestamp order (the order made above).
    std::map<uint32_t, std::map<uint64_t, uint64_t>> live;
    std::map<uint32_t, uint64_t> dev_in_use, dev_peak;
    std::map<uint64_t, uint64_t> step_peak, step_end;
    uint64_t in_use = 0, peak = 0, unknown = 0, reused = 0, last_step = 0;
    for (const MemoryEvent& e : events) {
      if (e.step != last_step) step_peak[e.step] = in_use;  // a step starts with what is in use
      last_step = e.step;
      auto& l = live[e.device];
      if (e.release) {
        const auto it = l.find(e.address);
        if (it == l.end()) {
          ++unknown;
        } else {
          dev_in_use[e.device] -= it->second;
          in_use -= it->second;
          l.erase(it);
        }
      } else {
        if (const auto it = l.find(e.address); it != l.end()) {
          ++reused;
          dev_in_use[e.device] -= it->second;
          in_use -= it->second;
        }
        l[e.address] = e.bytes;
        dev_in_use[e.device] += e.bytes;
        in_use += e.bytes;
      }
      dev_peak[e.device] = std::max(dev_peak[e.device], dev_in_use[e.device]);
      peak = std::max(peak, in_use);
      step_peak[e.step] = std::max(step_peak[e.step], in_use);
      step_end[e.step] = in_use;
    }
    // The tracker gets them shuffled in blocks, as buffers arrive.
    std::vector<MemoryEvent> shuffled = events;
    for (std::size_t b = 0; b + 100 <= shuffled.size(); b += 100)
      std::shuffle(shuffled.begin() + static_cast<std::ptrdiff_t>(b), shuffled.begin() + static_cast<std::ptrdiff_t>(b + 100), rng);
    for (const MemoryEvent& e : shuffled) t.add(e);
    const MemorySummary s = t.summary();
    REQUIRE(s.run.present);
    CHECK(s.run.peak_bytes == peak);
    CHECK(s.run.in_use_bytes == in_use);
    for (const auto& d : s.run.devices) {
      CHECK(d.peak_bytes == dev_peak[static_cast<uint32_t>(d.cuda_device)]);
      CHECK(d.in_use_bytes == dev_in_use[static_cast<uint32_t>(d.cuda_device)]);
    }
    for (const auto& [index, f] : s.steps) {
      CHECK(f.peak_bytes == step_peak[index]);
      CHECK(f.in_use_bytes == step_end[index]);
    }
    Section sec;
    t.count_into(sec);
    CHECK(counter(sec, "memory_unknown_frees") == unknown);
    CHECK(counter(sec, "memory_reused_addresses") == reused);
  }
}
