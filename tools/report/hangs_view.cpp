// Hangs: the collective a job hangs in, the ranks that wait in it and what each member that never
// entered it was doing (docs/report.md, "Hangs").
#include "views.h"

#include <algorithm>
#include <map>
#include <set>

#include "traintime/nccl/proxy_progress_section.h"

namespace traintime::report::views {
namespace {

std::string join_paths(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : " > ") + s;
  return out;
}

std::string what_it_was_doing(const core::RankFile& f) {
  std::string s = "rank " + std::to_string(f.rank) + " (host " + f.host + ", pid " + std::to_string(f.pid) + ", " +
                  (f.snapshot ? std::string("snapshot") : f.exit_reason_written()) + "): ";
  if (f.threads.empty()) return s + "no thread data in its file";
  std::string t;
  for (const core::ThreadSnapshot& th : f.threads) {
    if (!t.empty()) t += "; ";
    t += "thread " + std::to_string(th.tid) + " in step " + std::to_string(th.step) +
         (th.open_regions.empty() ? std::string(", no region open")
                                  : " inside " + th.open_regions.back() + " (open: " + join_paths(th.open_regions) + ")");
  }
  return s + t;
}

using Members = std::vector<const RankInput*>;

const core::Communicator* comm_in(const RankInput* r, const std::string& id) {
  for (const core::Communicator& c : r->data.communicators)
    if (c.id == id) return &c;
  return nullptr;
}

// The collective the job hangs in: the oldest seq that some member entered and another never did
// (a member with no file never entered anything we know of), and that no member completed (a
// collective cannot complete without all of them). Completion is not needed to find it: GPU
// records may not have been delivered when a hung rank's file was written. 0: none.
// A member's watchdog saw no progress for TRAINTIME_HANG_SEC (suspected), or a transfer inside
// stood still part way (`suspected` too, checked on the collective's rows by the caller): a
// collective every member entered that never completes is a hang too.
uint64_t oldest_stuck_seq(const std::string& id, const Members& members, uint32_t size, bool suspected) {
  uint64_t least = ~uint64_t{0};
  uint64_t most = 0;
  uint64_t not_completed = 0;  // the oldest seq some member entered and has not completed
  for (const RankInput* m : members) {
    const core::Communicator* c = comm_in(m, id);
    least = std::min(least, c->ops_enqueued);
    most = std::max(most, c->ops_enqueued);
    if (c->ops_completed < c->ops_enqueued && (not_completed == 0 || c->ops_completed + 1 < not_completed))
      not_completed = c->ops_completed + 1;
  }
  uint64_t oldest = 0;
  if (members.size() < size) {
    oldest = not_completed;  // a member without a file entered nothing we know of
  } else if (most > least) {
    oldest = least + 1;
  } else if (suspected) {
    oldest = not_completed;
  }
  if (oldest == 0) return 0;
  for (const RankInput* m : members)
    if (comm_in(m, id)->ops_completed >= oldest) return 0;
  return oldest;
}

// A member with a file that never entered h.seq, and what it was doing.
MissingMember missing_with_file(const RankInput* m, const core::Communicator* c) {
  MissingMember mm;
  mm.rank = m->data.rank;
  mm.comm_rank = c->rank;
  mm.has_file = true;
  mm.last_enqueued = c->ops_enqueued;
  for (const core::InFlightOp& op : c->in_flight)
    if (op.seq == c->ops_enqueued) mm.last_op = op_text(op.op);
  for (const core::RecentCollective& rc : c->recent)
    if (rc.seq == c->ops_enqueued) mm.last_op = op_text(rc.op);
  mm.doing = what_it_was_doing(m->data) + "; its last call on this communicator was seq " +
             std::to_string(c->ops_enqueued) + (mm.last_op.empty() ? "" : " (" + mm.last_op + ")");
  return mm;
}

// The hang at h.seq on communicator `id`: who waits in it, who never entered it.
Hang hang_at(const Job& job, const std::string& id, const Members& members, uint32_t size, uint64_t seq) {
  Hang h;
  h.communicator = id;
  h.comm_size = size;
  h.seq = seq;
  std::set<int64_t> comm_ranks_seen;
  bool identity = size == job.world_size;  // comm rank == global rank for every file?
  for (const RankInput* m : members) {
    const core::Communicator* c = comm_in(m, id);
    comm_ranks_seen.insert(c->rank);
    identity = identity && static_cast<int64_t>(c->rank) == m->data.rank;
    if (m->data.snapshot || core::signal_exit(m->data.exit_reason)) h.from_snapshots = true;
    if (c->ops_enqueued < seq) {
      h.missing.push_back(missing_with_file(m, c));
      continue;
    }
    if (c->ops_completed < seq) h.waiting_ranks.push_back(m->data.rank);
    for (const core::InFlightOp& op : c->in_flight)
      if (op.seq == seq && h.op.empty()) {
        h.op = op_text(op.op);
        h.bytes = op.bytes;
      }
  }
  for (uint32_t cr = 0; cr < size; ++cr) {
    if (comm_ranks_seen.count(cr)) continue;
    MissingMember mm;
    mm.comm_rank = cr;
    mm.rank = identity ? cr : -1;
    mm.doing = "communicator rank " + std::to_string(cr) +
               (identity ? " (rank " + std::to_string(cr) + ")" : std::string()) +
               ": no rank file, so it never reported entering; it may have died before writing one";
    h.missing.push_back(mm);
  }
  return h;
}

// Whether some member's proxy_progress has rows of communicator `id` (a stall inside may show).
bool has_progress_on(const Members& members, const std::string& id) {
  for (const RankInput* m : members)
    if (const nccl::ProxyProgressSection* p = nccl::proxy_progress(m->data))
      for (const nccl::ProxyProgress& row : p->rows)
        if (row.communicator == id) return true;
  return false;
}

bool has_hang_data(const Job& job) {
  for (const RankInput& r : job.ranks) {
    if (!r.data.threads.empty()) return true;
    for (const core::Communicator& c : r.data.communicators)
      if (!c.in_flight.empty()) return true;
    if (const nccl::ProxyProgressSection* p = nccl::proxy_progress(r.data); p && !p->rows.empty()) return true;
  }
  return false;
}

}  // namespace

