// The report as sections of diagnosis and tables, shared by the text, md, csv and html formats.
#include <algorithm>
#include <cstddef>
#include <cstdio>

#include "render.h"

namespace traintime::report {
namespace {

std::string f3(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}
std::string f1(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}
std::string f2(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}
std::string u(uint64_t v) { return std::to_string(v); }
std::string i(int64_t v) { return std::to_string(v); }

}  // namespace

std::string bytes_text(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int k = 0;
  while (b >= 1024 && k < 4) {
    b /= 1024;
    ++k;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, k == 0 ? "%.0f %s" : "%.1f %s", b, units[k]);
  return buf;
}

namespace {

// A warning's number as written: integers without decimals.
std::string number_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, WarningGroup::whole(v) ? "%.0f" : "%.6g", v);
  return buf;
}

std::string rank_list(const std::vector<int64_t>& ranks, std::size_t shown = 16) {
  std::string out;
  for (std::size_t k = 0; k < ranks.size() && k < shown; ++k) out += (k ? ", " : "") + std::to_string(ranks[k]);
  if (ranks.size() > shown) out += " and " + std::to_string(ranks.size() - shown) + " more";
  return out;
}

Table make(std::string id, std::string title, std::vector<std::pair<std::string, bool>> cols, std::string note = "") {
  Table t;
  t.id = std::move(id);
  t.title = std::move(title);
  for (auto& [h, numeric] : cols) {
    t.headers.push_back(h);
    t.numeric.push_back(numeric);
  }
  t.note = std::move(note);
  return t;
}

// What the job ran on and its one step time, said once with where it comes from.
void add_run(const Report& r, Document& d) {
  Section run{"Run", {}, true};
  const Dist& st = r.steps.step();
  if (st.n > 0)
    run.lines.push_back("step time p50 " + human_ms(st.p50) + " (p90 " + human_ms(st.p90) + ") over " + u(st.n) +
                        " (rank, step) values after warm-up, measured as the " +
                        (r.steps.gpu ? std::string("GPU step span (first GPU work of a step to its last, on the GPU's clock)")
                                     : std::string("CPU wall time from one tt_step to the next (no GPU step time)")));
  else
    run.lines.push_back("no step after warm-up in the rank files (the job marks steps with tt_step; warm-up " +
                        u(r.warmup) + ")");
  for (const std::string& dev : r.devices)
    run.lines.push_back("device " + dev +
                        (r.simulated && (dev.find("SIMULATED") != std::string::npos || dev.find("simgpu") != std::string::npos)
                             ? " -- SIMULATED: every GPU number here comes from simgpu, not from hardware"
                             : ""));
  d.diagnosis.push_back(run);
}

std::string gib(uint64_t bytes) { return f1(static_cast<double>(bytes) / (1ull << 30)); }

std::string headroom_text(const MemoryHeadroom& m) {
  return "rank " + i(m.rank) + " (host " + m.host + ") " + gib(m.used_bytes_max) + " of " + gib(m.total_bytes) +
         " GiB used at its highest, " + gib(m.headroom_bytes) + " GiB (" + f1(m.headroom_pct) + " %) left";
}

// The ranks closest to their GPU's memory capacity (Report::memory, least headroom first).
// Only ranks with NVML's figures (they come first): the caller checks the first one has them.
Section memory_section(const std::vector<MemoryHeadroom>& memory) {
  Section s{"GPU memory", {}};
  std::size_t near = 0;
  while (near < memory.size() && memory[near].nvml && memory[near].headroom_pct < kNearCapacityPct) ++near;
  if (near > 0) {
    s.lines.push_back(u(near) + " rank(s) with less than " + f1(kNearCapacityPct) +
                      " % of their GPU's memory left at their highest; the closest to capacity:");
    for (std::size_t k = 0; k < near && k < 3; ++k) s.lines.push_back("  " + headroom_text(memory[k]));
  } else {
    s.lines.push_back("every sampled rank kept at least " + f1(kNearCapacityPct) +
                      " % of its GPU's memory free; the least: " + headroom_text(memory.front()));
  }
  s.lines.push_back("(NVML's used memory of the whole GPU, sampled every TRAINTIME_NVML_INTERVAL_MS: every process "
                    "on it, the CUDA context, library workspaces and PyTorch's cached blocks; a peak shorter than "
                    "the interval can be missed)");
  return s;
}

// The order the dead are named in: what killed a rank first, then hangs, then the signals a
// launcher sends the others once one died.
int fate_order(const RankFate& f) {
  if (f.state.kind == RankState::Kind::kKilled) return 0;
  if (f.state.kind == RankState::Kind::kSuspectedHang) return 1;
  if (f.state.kind == RankState::Kind::kAsWritten && f.state.reason == core::ExitReason::kSigabrt) return 2;
  return 3;
}

std::string step_range(uint64_t lo, uint64_t hi) { return lo == hi ? "step " + u(lo) : "steps " + u(lo) + ".." + u(hi); }

