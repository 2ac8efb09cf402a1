// The statistics and the diagnosis of a job (docs/report.md says what each number means): the
// views (views.h), each in a file of its own, run in order over the loaded job; here, what the
// job adds up to across its ranks (the shares, the throughput, the devices) and the tables of the
// job as a whole.
#include "analysis.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "rank_fates.h"
#include "views.h"
#include "warnings_view.h"

namespace traintime::report {
namespace {

using views::ms;

bool is_simulated(const std::string& device) {
  return device.find("SIMULATED") != std::string::npos || device.find("simgpu") != std::string::npos;
}

// The job's figures summed over its ranks as each rank is read.
struct JobTotals {
  double span = 0, exposed = 0, idle = 0, comm = 0, compute = 0, busy = 0, unattributed = 0;
  double mfu_tflops = 0, mfu_peak = 0;  // over the ranks with a known peak
  double hfu_tflops = 0, hfu_peak = 0;  // over the ranks with a known HFU
  std::map<std::string, uint64_t> capture, devices, no_peak;
  views::WarningGrouper warnings;

  void add(const core::RankFile& f, Report& rep);
  void add_throughput(const core::RankFile& f, Throughput& tp);
  void finish(Report& rep);
};

void JobTotals::add(const core::RankFile& f, Report& rep) {
  const core::StepTotals& t = f.steps.totals;
  ++devices[f.device_name.empty() ? std::string("not recorded in the rank file") : f.device_name];
  if (is_simulated(f.device_name)) rep.simulated = true;
  if (f.steps.tflops > 0 && !(f.steps.mfu > 0 && f.peak_tflops > 0)) ++no_peak[f.device_name];
  span += static_cast<double>(t.gpu_busy_ns) + static_cast<double>(t.idle_ns);
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
  ++capture[std::string(core::gpu_capture_name(f.gpu_capture)) +
            (f.gpu_capture_reason.empty() ? "" : " (" + f.gpu_capture_reason + ")")];
  add_throughput(f, rep.throughput);
}

void JobTotals::add_throughput(const core::RankFile& f, Throughput& tp) {
  if (f.steps.samples_per_s > 0 || f.steps.tokens_per_s > 0) {
    ++tp.ranks_with_rates;
    tp.samples_per_s += f.steps.samples_per_s;
    tp.tokens_per_s += f.steps.tokens_per_s;
    tp.samples_per_s_rank.add(f.steps.samples_per_s, f.rank);
  }
  if (f.steps.tflops <= 0) return;
  ++tp.ranks_with_flops;
  tp.tflops += f.steps.tflops;
  tp.tflops_rank.add(f.steps.tflops, f.rank);
  if (!(f.steps.mfu > 0 && f.peak_tflops > 0)) return;
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

void JobTotals::finish(Report& rep) {
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
}

}  // namespace

namespace views {

std::vector<CategoryView> category_view(const Job& job) {
  std::vector<CategoryView> out;
  for (std::size_t i = 0; i < core::kCategoryCount; ++i) {
    const auto cat = static_cast<core::Category>(i);
    CategoryView c;
    c.name = std::string(core::category_name(cat));
    for (const RankInput& r : job.ranks)
      c.busy_ms.add(ms(r.data.categories[cat].gpu_busy_ns) / steps_of(r.data), r.data.rank);
    out.push_back(c);
  }
  return out;
}

std::vector<RegionAcross> region_view(const Job& job) {
  std::vector<RegionAcross> out;
  for (const auto& [path, ra] : job.regions) out.push_back(ra);
  std::stable_sort(out.begin(), out.end(), [](const RegionAcross& a, const RegionAcross& b) {
    if (a.gpu_busy_ms.mean() != b.gpu_busy_ms.mean()) return a.gpu_busy_ms.mean() > b.gpu_busy_ms.mean();
    return a.cpu_ms.mean() > b.cpu_ms.mean();
  });
  return out;
}

std::vector<KernelView> kernel_view(const Job& job) {
  std::vector<KernelView> out;
  for (const auto& [name, k] : job.kernels)
    out.push_back({name, k.count, static_cast<double>(k.gpu_sum_ns) / kNsPerMs,
                   k.ranks ? k.per_step_ms_sum / static_cast<double>(k.ranks) : 0, k.ranks});
  std::stable_sort(out.begin(), out.end(), [](const KernelView& a, const KernelView& b) { return a.gpu_ms > b.gpu_ms; });
  return out;
}

}  // namespace views

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

  rep.steps = views::step_view(job);
  rep.self_cost = self_cost_view(job);
  JobTotals totals;
  for (const RankInput& r : job.ranks) {
    rep.per_rank.push_back(views::rank_view(r, rep.steps.gpu));
    if (rep.per_rank.back().recompute_ms > 0) rep.has_recompute = true;
    totals.add(r.data, rep);
  }
  totals.finish(rep);
  rep.categories = views::category_view(job);
  rep.regions = views::region_view(job);
  rep.comm = views::comm_view(job);
  rep.kernels = views::kernel_view(job);

  rep.waits = views::waits_view(job);
  // The per-rank table's wait columns are the waits view's rows (both by Job::ranks index).
  for (std::size_t i = 0; i < rep.per_rank.size(); ++i) {
    const RankWaits& w = rep.waits.per_rank[i];
    RankView& v = rep.per_rank[i];
    std::tie(v.wait_ms, v.caused_ms, v.matched, v.last_arrivals) = std::tie(w.wait_ms, w.caused_ms, w.matched, w.last_arrivals);
  }
  rep.stragglers = views::stragglers_view(rep);
  rep.hangs = views::hangs_view(job);
  find_rank_fates(job, rep);
  rep.memory = views::memory_view(rep.per_rank);
  return rep;
}

}  // namespace traintime::report
