// What traintime itself cost this process (rank file self_cost, docs/schema.md): the composition
// root's part of it. Each module reports the rows of its own hot paths and memory through its
// section (core/self_cost.h); here are the figures no module owns: the CPU time of our threads
// (support/threads.h), the bytes written to files, the rows the Python package reports through
// the annotation table (report_cost: traintime.torch's hooks, timed in Python), this file's own
// memory, and the marks taken as steps end, which share the callbacks' time out over the steps
// after warm-up (self_cost.pct, the live metric traintime/self_cost_pct).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>

#include "session.h"
#include "traintime/core/self_cost.h"
#include "traintime/support/threads.h"

namespace traintime::preload {
namespace {

std::atomic<uint64_t> g_written{0};

// A row a caller of the annotation table reports (report_cost): its figures so far, replaced at
// each report. A few fixed slots (the Python package has one); a leaf lock (lock_order.h), held
// for a copy, orders the reports and the readers of whole rows. A step's mark reads only each
// slot's own time (own_ns) and how many slots there are (count), without the lock.
struct Reported {
  char module[24] = {};
  char what[48] = {};
  uint64_t calls = 0;
  uint64_t every = 1;
  core::CostSums::Totals sums;  // in ns, each sample's own time (the readings' cost taken off)
};
struct ReportedRows {
  static constexpr std::size_t kRows = 8;
  std::mutex mu;
  Reported rows[kRows];
  std::size_t count = 0;
  // For the marks: count and rows[i].sums.ticks, stored as the report writes them.
  std::atomic<std::size_t> published{0};
  std::atomic<uint64_t> own_ns[kRows] = {};
};
// A fork child makes a fresh one (the parent's lock may have been held by a thread the child
// does not have); the parent's is leaked, so a section name pointing into it stays valid.
std::atomic<ReportedRows*> g_reported{new ReportedRows()};

// The marks (relaxed: a torn mark only moves pct by one step's share): at the end of warm-up and
// at the newest step's end, the clock and the callbacks' time so far: the paths timed in full,
// and of each sampled path (and each reported row) its timed calls' own time, which window()
// turns into the window's share of the path's estimate. The newest step's mark is retaken once
// about kMarkGapNs have passed, judged by a count of steps (g_next_mark, from the steps' rate
// between the last two marks), so a step in between reads no clock and no module's sums (a mark
// is a few hundred instructions, which steps shorter than that, a loop of tt_step, a benchmark,
// would pay each time); the window then ends at most about kMarkGapNs before the last step's end.
struct Mark {
  std::atomic<uint64_t> ticks{0}, ns{0}, at_ns{0};
  std::atomic<uint64_t> own[core::kSampledPaths] = {};
  std::atomic<uint64_t> reported_own[ReportedRows::kRows] = {};
  std::atomic<bool> set{false};
  void store(const core::CostSoFar& c, const uint64_t* reported, uint64_t now) {
    ticks.store(c.ticks, std::memory_order_relaxed);
    ns.store(c.ns, std::memory_order_relaxed);
    for (std::size_t p = 0; p < core::kSampledPaths; ++p) own[p].store(c.timed[p].own_ticks, std::memory_order_relaxed);
    for (std::size_t i = 0; i < ReportedRows::kRows; ++i) reported_own[i].store(reported[i], std::memory_order_relaxed);
    at_ns.store(now, std::memory_order_relaxed);
    set.store(true, std::memory_order_release);
  }
};
Mark g_warm, g_last;
constexpr uint64_t kMarkGapNs = 1'000'000;
constexpr uint64_t kMaxMarkGap = 1024;  // steps
std::atomic<uint64_t> g_last_steps{0}, g_next_mark{0};

// The reported rows' timed calls' own time so far (ns), by slot: no lock (a step's mark).
void reported_so_far(uint64_t* own) {
  const ReportedRows& t = *g_reported.load(std::memory_order_acquire);
  const std::size_t n = t.published.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < ReportedRows::kRows; ++i)
    own[i] = i < n ? t.own_ns[i].load(std::memory_order_relaxed) : 0;
}

// The callbacks' time so far: the region registry's (the annotations) and every module's. With `calls` the sampled paths' calls too
// (the registry's lock is waited for until *calls): false when it was not had (the annotation
// calls' share is then left out).
bool cost_so_far(const Session& s, core::CostSoFar& c, const core::Deadline* calls) {
  const uint64_t pair = core::process_clock().pair_ticks();
  bool ok = true;
  if (const core::RegionRegistry* r = s.recorder.registry.load(std::memory_order_acquire))
    ok = r->cost_so_far(c, pair, calls);
  module_costs_so_far(c, pair, calls != nullptr);  // through the module table
  return ok;
}

void mark(const Session& s, Mark& m, uint64_t now) {
  core::CostSoFar c;
  cost_so_far(s, c, nullptr);
  uint64_t reported[ReportedRows::kRows];
  reported_so_far(reported);
  m.store(c, reported, now);
}

uint64_t diff(const std::atomic<uint64_t>& from, const std::atomic<uint64_t>& to) {
  const uint64_t a = from.load(std::memory_order_relaxed), b = to.load(std::memory_order_relaxed);
  return b > a ? b - a : 0;
}

// The callbacks' time between the end of warm-up and the newest step's end, and that span: the
// paths timed in full by their sums, each sampled one by its calls now x the own time of its
// timed calls between the marks / its timed calls now (core::window_ticks: the rows' estimator).
bool window(const core::Deadline& deadline, uint64_t* cost_ns, uint64_t* span_ns) {
  const Session* s = g_session.load(std::memory_order_acquire);
  if (!s || !g_warm.set.load(std::memory_order_acquire) || !g_last.set.load(std::memory_order_acquire)) return false;
  if (g_last.at_ns.load(std::memory_order_relaxed) <= g_warm.at_ns.load(std::memory_order_relaxed)) return false;
  core::CostSoFar now;
  try {
    cost_so_far(*s, now, &deadline);
  } catch (...) {
    return false;  // out of memory for the registry's thread list: no figure this time
  }
  uint64_t ticks = diff(g_warm.ticks, g_last.ticks);
  uint64_t ns = diff(g_warm.ns, g_last.ns);
  for (std::size_t p = 0; p < core::kSampledPaths; ++p)
    ticks += core::window_ticks(now.calls[p], now.timed[p].samples, g_warm.own[p].load(std::memory_order_relaxed),
                                g_last.own[p].load(std::memory_order_relaxed));
  {
    ReportedRows& t = *g_reported.load(std::memory_order_acquire);
    std::lock_guard<std::mutex> lock(t.mu);
    for (std::size_t i = 0; i < t.count; ++i)
      ns += core::window_ticks(t.rows[i].calls, t.rows[i].sums.samples,
                               g_warm.reported_own[i].load(std::memory_order_relaxed),
                               g_last.reported_own[i].load(std::memory_order_relaxed));
  }
  *cost_ns = core::process_clock().ticks_to_ns(ticks) + ns;
  *span_ns = g_last.at_ns.load(std::memory_order_relaxed) - g_warm.at_ns.load(std::memory_order_relaxed);
  return true;
}

}  // namespace