// The headline when a rank died (rank_fates.h): each rank that did not end normally, how and at
// which step; several ranks ended the same way (a launcher's teardown) are one line.
void add_dead_ranks(const Report& r, Document& d) {
  std::vector<const RankFate*> dead;
  for (const RankFate& f : r.fates)
    if (!f.running()) dead.push_back(&f);
  if (dead.empty()) return;
  std::stable_sort(dead.begin(), dead.end(),
                   [](const RankFate* a, const RankFate* b) { return fate_order(*a) < fate_order(*b); });
  Section s{"Ranks that died", {}};
  for (std::size_t k = 0; k < dead.size();) {
    std::size_t end = k;
    while (end < dead.size() && dead[end]->how == dead[k]->how) ++end;
    if (end - k <= 3) {
      for (; k < end; ++k) {
        const RankFate& f = *dead[k];
        s.lines.push_back("rank " + i(f.rank) + " (host " + f.host + ") " + f.how + " at step " + u(f.steps) +
                          (f.others_steps != f.steps ? " (the other ranks reached up to step " + u(f.others_steps) + ")"
                                                     : std::string()) +
                          (f.evidence.empty() ? std::string() : ": " + f.evidence));
      }
      continue;
    }
    std::vector<int64_t> ranks;
    uint64_t lo = ~uint64_t{0}, hi = 0;
    for (std::size_t m = k; m < end; ++m) {
      ranks.push_back(dead[m]->rank);
      lo = std::min(lo, dead[m]->steps);
      hi = std::max(hi, dead[m]->steps);
    }
    std::sort(ranks.begin(), ranks.end());
    s.lines.push_back(u(ranks.size()) + " ranks (" + rank_list(ranks) + ") " + dead[k]->how + " at " + step_range(lo, hi));
    k = end;
  }
  d.diagnosis.push_back(s);
}

// Ranks whose newest file is a snapshot or record of a process that still runs.
void add_running_ranks(const Report& r, Document& d) {
  std::vector<const RankFate*> running;
  for (const RankFate& f : r.fates)
    if (f.running()) running.push_back(&f);
  if (running.empty()) return;
  Section s{"Ranks still running", {}};
  if (running.size() <= 4) {
    for (const RankFate* f : running)
      s.lines.push_back("rank " + i(f->rank) + " (host " + f->host + ") running at step " + u(f->steps) +
                        (f->last_step_age_s ? ", its last step ended " + f1(*f->last_step_age_s) +
                                                  " s before its newest record"
                                            : std::string()) +
                        " (" + f->evidence + ")");
  } else {
    uint64_t lo = ~uint64_t{0}, hi = 0;
    const RankFate* longest = nullptr;
    for (const RankFate* f : running) {
      lo = std::min(lo, f->steps);
      hi = std::max(hi, f->steps);
      if (f->last_step_age_s && (!longest || *f->last_step_age_s > *longest->last_step_age_s)) longest = f;
    }
    s.lines.push_back(u(running.size()) + " ranks running, at " + step_range(lo, hi) +
                      (longest ? "; the longest since its last step: rank " + i(longest->rank) + ", " +
                                     f1(*longest->last_step_age_s) + " s before its newest record"
                               : std::string()));
  }
  d.diagnosis.push_back(s);
}

// What a straggler's one cost figure is, in one sentence (Straggler::cost_basis).
std::string cost_sentence(const Straggler& st, double step) {
  if (st.cost_basis == "counterfactual" && st.step_ms_without > 0 && step > 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "had it run at the median of its peers, the job's step would go %.2f -> %.2f ms/step",
                  step, st.step_ms_without);
    return buf;
  }
  if (st.cost_basis == "waits")
    return "the time the other ranks waited for it alone, in the collectives it arrived last at";
  return "its GPU compute above the median rank's, which the others wait for in their collectives";
}

void add_stragglers(const Report& r, Document& d) {
  Section s{"Stragglers", {}, true};
  const double step = r.steps.reference_ms();
  if (!r.stragglers.measured) {
    s.lines.push_back("not measured: stragglers are found from the durations of collectives lined up across ranks "
                      "and from GPU compute, and no rank has GPU time or a collective traintime.torch timed on the "
                      "CPU (gloo, MPI)");
  } else if (!r.gpu_data) {
    s.lines.push_back("measured from the CPU durations of " + u(r.waits.cpu_collectives_matched) + " collectives on " +
                      r.waits.cpu_backends + " lined up across ranks (no rank has GPU time)" +
                      (r.stragglers.found.empty() ? std::string(": no rank kept the others waiting") : std::string()));
  } else if (r.stragglers.found.empty()) {
    s.lines.push_back(r.waits.collectives_matched
                          ? "none: no rank kept the others waiting (" + u(r.waits.collectives_matched) +
                                " collectives lined up across ranks) and no rank's compute stands out"
                          : "none found; no collective could be lined up across ranks (a single rank, or no "
                            "communicators[].recent in the files), and no rank's compute stands out");
  }
  for (const Straggler& st : r.stragglers.found) {
    // One cost figure with what it is, then the evidence, one line each.
    s.lines.push_back("rank " + i(st.rank) + " (host " + st.host + ") costs the job " + human_ms(st.cost_ms_per_step) +
                      "/step" + (step > 0 ? " (" + f1(st.cost_pct) + "% of the " + human_ms(step) + " median step)" : "") +
                      ": " + cost_sentence(st, step));
    for (const std::string& why : st.reasons) s.lines.push_back("  " + why);
  }
  if (!r.stragglers.group.empty() && step > 0) {
    std::string ranks;
    for (int64_t k : r.stragglers.group) ranks += (ranks.empty() ? "" : ", ") + i(k);
    char buf[96];
    std::snprintf(buf, sizeof buf, ": %.2f -> %.2f ms/step", step, r.stragglers.group_step_ms_without);
    s.lines.push_back("without ranks " + ranks + " together (slow as a group, as a pipeline stage would be)" + buf +
                      "; one of them alone gains only what it is slower than the next");
  }
  d.diagnosis.push_back(s);
}

