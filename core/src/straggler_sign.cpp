// A straggler seen from one rank (straggler_sign.h).
#include "traintime/core/straggler_sign.h"

#include <algorithm>

namespace traintime::core {
namespace {

uint64_t duration(const RecentCollective& r) {
  return r.gpu_end_ns > r.gpu_start_ns && r.gpu_start_ns != 0 ? r.gpu_end_ns - r.gpu_start_ns : 0;
}

bool counted(CommOp op) { return op != CommOp::kSend && op != CommOp::kRecv && op != CommOp::kUnknown; }

// Whether `r` took far longer than the earlier collectives of its op and size in `recent`.
bool far_beyond(const std::vector<RecentCollective>& recent, const RecentCollective& r) {
  const uint64_t d = duration(r);
  if (d == 0 || !counted(r.op)) return false;
  std::vector<uint64_t> before;
  for (const RecentCollective& e : recent)
    if (e.seq < r.seq && e.op == r.op && e.bytes == r.bytes)
      if (const uint64_t x = duration(e); x != 0) before.push_back(x);
  if (before.size() < StragglerSign::kMinSamples) return false;
  const auto mid = before.begin() + static_cast<std::ptrdiff_t>(before.size() / 2);
  std::nth_element(before.begin(), mid, before.end());
  const uint64_t median = *mid;
  return d > StragglerSign::kFactor * median && d - median >= StragglerSign::kMinExcessNs;
}

}  // namespace

bool StragglerSign::observe(const std::vector<Communicator>& comms) {
  bool sign = false;
  for (const Communicator& c : comms) {
    if (c.cpu_clock) continue;  // CPU collectives (gloo): not NCCL's, no proxy to ask
    uint64_t& looked = looked_[c.id];
    uint64_t newest = looked;
    for (const RecentCollective& r : c.recent) {
      if (r.seq <= looked) continue;
      newest = std::max(newest, r.seq);
      sign = sign || far_beyond(c.recent, r);
    }
    looked = newest;
  }
  return sign;
}

}  // namespace traintime::core
