// The step view: the distributions of step time and of its breakdown over (rank, step) samples
// (docs/report.md, "Step time").
#include "views.h"

#include <algorithm>
#include <atomic>
#include <thread>

namespace traintime::report::views {

namespace {

// The (rank, step) samples of each distribution, in ms (the shares in percent).
struct Samples {
  std::vector<double> wall, span, busy, compute, recompute, comm, exposed, io, idle;
  std::vector<double> exposed_pct, comm_pct, compute_pct, idle_pct;

  // The per-step rows of every rank, warm-up and partial steps skipped.
  void add_detail(const core::Steps& s) {
    for (const core::Steps::Detail& d : s.detail) {
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

  // No per-step rows: each rank's totals spread over its steps.
  void add_totals(const core::RankFile& f) {
    const core::StepTotals& t = f.steps.totals;
    const double n = steps_of(f);
    span.push_back(ms(t.gpu_busy_ns + t.idle_ns) / n);
    busy.push_back(ms(t.gpu_busy_ns) / n);
    compute.push_back(ms(t.compute_ns) / n);
    recompute.push_back(ms(f.categories[core::Category::kRecompute].gpu_busy_ns) / n);
    comm.push_back(ms(t.comm_ns) / n);
    exposed.push_back(ms(t.exposed_comm_ns) / n);
    io.push_back(ms(t.io_ns) / n);
    idle.push_back(ms(t.idle_ns) / n);
  }
};

// No per-step wall times: the ranks' own statistics (p50/p90: the median of the ranks').
Dist wall_of_rank_stats(const Job& job) {
  Dist wall;
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
    wall.n = static_cast<uint64_t>(count);
    wall.mean = total / count;
    wall.p50 = median(p50);
    wall.p90 = median(p90);
    wall.max = max;
  }
  return wall;
}

// Each distribution is a sort of up to ranks x steps values (800,000 at 16384 ranks): they are
// sorted on every core at once, each by itself, so the figures do not depend on the threads.
void sort_all(const std::vector<std::pair<Dist*, std::vector<double>*>>& todo, bool large) {
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < todo.size();) *todo[i].first = dist_of(std::move(*todo[i].second));
  };
  std::vector<std::thread> pool;
  if (large)  // a thread is worth starting
    for (unsigned t = 1; t < std::min(4u, std::thread::hardware_concurrency()); ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

}  // namespace

StepView step_view(const Job& job) {
  Samples s;
  for (const RankInput& r : job.ranks) s.add_detail(r.data.steps);
  StepView v;
  std::vector<std::pair<Dist*, std::vector<double>*>> todo;
  if (!s.wall.empty()) {
    v.wall_source = "steps.detail";
    todo.push_back({&v.wall, &s.wall});
  } else {
    v.wall_source = "wall_ns";
    v.wall = wall_of_rank_stats(job);
  }
  if (!s.busy.empty()) {
    v.component_source = "steps.detail";
  } else {
    v.component_source = "totals";
    for (const RankInput& r : job.ranks) s.add_totals(r.data);
  }
  todo.insert(todo.end(), {{&v.span, &s.span},
                           {&v.gpu_busy, &s.busy},
                           {&v.compute, &s.compute},
                           {&v.recompute, &s.recompute},
                           {&v.comm, &s.comm},
                           {&v.exposed_comm, &s.exposed},
                           {&v.io, &s.io},
                           {&v.idle, &s.idle},
                           {&v.exposed_comm_pct, &s.exposed_pct},
                           {&v.comm_pct, &s.comm_pct},
                           {&v.compute_pct, &s.compute_pct},
                           {&v.idle_pct, &s.idle_pct}});
  sort_all(todo, s.span.size() >= 100000);
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
}  // namespace traintime::report::views
