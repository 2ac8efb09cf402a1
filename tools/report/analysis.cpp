// The statistics and the diagnosis of a job (docs/report.md says what each number means).
// No clock is compared between ranks: a collective is lined up across ranks by its
// (communicator, seq), and only durations measured on one rank's own clock are compared.
#include "analysis.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <set>
#include <thread>
#include <unordered_map>

#include "rank_fates.h"
#include "traintime/core/comm_stats.h"
#include "traintime/core/module_format.h"
#include "traintime/nvml/gpu_health.h"

namespace traintime::report {
namespace {

constexpr double kNsPerMs = 1e6;

double ms(uint64_t ns) { return static_cast<double>(ns) / kNsPerMs; }

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

StepView step_view(const Job& job) {
  std::vector<double> wall, span, busy, compute, recompute, comm, exposed, io, idle;
  std::vector<double> exposed_pct, comm_pct, compute_pct, idle_pct;
  for (const RankInput& r : job.ranks) {
    const core::Steps& s = r.data.steps;
    for (std::size_t i = 0; i < s.detail.size(); ++i) {
      const core::Steps::Detail& d = s.detail[i];
      if (d.partial || d.index < s.warmup) continue;
      if (d.wall_ns > 0) wall.push_back(ms(d.wall_ns));
      const double sp = static_cast<double>(d.totals.gpu_busy_ns + d.totals.idle_ns);
      if (sp > 0) {
        exposed_pct.push_back(static_cast<double>(d.totals.exposed_comm_ns) / sp * 100);
        comm_pct.push_back(static_cast<double>(d.totals.comm_ns) / sp * 100);
        compute_pct.push_back(static_cast<double>(d.totals.compute_ns) / sp * 100);
        idle_pct.push_back(static_cast<double>(d.totals.idle_ns) / sp * 100);
      }
      span.push_back(ms(d.totals.gpu_busy_ns + d.totals.idle_ns));
      busy.push_back(ms(d.totals.gpu_busy_ns));
      compute.push_back(ms(d.totals.compute_ns));
      recompute.push_back(ms(d.busy_ns_by_category[core::Category::kRecompute]));
      comm.push_back(ms(d.totals.comm_ns));
      exposed.push_back(ms(d.totals.exposed_comm_ns));
      io.push_back(ms(d.totals.io_ns));
      idle.push_back(ms(d.totals.idle_ns));
    }
  }
  StepView v;
  // Each distribution is a sort of up to ranks x steps values (800,000 at 16384 ranks): they are
  // sorted on every core at once, each by itself, so the figures do not depend on the threads.
  std::vector<std::pair<Dist*, std::vector<double>*>> todo;
  if (!wall.empty()) {
    v.wall_source = "steps.detail";
    todo.push_back({&v.wall, &wall});
  } else {
    // No per-step wall times: the ranks' own statistics.
    v.wall_source = "wall_ns";
    std::vector<double> p50, p90;
    double total = 0, count = 0, max = 0;
    for (const RankInput& r : job.ranks) {
      const core::DurationStats& w = r.data.steps.wall_ns;
      if (w.count == 0) continue;
      p50.push_back(ms(w.p50_ns));
      p90.push_back(ms(w.p90_ns));
      total += ms(w.total_ns);
      count += static_cast<double>(w.count);
      max = std::max(max, ms(w.max_ns));
    }
    if (count > 0) {
      v.wall.n = static_cast<uint64_t>(count);
      v.wall.mean = total / count;
      v.wall.p50 = median(p50);
      v.wall.p90 = median(p90);
      v.wall.max = max;
    }
  }
  if (!busy.empty()) {
    v.component_source = "steps.detail";
  } else {
    // No per-step rows: each rank's totals spread over its steps.
    v.component_source = "totals";
    for (const RankInput& r : job.ranks) {
      const core::StepTotals& t = r.data.steps.totals;
      const double n = steps_of(r.data);
      span.push_back(ms(t.gpu_busy_ns + t.idle_ns) / n);
      busy.push_back(ms(t.gpu_busy_ns) / n);
      compute.push_back(ms(t.compute_ns) / n);
      recompute.push_back(ms(r.data.categories[core::Category::kRecompute].gpu_busy_ns) / n);
      comm.push_back(ms(t.comm_ns) / n);
      exposed.push_back(ms(t.exposed_comm_ns) / n);
      io.push_back(ms(t.io_ns) / n);
      idle.push_back(ms(t.idle_ns) / n);
    }
  }
  todo.insert(todo.end(), {{&v.span, &span},
                           {&v.gpu_busy, &busy},
                           {&v.compute, &compute},
                           {&v.recompute, &recompute},
                           {&v.comm, &comm},
                           {&v.exposed_comm, &exposed},
                           {&v.io, &io},
                           {&v.idle, &idle},
                           {&v.exposed_comm_pct, &exposed_pct},
                           {&v.comm_pct, &comm_pct},
                           {&v.compute_pct, &compute_pct},
                           {&v.idle_pct, &idle_pct}});
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < todo.size();) *todo[i].first = dist_of(std::move(*todo[i].second));
  };
  std::vector<std::thread> pool;
  if (span.size() >= 100000)  // a thread is worth starting
    for (unsigned t = 1; t < std::min(4u, std::thread::hardware_concurrency()); ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  v.gpu = v.span.max > 0;
  return v;
}

// A rank's median step time from the job's step source, after warm-up; without per-step rows,
// the GPU span per step of its totals or its own CPU wall p50.
double rank_step_p50(const core::RankFile& f, bool gpu) {
  std::vector<double> v;
  for (const core::Steps::Detail& d : f.steps.detail) {
    if (d.partial || d.index < f.steps.warmup) continue;
    if (gpu) v.push_back(ms(d.totals.gpu_busy_ns + d.totals.idle_ns));
    else if (d.wall_ns > 0) v.push_back(ms(d.wall_ns));
  }
  if (!v.empty()) return median(std::move(v));
  return gpu ? ms(f.steps.totals.gpu_busy_ns + f.steps.totals.idle_ns) / steps_of(f) : ms(f.steps.wall_ns.p50_ns);
}

bool is_simulated(const std::string& device) {
  return device.find("SIMULATED") != std::string::npos || device.find("simgpu") != std::string::npos;
}

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

// The report's views spell ops as the rank file does.
std::string op_text(core::CommOp op) { return std::string(core::comm_op_name(op)); }

struct BwAcc {
  core::CommOp op = core::CommOp::kUnknown;
  uint64_t collectives = 0;
  double bytes = 0, min_ns = 0, all_bytes = 0, all_ns = 0;
};

void analyze_waits(const Job& job, Report& rep) {
  struct Member {
    std::size_t idx;  // into job.ranks
    const core::Communicator* c;
  };
  std::map<std::string, std::vector<Member>> by_comm;
  for (std::size_t i = 0; i < job.ranks.size(); ++i)
    for (const core::Communicator& c : job.ranks[i].data.communicators) by_comm[c.id].push_back({i, &c});
  std::set<std::string> cpu_backends;
  for (const auto& [id, members] : by_comm)
    if (members.front().c->cpu_clock) cpu_backends.insert(members.front().c->backend);
  for (const std::string& b : cpu_backends) rep.cpu_backends += (rep.cpu_backends.empty() ? "" : ", ") + b;

  std::vector<double> wait_ms(job.ranks.size(), 0), caused_ms(job.ranks.size(), 0);
  std::vector<uint64_t> matched(job.ranks.size(), 0), last(job.ranks.size(), 0);
  std::map<std::tuple<std::string, uint32_t, uint64_t>, BwAcc> bw;

  struct Entry {
    std::size_t member;
    uint64_t dur;
    const core::RecentCollective* rc;
  };
  for (const auto& [id, members] : by_comm) {
    if (members.size() < 2) continue;
    std::map<uint64_t, std::vector<Entry>> by_seq;
    for (std::size_t m = 0; m < members.size(); ++m)
      for (const core::RecentCollective& rc : members[m].c->recent)
        by_seq[rc.seq].push_back({m, rc.gpu_end_ns > rc.gpu_start_ns ? rc.gpu_end_ns - rc.gpu_start_ns : 0, &rc});
    std::vector<WaitTotals> tot(members.size());
    for (auto& [seq, entries] : by_seq) {
      if (entries.size() != members.size()) continue;  // not kept by every member
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
      ++rep.collectives_matched;
      // Collectives timed on the CPU (gloo, MPI) tell who waited for whom, not the links' speed.
      if (members[0].c->cpu_clock) {
        ++rep.cpu_collectives_matched;
        continue;
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
    // Per step: collectives per step on this communicator, as the rank counted them.
    for (std::size_t m = 0; m < members.size(); ++m) {
      if (tot[m].matched == 0) continue;
      const std::size_t i = members[m].idx;
      const core::RankFile& f = job.ranks[i].data;
      double ops = static_cast<double>(members[m].c->ops_enqueued);
      if (ops == 0)
        for (const core::CommRow& row : f.comm)
          if (row.comm_size == members[m].c->size) ops += static_cast<double>(row.calls);
      const double per_step = ops / steps_of(f) / static_cast<double>(tot[m].matched);
      wait_ms[i] += tot[m].wait_ns / kNsPerMs * per_step;
      caused_ms[i] += tot[m].caused_ns / kNsPerMs * per_step;
      matched[i] += tot[m].matched;
      last[i] += tot[m].last;
    }
  }
  for (std::size_t i = 0; i < job.ranks.size(); ++i) {
    rep.per_rank[i].wait_ms = wait_ms[i];
    rep.per_rank[i].caused_ms = caused_ms[i];
    rep.per_rank[i].matched = matched[i];
    rep.per_rank[i].last_arrivals = last[i];
  }
  for (const auto& [key, b] : bw) {
    BandwidthView v;
    std::tie(v.op, v.comm_size, v.lo_bytes) = key;
    v.collectives = b.collectives;
    const double f = core::busbw_factor(b.op, v.comm_size);
    v.waitfree_busbw_gbps = b.min_ns > 0 ? b.bytes / b.min_ns * f : 0;  // bytes/ns = 1e9 B/s
    v.recorded_busbw_gbps = b.all_ns > 0 ? b.all_bytes / b.all_ns * f : 0;
    rep.bandwidth.push_back(v);
  }
}

std::string ghz(double mhz) { return fmt("%.2f", mhz / 1000) + " GHz"; }

// What the straggler's GPU health says (gpu_health): a clock below the others' median (by more
// than 3%, NVML's clocks move in steps of about 15 MHz) with the clock-event reasons it reported,
// or the same clock, so its compute is slower at equal clocks. Nothing without sampled clocks.
// A GPU that throttles in some steps only (thermal slowdown, a power cap) keeps a normal run
// median clock, so its steps with a clock-event reason (RankView::throttled_steps) are named
// with what they cost, and "slower at equal clocks" is then only claimed when its unthrottled
// steps alone are still slow: their median time outside exposed comm above the other ranks'
// median (step p50 less exposed comm, as the counterfactual counts it) by more than 3%. With
// every sampled step throttled there is nothing to set apart, and the equal clocks stand.
void explain_clock(const Report& rep, Straggler& s) {
  const RankView* self = nullptr;
  std::vector<double> others, others_own;
  for (const RankView& v : rep.per_rank) {
    if (v.rank == s.rank) {
      self = &v;
      continue;
    }
    if (v.sm_clock_mhz > 0) others.push_back(v.sm_clock_mhz);
    others_own.push_back(std::max(0.0, v.step_p50_ms - v.exposed_comm_ms));
  }
  if (!self || self->sm_clock_mhz <= 0 || others.empty()) return;
  s.sm_clock_mhz = self->sm_clock_mhz;
  s.others_sm_clock_mhz = median(others);
  s.clock_event_reasons = self->clock_event_reasons;
  s.clock_slower = s.sm_clock_mhz < 0.97 * s.others_sm_clock_mhz;
  s.sampled_steps = self->sampled_steps;
  s.throttled_steps = self->throttled_steps;
  s.throttle_reasons = self->throttle_reasons;
  s.throttled_step_ms = self->throttled_step_ms;
  s.other_step_ms = self->other_step_ms;
  const auto join = [](const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& x : v) out += (out.empty() ? "" : ", ") + x;
    return out;
  };
  const std::string reasons = join(s.clock_event_reasons);
  const std::string counted = std::to_string(s.throttled_steps) + " of " + std::to_string(s.sampled_steps) +
                              " sampled steps";
  if (s.clock_slower) {
    s.reasons.push_back("rank " + std::to_string(s.rank) + "'s SM clock " + ghz(s.sm_clock_mhz) + " median vs " +
                        ghz(s.others_sm_clock_mhz) + " for the others; " +
                        (reasons.empty() ? std::string("NVML reported no clock-event reason")
                                         : "clock-event reasons " + reasons) +
                        (s.sampled_steps > 0 ? "; a clock-event reason in " + counted : std::string()));
    return;
  }
  const std::string matches = "its SM clock " + ghz(s.sm_clock_mhz) + " median matches the others' " +
                              ghz(s.others_sm_clock_mhz);
  const uint64_t unthrottled = s.sampled_steps - s.throttled_steps;
  if (s.throttled_steps == 0 || unthrottled == 0) {
    if (s.throttled_steps > 0)
      s.reasons.push_back("rank " + std::to_string(s.rank) + "'s GPU reported clock-event reasons " +
                          join(s.throttle_reasons) + " in " + counted);
    s.reasons.push_back(matches + ": its compute is slower at equal clocks");
    return;
  }
  s.reasons.push_back("rank " + std::to_string(s.rank) + "'s GPU reported clock-event reasons " +
                      join(s.throttle_reasons) + " in " + counted + "; those steps took " +
                      fmt("%.2f", s.throttled_step_ms) + " ms on average against " + fmt("%.2f", s.other_step_ms) +
                      " ms for its other steps");
  const double own = self->unthrottled_own_ms, others_med = median(others_own);
  const std::string compared = "its " + std::to_string(unthrottled) + " unthrottled step(s) took " +
                               fmt("%.2f", own) + " ms " +
                               (rep.steps.gpu ? "outside exposed comm" : "of CPU wall") + " (median) against " +
                               fmt("%.2f", others_med) + " ms for the others";
  if (own > 1.03 * others_med)
    s.reasons.push_back(matches + " and " + compared + ": its compute is slower at equal clocks too");
  else
    s.reasons.push_back(matches + "; " + compared + ": the throttled steps, not slower compute, explain its delay");
}

void find_stragglers(Report& rep) {
  rep.stragglers_measured = rep.gpu_data || rep.cpu_collectives_matched > 0;
  const double step_ms = rep.steps.reference_ms();
  const double floor_ms = std::max(step_ms * 0.01, 0.001);  // 1% of a step, at least 1 us
  std::map<int64_t, Straggler> found;
  auto entry = [&](const RankView& r) -> Straggler& {
    Straggler& s = found[r.rank];
    s.rank = r.rank;
    s.host = r.host;
    s.last_arrivals = r.last_arrivals;
    s.matched = r.matched;
    return s;
  };
  for (const RankView& r : rep.per_rank) {
    if (r.caused_ms >= floor_ms && r.last_arrivals * 2 >= r.matched && r.matched > 0) {
      Straggler& s = entry(r);
      s.cost_ms_per_step = r.caused_ms;
      s.cost_basis = "waits";
      s.reasons.push_back("arrived last at " + std::to_string(r.last_arrivals) + " of " +
                          std::to_string(r.matched) + " collectives lined up across ranks" +
                          (rep.gpu_data ? std::string() : " (their CPU durations on " + rep.cpu_backends + ")"));
    }
  }
  if (rep.per_rank.size() >= 2) {
    std::vector<double> compute;
    for (const RankView& r : rep.per_rank) compute.push_back(r.compute_ms);
    const double med = median(compute);
    for (const RankView& r : rep.per_rank) {
      if (med <= 0 || r.compute_ms < 1.10 * med || r.compute_ms - med < floor_ms) continue;
      std::vector<double> others;
      for (const RankView& o : rep.per_rank)
        if (o.rank != r.rank) others.push_back(o.exposed_comm_ms);
      const double others_exposed = median(others);
      if (others_exposed <= r.exposed_comm_ms) continue;
      Straggler& s = entry(r);
      s.compute_ms = r.compute_ms;
      s.median_compute_ms = med;
      if (s.cost_ms_per_step == 0) {
        s.cost_ms_per_step = r.compute_ms - med;
        s.cost_basis = "compute";
      }
      s.reasons.push_back("GPU compute " + fmt("%.3f", r.compute_ms) + " ms/step is " +
                          fmt("%.2f", r.compute_ms / med) + "x the median " + fmt("%.3f", med) +
                          " ms/step, while the other ranks' exposed comm is " + fmt("%.3f", others_exposed) +
                          " ms/step against its " + fmt("%.3f", r.exposed_comm_ms));
    }
  }
  // What the job's step would be without each straggler: it stops being the one the others wait
  // for once its time outside exposed comm (its own clock: step span - exposed comm) is the
  // median of the ranks that are no straggler, while its exposed comm, which it never waited in,
  // stays; those ranks then take at least their step less the waits they spent (their median).
  // One straggler among several only gains the job what it is slower than the next slowest;
  // several together (a slow group, as a pipeline stage would be) are estimated as one.
  if (rep.steps.gpu && rep.per_rank.size() >= 2 && found.size() < rep.per_rank.size()) {
    std::vector<double> own, waitfree;
    std::map<int64_t, const RankView*> view;
    for (const RankView& r : rep.per_rank) {
      view[r.rank] = &r;
      if (found.count(r.rank)) continue;
      own.push_back(std::max(0.0, r.step_p50_ms - r.exposed_comm_ms));
      waitfree.push_back(std::max(0.0, r.step_p50_ms - r.wait_ms));
    }
    const double own_med = median(own), waitfree_med = median(waitfree);
    std::map<int64_t, double> excess;
    double together = waitfree_med;
    for (const auto& [rank, s] : found) {
      const RankView& v = *view[rank];
      excess[rank] = std::max(0.0, v.step_p50_ms - v.exposed_comm_ms - own_med);
      together = std::max(together, v.step_p50_ms - excess[rank]);
    }
    for (auto& [rank, s] : found) {
      const RankView& v = *view[rank];
      if (v.step_p50_ms <= 0) continue;
      double without = std::max(v.step_p50_ms - excess[rank], waitfree_med);
      for (const auto& [other, e] : excess)
        if (other != rank) without = std::max(without, step_ms - std::max(0.0, excess[rank] - e));
      s.step_ms_without = std::min(step_ms, without);
      s.cost_ms_per_step = step_ms - s.step_ms_without;  // what the job would gain, not the waits it caused
      s.cost_basis = "counterfactual";
      s.kind = found.size() == 1 ? "rank" : "group";
    }
    if (found.size() >= 2) {
      for (const auto& [rank, s] : found) rep.straggler_group.push_back(rank);
      rep.group_step_ms_without = std::min(step_ms, together);
    }
  }
  for (auto& [rank, s] : found) {
    s.cost_pct = step_ms > 0 ? s.cost_ms_per_step / step_ms * 100.0 : 0;
    explain_clock(rep, s);
    rep.stragglers.push_back(s);
  }
  std::stable_sort(rep.stragglers.begin(), rep.stragglers.end(),
                   [](const Straggler& a, const Straggler& b) { return a.cost_ms_per_step > b.cost_ms_per_step; });
}

std::string join_paths(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : " > ") + s;
  return out;
}

std::string what_it_was_doing(const core::RankFile& f) {
  std::string s = "rank " + std::to_string(f.rank) + " (host " + f.host + ", pid " + std::to_string(f.pid) + ", " +
                  (f.snapshot ? std::string("snapshot") : f.exit_reason) + "): ";
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

void find_hangs(const Job& job, Report& rep) {
  for (const RankInput& r : job.ranks) {
    if (!r.data.threads.empty()) rep.hang_data = true;
    for (const core::Communicator& c : r.data.communicators)
      if (!c.in_flight.empty()) rep.hang_data = true;
    if (!r.data.proxy_progress.empty()) rep.hang_data = true;
  }
  if (!rep.hang_data) return;
  std::map<std::string, std::vector<const RankInput*>> by_comm;
  std::map<std::string, uint32_t> size_of;
  for (const RankInput& r : job.ranks)
    for (const core::Communicator& c : r.data.communicators) {
      by_comm[c.id].push_back(&r);
      size_of[c.id] = std::max(size_of[c.id], c.size);
    }
  auto comm_in = [](const RankInput* r, const std::string& id) -> const core::Communicator* {
    for (const core::Communicator& c : r->data.communicators)
      if (c.id == id) return &c;
    return nullptr;
  };
  for (const auto& [id, members] : by_comm) {
    // The collective the job hangs in: the oldest seq that some member entered and another
    // never did (a member with no file never entered anything we know of), and that no member
    // completed (a collective cannot complete without all of them). Completion is not needed to
    // find it: GPU records may not have been delivered when a hung rank's file was written.
    uint64_t least = ~uint64_t{0};
    uint64_t most = 0;
    uint64_t not_completed = 0;  // the oldest seq some member entered and has not completed
    for (const RankInput* m : members) {
      const core::Communicator* c = comm_in(m, id);
      least = std::min(least, c->ops_enqueued);
      most = std::max(most, c->ops_enqueued);
      if (c->ops_completed < c->ops_enqueued &&
          (not_completed == 0 || c->ops_completed + 1 < not_completed))
        not_completed = c->ops_completed + 1;
    }
    uint64_t oldest = 0;
    // A member's watchdog saw no progress for TRAINTIME_HANG_SEC: a collective every member
    // entered that never completes (a transfer that stopped part way) is a hang too.
    bool suspected = false;
    for (const RankInput* m : members) suspected = suspected || m->data.exit_reason == "suspected hang";
    if (members.size() < size_of[id]) {
      oldest = not_completed;  // a member without a file entered nothing we know of
    } else if (most > least) {
      oldest = least + 1;
    } else if (suspected) {
      oldest = not_completed;
    }
    if (oldest == 0) continue;
    bool completed = false;
    for (const RankInput* m : members) completed = completed || comm_in(m, id)->ops_completed >= oldest;
    if (completed) continue;
    Hang h;
    h.communicator = id;
    h.comm_size = size_of[id];
    h.seq = oldest;
    std::set<int64_t> comm_ranks_seen;
    bool identity = size_of[id] == job.world_size;  // comm rank == global rank for every file?
    for (const RankInput* m : members) {
      const core::Communicator* c = comm_in(m, id);
      comm_ranks_seen.insert(c->rank);
      identity = identity && static_cast<int64_t>(c->rank) == m->data.rank;
      if (m->data.snapshot || m->data.exit_reason.rfind("signal", 0) == 0) h.from_snapshots = true;
      if (c->ops_enqueued >= oldest) {
        if (c->ops_completed < oldest) h.waiting_ranks.push_back(m->data.rank);
        for (const core::InFlightOp& op : c->in_flight)
          if (op.seq == oldest && h.op.empty()) {
            h.op = op_text(op.op);
            h.bytes = op.bytes;
          }
        continue;
      }
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
      h.missing.push_back(mm);
    }
    for (uint32_t cr = 0; cr < size_of[id]; ++cr) {
      if (comm_ranks_seen.count(cr)) continue;
      MissingMember mm;
      mm.comm_rank = cr;
      mm.rank = identity ? cr : -1;
      mm.doing = "communicator rank " + std::to_string(cr) +
                 (identity ? " (rank " + std::to_string(cr) + ")" : std::string()) +
                 ": no rank file, so it never reported entering; it may have died before writing one";
      h.missing.push_back(mm);
    }
    // Every member entered: a hang only where a watchdog said so.
    if (h.missing.empty() && !suspected) continue;
    h.all_entered = h.missing.empty();
    for (const RankInput* m : members)
      add_rank_progress(h.progress, m->data.rank, rows_of_hung(m->data, id, h.op));
    if (const core::CommOp op = core::comm_op_from_name(h.op);
        !h.all_entered && (op == core::CommOp::kSend || op == core::CommOp::kRecv)) {
      // Only the peer had to enter a point-to-point op, and the files do not record which rank
      // that is: naming the members that did not enter would accuse ranks that had no part in it.
      std::string who;
      for (int64_t r : h.waiting_ranks) who += (who.empty() ? "" : ", ") + std::to_string(r);
      rep.p2p_waits.push_back("rank(s) " + who + " wait in " + h.op + " seq " + std::to_string(h.seq) +
                              " on communicator " + id + "; its peer is not recorded in the rank files");
      continue;
    }
    if (h.op.empty()) h.op = "unknown";
    for (const MissingMember& mm : h.missing)
      if (mm.rank >= 0) h.missing_ranks.push_back(mm.rank);
    std::sort(h.missing_ranks.begin(), h.missing_ranks.end());
    rep.hangs.push_back(std::move(h));
  }
}

// The warnings of the ranks, grouped as they are read (WarningGroup): per group the ranks and
// their counts only, and one text, so 16384 ranks cost two numbers per rank and warning. A
// warning a module counted is found from the rank's counters (modules.<module>.counters) and its
// text rendered from the module's table (core/module_format.h module_formats), the same function the
// writer formatted it with; the rank's own copy of that text in warnings[] is then not read again.
// No text is parsed for a number.
class WarningGrouper {
 public:
  void add_rank(const core::RankFile& f) {
    std::vector<std::string> rendered;  // this rank's texts made from its counters
    for (const auto& [name, m] : f.modules) {
      const core::ModuleFormat* format = core::find_module_format(name);
      if (format == nullptr) continue;  // a newer writer's module: its texts group as texts
      for (const auto& [key, v] : m.counters) {
        if (v == 0) continue;
        const core::CounterSpec* spec = format->find(key);
        if (spec == nullptr || spec->message == nullptr) continue;
        std::string text = spec->message(v, m);
        add(name + "." + key, true, static_cast<double>(v), f.rank, text);
        rendered.push_back(std::move(text));
      }
    }
    for (const std::string& w : f.warnings)
      if (std::find(rendered.begin(), rendered.end(), w) == rendered.end()) add(w, false, 0, f.rank, w);
  }

  // The groups by key (counted) or text, each counted one with its total and worst ranks.
  std::vector<WarningGroup> take() {
    std::vector<std::pair<std::string, std::size_t>> order(index_.begin(), index_.end());
    std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
      const WarningGroup& x = groups_[a.second].g;
      const WarningGroup& y = groups_[b.second].g;
      return x.key != y.key ? x.key < y.key : x.text < y.text;
    });
    std::vector<WarningGroup> out;
    out.reserve(order.size());
    for (const auto& [id, k] : order) {
      Building& b = groups_[k];
      std::vector<std::size_t> by(b.g.ranks.size());
      for (std::size_t i = 0; i < by.size(); ++i) by[i] = i;
      std::sort(by.begin(), by.end(), [&](std::size_t x, std::size_t y) { return b.g.ranks[x] < b.g.ranks[y]; });
      std::vector<int64_t> ranks;
      ranks.reserve(by.size());
      for (std::size_t i : by) ranks.push_back(b.g.ranks[i]);
      if (b.g.has_number) {
        for (double v : b.values) b.g.total += v;
        const std::size_t n = std::min<std::size_t>(3, by.size());
        std::partial_sort(by.begin(), by.begin() + static_cast<std::ptrdiff_t>(n), by.end(),
                          [&](std::size_t x, std::size_t y) {
                            return b.values[x] != b.values[y] ? b.values[x] > b.values[y]
                                                              : b.g.ranks[x] < b.g.ranks[y];
                          });
        for (std::size_t i = 0; i < n; ++i) b.g.worst.push_back({b.g.ranks[by[i]], b.values[by[i]]});
      }
      b.g.ranks = std::move(ranks);
      out.push_back(std::move(b.g));
    }
    return out;
  }

