// The one interval-union sweep behind every busy figure, checked against hand-worked cases and
// against a brute-force count of covered nanoseconds.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <vector>

#include "traintime/core/interval_union.h"

using traintime::core::Interval;
using traintime::core::IntervalUnion;
using traintime::core::union_measure;

namespace {

uint64_t measure(std::vector<Interval> v) { return union_measure(v); }

// Independent reference: count every covered nanosecond of a small time line.
uint64_t brute_force(const std::vector<Interval>& v, uint64_t horizon) {
  uint64_t covered = 0;
  for (uint64_t t = 0; t < horizon; ++t) {
    for (const Interval& i : v) {
      if (i.start <= t && t < i.end) {
        ++covered;
        break;
      }
    }
  }
  return covered;
}

}  // namespace

TEST_CASE("interval union measure counts overlapping time once", "[interval]") {
  CHECK(measure({{0, 10}, {5, 15}}) == 15);  // overlap on [5,10)
}

TEST_CASE("interval union handles nested intervals", "[interval]") {
  CHECK(measure({{0, 100}, {10, 20}, {30, 40}}) == 100);
}

TEST_CASE("interval union merges touching intervals", "[interval]") {
  CHECK(measure({{0, 10}, {10, 20}}) == 20);
}

TEST_CASE("interval union ignores zero-length and inverted intervals", "[interval]") {
  CHECK(measure({{5, 5}, {7, 3}, {10, 12}}) == 2);
  CHECK(measure({{4, 4}}) == 0);
  CHECK(measure({}) == 0);
}

TEST_CASE("interval union counts duplicates once", "[interval]") {
  CHECK(measure({{3, 8}, {3, 8}, {3, 8}}) == 5);
}

TEST_CASE("interval union is independent of insertion order", "[interval]") {
  // [0,30) + [50,61) = 41
  CHECK(measure({{50, 60}, {0, 10}, {20, 30}, {5, 25}, {60, 61}}) == 41);
}

TEST_CASE("an empty or inverted interval beyond the union's reach hides nothing after it",
          "[interval]") {
  // Sorted by start, an empty interval at 30 comes between [0,10) and [30,40); so does an
  // inverted one. Neither may count, nor swallow the interval that starts where they do.
  CHECK(measure({{0, 10}, {30, 30}, {30, 40}}) == 20);
  CHECK(measure({{0, 10}, {30, 5}, {30, 40}, {45, 50}}) == 25);
  std::mt19937 rng(777);
  std::uniform_int_distribution<uint64_t> at(0, 200), len(0, 20), kind(0, 3);
  for (int round = 0; round < 200; ++round) {
    std::vector<Interval> v;
    for (int i = 0; i < 10; ++i) {
      const uint64_t s = at(rng);
      v.push_back(kind(rng) == 0 ? Interval{s, s - std::min(s, len(rng))} : Interval{s, s + len(rng)});
    }
    REQUIRE(measure(v) == brute_force(v, 256));
  }
}

TEST_CASE("the sweep resets after finish()", "[interval]") {
  IntervalUnion u;
  u.add(0, 10);
  u.add(20, 25);
  CHECK(u.finish() == 15);
  CHECK(u.finish() == 0);
  u.add(100, 101);
  CHECK(u.finish() == 1);
}

TEST_CASE("union, intersection and difference by inclusion-exclusion match a brute-force count",
          "[interval]") {
  // The aggregator derives comm ∩ compute = |comm| + |compute| − |comm ∪ compute| and
  // exposed comm = |comm ∪ compute| − |compute|; check both against counted nanoseconds.
  std::mt19937 rng(12345);
  std::uniform_int_distribution<uint64_t> start(0, 180), len(0, 30);
  for (int round = 0; round < 200; ++round) {
    std::vector<Interval> a, b;
    for (int i = 0; i < 6; ++i) {
      const uint64_t s = start(rng);
      a.push_back({s, s + len(rng)});
    }
    for (int i = 0; i < 6; ++i) {
      const uint64_t s = start(rng);
      b.push_back({s, s + len(rng)});
    }
    std::vector<Interval> both = a;
    both.insert(both.end(), b.begin(), b.end());
    const uint64_t ua = measure(a), ub = measure(b), uab = measure(both);
    REQUIRE(ua == brute_force(a, 256));
    REQUIRE(uab == brute_force(both, 256));
    uint64_t inter = 0, a_only = 0;
    for (uint64_t t = 0; t < 256; ++t) {
      bool in_a = false, in_b = false;
      for (const Interval& i : a) in_a = in_a || (i.start <= t && t < i.end);
      for (const Interval& i : b) in_b = in_b || (i.start <= t && t < i.end);
      inter += in_a && in_b;
      a_only += in_a && !in_b;
    }
    CHECK(ua + ub - uab == inter);
    CHECK(uab - ub == a_only);
  }
}
