// FastClock: CLOCK_MONOTONIC nanoseconds from the CPU's counter once calibrated, clock_gettime
// where the counter is not trusted; every reading bracketed by clock_gettime readings taken just
// before and after it (a preempted thread only widens the bracket, so this is not a timing test).
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "not_run.h"
#include "traintime/core/fast_clock.h"

using traintime::core::FastClock;

namespace {

// Reads until the clock counts (the calibration needs kCalibrateNs of clock time).
void calibrate(FastClock& c) {
  const uint64_t start = FastClock::clock_gettime_ns();
  while (!c.counting() && FastClock::clock_gettime_ns() - start < 20 * FastClock::kCalibrateNs) c.now_ns();
}

// The counter's conversion error allowed: far below a microsecond after calibration; 20 µs
// leaves room for a hypervisor's clock adjustments during the 10 ms calibration.
constexpr uint64_t kSlackNs = 20'000;

struct Bracketed {
  uint64_t readings = 0;
  uint64_t outside = 0;  // readings outside their clock_gettime bracket by more than the slack
};

// Three threads read for two anchor periods and a calibration (so the clock calibrates and
// re-anchors while they read), each reading bracketed by clock_gettime. make_reader() is called
// on each thread and returns that thread's uint64_t() reading function.
template <class MakeReader>
Bracketed read_through_reanchorings(MakeReader make_reader) {
  std::atomic<uint64_t> outside{0}, readings{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 3; ++k)
    threads.emplace_back([&] {
      auto read = make_reader();
      const uint64_t start = FastClock::clock_gettime_ns();
      while (FastClock::clock_gettime_ns() - start < 2 * FastClock::kAnchorNs + FastClock::kCalibrateNs) {
        const uint64_t before = FastClock::clock_gettime_ns();
        const uint64_t now = read();
        const uint64_t after = FastClock::clock_gettime_ns();
        ++readings;
        // Before calibration the readings are clock_gettime's; after, within the slack.
        if (now + kSlackNs < before || now > after + kSlackNs) ++outside;
      }
    });
  for (auto& t : threads) t.join();
  return {readings.load(), outside.load()};
}

}  // namespace

TEST_CASE("an untrusted counter leaves every reading to clock_gettime", "[fast_clock]") {
  FastClock c(FastClock::Trust::kClockGettime);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t before = FastClock::clock_gettime_ns();
    const uint64_t now = c.now_ns();
    const uint64_t after = FastClock::clock_gettime_ns();
    CHECK(before <= now);
    CHECK(now <= after);
  }
  CHECK_FALSE(c.counting());
}

TEST_CASE("a trusted counter, once calibrated, reads CLOCK_MONOTONIC through re-anchorings",
          "[fast_clock]") {
  if (!FastClock::counter_trusted()) TT_NOT_RUN("this machine's counter is not trusted (its readings may drift)");
  FastClock c(FastClock::Trust::kCounter);
  calibrate(c);
  REQUIRE(c.counting());
  // Across more than two anchor periods, so readings straddle re-anchorings.
  const uint64_t start = FastClock::clock_gettime_ns();
  uint64_t readings = 0, outside = 0;
  while (FastClock::clock_gettime_ns() - start < 3 * FastClock::kAnchorNs) {
    const uint64_t before = FastClock::clock_gettime_ns();
    const uint64_t now = c.now_ns();
    const uint64_t after = FastClock::clock_gettime_ns();
    ++readings;
    if (now + kSlackNs < before || now > after + kSlackNs) ++outside;
  }
  CHECK(readings > 1000);
  CHECK(outside == 0);
}

TEST_CASE("threads reading while one re-anchors get consistent readings", "[fast_clock]") {
  FastClock c(FastClock::counter_trusted() ? FastClock::Trust::kCounter : FastClock::Trust::kClockGettime);
  const Bracketed r = read_through_reanchorings([&c] { return [&c] { return c.now_ns(); }; });
  CHECK(r.readings > 100);
  CHECK(r.outside == 0);
}

TEST_CASE("a thread's own copy of the anchor reads CLOCK_MONOTONIC through re-anchorings",
          "[fast_clock]") {
  const bool trusted = FastClock::counter_trusted();
  FastClock c(trusted ? FastClock::Trust::kCounter : FastClock::Trust::kClockGettime);
  std::atomic<uint64_t> from_copy{0};
  const Bracketed r = read_through_reanchorings([&] {
    // The thread's own anchor, empty: the first reading fills it.
    return [&c, &from_copy, a = FastClock::Anchor{}]() mutable {
      uint64_t unused;
      if (FastClock::read(a, &unused)) ++from_copy;
      return c.now_ns(a);
    };
  });
  CHECK(r.readings > 100);
  CHECK(r.outside == 0);
  if (trusted) {
    CHECK(c.counting());
    CHECK(from_copy.load() > r.readings / 2);  // the copy, not the shared anchor, answers
  } else {
    CHECK(from_copy.load() == 0);  // an untrusted counter leaves the copy empty
  }
}

TEST_CASE("ticks: the counter itself where trusted, made nanoseconds at the measured rate",
          "[fast_clock]") {
  SECTION("an untrusted counter: ticks are clock_gettime's nanoseconds") {
    FastClock c(FastClock::Trust::kClockGettime);
    CHECK_FALSE(c.ticks_from_counter());
    const uint64_t before = FastClock::clock_gettime_ns();
    const uint64_t t = c.ticks();
    const uint64_t after = FastClock::clock_gettime_ns();
    CHECK(before <= t);
    CHECK(t <= after);
    CHECK(c.ticks_to_ns(123'456) == 123'456);
  }
  SECTION("a trusted counter, before and after calibration") {
    if (!FastClock::counter_trusted()) TT_NOT_RUN("this machine's counter is not trusted (its readings may drift)");
    FastClock c(FastClock::Trust::kCounter);
    REQUIRE(c.ticks_from_counter());
    // A span of ticks against the clock_gettime span around it, converted before calibration
    // (the rate measured on demand) and after.
    auto check_span = [&c] {
      const uint64_t n0 = FastClock::clock_gettime_ns();
      const uint64_t t0 = c.ticks();
      const uint64_t n1 = FastClock::clock_gettime_ns();
      while (FastClock::clock_gettime_ns() - n1 < 3'000'000) {
      }
      const uint64_t n2 = FastClock::clock_gettime_ns();
      const uint64_t t1 = c.ticks();
      const uint64_t n3 = FastClock::clock_gettime_ns();
      const uint64_t ns = c.ticks_to_ns(t1 - t0);
      // Within the bracket, with 1 % for the rate of a short calibration.
      CHECK(ns + (n2 - n1) / 100 >= n2 - n1);
      CHECK(ns <= (n3 - n0) + (n3 - n0) / 100);
    };
    CHECK_FALSE(c.counting());
    check_span();
    calibrate(c);
    REQUIRE(c.counting());
    check_span();
  }
}
