#include "traintime/core/interval_union.h"

#include <algorithm>

namespace traintime::core {

uint64_t union_measure(std::vector<Interval>& v) {
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  IntervalUnion u;
  for (const Interval& i : v) u.add(i.start, i.end);
  return u.finish();
}

}  // namespace traintime::core
