#include <catch2/catch.hpp>

#include "traintime/core/interval_set.h"

using traintime::core::Interval;
using traintime::core::IntervalSet;
using traintime::core::intersection_measure;
using traintime::core::difference_measure;

namespace {
std::vector<Interval> iv(std::initializer_list<Interval> l) { return l; }
}  // namespace

TEST_CASE("interval union measure counts overlapping time once", "[interval]") {
  // [0,10) and [5,15) overlap on [5,10): union is [0,15) = 15.
  IntervalSet s{{0, 10}, {5, 15}};
  CHECK(s.measure() == 15);
  CHECK(s.intervals() == iv({{0, 15}}));
}

TEST_CASE("interval union handles nested intervals", "[interval]") {
  IntervalSet s{{0, 100}, {10, 20}, {30, 40}};
  CHECK(s.measure() == 100);
  CHECK(s.intervals().size() == 1);
}

TEST_CASE("interval union merges touching intervals", "[interval]") {
  IntervalSet s{{0, 10}, {10, 20}};
  CHECK(s.measure() == 20);
  CHECK(s.intervals() == iv({{0, 20}}));
}

TEST_CASE("interval union ignores zero-length and inverted intervals", "[interval]") {
  IntervalSet s{{5, 5}, {7, 3}, {10, 12}};
  CHECK(s.measure() == 2);
  CHECK(s.intervals() == iv({{10, 12}}));
  IntervalSet empty{{4, 4}};
  CHECK(empty.empty());
  CHECK(empty.measure() == 0);
}

TEST_CASE("interval union counts duplicates once", "[interval]") {
  IntervalSet s{{3, 8}, {3, 8}, {3, 8}};
  CHECK(s.measure() == 5);
}

TEST_CASE("interval union is independent of insertion order", "[interval]") {
  IntervalSet s{{50, 60}, {0, 10}, {20, 30}, {5, 25}};
  // [0,30) + [50,60) = 40
  CHECK(s.measure() == 40);
  CHECK(s.intervals() == iv({{0, 30}, {50, 60}}));
  std::vector<Interval> raw = {{50, 60}, {0, 10}, {20, 30}, {5, 25}, {60, 61}};
  CHECK(traintime::core::union_measure(raw) == 41);  // [60,61) touches [50,60)
}

TEST_CASE("interval intersection of overlapping, nested and disjoint sets", "[interval]") {
  IntervalSet a{{0, 10}, {20, 30}, {40, 50}};
  IntervalSet b{{5, 25}, {42, 44}, {60, 70}};
  // overlaps: [5,10)=5, [20,25)=5, [42,44)=2
  CHECK(intersection_measure(a, b) == 12);
  CHECK(intersect(a, b).intervals() == iv({{5, 10}, {20, 25}, {42, 44}}));
  CHECK(intersection_measure(b, a) == 12);
}

TEST_CASE("interval intersection of touching sets is empty", "[interval]") {
  IntervalSet a{{0, 10}};
  IntervalSet b{{10, 20}};
  CHECK(intersection_measure(a, b) == 0);
  CHECK(intersect(a, b).empty());
}

TEST_CASE("interval difference removes covered parts", "[interval]") {
  IntervalSet a{{0, 100}};
  IntervalSet b{{10, 20}, {15, 30}, {90, 120}};
  // a − b = [0,10) + [30,90) = 10 + 60
  CHECK(difference_measure(a, b) == 70);
  CHECK(subtract(a, b).intervals() == iv({{0, 10}, {30, 90}}));
  // b − a = [100,120)
  CHECK(subtract(b, a).intervals() == iv({{100, 120}}));
}

TEST_CASE("interval difference with a hole splitting several intervals", "[interval]") {
  IntervalSet a{{0, 10}, {20, 30}};
  IntervalSet b{{5, 25}};
  CHECK(subtract(a, b).intervals() == iv({{0, 5}, {25, 30}}));
  CHECK(subtract(a, IntervalSet{}).intervals() == a.intervals());
  CHECK(subtract(a, a).empty());
}

TEST_CASE("interval union of two sets", "[interval]") {
  IntervalSet a{{0, 10}};
  IntervalSet b{{10, 15}, {30, 40}};
  CHECK(unite(a, b).intervals() == iv({{0, 15}, {30, 40}}));
  CHECK(unite(a, b).measure() == 25);
}

TEST_CASE("interval set adding out of order after reading renormalises", "[interval]") {
  IntervalSet s;
  s.add(100, 200);
  CHECK(s.measure() == 100);
  s.add(0, 50);
  s.add(150, 250);
  CHECK(s.measure() == 200);  // [0,50) + [100,250)
  s.clear();
  CHECK(s.empty());
}
