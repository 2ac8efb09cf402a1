// Communication and waits: the collectives lined up across ranks by (communicator, seq), what
// each rank waited and caused, the wait-free bandwidth per message size, and the comm table.
// No clock is compared between ranks: only durations measured on one rank's own clock.
#include "views.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "traintime/core/comm_stats.h"

namespace traintime::report::views {
namespace {

uint64_t bucket_of(uint64_t bytes) {
  if (bytes == 0) return 0;
  uint64_t lo = 1;
  while (lo <= bytes / 2) lo *= 2;
  return lo;
}

// Per (communicator, seq) lined up across the member ranks that kept it in their ring.
struct WaitTotals {
  double wait_ns = 0, caused_ns = 0;
  uint64_t matched = 0, last = 0;
};

struct BwAcc {
  core::CommOp op = core::CommOp::kUnknown;
  uint64_t collectives = 0;
  double bytes = 0, min_ns = 0, all_bytes = 0, all_ns = 0;
};

}  // namespace

std::vector<CommView> comm_view(const Job& job) {
  std::map<std::tuple<std::string, std::string, uint32_t>, CommView> comm_rows;  // NCCL's ("") first
  for (const RankInput& r : job.ranks)
    for (const core::CommRow& row : r.data.comm) {
      CommView& c = comm_rows[{row.backend, op_text(row.op), row.comm_size}];
      c.op = op_text(row.op);
      c.comm_size = row.comm_size;
      c.backend = row.backend;
      const double n = steps_of(r.data);
      c.calls.add(static_cast<double>(row.calls) / n, r.data.rank);
      c.gpu_ms.add(ms(row.gpu_ns) / n, r.data.rank);
      if (!row.backend.empty()) c.cpu_ms.add(ms(row.cpu_ns) / n, r.data.rank);
      c.busbw_gbps.add(row.busbw_gbps, r.data.rank);
      c.bytes += row.bytes;
      c.calls_total += row.calls;
      c.bytes_known = c.bytes_known && row.bytes_known;
    }
  std::vector<CommView> out;
  for (auto& [key, c] : comm_rows) out.push_back(c);
  return out;
}

namespace {

struct Member {
  std::size_t idx;  // into job.ranks
  const core::Communicator* c;
};
struct Entry {
  std::size_t member;
  uint64_t dur;
  const core::RecentCollective* rc;
};
using Bandwidths = std::map<std::tuple<std::string, uint32_t, uint64_t>, BwAcc>;

// One collective (communicator, seq) that every member kept: who waited how long, who arrived
// last and what it cost the others, and (timed on the GPU) its wait-free bandwidth.
void line_up(const Job& job, const std::vector<Member>& members, std::vector<Entry>& entries,
             std::vector<WaitTotals>& tot, Bandwidths& bw, WaitsView& view) {
  // The first to finish (the shortest wait, the lowest rank on a tie: it arrived last) and the
  // next shortest duration: two linear passes, no sort (16384 entries per collective).
  const auto before = [&](const Entry& a, const Entry& b) {
    return a.dur != b.dur ? a.dur < b.dur
                          : job.ranks[members[a.member].idx].data.rank < job.ranks[members[b.member].idx].data.rank;
  };
  std::iter_swap(entries.begin(), std::min_element(entries.begin(), entries.end(), before));
  const uint64_t d0 = entries[0].dur;
  uint64_t d1 = entries[1].dur;
  for (std::size_t k = 2; k < entries.size(); ++k) d1 = std::min(d1, entries[k].dur);
  for (const Entry& e : entries) {
    tot[e.member].wait_ns += static_cast<double>(e.dur - d0);
    ++tot[e.member].matched;
  }
  if (d1 > d0) {  // a tie means nobody arrived last
    tot[entries[0].member].caused_ns += static_cast<double>(d1 - d0);
    ++tot[entries[0].member].last;
  }
  ++view.collectives_matched;
  // Collectives timed on the CPU (gloo, MPI) tell who waited for whom, not the links' speed.
  if (members[0].c->cpu_clock) {
    ++view.cpu_collectives_matched;
    return;
  }
  const core::RecentCollective& rc = *entries[0].rc;
  BwAcc& b = bw[{op_text(rc.op), members[0].c->size, bucket_of(rc.bytes)}];
  b.op = rc.op;
  ++b.collectives;
  b.bytes += static_cast<double>(rc.bytes);
  b.min_ns += static_cast<double>(d0);
  for (const Entry& e : entries) {
    b.all_bytes += static_cast<double>(e.rc->bytes);
    b.all_ns += static_cast<double>(e.dur);
  }
}

// Every collective of one communicator lined up; each member's totals into its rank's row, per
// step: collectives per step on this communicator, as the rank counted them.
void line_up_communicator(const Job& job, const std::vector<Member>& members, Bandwidths& bw, WaitsView& view) {
  std::map<uint64_t, std::vector<Entry>> by_seq;
  for (std::size_t m = 0; m < members.size(); ++m)
    for (const core::RecentCollective& rc : members[m].c->recent)
      by_seq[rc.seq].push_back({m, rc.gpu_end_ns > rc.gpu_start_ns ? rc.gpu_end_ns - rc.gpu_start_ns : 0, &rc});
  std::vector<WaitTotals> tot(members.size());
  for (auto& [seq, entries] : by_seq)
    if (entries.size() == members.size()) line_up(job, members, entries, tot, bw, view);  // kept by every member
  for (std::size_t m = 0; m < members.size(); ++m) {
    if (tot[m].matched == 0) continue;
    const std::size_t i = members[m].idx;
    const core::RankFile& f = job.ranks[i].data;
    double ops = static_cast<double>(members[m].c->ops_enqueued);
    if (ops == 0)
      for (const core::CommRow& row : f.comm)
        if (row.comm_size == members[m].c->size) ops += static_cast<double>(row.calls);
    const double per_step = ops / steps_of(f) / static_cast<double>(tot[m].matched);
    RankWaits& v = view.per_rank[i];
    v.wait_ms += tot[m].wait_ns / kNsPerMs * per_step;
    v.caused_ms += tot[m].caused_ns / kNsPerMs * per_step;
    v.matched += tot[m].matched;
    v.last_arrivals += tot[m].last;
  }
}

}  // namespace

WaitsView waits_view(const Job& job) {
  WaitsView view;
  view.per_rank.resize(job.ranks.size());
  std::map<std::string, std::vector<Member>> by_comm;
  for (std::size_t i = 0; i < job.ranks.size(); ++i)
    for (const core::Communicator& c : job.ranks[i].data.communicators) by_comm[c.id].push_back({i, &c});
  std::set<std::string> cpu_backends;
  for (const auto& [id, members] : by_comm)
    if (members.front().c->cpu_clock) cpu_backends.insert(members.front().c->backend);
  for (const std::string& b : cpu_backends) view.cpu_backends += (view.cpu_backends.empty() ? "" : ", ") + b;
  Bandwidths bw;
  for (const auto& [id, members] : by_comm)
    if (members.size() >= 2) line_up_communicator(job, members, bw, view);
  for (const auto& [key, b] : bw) {
    BandwidthView v;
    std::tie(v.op, v.comm_size, v.lo_bytes) = key;
    v.collectives = b.collectives;
    const double f = core::busbw_factor(b.op, v.comm_size);
    v.waitfree_busbw_gbps = b.min_ns > 0 ? b.bytes / b.min_ns * f : 0;  // bytes/ns = 1e9 B/s
    v.recorded_busbw_gbps = b.all_ns > 0 ? b.all_bytes / b.all_ns * f : 0;
    view.bandwidth.push_back(v);
  }
  return view;
}

}  // namespace traintime::report::views
