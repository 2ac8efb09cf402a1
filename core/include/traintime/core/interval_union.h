// The one interval-union implementation (DESIGN §4): GPU busy time is the measure of a union of
// half-open [start, end) nanosecond intervals, because kernels on different streams overlap.
// Every busy figure of the attribution engine is a sweep of this kind over intervals fed in start
// order; intersections and differences follow from unions by inclusion–exclusion
// (|A ∩ B| = |A| + |B| − |A ∪ B|, |A − B| = |A ∪ B| − |B|), which is how comm overlapped with
// compute, exposed comm and idle are computed.
#pragma once

#include <cstdint>
#include <vector>

namespace traintime::core {

// Sweep over intervals added in non-decreasing start order: add() is O(1), no allocation.
// Empty or inverted intervals (end <= start) count nothing but may still be added.
class IntervalUnion {
 public:
  void add(uint64_t start, uint64_t end) {
    if (end <= start) return;
    if (!open_) {
      start_ = start, end_ = end, open_ = true;
    } else if (start > end_) {
      total_ += end_ - start_;
      start_ = start, end_ = end;
    } else if (end > end_) {
      end_ = end;
    }
  }
  // Measure of everything added, and a reset for the next sweep.
  uint64_t finish() {
    const uint64_t t = total_ + (open_ ? end_ - start_ : 0);
    *this = IntervalUnion{};
    return t;
  }

 private:
  uint64_t start_ = 0, end_ = 0, total_ = 0;
  bool open_ = false;
};

struct Interval {
  uint64_t start = 0;
  uint64_t end = 0;  // exclusive
};

// Measure of the union of v, in any order, with any overlaps: sorts v by start and sweeps.
uint64_t union_measure(std::vector<Interval>& v);

}  // namespace traintime::core