 private:
  // `id`: "<module>.<key>" of a counted warning (`counted`, with its count `v`), else the text.
  void add(const std::string& id, bool counted, double v, int64_t rank, const std::string& text) {
    auto [it, fresh] = index_.try_emplace((counted ? "#" : "=") + id, groups_.size());
    if (fresh) {
      groups_.emplace_back();
      groups_.back().g.key = counted ? id : std::string();
      groups_.back().g.has_number = counted;
    }
    Building& b = groups_[it->second];
    if (!b.g.ranks.empty() && b.g.ranks.back() == rank) {
      if (b.g.has_number) b.values.back() += v;  // the rank wrote this one twice: its counts add up
    } else {
      b.g.ranks.push_back(rank);
      if (b.g.has_number) b.values.push_back(v);
    }
    if (b.g.text.empty() || (b.g.has_number && b.values.back() > b.top)) {
      b.g.text = text;
      b.top = b.g.has_number ? b.values.back() : 0;
    }
  }

  struct Building {
    WarningGroup g;
    std::vector<double> values;  // parallel to g.ranks when g.has_number
    double top = 0;              // the value of g.text's rank
  };
  std::unordered_map<std::string, std::size_t> index_;  // "#" key or "=" exact text -> groups_
  std::vector<Building> groups_;
};

}  // namespace

