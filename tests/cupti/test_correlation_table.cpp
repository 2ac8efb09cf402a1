// Correlation id -> launch context: bounded, lock-free, never a torn or foreign context.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "correlation_table.h"

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
  c.comm_op = static_cast<CommOp>(id % 12);
  c.comm_id = id % 1000;
  c.comm_seq = uint64_t{id} << 20;
  c.comm_bytes = ~uint64_t{id};
  c.comm_group = uint64_t{id} * 31;
  c.comm_captured = (id & 1) != 0;
  return c;
}

bool same(const LaunchContext& a, const LaunchContext& b) {
  return a.path == b.path && a.step == b.step && a.entry == b.entry && a.comm_op == b.comm_op &&
         a.comm_id == b.comm_id && a.comm_seq == b.comm_seq && a.comm_bytes == b.comm_bytes &&
         a.comm_group == b.comm_group && a.comm_captured == b.comm_captured;
}

}  // namespace

TEST_CASE("a stored context is found under its id with every field intact", "[correlation]") {
  CorrelationTable t(1000);
  CHECK(t.capacity() == 1024);
  for (uint32_t id = 1; id <= 500; ++id) t.store(id, context_for(id));
  for (uint32_t id = 1; id <= 500; ++id) {
    LaunchContext got;
    REQUIRE(t.lookup(id, &got));
    CHECK(same(got, context_for(id)));
  }
  LaunchContext got;
  CHECK_FALSE(t.lookup(501, &got));
  CHECK_FALSE(t.lookup(0, &got));
  CHECK(t.overwritten() == 0);
}

TEST_CASE("ids that advance by thousands per launch keep every pending context", "[correlation]") {
  // CUPTI numbers every traced API call: a launch-heavy loop moves the ids far faster than the
  // launches. 256 launches 1024 ids apart in a 1024-slot table: indexed by id, all would share
  // one slot; keyed by id with eviction by launch age, all stay until their records arrive.
  CorrelationTable t(1024);
  for (uint32_t k = 0; k < 256; ++k) t.store(7 + 1024 * k, context_for(7 + 1024 * k));
  LaunchContext got;
  for (uint32_t k = 0; k < 256; ++k) {
    REQUIRE(t.lookup(7 + 1024 * k, &got));
    CHECK(same(got, context_for(7 + 1024 * k)));
  }
  CHECK(t.overwritten() == 0);
  CHECK(t.ids_per_store() == Approx((255.0 * 1024 + 1) / 256).epsilon(1e-9));  // ids spanned / launches
}

TEST_CASE("the id rate stays right when the 32-bit correlation ids wrap", "[correlation]") {
  // A long launch-heavy run passes 2^32 traced API calls: the rate must count across the wrap,
  // not from the first id to the (numerically smaller) newest one.
  CorrelationTable t(64);
  t.store(0xFFFFFFF0u, context_for(1));
  t.store(0xFFFFFFF8u, context_for(2));
  t.store(0x00000010u, context_for(3));  // 0x20 ids after the first, past the wrap
  CHECK(t.launches() == 3);
  CHECK(t.ids_per_store() == Approx((0x20 + 1) / 3.0).epsilon(1e-9));
  // An out-of-order (older) id from another thread spans nothing new.
  t.store(0xFFFFFFFCu, context_for(4));
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

TEST_CASE("concurrent launches and lookups never yield a torn or foreign context",
          "[correlation]") {
  CorrelationTable t(256);  // small: writers keep overwriting slots the reader is reading
  std::atomic<uint32_t> next{1};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> hits{0}, bad{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < 3; ++w)
    writers.emplace_back([&] {
      while (!stop.load()) {
        const uint32_t id = next.fetch_add(1);
        t.store(id, context_for(id));
      }
    });
  std::thread reader([&] {
    for (int i = 0; i < 200000; ++i) {
      const uint32_t newest = next.load();
      const uint32_t id = newest > 100 ? newest - 1 - static_cast<uint32_t>(i % 100) : 1;
      LaunchContext got;
      if (t.lookup(id, &got)) {
        ++hits;
        if (!same(got, context_for(id))) ++bad;
      }
    }
    stop = true;
  });
  reader.join();
  for (auto& w : writers) w.join();
  CHECK(bad.load() == 0);
  CHECK(hits.load() > 0);
}