// Where the GPU step time goes: the shares; without GPU time, the largest regions' CPU time.
void add_where_time_goes(const Report& r, Document& d) {
  Section g{r.gpu_data ? "Where the GPU step time goes" : "Where the step time goes (CPU)", {}, true};
  if (r.gpu_data) {
    g.lines.push_back("exposed comm " + f1(r.exposed_comm_pct) +
                      "% of the GPU step span (communication the GPU waited for; all comm " + f1(r.comm_pct) +
                      "%, compute " + f1(r.compute_pct) + "%)");
    const RankView* worst_exposed = nullptr;
    const RankView* worst_idle = nullptr;
    for (const RankView& v : r.per_rank) {
      if (!worst_exposed || v.exposed_comm_pct > worst_exposed->exposed_comm_pct) worst_exposed = &v;
      if (!worst_idle || v.idle_pct > worst_idle->idle_pct) worst_idle = &v;
    }
    if (worst_exposed) g.lines.back() += "; highest on rank " + i(worst_exposed->rank) + ": " + f1(worst_exposed->exposed_comm_pct) + "%";
    g.lines.push_back("idle " + f1(r.idle_pct) + "% of the GPU step span (the GPU had nothing to run inside a step)" +
                      (worst_idle ? "; highest on rank " + i(worst_idle->rank) + ": " + f1(worst_idle->idle_pct) + "%" : ""));
    g.lines.push_back("unattributed " + f1(r.unattributed_pct) +
                      "% of GPU busy time (launched while no region was open anywhere)");
  } else {
    std::string why;
    for (const std::string& c : r.capture) why += (why.empty() ? "" : "; ") + c;
    g.lines.push_back("no GPU time on any rank (gpu_capture " + why +
                      "): the report shows CPU time per region and step; GPU tables, shares and charts are left out");
    const double step_ms = r.steps.wall.p50;
    std::size_t shown = 0;
    for (const RegionAcross& ra : r.regions) {
      if (shown == 5) break;
      if (ra.cpu_ms.mean() <= 0) continue;
      ++shown;
      g.lines.push_back(ra.path + ": " + human_ms(ra.cpu_ms.mean()) + "/step CPU wall, inclusive" +
                        (step_ms > 0 ? " (" + f1(ra.cpu_ms.mean() / step_ms * 100) + "% of the median step)" : "") +
                        (ra.cpu_ms.n > 1 ? "; highest on rank " + i(ra.cpu_ms.max_rank) + ": " + human_ms(ra.cpu_ms.max) : ""));
    }
  }
  d.diagnosis.push_back(g);
}

void add_hangs(const Report& r, Document& d) {
  Section h{"Hangs", {}};
  if (!r.hangs.data) {
    h.lines.push_back("no hang data: these rank files have no communicators[].in_flight or threads[] "
                      "(written by an older traintime)");
  } else if (r.hangs.found.empty()) {
    h.lines.push_back("none found: no collective that some ranks wait in and others never entered");
  }
  for (const std::string& line : r.hangs.p2p_waits) h.lines.push_back(line);
  for (const Hang& hg : r.hangs.found) {
    std::vector<int64_t> missing = hg.missing_ranks;
    std::string who = missing.empty() ? std::to_string(hg.missing.size()) + " member(s) without a rank file"
                                      : "rank(s) " + rank_list(missing);
    const std::string what = hg.op + " seq " + u(hg.seq) +
                             (hg.bytes ? " (" + bytes_text(static_cast<double>(hg.bytes)) + ")" : "");
    const std::string files = hg.from_snapshots ? " (from snapshot or signal files of a running job)" : "";
    if (hg.all_entered)
      h.lines.push_back("communicator " + hg.communicator + " (" + u(hg.comm_size) + " ranks): every rank entered " +
                        what + " and it never completed: rank(s) " + rank_list(hg.waiting_ranks) +
                        " wait in it, " +
                        (hg.stalled_inside ? "and " + stalled_inside_words()
                                           : std::string("with no progress for TRAINTIME_HANG_SEC")) +
                        files);
    else
      h.lines.push_back("communicator " + hg.communicator + " (" + u(hg.comm_size) + " ranks): " + who +
                        " never entered " + what + ", which rank(s) " + rank_list(hg.waiting_ranks) + " wait in" + files);
    for (const MissingMember& mm : hg.missing) h.lines.push_back("  " + mm.doing);
    // Inside it: where each channel had got to (proxy_progress of the ranks' files).
    if (hg.progress.rows.empty()) {
      h.lines.push_back("  inside it: no channel progress in these files (traintime was not NCCL's profiler plugin, "
                        "or NCCL is older than 2.23)");
    } else {
      h.lines.push_back("  inside it (" + hg.progress.detail() + "): " + stopped_line(hg.progress));
      for (const std::string& line : progress_lines(hg.progress, 8)) h.lines.push_back("    " + line);
    }
  }
  d.diagnosis.push_back(h);
}

void add_ranks_and_records(const Report& r, Document& d) {
  Section k{"Ranks and records", {}};
  k.lines.push_back(u(r.ranks) + " of " + i(r.world_size) + " ranks merged" +
                    (r.missing_ranks.empty() ? "" : "; missing: rank(s) " + rank_list(r.missing_ranks, 32) +
                                                        " (no usable rank file)"));
  if (r.dropped_records)
    k.lines.push_back(u(r.dropped_records) + " GPU activity records dropped on rank(s) " + rank_list(r.ranks_dropping) +
                      ": their GPU figures undercount");
  else if (r.gpu_data)
    k.lines.push_back("no GPU activity record dropped");
  if (!r.incomplete_ranks.empty())
    k.lines.push_back("rank(s) " + rank_list(r.incomplete_ranks) +
                      " wrote while CUPTI still held records (snapshot or signal): their latest steps may miss GPU work");
  if (r.gpu_data)  // without GPU time the capture lines are the reason already given above
    for (const std::string& c : r.capture) k.lines.push_back("GPU capture " + c);
  if (!r.problems.empty())
    k.lines.push_back(u(r.problems.size()) + " input problem(s): see the \"problems\" table");
  if (!r.aux_files.empty())
    k.lines.push_back(u(r.aux_files.size()) + " aux file(s) (other processes that claimed a rank) listed, not merged");
  d.diagnosis.push_back(k);
}

