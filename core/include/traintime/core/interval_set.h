// Interval algebra on half-open [start, end) nanosecond intervals (DESIGN §4): GPU busy time is
// the measure of a union because kernels on different streams overlap; comm overlapped with
// compute is an intersection, exposed comm a difference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace traintime::core {

struct Interval {
  uint64_t start = 0;
  uint64_t end = 0;  // exclusive; an interval with end <= start is empty and contributes nothing
  uint64_t length() const { return end > start ? end - start : 0; }
  friend bool operator==(const Interval& a, const Interval& b) {
    return a.start == b.start && a.end == b.end;
  }
};

// Sorts by start and merges overlapping and touching intervals in place, dropping empty ones.
// O(n log n). Afterwards the vector is sorted, disjoint and has gaps between neighbours.
void normalize_intervals(std::vector<Interval>& v);

// Measure (total length) of the union of v, in any order, with any overlaps. Sorts v in place.
uint64_t union_measure(std::vector<Interval>& v);

// A set of points on the time line, stored as intervals. Intervals may be added in any order,
// nested, touching, duplicated or empty; the set normalises itself lazily when read. Reading a
// const IntervalSet mutates its cache, so it is not safe to read one set from two threads.
class IntervalSet {
 public:
  IntervalSet() = default;
  IntervalSet(std::initializer_list<Interval> intervals);

  void add(uint64_t start, uint64_t end);
  void add(const Interval& i) { add(i.start, i.end); }
  void clear();

  // Sorted, disjoint, non-touching, non-empty intervals.
  const std::vector<Interval>& intervals() const;
  uint64_t measure() const;
  bool empty() const { return intervals().empty(); }

  friend IntervalSet unite(const IntervalSet& a, const IntervalSet& b);
  friend IntervalSet intersect(const IntervalSet& a, const IntervalSet& b);
  friend IntervalSet subtract(const IntervalSet& a, const IntervalSet& b);  // a − b
  friend bool operator==(const IntervalSet& a, const IntervalSet& b) {
    return a.intervals() == b.intervals();
  }

 private:
  mutable std::vector<Interval> v_;
  mutable bool normalized_ = true;
};

// Measures without building the result set: O(|a| + |b|) on normalised sets.
uint64_t intersection_measure(const IntervalSet& a, const IntervalSet& b);
uint64_t difference_measure(const IntervalSet& a, const IntervalSet& b);  // |a − b|

}  // namespace traintime::core