HangsView hangs_view(const Job& job) {
  HangsView view;
  view.data = has_hang_data(job);
  if (!view.data) return view;
  std::map<std::string, Members> by_comm;
  std::map<std::string, uint32_t> size_of;
  for (const RankInput& r : job.ranks)
    for (const core::Communicator& c : r.data.communicators) {
      by_comm[c.id].push_back(&r);
      size_of[c.id] = std::max(size_of[c.id], c.size);
    }
  for (const auto& [id, members] : by_comm) {
    bool suspected = false;
    for (const RankInput* m : members) suspected = suspected || m->data.exit_reason == core::ExitReason::kSuspectedHang;
    const uint64_t seq = oldest_stuck_seq(id, members, size_of[id], suspected || has_progress_on(members, id));
    if (seq == 0) continue;
    Hang h = hang_at(job, id, members, size_of[id], seq);
    for (const RankInput* m : members) add_rank_progress(h.progress, m->data.rank, rows_of_hung(m->data, id, h.op));
    h.stalled_inside = stalled_inside(h.progress);
    // Every member entered: a hang only where a watchdog said so, or a transfer inside stood still
    // part way (seen live in the records of a running job).
    if (h.missing.empty() && !suspected && !h.stalled_inside) continue;
    h.all_entered = h.missing.empty();
    if (const core::CommOp op = core::comm_op_from_name(h.op);
        !h.all_entered && (op == core::CommOp::kSend || op == core::CommOp::kRecv)) {
      // Only the peer had to enter a point-to-point op, and the files do not record which rank
      // that is: naming the members that did not enter would accuse ranks that had no part in it.
      std::string who;
      for (int64_t r : h.waiting_ranks) who += (who.empty() ? "" : ", ") + std::to_string(r);
      view.p2p_waits.push_back("rank(s) " + who + " wait in " + h.op + " seq " + std::to_string(h.seq) +
                              " on communicator " + id + "; its peer is not recorded in the rank files");
      continue;
    }
    if (h.op.empty()) h.op = "unknown";
    for (const MissingMember& mm : h.missing)
      if (mm.rank >= 0) h.missing_ranks.push_back(mm.rank);
    std::sort(h.missing_ranks.begin(), h.missing_ranks.end());
    view.found.push_back(std::move(h));
  }
  return view;
}
}  // namespace traintime::report::views
