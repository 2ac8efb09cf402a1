#include "traintime/core/cpu_collectives.h"

#include <algorithm>

#include "traintime/core/core_counters.h"

namespace traintime::core {

void CpuCollectives::record(const CpuCollective& c) {
  std::lock_guard<std::mutex> lock(mu_);
  if (c.group.empty() || c.end_ns < c.start_ns || c.seq == 0) {
    ++dropped_;
    return;
  }
  auto it = std::find_if(groups_.begin(), groups_.end(), [&](const Ring& r) { return r.group.id == c.group; });
  if (it == groups_.end()) {
    if (groups_.size() >= kMaxGroups) {
      ++dropped_;
      return;
    }
    Ring r;
    r.group.id = c.group;
    r.group.backend = c.backend;
    r.group.size = c.group_size;
    r.group.rank = c.group_rank;
    r.ring.resize(kRecent);
    groups_.push_back(std::move(r));
    it = groups_.end() - 1;
  }
  ++recorded_;
  Group& g = it->group;
  g.ops_enqueued = std::max(g.ops_enqueued, c.seq);
  g.ops_completed = std::max(g.ops_completed, c.seq);
  OpTotals& t = g.ops[static_cast<std::size_t>(c.op)];
  ++t.calls;
  t.bytes += c.bytes;
  t.cpu_ns += c.end_ns - c.start_ns;
  it->ring[it->written % kRecent] = {c.seq, c.op, c.bytes, c.start_ns, c.end_ns};
  ++it->written;
}

CpuCollectives::Summary CpuCollectives::summary(const Deadline& deadline) const {
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  if (!lock_until(lock, deadline)) {
    const auto last = published_.get(deadline);
    Summary out = last.figures ? *last.figures : Summary{};
    count_last_publish<Summary>(out.section, kCollectiveCounters, last);
    return out;
  }
  Summary out;
  if (recorded_ > 0 || dropped_ > 0) {
    out.section.count(kCollectiveCounters, CollectiveCounter::recorded, recorded_);
    out.section.count(kCollectiveCounters, CollectiveCounter::dropped, dropped_);
  }
  for (const Ring& r : groups_) {
    Group g = r.group;
    const uint64_t kept = std::min<uint64_t>(r.written, kRecent);
    for (uint64_t k = r.written - kept; k < r.written; ++k) g.recent.push_back(r.ring[k % kRecent]);
    // Completion order can differ from issue order (async work): the ring reads by sequence.
    std::sort(g.recent.begin(), g.recent.end(),
              [](const RecentCollective& a, const RecentCollective& b) { return a.seq < b.seq; });
    out.groups.push_back(std::move(g));
  }
  lock.unlock();
  published_.publish(out);
  return out;
}

}  // namespace traintime::core