void add_comparison(const Extras& x, Document& d) {
  if (x.comparison) {
    const Comparison& c = *x.comparison;
    Section cs{"Compared with " + c.base_dir, {}};
    std::string beyond;
    for (const MetricChange& m : c.metrics)
      if (m.beyond_spread && *m.beyond_spread) beyond += (beyond.empty() ? "" : ", ") + m.name;
    cs.lines.push_back("changed beyond their own step-to-step spread: " + (beyond.empty() ? std::string("none") : beyond) +
                       " (spread = (p90 - p50) / p50 of the metric's per-step values, the larger of the two runs; "
                       "see the \"compare\" table)");
    if (c.region)
      cs.lines.push_back("region that moved most: " + c.region->name + " " + human_ms(c.region->base_ms) + " -> " +
                         human_ms(c.region->now_ms) + " per step (" + c.region->measure + ", mean over ranks)");
    if (c.collective)
      cs.lines.push_back("collective that moved most: " + c.collective->name + " " + human_ms(c.collective->base_ms) + " -> " +
                         human_ms(c.collective->now_ms) + " per step (" + c.collective->measure + ", mean over ranks)");
    d.diagnosis.push_back(cs);
  }
}

void add_gate(const Extras& x, Document& d) {
  if (x.verdicts) {
    Section gs{"Gate (--fail-if)", {}};
    for (const Verdict& v : *x.verdicts) gs.lines.push_back(std::string(v.holds ? "HOLDS  " : "ok     ") + v.explanation);
    d.diagnosis.push_back(gs);
  }
}

void add_diagnosis(const Report& r, const Extras& x, Document& d) {
  add_dead_ranks(r, d);
  add_run(r, d);
  add_running_ranks(r, d);
  add_stragglers(r, d);
  add_where_time_goes(r, d);
  if (!r.memory.empty() && r.memory.front().nvml) d.diagnosis.push_back(memory_section(r.memory));
  add_hangs(r, d);
  add_ranks_and_records(r, d);
  add_self_cost_diagnosis(r.self_cost, d);
  add_comparison(x, d);
  add_gate(x, d);
}

void dist_row(Table& t, const char* name, const Dist& dd) {
  t.rows.push_back({name, u(dd.n), f3(dd.mean), f3(dd.p50), f3(dd.p90), f3(dd.max)});
}

void across_cells(std::vector<std::string>& row, const Across& a) {
  row.push_back(f3(a.mean()));
  row.push_back(f3(a.min));
  row.push_back(f3(a.max));
  row.push_back(i(a.max_rank));
  row.push_back(f1(a.spread_pct()));
}

// The column naming the rank that holds a row's highest value.
constexpr const char* kMaxRank = "rank of max";

std::string per_call(const CommView& c) {
  return c.bytes_known && c.calls_total ? bytes_text(static_cast<double>(c.bytes) / static_cast<double>(c.calls_total))
                                        : "unknown";
}

// Communication of a job without GPU time: NCCL's calls and bytes as its interposers counted them,
// and the collectives traintime.torch timed on the CPU (gloo, MPI) with their CPU time.
Table cpu_comm_table(const Report& r, const std::string& no_gpu) {
  Table comm = make("comm", "Communication per op and communicator size (per step, across ranks)",
                    {{"op", false}, {"backend", false}, {"size", true}, {"calls", true}, {"bytes/call", true},
                     {"cpu ms mean", true}, {"cpu ms max", true}, {kMaxRank, true}},
                    "NCCL rows: calls and bytes as its interposers counted them. Other backends: the collectives "
                    "traintime.torch timed on the CPU, from when each could start to its completion, waiting "
                    "for the slowest rank included. " + no_gpu);
  for (const CommView& c : r.comm) {
    const bool cpu = !c.backend.empty();
    comm.rows.push_back({c.op, cpu ? c.backend : "nccl", u(c.comm_size), f2(c.calls.mean()), per_call(c),
                         cpu ? f3(c.cpu_ms.mean()) : "-", cpu ? f3(c.cpu_ms.max) : "-",
                         cpu ? i(c.cpu_ms.max_rank) : "-"});
  }
  return comm;
}

