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
// one is a max, not a jump: on a busy GPU the answer is random). The sweep keeps only how far the
// union reaches and its measure so far: in start order, an interval adds exactly its part beyond
// that reach. Empty or inverted intervals (end <= start) count nothing but may still be added.
class IntervalUnion {
 public:
  void add(uint64_t start, uint64_t end) {
    const uint64_t from = start > reach_ ? start : reach_;  // what is not yet covered begins here
    const uint64_t to = end > from ? end : from;            // and ends here (empty: from)
    total_ += to - from;
    // Moving the reach up to an empty interval's start changes nothing: later intervals start
    // there or later.
    reach_ = to;
  }
  // Adds a set of intervals already swept on their own (measure `total`, all of them in
  // [first, reach)) in one step, when the set begins at or after everything added so far: then
  // the two are disjoint and the measures add. Returns false and changes nothing otherwise; the
  // caller then adds the set's intervals one by one. The result is the same as adding them singly.
  bool add_after(uint64_t first, uint64_t reach, uint64_t total) {
    if (first < reach_) return false;
    total_ += total;
    reach_ = reach;
    return true;
  }
  uint64_t reach() const { return reach_; }  // how far the union reaches (0: nothing added)
  uint64_t total() const { return total_; }  // its measure so far
  // Measure of everything added, and a reset for the next sweep.
  uint64_t finish() {
    const uint64_t t = total_;
    *this = IntervalUnion{};
    return t;
  }

 private:
  uint64_t reach_ = 0, total_ = 0;
};

struct Interval {
  uint64_t start = 0;
  uint64_t end = 0;  // exclusive
};

// Measure of the union of v, in any order, with any overlaps: sorts v by start and sweeps.
uint64_t union_measure(std::vector<Interval>& v);

}  // namespace traintime::core