void note_written(uint64_t bytes) noexcept { g_written.fetch_add(bytes, std::memory_order_relaxed); }

void mark_cost_at_activation() noexcept {
  Session* s = g_session.load(std::memory_order_acquire);
  if (!s) return;
  core::process_clock().pair_ticks();  // measured before any hot path times a call
  // With no warm-up the measured steps start at the origin (activation).
  if (s->identity.config.warmup_steps == 0) mark(*s, g_warm, mono_ns());
}

void mark_step_cost(uint64_t steps) noexcept {
  Session* s = g_session.load(std::memory_order_acquire);
  if (!s) return;
  const uint64_t warmup = s->identity.config.warmup_steps;
  if (steps < warmup || steps == 0 || steps < g_next_mark.load(std::memory_order_relaxed)) return;
  const uint64_t now = mono_ns();
  // The first count at or past warm-up's end (detected steps end several at a time) opens the
  // window; with no warm-up, activation did.
  if (!g_warm.set.load(std::memory_order_acquire)) {
    if (warmup > 0) mark(*s, g_warm, now);
    return;
  }
  if (steps == warmup) return;
  uint64_t gap = 1;
  if (g_last.set.load(std::memory_order_relaxed)) {
    const uint64_t d_steps = steps - std::min(steps, g_last_steps.load(std::memory_order_relaxed));
    const uint64_t d_ns = now - std::min(now, g_last.at_ns.load(std::memory_order_relaxed));
    if (d_ns < kMarkGapNs) gap = std::clamp<uint64_t>(d_steps * kMarkGapNs / std::max<uint64_t>(d_ns, 1), 1, kMaxMarkGap);
  }
  mark(*s, g_last, now);
  g_last_steps.store(steps, std::memory_order_relaxed);
  g_next_mark.store(steps + gap, std::memory_order_relaxed);
}

