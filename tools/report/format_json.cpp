// --format json: the machine-readable job summary (docs/report.md is its contract).
#include "render.h"
#include <nlohmann/json.hpp>

namespace traintime::report {
namespace {

using nlohmann::json;

json dist(const Dist& d) { return {{"n", d.n}, {"mean", d.mean}, {"p50", d.p50}, {"p90", d.p90}, {"max", d.max}}; }

json across(const Across& a) {
  return {{"mean", a.mean()}, {"min", a.min}, {"max", a.max}, {"min_rank", a.min_rank}, {"max_rank", a.max_rank},
          {"ranks", a.n}, {"spread_pct", a.spread_pct()}};
}

json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

void add_run(const Report& r, json& out) {
  out["format"] = "traintime-report/1";
  out["dir"] = r.dir;
  out["job_id"] = r.job_id;
  out["ranks"] = r.ranks;
  out["world_size"] = r.world_size;
  out["missing_ranks"] = r.missing_ranks;
  out["files_seen"] = r.files_seen;
  out["steps"] = r.steps_max;
  out["warmup"] = r.warmup;
}

void add_steps(const Report& r, json& out) {
  json metrics = json::object();
  for (const Metric& m : headline_metrics(r)) metrics[m.name] = opt(m.value);
  out["metrics"] = metrics;

  out["step_time_ms"] = dist(r.steps.step());
  out["step_time_source"] = r.steps.gpu ? "gpu_span" : "cpu_wall";
  out["cpu_wall_ms"] = dist(r.steps.wall);
  out["cpu_wall_source"] = r.steps.wall_source;
  out["gpu_data"] = r.gpu_data;
  out["devices"] = r.devices;
  out["simulated"] = r.simulated;
  out["breakdown_source"] = r.steps.component_source;
  out["reference_step_ms"] = r.steps.reference_ms();
  out["breakdown_ms"] = {{"span", dist(r.steps.span)}, {"gpu_busy", dist(r.steps.gpu_busy)}, {"compute", dist(r.steps.compute)},
                         {"recompute", dist(r.steps.recompute)},
                         {"comm", dist(r.steps.comm)},         {"exposed_comm", dist(r.steps.exposed_comm)},
                         {"io", dist(r.steps.io)},             {"idle", dist(r.steps.idle)}};
  out["shares_pct"] = {{"exposed_comm", r.exposed_comm_pct}, {"comm", r.comm_pct}, {"compute", r.compute_pct},
                       {"idle", r.idle_pct}, {"unattributed", r.unattributed_pct}};
  out["throughput"] = {{"samples_per_s", r.throughput.samples_per_s},
                       {"tokens_per_s", r.throughput.tokens_per_s},
                       {"ranks_with_rates", r.throughput.ranks_with_rates},
                       {"tflops", r.throughput.tflops},
                       {"ranks_with_flops", r.throughput.ranks_with_flops},
                       {"mfu", r.throughput.job_mfu},
                       {"ranks_with_mfu", r.throughput.mfu_rank.n},
                       {"hfu", r.throughput.hfu_rank.n ? json(r.throughput.job_hfu) : json(nullptr)},
                       {"ranks_with_hfu", r.throughput.hfu_rank.n},
                       {"peak_sources", r.throughput.peak_sources},
                       {"summed_over", "ranks (data parallelism: each rank consumes its own samples)"}};
}

void add_tables(const Report& r, json& out) {
  json cats = json::array();
  for (const CategoryView& c : r.categories) cats.push_back({{"category", c.name}, {"gpu_busy_ms_per_step", across(c.busy_ms)}});
  out["categories"] = cats;
  json regs = json::array();
  for (const RegionAcross& ra : r.regions)
    regs.push_back({{"path", ra.path}, {"category", ra.category}, {"gpu_busy_ms_per_step", across(ra.gpu_busy_ms)},
                    {"cpu_ms_per_step", across(ra.cpu_ms)}, {"entries_per_step", across(ra.entries)}});
  out["regions"] = regs;
  json comm = json::array();
  for (const CommView& c : r.comm)
    comm.push_back({{"op", c.op}, {"comm_size", c.comm_size}, {"calls_per_step", across(c.calls)},
                    {"gpu_ms_per_step", across(c.gpu_ms)}, {"busbw_gbps_recorded", across(c.busbw_gbps)},
                    {"bytes", c.bytes}, {"calls", c.calls_total}, {"bytes_known", c.bytes_known},
                    {"backend", c.backend.empty() ? json("nccl") : json(c.backend)},
                    {"cpu_ms_per_step", c.backend.empty() ? json(nullptr) : across(c.cpu_ms)}});
  out["comm"] = comm;
  json bw = json::array();
  for (const BandwidthView& b : r.waits.bandwidth)
    bw.push_back({{"op", b.op}, {"comm_size", b.comm_size}, {"lo_bytes", b.lo_bytes}, {"collectives", b.collectives},
                  {"waitfree_busbw_gbps", b.waitfree_busbw_gbps}, {"recorded_busbw_gbps", b.recorded_busbw_gbps}});
  out["bandwidth"] = bw;
  out["collectives_matched"] = r.waits.collectives_matched;
  out["cpu_collectives_matched"] = r.waits.cpu_collectives_matched;
}

void add_per_rank(const Report& r, json& out) {
  json ranks = json::array();
  for (const RankView& v : r.per_rank)
    ranks.push_back({{"rank", v.rank},
                     {"host", v.host},
                     {"file", v.file},
                     {"state", v.state.name()},
                     {"gpu_capture", v.gpu_capture},
                     {"gpu_capture_reason", v.gpu_capture_reason},
                     {"steps", v.steps},
                     {"step_time_p50_ms", v.step_p50_ms},
                     {"cpu_wall_p50_ms", v.cpu_wall_p50_ms},
                     {"per_step_ms",
                      {{"gpu_busy", v.gpu_busy_ms},
                       {"compute", v.compute_ms},
                       {"recompute", v.recompute_ms},
                       {"comm", v.comm_ms},
                       {"exposed_comm", v.exposed_comm_ms},
                       {"io_other", v.io_other_ms},
                       {"idle", v.idle_ms},
                       {"wait", v.wait_ms},
                       {"caused_wait", v.caused_ms}}},
                     {"exposed_comm_pct", v.exposed_comm_pct},
                     {"idle_pct", v.idle_pct},
                     {"collectives_matched", v.matched},
                     {"last_arrivals", v.last_arrivals},
                     {"samples_per_s", v.samples_per_s},
                     {"tflops", v.tflops},
                     {"mfu", v.mfu},
                     {"hfu", v.hfu > 0 ? json(v.hfu) : json(nullptr)},
                     {"device", v.device},
                     {"dropped_records", v.dropped_records},
                     {"gpu_health", v.sm_clock_mhz > 0
                                        ? json{{"sm_clock_mhz", v.sm_clock_mhz},
                                               {"sm_clock_min_mhz", v.sm_clock_min_mhz},
                                               {"power_w", v.power_w},
                                               {"power_limit_w", v.power_limit_w},
                                               {"temperature_max_c", v.temperature_max_c},
                                               {"clock_event_reasons", core::clock_event_reason_names(v.clock_event_reasons)},
                                               {"memory_used_bytes", v.memory_used_bytes},
                                               {"memory_total_bytes", v.memory_total_bytes},
                                               {"mig", v.mig},
                                               {"sampled_steps", v.sampled_steps},
                                               {"throttled_steps", v.throttled_steps},
                                               {"throttle_reasons", core::clock_event_reason_names(v.throttle_reasons)}}
                                        : json(nullptr)}});
  out["per_rank"] = ranks;
}

void add_stragglers(const Report& r, json& out) {
  json st = json::array();
  for (const Straggler& s : r.stragglers.found) {
    json clock = nullptr;
    if (s.sm_clock_mhz > 0) {
      clock = {{"sm_clock_mhz", s.sm_clock_mhz},
               {"others_sm_clock_mhz", s.others_sm_clock_mhz},
               {"slower", s.clock_slower},
               {"clock_event_reasons", core::clock_event_reason_names(s.clock_event_reasons)}};
      if (s.sampled_steps > 0) {
        clock["sampled_steps"] = s.sampled_steps;
        clock["throttled_steps"] = s.throttled_steps;
        clock["throttle_reasons"] = core::clock_event_reason_names(s.throttle_reasons);
        clock["throttled_step_ms"] = s.throttled_steps > 0 ? json(s.throttled_step_ms) : json(nullptr);
        clock["other_step_ms"] = s.throttled_steps < s.sampled_steps ? json(s.other_step_ms) : json(nullptr);
      }
    }
    st.push_back({{"rank", s.rank}, {"host", s.host}, {"cost_ms_per_step", s.cost_ms_per_step},
                  {"cost_pct_of_step", s.cost_pct}, {"last_arrivals", s.last_arrivals},
                  {"collectives_matched", s.matched}, {"step_ms", r.steps.reference_ms()},
                  {"step_ms_without", s.step_ms_without > 0 ? json(s.step_ms_without) : json(nullptr)},
                  {"kind", s.kind.empty() ? json(nullptr) : json(s.kind)}, {"cost_basis", s.cost_basis}, {"reasons", s.reasons},
                  {"clock", clock}});
  }
  out["stragglers"] = st;
  out["straggler_group"] = r.stragglers.group.empty()
                               ? json(nullptr)
                               : json{{"ranks", r.stragglers.group}, {"step_ms", r.steps.reference_ms()},
                                      {"step_ms_without", r.stragglers.group_step_ms_without}};
}

void add_hangs(const Report& r, json& out) {
  out["hang_data"] = r.hangs.data;
  json hangs = json::array();
  for (const Hang& h : r.hangs.found) {
    json missing = json::array();
    for (const MissingMember& m : h.missing)
      missing.push_back({{"rank", m.rank >= 0 ? json(m.rank) : json(nullptr)}, {"comm_rank", m.comm_rank},
                         {"has_file", m.has_file}, {"last_seq", m.last_enqueued},
                         {"last_op", m.last_op}, {"doing", m.doing}});
    // Inside it, per rank, channel and peer (docs/report.md): a figure not measured is null.
    json progress = json::array();
    const auto known = [](uint64_t v) { return v == nccl::ProxyProgress::kUnknown ? json(nullptr) : json(v); };
    for (const ChannelProgress& c : h.progress.rows) {
      const nccl::ProxyProgress& p = c.row;
      progress.push_back({{"rank", c.rank}, {"channel", p.channel}, {"peer", p.peer >= 0 ? json(p.peer) : json(nullptr)},
                          {"direction", p.direction}, {"state", p.state}, {"steps_done", known(p.steps_done)},
                          {"steps_posted", known(p.steps_posted)}, {"steps_total", known(p.steps_total)},
                          {"bytes_done", known(p.bytes_done)}, {"since_ns", p.since_ns}, {"idle_ns", p.idle_ns},
                          {"source", p.source}, {"stopped_short", c.stopped_short}});
    }
    hangs.push_back({{"communicator", h.communicator}, {"comm_size", h.comm_size}, {"op", h.op}, {"seq", h.seq},
                     {"bytes", h.bytes}, {"missing_ranks", h.missing_ranks}, {"waiting_ranks", h.waiting_ranks},
                     {"missing", missing}, {"from_snapshots", h.from_snapshots}, {"all_entered", h.all_entered},
                     {"stalled_inside", h.stalled_inside},
                     {"progress", std::move(progress)}, {"progress_detail", h.progress.detail()},
                     {"stopped", stopped_line(h.progress)},
                     {"stopped_together", stopped_together(h.progress)}});
  }
  out["hangs"] = hangs;
  out["p2p_waits"] = r.hangs.p2p_waits;
}

void add_memory(const Report& r, json& out) {
  json memory = json::array();
  for (const MemoryHeadroom& m : r.memory)
    memory.push_back({{"rank", m.rank}, {"host", m.host}, {"nvml", m.nvml},
                      {"used_bytes_max", m.nvml ? json(m.used_bytes_max) : json(nullptr)},
                      {"total_bytes", m.nvml ? json(m.total_bytes) : json(nullptr)},
                      {"headroom_bytes", m.nvml ? json(m.headroom_bytes) : json(nullptr)},
                      {"headroom_pct", m.nvml ? json(m.headroom_pct) : json(nullptr)},
                      {"near_capacity", m.nvml && m.headroom_pct < kNearCapacityPct},
                      {"allocated_peak_bytes", m.allocated_known ? json(m.allocated_peak_bytes) : json(nullptr)}});
  out["memory"] = memory;
}

void add_fates(const Report& r, json& out) {
  json stopped = json::array(), running = json::array();
  for (const RankFate& fate : r.fates) {
    if (fate.running()) {
      running.push_back({{"rank", fate.rank}, {"host", fate.host}, {"steps", fate.steps},
                         {"last_step_age_s", fate.last_step_age_s ? json(*fate.last_step_age_s) : json(nullptr)}});
      continue;
    }
    stopped.push_back({{"rank", fate.rank}, {"host", fate.host}, {"state", fate.state.name()}, {"how", fate.how},
                       {"evidence", fate.evidence}, {"steps", fate.steps}, {"finished_ranks_steps", fate.others_steps}});
  }
  out["stopped_ranks"] = stopped;
  out["running_ranks"] = running;
}

void add_kernels(const Report& r, json& out) {
  json kernels = json::array();
  for (std::size_t k = 0; k < r.kernels.size() && k < 50; ++k) {
    const KernelView& kv = r.kernels[k];
    kernels.push_back({{"name", kv.name}, {"count", kv.count}, {"gpu_ms", kv.gpu_ms},
                       {"gpu_ms_per_step", kv.per_step_ms}, {"ranks", kv.ranks}});
  }
  out["top_kernels"] = kernels;
}

void add_warnings(const Report& r, json& out) {
  out["dropped_records"] = r.dropped_records;
  out["ranks_dropping_records"] = r.ranks_dropping;
  out["incomplete_gpu_records_ranks"] = r.incomplete_ranks;
  json warnings = json::array();
  auto number = [](double v) { return WarningGroup::whole(v) ? json(static_cast<int64_t>(v)) : json(v); };
  for (const WarningGroup& g : r.rank_warnings) {
    json worst = json::array();
    for (const WarningGroup::Worst& wr : g.worst) worst.push_back({{"rank", wr.rank}, {"value", number(wr.value)}});
    warnings.push_back({{"warning", g.text}, {"key", g.key.empty() ? json(nullptr) : json(g.key)}, {"ranks", g.ranks},
                        {"total", g.has_number ? number(g.total) : json(nullptr)}, {"worst", worst}});
  }
  out["rank_warnings"] = warnings;
}

void add_modules(const Report& r, json& out) {
  // What each module counted, merged typed across the ranks (docs/report.md, JSON).
  json modules = json::object();
  for (const auto& [name, counters] : r.modules) {
    json cs = json::object();
    for (const auto& [key, c] : counters)
      cs[key] = {{"sum", c.sum}, {"max", c.max}, {"max_rank", c.max_rank == -1 ? json(nullptr) : json(c.max_rank)},
                 {"ranks_nonzero", c.ranks_nonzero}};
    modules[name] = {{"counters", std::move(cs)}};
  }
  add_module_figures_json(r.module_figures, &modules);  // each module's report half
  out["modules"] = std::move(modules);
}

void add_problems(const Report& r, json& out) {
  json problems = json::array();
  for (const Problem& p : r.problems) problems.push_back({{"file", p.file}, {"problem", p.message}});
  out["problems"] = problems;
  out["aux_files"] = r.aux_files;
  out["other_jobs"] = r.other_jobs;
}

void add_compare(const Extras& x, json& out) {
  if (x.comparison) {
    const Comparison& c = *x.comparison;
    json ms = json::array();
    for (const MetricChange& m : c.metrics)
      ms.push_back({{"metric", m.name}, {"unit", unit_label(m.unit)}, {"value", opt(m.now)}, {"baseline", opt(m.base)},
                    {"change", opt(m.change)}, {"change_pct", opt(m.change_pct)}, {"spread_pct", opt(m.spread_pct)},
                    {"beyond_spread", m.beyond_spread ? json(*m.beyond_spread) : json(nullptr)}});
    auto mover = [](const std::optional<Mover>& m) {
      return m ? json{{"name", m->name}, {"ms_per_step", m->now_ms}, {"baseline_ms_per_step", m->base_ms},
                      {"measure", m->measure}}
               : json(nullptr);
    };
    out["compare"] = {{"baseline_dir", c.base_dir}, {"baseline_job_id", c.base_job},
                      {"metrics", ms}, {"moved_most_region", mover(c.region)},
                      {"moved_most_collective", mover(c.collective)}};
  }
}

void add_gate(const Extras& x, json& out) {
  if (x.verdicts) {
    json g = json::array();
    for (const Verdict& v : *x.verdicts)
      g.push_back({{"condition", v.condition.text}, {"holds", v.holds}, {"explanation", v.explanation}});
    out["gate"] = g;
  }
}

}  // namespace

json summary_json(const Report& r, const Extras& x) {
  json out;
  add_run(r, out);
  add_steps(r, out);
  add_tables(r, out);
  add_per_rank(r, out);
  out["self_cost"] = self_cost_json(r.self_cost);
  add_stragglers(r, out);
  add_hangs(r, out);
  add_memory(r, out);
  add_fates(r, out);
  add_kernels(r, out);
  add_warnings(r, out);
  add_modules(r, out);
  add_problems(r, out);
  add_compare(x, out);
  add_gate(x, out);
  return out;
}

}  // namespace traintime::report
