// What the views share: the units and the statistics of a list of samples.
#include "views.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace traintime::report::views {

// Nearest-rank percentile of sorted values: the ceil(q*n)-th smallest.
double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  std::size_t k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  k = std::clamp<std::size_t>(k, 1, sorted.size());
  return sorted[k - 1];
}

Dist dist_of(std::vector<double> v) {
  Dist d;
  if (v.empty()) return d;
  std::sort(v.begin(), v.end());
  d.n = v.size();
  double sum = 0;
  for (double x : v) sum += x;
  d.mean = sum / static_cast<double>(v.size());
  d.p50 = percentile(v, 0.5);
  d.p90 = percentile(v, 0.9);
  d.max = v.back();
  return d;
}

double median(std::vector<double> v) { return dist_of(std::move(v)).p50; }

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// The report's views spell ops as the rank file does.
std::string op_text(core::CommOp op) { return std::string(core::comm_op_name(op)); }
}  // namespace traintime::report::views
