#include "traintime/core/interval_set.h"

#include <algorithm>

namespace traintime::core {

void normalize_intervals(std::vector<Interval>& v) {
  std::sort(v.begin(), v.end(),
            [](const Interval& a, const Interval& b) { return a.start < b.start; });
  std::size_t out = 0;
  for (const Interval& i : v) {
    if (i.end <= i.start) continue;
    // Touching intervals merge too, so that a normalised set has a unique representation.
    if (out > 0 && i.start <= v[out - 1].end) {
      v[out - 1].end = std::max(v[out - 1].end, i.end);
    } else {
      v[out++] = i;
    }
  }
  v.resize(out);
}

uint64_t union_measure(std::vector<Interval>& v) {
  normalize_intervals(v);
  uint64_t total = 0;
  for (const Interval& i : v) total += i.end - i.start;
  return total;
}

IntervalSet::IntervalSet(std::initializer_list<Interval> intervals) {
  for (const Interval& i : intervals) add(i);
}

void IntervalSet::add(uint64_t start, uint64_t end) {
  if (end <= start) return;
  if (normalized_ && !v_.empty() && start <= v_.back().end) {
    if (start >= v_.back().start) {
      // Appending in time order (the common case) keeps the set normalised without a sort.
      v_.back().end = std::max(v_.back().end, end);
      return;
    }
    normalized_ = false;
  }
  v_.push_back({start, end});
}

void IntervalSet::clear() {
  v_.clear();
  normalized_ = true;
}

const std::vector<Interval>& IntervalSet::intervals() const {
  if (!normalized_) {
    normalize_intervals(v_);
    normalized_ = true;
  }
  return v_;
}

uint64_t IntervalSet::measure() const {
  uint64_t total = 0;
  for (const Interval& i : intervals()) total += i.end - i.start;
  return total;
}

IntervalSet unite(const IntervalSet& a, const IntervalSet& b) {
  IntervalSet r;
  r.v_ = a.intervals();
  r.v_.insert(r.v_.end(), b.intervals().begin(), b.intervals().end());
  r.normalized_ = false;
  return r;
}

IntervalSet intersect(const IntervalSet& a, const IntervalSet& b) {
  const auto& x = a.intervals();
  const auto& y = b.intervals();
  IntervalSet r;
  std::size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    uint64_t lo = std::max(x[i].start, y[j].start);
    uint64_t hi = std::min(x[i].end, y[j].end);
    if (lo < hi) r.v_.push_back({lo, hi});
    if (x[i].end < y[j].end) ++i; else ++j;
  }
  return r;  // pieces of two normalised sets are sorted and disjoint; they cannot touch
}

IntervalSet subtract(const IntervalSet& a, const IntervalSet& b) {
  const auto& x = a.intervals();
  const auto& y = b.intervals();
  IntervalSet r;
  std::size_t j = 0;
  for (const Interval& in : x) {
    uint64_t cur = in.start;
    while (j < y.size() && y[j].end <= cur) ++j;
    std::size_t k = j;
    while (k < y.size() && y[k].start < in.end) {
      if (y[k].start > cur) r.v_.push_back({cur, y[k].start});
      cur = std::max(cur, y[k].end);
      if (cur >= in.end) break;
      ++k;
    }
    if (cur < in.end) r.v_.push_back({cur, in.end});
  }
  return r;
}

uint64_t intersection_measure(const IntervalSet& a, const IntervalSet& b) {
  const auto& x = a.intervals();
  const auto& y = b.intervals();
  uint64_t total = 0;
  std::size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    uint64_t lo = std::max(x[i].start, y[j].start);
    uint64_t hi = std::min(x[i].end, y[j].end);
    if (lo < hi) total += hi - lo;
    if (x[i].end < y[j].end) ++i; else ++j;
  }
  return total;
}

uint64_t difference_measure(const IntervalSet& a, const IntervalSet& b) {
  return a.measure() - intersection_measure(a, b);
}

}  // namespace traintime::core