bool live_self_cost_pct(double* pct) noexcept {
  uint64_t cost = 0, span = 0;
  if (!window(core::Deadline::never(), &cost, &span)) return false;
  *pct = 100.0 * static_cast<double>(cost) / static_cast<double>(span);
  return true;
}

void report_cost(const char* module, const char* what, uint64_t calls, uint64_t every, uint64_t samples,
                 uint64_t sum_ns, double sum_squares_ns) noexcept {
  if (module == nullptr || what == nullptr || every == 0) return;
  ReportedRows& t = *g_reported.load(std::memory_order_acquire);
  std::lock_guard<std::mutex> lock(t.mu);
  std::size_t i = 0;
  while (i < t.count && (std::strcmp(t.rows[i].module, module) != 0 || std::strcmp(t.rows[i].what, what) != 0))
    ++i;
  if (i == t.count) {
    if (t.count == ReportedRows::kRows) return;
    ++t.count;
    std::strncpy(t.rows[i].module, module, sizeof t.rows[i].module - 1);
    std::strncpy(t.rows[i].what, what, sizeof t.rows[i].what - 1);
  }
  Reported& r = t.rows[i];
  r.calls = calls;
  r.every = every;
  r.sums.samples = samples;
  r.sums.ticks = sum_ns;
  r.sums.ticks_squared = sum_squares_ns;
  t.own_ns[i].store(sum_ns, std::memory_order_relaxed);
  t.published.store(t.count, std::memory_order_release);
}

std::vector<core::Section> cost_sections(const Session& s) {
  std::vector<core::Section> out;
  {
    ReportedRows& t = *g_reported.load(std::memory_order_acquire);
    std::lock_guard<std::mutex> lock(t.mu);
    for (std::size_t i = 0; i < t.count; ++i) {
      const Reported& r = t.rows[i];
      std::size_t k = 0;
      while (k < out.size() && out[k].name != r.module) ++k;
      // A section's name is a string_view: the slot's text lives as long as the process.
      if (k == out.size()) out.emplace_back(std::string_view(r.module));
      out[k].cost(core::cost_row(r.what, r.calls, r.every, r.sums, 0, 1.0));
    }
  }
  core::Section own("preload");
  own.own_memory("always-current record", live_record_bytes(s));
  out.push_back(std::move(own));
  return out;
}

core::ProcessCost process_cost(const core::Deadline& deadline) {
  core::ProcessCost c;
  c.present = true;
  c.threads = support::own_thread_cpu(deadline);
  c.written_bytes = g_written.load(std::memory_order_relaxed);
  uint64_t span = 0;
  window(deadline, &c.steps_callbacks_ns, &span);
  return c;
}

void reset_cost_after_fork() noexcept {
  g_written.store(0, std::memory_order_relaxed);
  g_warm.set.store(false, std::memory_order_relaxed);
  g_last.set.store(false, std::memory_order_relaxed);
  g_last_steps.store(0, std::memory_order_relaxed);
  g_next_mark.store(0, std::memory_order_relaxed);
  try {
    g_reported.store(new ReportedRows(), std::memory_order_release);  // the parent's rows are its own
  } catch (...) {
  }
  support::forget_own_threads_after_fork();
}

}  // namespace traintime::preload