// The largest share of the step: of the GPU step span (compute, exposed comm, idle, io and other),
// or without GPU time, the top-level region with the most CPU wall time per step (a region named
// "step" is the step itself: its children are the top level then).
std::string largest_share(const Report& r) {
  if (r.gpu_data) {
    std::vector<std::pair<double, std::string>> shares = {
        {r.compute_pct, "compute"}, {r.exposed_comm_pct, "exposed comm"}, {r.idle_pct, "idle"},
        {std::max(0.0, 100.0 - r.compute_pct - r.exposed_comm_pct - r.idle_pct), "io and other"}};
    std::stable_sort(shares.begin(), shares.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    return shares[0].second + ", " + f1(shares[0].first) + "% of the GPU step span (then " + shares[1].second + " " +
           f1(shares[1].first) + "%, " + shares[2].second + " " + f1(shares[2].first) + "%)";
  }
  const double step = r.steps.wall.p50;
  std::vector<const RegionAcross*> top;
  for (const RegionAcross& ra : r.regions)
    if (top_level_region(ra.path) && ra.cpu_ms.mean() > 0) top.push_back(&ra);
  std::stable_sort(top.begin(), top.end(),
                   [](const RegionAcross* a, const RegionAcross* b) { return a->cpu_ms.mean() > b->cpu_ms.mean(); });
  if (top.empty() || step <= 0) return "not known: no region with CPU time, or no step after warm-up";
  const bool named = top[0]->path == top[0]->category;  // "backward" is already its category
  std::string s = top[0]->path + (named ? "" : " (" + top[0]->category + ")") + ", " +
                  f1(top[0]->cpu_ms.mean() / step * 100) +
                  "% of the median step's CPU wall time";
  if (top.size() > 1) s += " (then " + top[1]->path + " " + f1(top[1]->cpu_ms.mean() / step * 100) + "%)";
  return s;
}

// The report's answer in three lines (Document::summary).
void add_summary(const Report& r, const Extras& x, Document& d) {
  d.summary.title = r.simulated ? "SUMMARY -- SIMULATED GPU, CUDA, CUPTI and NCCL (simgpu): every GPU number too"
                                : "SUMMARY";
  const double step = r.steps.reference_ms();
  if (!r.stragglers.measured)
    d.summary.lines.push_back("straggler: not measured (no GPU time, and no collective timed on the CPU)");
  else if (r.stragglers.found.empty())
    d.summary.lines.push_back("straggler: none (no rank kept the others waiting)");
  else
    d.summary.lines.push_back("straggler: rank " + i(r.stragglers.found[0].rank) + " costs the job " +
                              human_ms(r.stragglers.found[0].cost_ms_per_step) + "/step" +
                              (step > 0 ? " (" + f1(r.stragglers.found[0].cost_pct) + "% of the " + human_ms(step) +
                                              " median step)"
                                        : std::string()) +
                              (r.stragglers.found.size() > 1 ? "; " + u(r.stragglers.found.size() - 1) + " more in the diagnosis"
                                                       : std::string()));
  d.summary.lines.push_back("largest share: " + largest_share(r));
  d.summary.lines.push_back(x.html_path.empty()
                                ? "HTML: traintime-report " + r.dir + " --format html -o report.html (the same, with charts)"
                                : "HTML: " + x.html_path + " (the same, with charts)");
}

const std::string kNoGpu = "Without GPU time on any rank the GPU columns are left out.";

void add_steps_table(const Report& r, Document& d) {
  const bool gpu = r.gpu_data;
  Table steps = make("steps", std::string("Step time (") + r.steps.step_source() + ")" +
                                  (gpu ? " and its GPU breakdown" : "") + " per step (ms)",
                     {{"component", false}, {"n", true}, {"mean", true}, {"p50", true}, {"p90", true}, {"max", true}},
                     gpu ? std::string(r.steps.component_source == "steps.detail"
                                           ? "Over every (rank, step) row of steps.detail after warm-up, partial steps "
                                             "left out."
                                           : "No per-step rows: each rank's mean per step.") +
                               " The step time is the GPU step span: busy + idle."
                         : std::string(r.steps.wall_source == "steps.detail"
                                           ? "CPU wall time over every (rank, step) row of steps.detail after warm-up. "
                                           : "CPU wall time from each rank's steps.wall_ns (p50/p90 = median of the "
                                             "ranks' p50/p90). ") +
                               kNoGpu);
  dist_row(steps, gpu ? "step time (GPU step span)" : "step time (CPU wall)", r.steps.step());
  if (gpu) {
    dist_row(steps, "GPU busy", r.steps.gpu_busy);
    dist_row(steps, "compute", r.steps.compute);
    // Activation checkpointing's re-run forward, part of compute: only when some rank has it.
    if (r.has_recompute) {
      dist_row(steps, "recompute", r.steps.recompute);
      steps.note += " Recompute (activation checkpointing) is part of compute.";
    }
    dist_row(steps, "comm", r.steps.comm);
    dist_row(steps, "exposed comm", r.steps.exposed_comm);
    dist_row(steps, "io", r.steps.io);
    dist_row(steps, "idle", r.steps.idle);
  }
  d.tables.push_back(steps);
}

void add_throughput_table(const Report& r, Document& d) {
  const bool gpu = r.gpu_data;
  Table tp = make("throughput", "Throughput after warm-up (the job's total; min, mean and max per rank)",
                  {{"metric", false}, {"job total", true}, {"ranks", true}, {"min", true}, {"mean", true},
                   {"max", true}, {kMaxRank, true}},
                  "Job total = sum over ranks: right for data parallelism, where each rank consumes its own samples; "
                  "with tensor or pipeline parallelism divide by the model-parallel degree.");
  if (r.throughput.samples_per_s > 0) {
    const Across& a = r.throughput.samples_per_s_rank;
    tp.rows.push_back({"samples/s", f1(r.throughput.samples_per_s), u(r.throughput.ranks_with_rates), f1(a.min),
                       f1(a.mean()), f1(a.max), i(a.max_rank)});
  }
  if (r.throughput.tokens_per_s > 0)
    tp.rows.push_back({"tokens/s", f1(r.throughput.tokens_per_s), u(r.throughput.ranks_with_rates), "", "", "", ""});
  if (r.throughput.ranks_with_flops) {
    const Across& t = r.throughput.tflops_rank;
    tp.rows.push_back({"TFLOP/s", f1(r.throughput.tflops), u(r.throughput.ranks_with_flops), f1(t.min), f1(t.mean()),
                       f1(t.max), i(t.max_rank)});
  }
  if (r.throughput.mfu_rank.n) {
    const Across& m = r.throughput.mfu_rank;
    tp.rows.push_back({"MFU %", f1(100 * r.throughput.job_mfu), u(m.n), f1(100 * m.min), f1(100 * m.mean()),
                       f1(100 * m.max), i(m.max_rank)});
    tp.note += " MFU = achieved model TFLOP/s / the GPU's peak (" + r.throughput.peak_sources +
               "); job MFU = summed TFLOP/s / summed peaks.";
  }
  if (r.throughput.hfu_rank.n) {
    const Across& h = r.throughput.hfu_rank;
    tp.rows.push_back({"HFU %", f1(100 * r.throughput.job_hfu), u(h.n), f1(100 * h.min), f1(100 * h.mean()),
                       f1(100 * h.max), i(h.max_rank)});
    tp.note += " HFU = MFU with activation checkpointing's recompute counted, its FLOPs estimated from GPU time: "
               "MFU x (1 + recompute / forward GPU busy time); only on ranks with recompute.";
  }
  if (!r.mfu_missing_why.empty()) tp.note += " MFU '-': " + r.mfu_missing_why + ".";
  if (gpu && !tp.rows.empty())
    tp.note += " Rates are the ranks' own, over their CPU wall time between steps.";
  tp.empty_why = "the job gave tt_step no samples or tokens, and no model FLOPs";
  d.tables.push_back(tp);
}

void add_categories_table(const Report& r, Document& d) {
  const bool gpu = r.gpu_data;
  if (gpu) {
    Table cat = make("categories", "GPU busy per category (ms/step, across ranks)",
                     {{"category", false}, {"mean", true}, {"min", true}, {"max", true}, {kMaxRank, true}, {"spread %", true}},
                     "Per step = the rank's total / its steps. spread = (max - min) / mean.");
    for (const CategoryView& c : r.categories) {
      std::vector<std::string> row{c.name};
      across_cells(row, c.busy_ms);
      cat.rows.push_back(row);
    }
    d.tables.push_back(cat);
  }
}

void add_regions_table(const Report& r, Document& d) {
  const bool gpu = r.gpu_data;
  if (gpu) {
    Table reg = make("regions", "Regions: self GPU busy (ms/step, across ranks)",
                     {{"region", false}, {"category", false}, {"ranks", true}, {"mean", true}, {"min", true}, {"max", true},
                      {kMaxRank, true}, {"spread %", true}, {"cpu mean", true}},
                     "Exclusive GPU time of the work launched directly in the region; cpu = inclusive CPU wall time.");
    for (const RegionAcross& ra : r.regions) {
      std::vector<std::string> row{ra.path, ra.category, u(ra.gpu_busy_ms.n)};
      across_cells(row, ra.gpu_busy_ms);
      row.push_back(f3(ra.cpu_ms.mean()));
      reg.rows.push_back(row);
    }
    reg.text_rows = 25;
    d.tables.push_back(reg);
  } else {
    Table reg = make("regions", "Regions: CPU wall time (ms/step, inclusive, across ranks)",
                     {{"region", false}, {"category", false}, {"ranks", true}, {"mean", true}, {"min", true}, {"max", true},
                      {kMaxRank, true}, {"spread %", true}, {"entries/step", true}},
                     "Inclusive CPU wall time of the region per step: nested regions are inside their parent's time.");
    for (const RegionAcross& ra : r.regions) {
      std::vector<std::string> row{ra.path, ra.category, u(ra.cpu_ms.n)};
      across_cells(row, ra.cpu_ms);
      row.push_back(f2(ra.entries.mean()));
      reg.rows.push_back(row);
    }
    reg.text_rows = 25;
    d.tables.push_back(reg);
  }
}

void add_kernels_table(const Report& r, Document& d) {
  const bool gpu = r.gpu_data;
  if (gpu && !r.kernels.empty()) {
    // The name last, in the width the numbers leave: a long demangled signature is shortened (short_signature).
    Table k = make("kernels", "Top kernels by GPU time (all ranks)",
                   {{"gpu ms total", true}, {"ms/step", true}, {"calls", true}, {"ranks", true}, {"kernel", false}},
                   "From each region's top_kernels (the most expensive kernels a rank file keeps), summed over ranks; "
                   "ms/step = mean over the ranks that ran it. Long names shortened (no \"void \" or parameters; nested, "
                   "then all template arguments as <...>; then cut in the middle); html unfolds each whole. Complete "
                   "list, whole names: --format csv or json.");
    for (const KernelView& kv : r.kernels)
      k.rows.push_back({f3(kv.gpu_ms), f3(kv.per_step_ms), u(kv.count), u(kv.ranks), kv.name});
    k.text_rows = 10;
    k.signature_column = 4;
    d.tables.push_back(k);
  }
}

void add_comm_tables(const Report& r, Document& d) {
  const bool gpu = r.gpu_data;
  if (gpu) {
    Table comm = make("comm", "Communication per op and communicator size (per step, across ranks)",
                      {{"op", false}, {"size", true}, {"calls", true}, {"bytes/call", true}, {"gpu ms mean", true},
                       {"gpu ms max", true}, {kMaxRank, true}, {"busbw GB/s", true}},
                      "GPU time includes waiting for the slowest rank, so this busbw (mean over ranks) is a lower "
                      "bound; see \"bandwidth\" for the wait-free figures.");
    for (const CommView& c : r.comm) {
      if (!c.backend.empty()) {  // timed on the CPU (gloo, MPI): no GPU time, no bandwidth
        comm.rows.push_back({c.op + " (" + c.backend + ", CPU " + f3(c.cpu_ms.mean()) + " ms)", u(c.comm_size),
                             f2(c.calls.mean()), per_call(c), "-", "-", "-", "-"});
        continue;
      }
      comm.rows.push_back({c.op, u(c.comm_size), f2(c.calls.mean()), per_call(c), f3(c.gpu_ms.mean()),
                           f3(c.gpu_ms.max), i(c.gpu_ms.max_rank), f2(c.busbw_gbps.mean())});
    }
    d.tables.push_back(comm);

    Table bw = make("bandwidth", "Wait-free bus bandwidth per op and message size (GB/s = 1e9 B/s)",
                    {{"op", false}, {"size", true}, {"bytes from", true}, {"collectives", true}, {"wait-free busbw", true},
                     {"recorded busbw", true}},
                    "Each collective lined up by (communicator, seq); its shortest duration over the member ranks is "
                    "the wait-free time. recorded = from every rank's duration, waiting included.");
    for (const BandwidthView& b : r.waits.bandwidth)
      bw.rows.push_back({b.op, u(b.comm_size), bytes_text(static_cast<double>(b.lo_bytes)), u(b.collectives),
                         f2(b.waitfree_busbw_gbps), f2(b.recorded_busbw_gbps)});
    d.tables.push_back(bw);
  } else if (!r.comm.empty()) {
    d.tables.push_back(cpu_comm_table(r, kNoGpu));
  }
}

void add_ranks_table(const Report& r, Document& d) {
  const bool gpu = r.gpu_data;
  Table ranks = gpu ? make("ranks", "Per rank (ms/step)",
                           {{"rank", true}, {"host", false}, {"steps", true}, {"p50 step", true}, {"compute", true},
                            {"exp comm", true}, {"io+other", true}, {"idle", true}, {"wait", true}, {"caused", true},
                            {"state", false}},
                           "p50 step = the rank's median GPU step span; wait = time this rank's collectives waited for "
                           "the others; caused = the wait of the job that this rank alone caused by arriving last.")
                    : make("ranks", "Per rank (ms/step)",
                           {{"rank", true}, {"host", false}, {"steps", true}, {"p50 step", true}, {"state", false}},
                           "p50 step = the rank's median CPU wall time per step. " + kNoGpu);
  // A recompute column (part of compute) only when some rank has recompute.
  const bool recompute = gpu && r.has_recompute;
  if (recompute) {
    constexpr std::ptrdiff_t kAfterCompute = 5;  // rank, host, steps, p50 step, compute
    // "recomp": short, so the table stays within 100 columns with TFLOP/s and MFU as well.
    ranks.headers.insert(ranks.headers.begin() + kAfterCompute, "recomp");
    ranks.numeric.insert(ranks.numeric.begin() + kAfterCompute, true);
    ranks.note += " recomp = GPU busy in the recompute category (activation checkpointing), part of compute.";
  }
  // TFLOP/s and MFU columns only when some rank knows its model FLOPs. (HFU per rank is in the
  // throughput table's min/max and the JSON: a column more would pass 100 columns.)
  const bool flops = r.throughput.ranks_with_flops > 0;
  if (flops) {
    ranks.headers.insert(ranks.headers.end() - 1, {"TFLOP/s", "MFU %"});
    ranks.numeric.insert(ranks.numeric.end() - 1, {true, true});
  }
  for (const RankView& v : r.per_rank) {
    std::vector<std::string> row{i(v.rank), v.host, u(v.steps), f3(v.step_p50_ms)};
    if (gpu) {
      row.push_back(f3(v.compute_ms));
      if (recompute) row.push_back(f3(v.recompute_ms));
      for (double val : {v.exposed_comm_ms, v.io_other_ms, v.idle_ms, v.wait_ms, v.caused_ms}) row.push_back(f3(val));
    }
    if (flops) {
      row.push_back(v.tflops > 0 ? f1(v.tflops) : "-");
      row.push_back(v.mfu > 0 ? f1(100 * v.mfu) : "-");
    }
    row.push_back(v.state.name());
    ranks.rows.push_back(std::move(row));
  }
  ranks.text_rows = 64;
  d.tables.push_back(ranks);
}

void add_gpu_health_table(const Report& r, Document& d) {
  // GPU health (rank file gpu_health) only when some rank sampled it.
  bool health = false;
  for (const RankView& v : r.per_rank) health = health || v.sm_clock_mhz > 0;
  if (health) {
    Table h = make("gpu_health", "GPU health per rank (NVML, sampled over the run)",
                   {{"rank", true}, {"SM MHz p50", true}, {"SM MHz min", true}, {"power W p50", true},
                    {"limit W", true}, {"max C", true}, {"GiB used", true}, {"GiB total", true},
                    {"sampled steps", true}, {"throttled steps", true}, {"clock-event reasons", false}},
                   "The rank's first GPU as NVML reported it every TRAINTIME_NVML_INTERVAL_MS; GiB used = NVML's "
                   "highest used memory for the whole GPU (every process), not this rank's allocations; sampled "
                   "steps = steps after warm-up with per-step figures (- when the file has none), throttled = "
                   "those with a clock-event reason other than gpu_idle on any of the rank's GPUs; reasons seen "
                   "in any sample, gpu_idle left out.");
    for (const RankView& v : r.per_rank) {
      if (v.sm_clock_mhz <= 0) continue;
      std::string reasons;
      for (const std::string& reason : core::clock_event_reason_names(v.clock_event_reasons))
        reasons += (reasons.empty() ? "" : " ") + reason;
      h.rows.push_back({i(v.rank), f1(v.sm_clock_mhz), u(v.sm_clock_min_mhz), f1(v.power_w), f1(v.power_limit_w),
                        u(v.temperature_max_c), f1(static_cast<double>(v.memory_used_bytes) / (1ull << 30)),
                        f1(static_cast<double>(v.memory_total_bytes) / (1ull << 30)),
                        v.sampled_steps > 0 ? u(v.sampled_steps) : "-",
                        v.sampled_steps > 0 ? u(v.throttled_steps) : "-",
                        reasons.empty() ? "-" : reasons});
    }
    std::vector<int64_t> mig;
    for (const RankView& v : r.per_rank)
      if (v.mig) mig.push_back(v.rank);
    if (!mig.empty())
      h.note += " Rank(s) " + rank_list(mig) + " run on MIG instances: their clocks, power and temperature are the "
                "whole GPU's, shared with the other instances on it.";
    h.text_rows = 64;
    d.tables.push_back(h);
  }
}

void add_memory_table(const Report& r, Document& d) {
  if (!r.memory.empty()) {
    Table m = make("memory", "GPU memory headroom per rank (NVML, GiB), least left first, and the peak allocated (CUPTI)",
                   {{"rank", true}, {"host", false}, {"GiB used (highest)", true}, {"GiB total", true},
                    {"GiB left", true}, {"% left", true}, {"GiB allocated (peak)", true}},
                   "NVML's used memory of the rank's first GPU, the highest sampled over the run: the whole GPU "
                   "(every process, the CUDA context, library workspaces, PyTorch's cached blocks), so an upper "
                   "bound of the rank's own use. Under " + f1(kNearCapacityPct) + " % left is named in the diagnosis. "
                   "GiB allocated = the most device memory the rank's own allocations held at once on that GPU "
                   "(CUPTI's allocation and release records: cudaMalloc, memory pools; not the context or library "
                   "workspaces). - = not recorded.");
    for (const MemoryHeadroom& h : r.memory) {
      const std::string allocated = h.allocated_known ? gib(h.allocated_peak_bytes) : "-";
      if (h.nvml)
        m.rows.push_back({i(h.rank), h.host, gib(h.used_bytes_max), gib(h.total_bytes), gib(h.headroom_bytes),
                          f1(h.headroom_pct), allocated});
      else
        m.rows.push_back({i(h.rank), h.host, "-", "-", "-", "-", allocated});
    }
    m.text_rows = 16;
    d.tables.push_back(m);
  }
}

void add_compare_table(const Extras& x, Document& d) {
  if (x.comparison) {
    Table c = make("compare", "Compared with " + x.comparison->base_dir,
                   {{"metric", false}, {"this run", true}, {"baseline", true}, {"change", true}, {"change %", true},
                    {"spread %", true}, {"beyond spread", false}},
                   "spread = the metric's own step-to-step spread (p90 - p50) / p50, the larger of the two runs (rates: "
                   "the step time's); beyond spread: |change %| is larger; '-' where the metric has no per-step values.");
    std::vector<std::string> neither;  // measured in neither run: a row of n/a says nothing
    for (const MetricChange& m : x.comparison->metrics) {
      if (!m.now && !m.base) {
        neither.push_back(m.name);
        continue;
      }
      c.rows.push_back({m.name, m.now ? human(*m.now, m.unit) : "n/a", m.base ? human(*m.base, m.unit) : "n/a",
                        m.change ? (*m.change > 0 ? "+" : "") + human(*m.change, m.unit) : "n/a",
                        m.change_pct ? f1(*m.change_pct) : "n/a", m.spread_pct ? f1(*m.spread_pct) : "-",
                        m.beyond_spread ? (*m.beyond_spread ? "yes" : "no") : "-"});
    }
    if (!neither.empty()) {
      std::string names;
      for (const std::string& n : neither) names += (names.empty() ? "" : ", ") + n;
      c.note += " Left out, measured in neither run: " + names + ".";
    }
    c.empty_why = "no metric was measured in either run";
    d.tables.push_back(c);
  }
}

void add_warnings_table(const Report& r, Document& d) {
  Table w = make("warnings", "Warnings written in the rank files",
                 {{"ranks", false}, {"warning", false}, {"across ranks", false}},
                 "A warning a module counted is one row for every rank that counted it: the text is the "
                 "rank's with the largest count, summed over the ranks (more than one) with the largest named.");
  for (const WarningGroup& g : r.rank_warnings) {
    std::string across;
    if (g.has_number && g.ranks.size() > 1) {  // one rank's total is its own text
      across = "total " + number_text(g.total) + " over " + u(g.ranks.size()) + " rank(s); worst: ";
      for (std::size_t k = 0; k < g.worst.size(); ++k)
        across += (k ? ", rank " : "rank ") + i(g.worst[k].rank) + ": " + number_text(g.worst[k].value);
    }
    w.rows.push_back({"rank(s) " + rank_list(g.ranks), g.text, across});
  }
  w.as_lines = true;
  w.text_rows = 50;
  w.empty_why = "no rank file has one";
  d.tables.push_back(w);
}

void add_problems_table(const Report& r, Document& d) {
  Table p = make("problems", "Input problems (each file named; the rest is still reported)",
                 {{"file", false}, {"problem", false}});
  for (const Problem& pr : r.problems) p.rows.push_back({pr.file, pr.message});
  for (const std::string& a : r.aux_files) p.rows.push_back({a, "aux file: listed, not merged as a rank"});
  p.as_lines = true;
  p.text_rows = 200;
  p.empty_why = "every file was read and merged";
  d.tables.push_back(p);
}

}  // namespace

