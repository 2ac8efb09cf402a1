// The view "traintime's own cost" (self_cost_view.h).
#include "self_cost_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "render.h"

namespace traintime::report {
namespace {

double ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

std::string fixed(double v, int decimals) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

std::string mib(uint64_t bytes) { return fixed(static_cast<double>(bytes) / (1 << 20), 1); }

std::string pct_text(double pct) { return fixed(pct, pct < 0.1 ? 3 : 2) + " %"; }

}  // namespace

SelfCostView self_cost_view(const Job& job) {
  SelfCostView v;
  std::map<std::pair<std::string, std::string>, std::size_t> path_at;
  std::map<std::string, std::size_t> thread_at;
  double window_ns = 0, window_cost_ns = 0;
  std::vector<double> spread_squares;
  for (const RankInput& r : job.ranks) {
    const core::SelfCost& c = r.data.self_cost;
    if (!c.present) continue;
    ++v.ranks;
    SelfCostRank row;
    row.rank = r.data.rank;
    row.host = r.data.host;
    row.has_pct = c.has_pct;
    row.pct = c.pct;
    row.callbacks_ms = ms(c.callbacks_ns);
    row.peak_bytes = c.peak_bytes;
    row.written_bytes = c.written_bytes;
    for (const core::ThreadCost& t : c.threads) {
      row.threads_cpu_ms += ms(t.cpu_ns);
      auto [it, added] = thread_at.emplace(t.name, v.threads.size());
      if (added) v.threads.push_back({t.name, 0, 0});
      SelfCostThread& total = v.threads[it->second];
      ++total.ranks;
      total.cpu_ms += ms(t.cpu_ns);
    }
    for (const core::CallbackCost& cb : c.callbacks) {
      auto [it, added] = path_at.emplace(std::make_pair(cb.module, cb.what), v.paths.size());
      if (added) {
        v.paths.push_back({cb.module, cb.what});
        spread_squares.push_back(0);
      }
      SelfCostPath& p = v.paths[it->second];
      ++p.ranks;
      p.calls += cb.calls;
      p.samples += cb.samples;
      p.interrupted += cb.interrupted;
      p.estimated = p.estimated || cb.estimated;
      if (!cb.measured) {
        ++p.unmeasured_ranks;
        ++row.unmeasured;
        continue;
      }
      p.ms += ms(cb.estimated_ns);
      spread_squares[it->second] += ms(cb.spread_ns) * ms(cb.spread_ns);
      if (ms(cb.estimated_ns) > row.costliest_ms) {
        row.costliest_ms = ms(cb.estimated_ns);
        row.costliest = cb.what + " (" + cb.module + ")";
      }
    }
    if (c.has_pct) {
      window_ns += static_cast<double>(c.steps_wall_ns);
      window_cost_ns += static_cast<double>(c.steps_callbacks_ns);
      if (!v.has_pct || c.pct > v.max_pct) {
        v.max_pct = c.pct;
        v.max_rank = r.data.rank;
      }
      v.has_pct = true;
    }
    v.per_rank.push_back(std::move(row));
  }
  for (std::size_t i = 0; i < v.paths.size(); ++i) v.paths[i].spread_ms = std::sqrt(spread_squares[i]);
  if (window_ns > 0) v.job_pct = 100.0 * window_cost_ns / window_ns;
  std::stable_sort(v.paths.begin(), v.paths.end(), [](const SelfCostPath& a, const SelfCostPath& b) { return a.ms > b.ms; });
  std::stable_sort(v.per_rank.begin(), v.per_rank.end(), [](const SelfCostRank& a, const SelfCostRank& b) {
    if (a.has_pct != b.has_pct) return a.has_pct;
    return a.has_pct ? a.pct > b.pct : a.rank < b.rank;
  });
  return v;
}

void add_self_cost_diagnosis(const SelfCostView& v, Document& d) {
  if (!v.has_pct || v.max_pct <= kSelfCostDiagnosePct) return;
  std::size_t over = 0;
  for (const SelfCostRank& r : v.per_rank) over += r.has_pct && r.pct > kSelfCostDiagnosePct ? 1 : 0;
  const SelfCostRank& top = v.per_rank.front();
  Section s{"traintime's overhead", {}};
  s.lines.push_back("traintime's own code took " + pct_text(top.pct) + " of the steps' wall time on rank " +
                    std::to_string(top.rank) + (over > 1 ? " (" + std::to_string(over) + " ranks above " +
                                                                fixed(kSelfCostDiagnosePct, 0) + " %)"
                                                          : std::string()) +
                    ", most of it in " + (top.costliest.empty() ? std::string("n/a") : top.costliest) +
                    "; job-wide " + pct_text(v.job_pct) + " (estimated: see the table \"traintime's own cost\")");
  d.diagnosis.push_back(s);
}

void add_self_cost_tables(const SelfCostView& v, Document& d) {
  Table t;
  t.id = "self_cost";
  t.title = "traintime's own cost";
  for (const auto& [h, numeric] : std::vector<std::pair<std::string, bool>>{
           {"rank", false}, {"% steps", true}, {"code ms", true}, {"threads ms", true},
           {"peak MiB", true}, {"wrote MiB", true}, {"n/a", true}, {"costliest path", false}}) {
    t.headers.push_back(h);
    t.numeric.push_back(numeric);
  }
  t.note = "Estimated from inside the run (docs/schema.md self_cost). % steps: traintime's code on the "
           "application's threads (launch and buffer callbacks, annotations, NVTX, NCCL wrappers, the Python "
           "hooks; sampled, so estimated) over the CPU wall time of the steps after warm-up, all threads "
           "summed, so it can pass 100; the job row sums both over the ranks. code ms: that code over the whole "
           "run; threads ms: the CPU time of tt-cupti, tt-writer, tt-snapshot, tt-hang and tt-nvml; peak: "
           "traintime's own buffers and tables by its accounting (not the RSS; the job row: the highest rank's); "
           "wrote: files before the final one; n/a: hot paths with calls and none timed (not measured).";
  if (v.ranks == 0) {
    // Left out with the other empty tables, in their one line (render.h shown_tables).
    t.empty_why = "no rank file has self_cost: older files lack it";
    d.tables.push_back(t);
    return;
  }
  double callbacks = 0, threads = 0;
  uint64_t peak = 0, written = 0, unmeasured = 0;
  for (const SelfCostRank& r : v.per_rank) {
    callbacks += r.callbacks_ms;
    threads += r.threads_cpu_ms;
    peak = std::max(peak, r.peak_bytes);
    written += r.written_bytes;
    unmeasured += r.unmeasured;
  }
  t.rows.push_back({"job", v.has_pct ? fixed(v.job_pct, 3) : "n/a", fixed(callbacks, 1), fixed(threads, 1),
                    mib(peak), mib(written), std::to_string(unmeasured),
                    v.paths.empty() ? "-" : v.paths.front().what + " (" + v.paths.front().module + ")"});
  for (const SelfCostRank& r : v.per_rank)
    t.rows.push_back({std::to_string(r.rank), r.has_pct ? fixed(r.pct, 3) : "n/a", fixed(r.callbacks_ms, 1),
                      fixed(r.threads_cpu_ms, 1), mib(r.peak_bytes), mib(r.written_bytes),
                      std::to_string(r.unmeasured), r.costliest.empty() ? std::string("-") : r.costliest});
  t.text_rows = 17;
  d.tables.push_back(t);

  Table p;
  p.id = "self_cost_paths";
  p.title = "traintime's own cost by hot path (all ranks)";
  for (const auto& [h, numeric] : std::vector<std::pair<std::string, bool>>{
           {"path", false}, {"module", false}, {"ranks", true}, {"calls", true}, {"ms", true},
           {"+/- ms", true}, {"timed", true}, {"interrupted", true}}) {
    p.headers.push_back(h);
    p.numeric.push_back(numeric);
  }
  p.note = "ms: calls x the mean timed call (estimated), or every call timed (+/- 0); +/- the standard error; "
           "timed: calls timed; interrupted: timed calls left out (preempted between their readings). The "
           "CUPTI overhead rows are CUPTI's own records of its cost; our threads' CPU time is not in this table.";
  for (const SelfCostPath& x : v.paths)
    p.rows.push_back({x.what, x.module, std::to_string(x.ranks), std::to_string(x.calls),
                      x.unmeasured_ranks == x.ranks ? "n/a" : fixed(x.ms, 3),
                      x.estimated ? fixed(x.spread_ms, 3) : "0", std::to_string(x.samples),
                      std::to_string(x.interrupted)});
  d.tables.push_back(p);
}

nlohmann::json self_cost_json(const SelfCostView& v) {
  using nlohmann::json;
  json ranks = json::array();
  for (const SelfCostRank& r : v.per_rank)
    ranks.push_back({{"rank", r.rank},
                     {"pct", r.has_pct ? json(r.pct) : json(nullptr)},
                     {"callbacks_ms", r.callbacks_ms},
                     {"threads_cpu_ms", r.threads_cpu_ms},
                     {"peak_bytes", r.peak_bytes},
                     {"written_bytes", r.written_bytes},
                     {"costliest", r.costliest}});
  json paths = json::array();
  for (const SelfCostPath& p : v.paths)
    paths.push_back({{"module", p.module},
                     {"what", p.what},
                     {"ranks", p.ranks},
                     {"calls", p.calls},
                     {"ms", p.unmeasured_ranks == p.ranks ? json(nullptr) : json(p.ms)},
                     {"spread_ms", p.spread_ms},
                     {"estimated", p.estimated}});
  json threads = json::array();
  for (const SelfCostThread& t : v.threads)
    threads.push_back({{"name", t.name}, {"ranks", t.ranks}, {"cpu_ms", t.cpu_ms}});
  return {{"ranks", v.ranks},
          {"pct", v.has_pct ? json(v.job_pct) : json(nullptr)},
          {"max_pct", v.has_pct ? json(v.max_pct) : json(nullptr)},
          {"max_rank", v.has_pct ? json(v.max_rank) : json(nullptr)},
          {"per_rank", std::move(ranks)},
          {"paths", std::move(paths)},
          {"threads", std::move(threads)}};
}

std::string self_cost_watch_line(const SelfCostView& v) {
  if (!v.has_pct) return "";
  return "traintime's own cost: " + pct_text(v.job_pct) + " of the steps' wall time (highest: rank " +
         std::to_string(v.max_rank) + ", " + pct_text(v.max_pct) + ")\n";
}

}  // namespace traintime::report
