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

// Sweep over intervals added in non-decreasing start order: add() is O(1), no allocation, and
// free of data-dependent branches (whether an interval opens a new run or extends the current
// one is a select, not a jump: on a busy GPU the answer is random). Empty or inverted intervals
// (end <= start) count nothing but may still be added.
class IntervalUnion {
 public:
  void add(uint64_t start, uint64_t end) {
    if (end <= start) return;
    // The current run is [start_, end_), empty before the first add (0, 0): a first interval
    // starting at 0 extends it, any other opens a new one, and the empty run adds nothing.
    const bool gap = start > end_;
    total_ += gap ? end_ - start_ : 0;
    start_ = gap ? start : start_;
    end_ = gap ? end : (end > end_ ? end : end_);
  }
  // Measure of everything added, and a reset for the next sweep.
  uint64_t finish() {
    const uint64_t t = total_ + (end_ - start_);
    *this = IntervalUnion{};
    return t;
  }

 private:
  uint64_t start_ = 0, end_ = 0, total_ = 0;
};

struct Interval {
  uint64_t start = 0;
  uint64_t end = 0;  // exclusive
};

// Measure of the union of v, in any order, with any overlaps: sorts v by start and sweeps.
uint64_t union_measure(std::vector<Interval>& v);

}  // namespace traintime::core