Document build_document(const Report& r, const Extras& x) {
  Document d;
  d.heading = "traintime-report: job " + r.job_id + ", " + u(r.ranks) + " of " + i(r.world_size) + " ranks, " +
              u(r.steps_max) + " steps (warm-up " + u(r.warmup) + "), from " + r.dir +
              (r.simulated ? " -- SIMULATED GPU (simgpu)" : "");
  add_diagnosis(r, x, d);
  add_steps_table(r, d);
  add_throughput_table(r, d);
  add_categories_table(r, d);
  add_regions_table(r, d);
  add_kernels_table(r, d);
  add_comm_tables(r, d);
  add_ranks_table(r, d);
  add_gpu_health_table(r, d);
  add_memory_table(r, d);
  add_compare_table(x, d);
  add_self_cost_tables(r.self_cost, d);
  add_warnings_table(r, d);
  add_problems_table(r, d);
  add_summary(r, x, d);
  add_module_tables(r.module_figures, &d);  // each module's report half
  return d;
}

std::vector<const Table*> shown_tables(const Document& d, std::string* left_out) {
  std::vector<const Table*> shown;
  std::string out;
  for (const Table& t : d.tables) {
    if (!t.rows.empty() || t.empty_why.empty()) {
      shown.push_back(&t);
      continue;
    }
    out += (out.empty() ? "" : "; ") + t.id + " (" + t.empty_why + ")";
  }
  if (left_out) *left_out = out.empty() ? "" : "Left out, nothing to show for this job: " + out + ".";
  return shown;
}

}  // namespace traintime::report
