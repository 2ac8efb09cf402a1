// The watchdog thread (DESIGN §2), started at activation: every period it refreshes the
// always-current record (live_record.cpp) and looks for a hang nobody will signal. When
// TRAINTIME_HANG_SEC seconds pass without progress on this rank (no step ended, no collective
// enqueued or completed) while a collective is in flight or after steps have been ending, it
// writes the rank file once, marked as a suspected hang (snapshot, exit_reason "suspected
// hang", with the in-flight collectives and the open regions of every thread), and prints one
// line naming what the rank waits in or where it is. The job itself is never touched.
//
// Cost: one refresh builds the rank file as a snapshot would (complete CUPTI buffers flushed and
// ingested first); the period stretches so refreshing takes at most 0.1 % of a core. Each refresh
// is also what every module last published (core/lock_order.h: LastPublished), which a
// terminating signal's write falls back on for a lock the signal's thread holds.
// Lock order: core/lock_order.h. The modules' summaries with no lock held, then Output::mu;
// never with Control::mu held.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

#include "session.h"
#include "traintime/core/straggler_sign.h"
#include "traintime/nccl/nccl_interposer.h"
#include "traintime/support/log.h"
#include "traintime/support/threads.h"

namespace traintime::preload {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kMinPeriod = std::chrono::seconds(1);
constexpr int kCostFactor = 1000;  // period >= 1000 x the refresh's cost: at most 0.1 % of a core

// Leaked, like the snapshot thread's: the thread may be waiting on it while statics are destroyed.
struct Control {
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
};
Control* g_control = nullptr;

// What moves while a rank makes progress.
struct Progress {
  uint64_t steps = 0;
  uint64_t enqueued = 0;
  uint64_t completed = 0;
  bool operator==(const Progress& o) const {
    return steps == o.steps && enqueued == o.enqueued && completed == o.completed;
  }
};

Progress progress_of(const core::RankFile& f) {
  Progress p;
  p.steps = f.steps.count;
  for (const core::Communicator& c : f.communicators) {
    p.enqueued += c.ops_enqueued;
    p.completed += c.ops_completed;
  }
  return p;
}

const core::Communicator* waiting_in(const core::RankFile& f) {
  for (const core::Communicator& c : f.communicators)
    if (!c.in_flight.empty()) return &c;
  return nullptr;
}

// "waiting in AllReduce seq 7 on communicator 3f..." or "in step 3, inside step/backward".
std::string where(const core::RankFile& f) {
  if (const core::Communicator* c = waiting_in(f)) {
    const core::InFlightOp& op = c->in_flight.front();
    return "waiting in " + std::string(core::comm_op_name(op.op)) + " seq " + std::to_string(op.seq) + " on communicator " + c->id +
           " (size " + std::to_string(c->size) + ")";
  }
  const core::ThreadSnapshot* deepest = nullptr;
  for (const core::ThreadSnapshot& t : f.threads)
    if (!deepest || t.open_regions.size() > deepest->open_regions.size()) deepest = &t;
  std::string text = "in step " + std::to_string(f.steps.count);
  if (deepest && !deepest->open_regions.empty())
    text += ", inside " + deepest->open_regions.back() + " (thread " + std::to_string(deepest->tid) + ")";
  else
    text += ", outside any region";
  return text;
}

void report_hang(Session& s, uint32_t idle_sec) {
  // Complete buffers flushed and ingested first (as a snapshot does), before the file lock.
  const Measured m = measure(s, true, core::Deadline::never());
  std::string line, path;
  bool written = false;
  {
    std::lock_guard<std::mutex> lock(s.output.mu);
    if (s.output.final_written || s.output.file_path.empty()) return;
    const core::RankFile f = assemble_locked(s, true, core::ExitReason::kSuspectedHang, m);
    live_record_update_locked(s, f);
    written = write_assembled_locked(s, f);
    path = s.output.file_path;
    line = "rank " + std::to_string(f.rank) + ": suspected hang, no progress for " +
           std::to_string(idle_sec) + " s, " + where(f);
  }
  if (written)
    support::log_warn("{}; wrote {} (the job is left running; TRAINTIME_HANG_SEC sets the wait)",
                      line, path);
  else
    support::log_warn("{} (the job is left running; TRAINTIME_HANG_SEC sets the wait)", line);
}

void watchdog_loop(uint32_t hang_sec) {
  Control* c = g_control;
  Progress last;
  bool seen = false, reported = false, suspected = false;
  core::StragglerSign straggler;  // a wait far beyond recent durations: ProxyStep (auto) for what follows
  Clock::time_point last_change = Clock::now();
  auto period = std::chrono::duration_cast<Clock::duration>(kMinPeriod);
  std::unique_lock<std::mutex> lock(c->mu);
  while (!c->stop) {
    lock.unlock();
    Session* s = session();
    if (!s) return;
    const Clock::time_point start = Clock::now();
    // Complete buffers flushed and ingested, as for a snapshot: records of the collectives that
    // completed must arrive while the rank still progresses, since a buffer that also holds a
    // collective that never completes is never delivered by a normal flush.
    const Measured m = measure(*s, true, core::Deadline::never());
    Progress now_progress;
    bool in_flight = false, have = false;
    {
      std::lock_guard<std::mutex> out(s->output.mu);
      if (s->output.final_written) return;
      claim_locked(*s);
      if (!s->output.file_path.empty()) {
        const core::RankFile f = assemble_locked(*s, true, core::ExitReason::kSnapshot, m);
        live_record_update_locked(*s, f);
        now_progress = progress_of(f);
        in_flight = waiting_in(f) != nullptr;
        have = true;
        if (straggler.observe(f.communicators)) nccl::suspect_straggler();
      }
    }
    const Clock::time_point end = Clock::now();
    period = std::max<Clock::duration>(kMinPeriod, (end - start) * kCostFactor);
    if (have && hang_sec > 0 && !reported) {
      if (!seen || !(now_progress == last)) {
        seen = true;
        suspected = false;
        last = now_progress;
        last_change = end;
      } else if (end - last_change >= std::chrono::seconds(hang_sec) &&
                 (in_flight || now_progress.steps > 0)) {
        // A period stretched by load (kCostFactor) can step over the half-way look below: the
        // rank waited past half of it all the same, and is suspected before its file is written.
        if (!suspected && in_flight) {
          suspected = true;
          nccl::suspect_hang();
        }
        reported = true;
        report_hang(*s, static_cast<uint32_t>(
                            std::chrono::duration_cast<std::chrono::seconds>(end - last_change).count()));
      } else if (!suspected && in_flight && (end - last_change) * 2 >= std::chrono::seconds(hang_sec)) {
        // Half the wait: NCCL's per-step proxy events for what is enqueued next (a collective
        // already in flight keeps the mask it was enqueued with).
        suspected = true;
        nccl::suspect_hang();
      }
    }
    lock.lock();
    c->cv.wait_for(lock, period, [c] { return c->stop; });
  }
}

}  // namespace

void start_watchdog(Session& s) {
  if (!g_control) g_control = new Control();
  const uint32_t hang_sec = s.identity.config.hang_sec;
  support::start_detached(support::OwnThread::kHang, [hang_sec] { watchdog_loop(hang_sec); });
}

void stop_watchdog(const core::Deadline& deadline) {
  if (!g_control) return;
  std::unique_lock<std::mutex> lock(g_control->mu, std::defer_lock);
  // Not had in time: the watchdog is the thread the signal stopped; it writes nothing after the
  // final file anyway (Output::final_written).
  if (!core::lock_until(lock, deadline)) return;
  g_control->stop = true;
  g_control->cv.notify_all();
}

void reset_watchdog_after_fork() {
  g_control = nullptr;  // leaked: its mutex may have been held by a thread that is gone
}

}  // namespace traintime::preload