namespace {
void find_memory_headroom(Report& rep) {
  for (const RankView& v : rep.per_rank) {
    if (v.memory_total_bytes == 0 && !v.allocated_known) continue;
    MemoryHeadroom m;
    m.rank = v.rank;
    m.host = v.host;
    m.allocated_known = v.allocated_known;
    m.allocated_peak_bytes = v.allocated_peak_bytes;
    m.nvml = v.memory_total_bytes > 0;
    if (m.nvml) {
      m.used_bytes_max = std::min(v.memory_used_bytes, v.memory_total_bytes);
      m.total_bytes = v.memory_total_bytes;
      m.headroom_bytes = m.total_bytes - m.used_bytes_max;
      m.headroom_pct = 100.0 * static_cast<double>(m.headroom_bytes) / static_cast<double>(m.total_bytes);
    }
    rep.memory.push_back(std::move(m));
  }
  std::stable_sort(rep.memory.begin(), rep.memory.end(), [](const MemoryHeadroom& a, const MemoryHeadroom& b) {
    if (a.nvml != b.nvml) return a.nvml;
    return a.headroom_pct != b.headroom_pct ? a.headroom_pct < b.headroom_pct : a.rank < b.rank;
  });
}
}  // namespace

Report analyze(const Job& job) {
  Report rep;
  rep.dir = job.dir;
  rep.job_id = job.job_id;
  rep.world_size = job.world_size;
  rep.ranks = job.ranks.size();
  rep.missing_ranks = job.missing_ranks;
  rep.problems = job.problems;
  rep.aux_files = job.aux_files;
  rep.other_jobs = job.other_jobs;
  rep.modules = job.modules;
  rep.module_figures = job.module_figures;
  rep.files_seen = job.files_seen;
  if (job.ranks.empty()) return rep;

  rep.steps = step_view(job);
  rep.self_cost = self_cost_view(job);

  // Per rank, and the job-wide shares.
  double span = 0, exposed = 0, idle = 0, comm = 0, compute = 0, busy = 0, unattributed = 0;
  double mfu_tflops = 0, mfu_peak = 0;  // over the ranks with a known peak
  double hfu_tflops = 0, hfu_peak = 0;  // over the ranks with a known HFU
  std::map<std::string, uint64_t> capture, devices, no_peak;
  WarningGrouper warnings;
  for (const RankInput& r : job.ranks) {
    const core::RankFile& f = r.data;
    const core::StepTotals& t = f.steps.totals;
    const double n = steps_of(f);
    RankView v;
    v.rank = f.rank;
    v.host = f.host;
    v.file = r.file;
    v.gpu_capture = core::gpu_capture_name(f.gpu_capture);
    v.gpu_capture_reason = f.gpu_capture_reason;
    v.steps = f.steps.count;
    v.step_p50_ms = rank_step_p50(f, rep.steps.gpu);
    v.cpu_wall_p50_ms = ms(f.steps.wall_ns.p50_ns);
    v.compute_ms = ms(t.compute_ns) / n;
    v.exposed_comm_ms = ms(t.exposed_comm_ns) / n;
    v.comm_ms = ms(t.comm_ns) / n;
    v.gpu_busy_ms = ms(t.gpu_busy_ns) / n;
    v.io_other_ms = std::max(0.0, v.gpu_busy_ms - v.compute_ms - v.exposed_comm_ms);
    v.idle_ms = ms(t.idle_ns) / n;
    const double rank_span = static_cast<double>(t.gpu_busy_ns) + static_cast<double>(t.idle_ns);
    v.exposed_comm_pct = rank_span > 0 ? static_cast<double>(t.exposed_comm_ns) / rank_span * 100 : 0;
    v.idle_pct = rank_span > 0 ? static_cast<double>(t.idle_ns) / rank_span * 100 : 0;
    v.samples_per_s = f.steps.samples_per_s;
    v.tflops = f.steps.tflops;
    v.mfu = f.steps.mfu;
    v.hfu = f.steps.hfu;
    v.recompute_ms = ms(f.categories[core::Category::kRecompute].gpu_busy_ns) / n;
    if (v.recompute_ms > 0) rep.has_recompute = true;
    v.device = f.device_name;
    v.dropped_records = f.dropped_records;
    v.top_cpu_ms = r.top_cpu_ms;
    std::vector<double> unthrottled_own;
    uint64_t throttle_mask = 0;
    for (const core::Steps::Detail& d : f.steps.detail) {
      if (d.partial) continue;
      const double step = rep.steps.gpu ? ms(d.totals.gpu_busy_ns + d.totals.idle_ns) : ms(d.wall_ns);
      v.step_ms.emplace_back(d.index, step);
      if (d.wall_ns > 0) v.cpu_wall_ms.emplace_back(d.index, ms(d.wall_ns));
      if (d.index < f.steps.warmup || d.gpu_health.empty()) continue;
      uint64_t mask = 0;
      for (const core::StepHealth& h : d.gpu_health) mask |= h.clock_event_reasons;
      ++v.sampled_steps;
      if (core::health_throttled(mask)) {
        ++v.throttled_steps;
        throttle_mask |= mask;
        v.throttled_step_ms += step;
      } else {
        v.other_step_ms += step;
        unthrottled_own.push_back(std::max(0.0, step - (rep.steps.gpu ? ms(d.totals.exposed_comm_ns) : 0.0)));
      }
    }
    if (v.throttled_steps > 0) v.throttled_step_ms /= static_cast<double>(v.throttled_steps);
    if (!unthrottled_own.empty()) v.other_step_ms /= static_cast<double>(unthrottled_own.size());
    v.unthrottled_own_ms = median(std::move(unthrottled_own));
    v.throttle_reasons = core::health_reason_names(throttle_mask & ~core::kHealthReasonGpuIdle);
    // The nvml module's data section, through its reader (nvml/gpu_health.h).
    const nvml::GpuHealth* health = nvml::gpu_health(f);
    const nvml::HealthDevice* first_device =
        health && !health->devices.empty() ? &health->devices.front() : nullptr;
    if (first_device) {
      const nvml::HealthFigures& h = first_device->run;
      v.sm_clock_mhz = h.sm_clock_mhz_median;
      v.sm_clock_min_mhz = h.sm_clock_mhz_min;
      v.power_w = h.power_w_median;
      v.power_limit_w = h.power_limit_w;
      v.temperature_max_c = h.temperature_c_max;
      for (const std::string& reason : h.clock_event_reasons)
        if (reason != "gpu_idle") v.clock_event_reasons.push_back(reason);
      v.memory_used_bytes = h.memory_used_bytes_max;
      v.memory_total_bytes = h.memory_total_bytes;
      v.mig = first_device->mig;
    }
    if (f.memory.present) {
      v.allocated_known = true;
      v.allocated_peak_bytes = f.memory.peak_bytes;
      // Beside NVML's figure, the same device's own peak.
      if (first_device)
        for (const core::DeviceMemory& d : f.memory.devices)
          if (d.cuda_device == first_device->cuda_device) v.allocated_peak_bytes = d.peak_bytes;
    }
    ++devices[f.device_name.empty() ? std::string("not recorded in the rank file") : f.device_name];
    if (is_simulated(f.device_name)) rep.simulated = true;
    if (f.steps.tflops > 0 && !(f.steps.mfu > 0 && f.peak_tflops > 0)) ++no_peak[f.device_name];
    rep.per_rank.push_back(std::move(v));

    span += rank_span;
    busy += static_cast<double>(t.gpu_busy_ns);
    exposed += static_cast<double>(t.exposed_comm_ns);
    idle += static_cast<double>(t.idle_ns);
    comm += static_cast<double>(t.comm_ns);
    compute += static_cast<double>(t.compute_ns);
    unattributed += static_cast<double>(f.categories[core::Category::kUnattributed].gpu_busy_ns);

    rep.warmup = std::max(rep.warmup, f.steps.warmup);
    rep.steps_max = std::max(rep.steps_max, f.steps.count);
    rep.dropped_records += f.dropped_records;
    if (f.dropped_records) rep.ranks_dropping.push_back(f.rank);
    if (!f.gpu_records_complete) rep.incomplete_ranks.push_back(f.rank);
    warnings.add_rank(f);
    ++capture[std::string(core::gpu_capture_name(f.gpu_capture)) + (f.gpu_capture_reason.empty() ? "" : " (" + f.gpu_capture_reason + ")")];

    if (f.steps.samples_per_s > 0 || f.steps.tokens_per_s > 0) {
      ++rep.throughput.ranks_with_rates;
      rep.throughput.samples_per_s += f.steps.samples_per_s;
      rep.throughput.tokens_per_s += f.steps.tokens_per_s;
      rep.throughput.samples_per_s_rank.add(f.steps.samples_per_s, f.rank);
    }
    if (f.steps.tflops > 0) {
      Throughput& tp = rep.throughput;
      ++tp.ranks_with_flops;
      tp.tflops += f.steps.tflops;
      tp.tflops_rank.add(f.steps.tflops, f.rank);
      if (f.steps.mfu > 0 && f.peak_tflops > 0) {
        tp.mfu_rank.add(f.steps.mfu, f.rank);
        mfu_tflops += f.steps.tflops;
        mfu_peak += f.peak_tflops;
        if (tp.peak_sources.find(f.peak_source) == std::string::npos)
          tp.peak_sources += (tp.peak_sources.empty() ? "" : "; ") + f.peak_source;
        if (f.steps.hfu > 0) {
          tp.hfu_rank.add(f.steps.hfu, f.rank);
          hfu_tflops += f.steps.hfu * f.peak_tflops;
          hfu_peak += f.peak_tflops;
        }
      }
    }
  }
  rep.rank_warnings = warnings.take();
  if (mfu_peak > 0) rep.throughput.job_mfu = mfu_tflops / mfu_peak;
  if (hfu_peak > 0) rep.throughput.job_hfu = hfu_tflops / hfu_peak;
  for (const auto& [name, n] : devices) rep.devices.push_back(name + ": " + std::to_string(n) + " rank(s)");
  for (const auto& [name, n] : no_peak)
    rep.mfu_missing_why += (rep.mfu_missing_why.empty() ? "" : "; ") + std::to_string(n) + " rank(s) on " +
                           (name.empty() ? std::string("an unrecorded device") : name) +
                           ": the GPU's peak TFLOP/s is not known (not in the table of known GPUs, "
                           "docs/metrics.md); set TRAINTIME_PEAK_TFLOPS";
  rep.gpu_data = span > 0;
  if (span > 0) {
    rep.exposed_comm_pct = exposed / span * 100;
    rep.idle_pct = idle / span * 100;
    rep.comm_pct = comm / span * 100;
    rep.compute_pct = compute / span * 100;
  }
  rep.unattributed_pct = busy > 0 ? unattributed / busy * 100 : 0;
  for (const auto& [line, n] : capture) rep.capture.push_back(line + ": " + std::to_string(n) + " rank(s)");

  for (std::size_t i = 0; i < core::kCategoryCount; ++i) {
    const auto cat = static_cast<core::Category>(i);
    CategoryView c;
    c.name = std::string(core::category_name(cat));
    for (const RankInput& r : job.ranks)
      c.busy_ms.add(ms(r.data.categories[cat].gpu_busy_ns) / steps_of(r.data), r.data.rank);
    rep.categories.push_back(c);
  }

  for (const auto& [path, ra] : job.regions) rep.regions.push_back(ra);
  std::stable_sort(rep.regions.begin(), rep.regions.end(), [](const RegionAcross& a, const RegionAcross& b) {
    if (a.gpu_busy_ms.mean() != b.gpu_busy_ms.mean()) return a.gpu_busy_ms.mean() > b.gpu_busy_ms.mean();
    return a.cpu_ms.mean() > b.cpu_ms.mean();
  });

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
  for (auto& [key, c] : comm_rows) rep.comm.push_back(c);

  for (const auto& [name, k] : job.kernels)
    rep.kernels.push_back({name, k.count, static_cast<double>(k.gpu_sum_ns) / kNsPerMs,
                           k.ranks ? k.per_step_ms_sum / static_cast<double>(k.ranks) : 0, k.ranks});
  std::stable_sort(rep.kernels.begin(), rep.kernels.end(),
                   [](const KernelView& a, const KernelView& b) { return a.gpu_ms > b.gpu_ms; });

  analyze_waits(job, rep);
  find_stragglers(rep);
  find_hangs(job, rep);
  find_rank_fates(job, rep);
  find_memory_headroom(rep);
  return rep;
}

}  // namespace traintime::report
