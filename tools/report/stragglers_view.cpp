// Stragglers: the ranks the others wait for, what each costs the job's step (the counterfactual
// of docs/report.md), and what its GPU health says about why.
#include "views.h"

#include <algorithm>
#include <map>

namespace traintime::report::views {
namespace {

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
  const auto join = [](const core::ClockEventReasons& r) {
    std::string out;
    for (const std::string& x : core::clock_event_reason_names(r)) out += (out.empty() ? "" : ", ") + x;
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

using Found = std::map<int64_t, Straggler>;

Straggler& entry(Found& found, const RankView& r) {
  Straggler& s = found[r.rank];
  s.rank = r.rank;
  s.host = r.host;
  s.last_arrivals = r.last_arrivals;
  s.matched = r.matched;
  return s;
}

// The ranks that arrived last at most of their collectives and cost the others at least floor_ms.
void by_waits(const Report& rep, double floor_ms, Found& found) {
  for (const RankView& r : rep.per_rank) {
    if (r.caused_ms >= floor_ms && r.last_arrivals * 2 >= r.matched && r.matched > 0) {
      Straggler& s = entry(found, r);
      s.cost_ms_per_step = r.caused_ms;
      s.cost_basis = "waits";
      s.reasons.push_back("arrived last at " + std::to_string(r.last_arrivals) + " of " +
                          std::to_string(r.matched) + " collectives lined up across ranks" +
                          (rep.gpu_data ? std::string() : " (their CPU durations on " + rep.waits.cpu_backends + ")"));
    }
  }
}

// The ranks whose GPU compute is 10% above the median while the others wait in exposed comm.
void by_compute(const Report& rep, double floor_ms, Found& found) {
  if (rep.per_rank.size() < 2) return;
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
    Straggler& s = entry(found, r);
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
void counterfactual(const Report& rep, double step_ms, Found& found, StragglersView& out) {
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
    for (const auto& [rank, s] : found) out.group.push_back(rank);
    out.group_step_ms_without = std::min(step_ms, together);
  }
}

}  // namespace

StragglersView stragglers_view(const Report& rep) {
  StragglersView out;
  out.measured = rep.gpu_data || rep.waits.cpu_collectives_matched > 0;
  const double step_ms = rep.steps.reference_ms();
  const double floor_ms = std::max(step_ms * 0.01, 0.001);  // 1% of a step, at least 1 us
  Found found;
  by_waits(rep, floor_ms, found);
  by_compute(rep, floor_ms, found);
  if (rep.steps.gpu && rep.per_rank.size() >= 2 && found.size() < rep.per_rank.size())
    counterfactual(rep, step_ms, found, out);
  for (auto& [rank, s] : found) {
    s.cost_pct = step_ms > 0 ? s.cost_ms_per_step / step_ms * 100.0 : 0;
    explain_clock(rep, s);
    out.found.push_back(s);
  }
  std::stable_sort(out.found.begin(), out.found.end(),
                   [](const Straggler& a, const Straggler& b) { return a.cost_ms_per_step > b.cost_ms_per_step; });
  return out;
}

}  // namespace traintime::report::views
