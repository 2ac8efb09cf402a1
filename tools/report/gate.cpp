// Headline metrics, their comparison between two runs, and the --fail-if gate over them.
#include "gate.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace traintime::report {
namespace {

struct MetricDef {
  const char* name;
  Unit unit;
  const char* what;
};

constexpr MetricDef kMetrics[] = {
    {"step_time_p50", Unit::kMs,
     "median step time over (rank, step) after warm-up, ms: the GPU step span when GPU capture worked, else the CPU wall"},
    {"step_time_p90", Unit::kMs, "90th percentile step time, ms"},
    {"step_time_mean", Unit::kMs, "mean step time, ms"},
    {"step_time_max", Unit::kMs, "longest step, ms"},
    {"exposed_comm_pct", Unit::kPct, "exposed communication, % of the GPU step span summed over ranks"},
    {"comm_pct", Unit::kPct, "all communication (overlapped or not), % of the GPU step span"},
    {"compute_pct", Unit::kPct, "compute, % of the GPU step span"},
    {"idle_pct", Unit::kPct, "GPU idle inside steps, % of the GPU step span"},
    {"unattributed_pct", Unit::kPct, "GPU work launched with no region open, % of GPU busy time"},
    {"samples_per_s", Unit::kRate, "samples/s after warm-up, summed over ranks"},
    {"tokens_per_s", Unit::kRate, "tokens/s after warm-up, summed over ranks"},
    {"tflops", Unit::kCount, "achieved model TFLOP/s after warm-up, summed over ranks"},
    {"mfu_pct", Unit::kPct, "model FLOPs utilisation: summed TFLOP/s / summed GPU peaks, %"},
    {"hfu_pct", Unit::kPct, "hardware FLOPs utilisation (MFU with recompute counted), over the ranks with recompute, %"},
    {"straggler_cost_ms", Unit::kMs,
     "ms per step the worst straggler costs the job (0 without one; cannot be judged when stragglers were not measured)"},
    {"stragglers", Unit::kCount,
     "straggler ranks (cannot be judged when they were not measured: no GPU time and no collective timed on the CPU)"},
    {"hangs", Unit::kCount, "hangs found (collectives some ranks never entered)"},
    {"missing_ranks", Unit::kCount, "ranks of 0..world_size-1 without a merged rank file"},
    {"dropped_records", Unit::kCount, "GPU activity records lost, summed over ranks"},
    {"memory_headroom_pct", Unit::kPct,
     "the least GPU memory left over the ranks at their highest use (NVML's whole-GPU view), % of the device's"},
    {"self_cost_pct", Unit::kPct,
     "traintime's own estimated cost, % of the measured steps' wall time: the highest rank's (self_cost.pct)"},
    {"bad_files", Unit::kCount, "input problems (files left out or doubtful)"},
    {"ranks", Unit::kCount, "rank files merged"},
};

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string with_unit(double v, Unit u) { return human(v, u); }

bool compare_op(double a, const std::string& op, double b) {
  if (op == ">") return a > b;
  if (op == ">=") return a >= b;
  if (op == "<") return a < b;
  if (op == "<=") return a <= b;
  if (op == "==") return a == b;
  return a != b;
}


// A module's figure (module_reports.h) as a metric of `r`: n/a when no rank file held the
// module's part or no rank measured it.
Metric module_metric(const Report& r, const std::string& name) {
  Metric m;
  m.name = name;
  if (const ModuleFigures::Row* row = find_module_figure(r.module_figures, name)) {
    m.what = row->what;
    m.value = row->value;
    m.missing_why = "no rank measured it";
  } else {
    m.missing_why = "no rank file holds its module's part";
  }
  return m;
}

// The metric `name` of `r` (its headline metrics `ms`): a module figure the gate takes whose module
// no rank file of `r` holds is n/a (module_metric).
Metric metric_of(const std::vector<Metric>& ms, const Report& r, const std::string& name) {
  for (const Metric& m : ms)
    if (m.name == name) return m;
  return module_metric(r, name);
}

std::string trim(const std::string& s) {
  std::size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

std::vector<std::string> split_conditions(const std::string& expr) {
  std::vector<std::string> parts;
  std::string cur;
  for (std::size_t i = 0; i < expr.size(); ++i) {
    if (expr[i] == ',') {
      parts.push_back(cur);
      cur.clear();
    } else if (expr.compare(i, 2, "||") == 0) {
      parts.push_back(cur);
      cur.clear();
      ++i;
    } else {
      cur += expr[i];
    }
  }
  parts.push_back(cur);
  return parts;
}

Condition parse_condition(const std::string& raw) {
  const std::string text = trim(raw);
  if (text.empty()) throw UsageError("--fail-if: empty condition (write METRIC OP VALUE, e.g. exposed_comm_pct>20)");
  Condition c;
  c.text = text;
  std::size_t i = 0;
  while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) ++i;
  c.metric = text.substr(0, i);
  const std::vector<std::string> names = metric_names();
  if (c.metric.empty() || std::find(names.begin(), names.end(), c.metric) == names.end()) {
    // The module figures a job has are in its report's module tables: listing every compiled-in
    // module's here would name figures of modules the job never used.
    std::string known;
    for (const MetricDef& d : kMetrics) known += (known.empty() ? "" : ", ") + std::string(d.name);
    throw UsageError("--fail-if \"" + text + "\": unknown metric \"" + c.metric + "\" (known: " + known +
                     ") or a module's figure, <module>_<figure>, as the report's module tables list a job's");
  }
  Unit unit = Unit::kCount;
  for (const MetricDef& d : kMetrics)
    if (c.metric == d.name) unit = d.unit;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  for (const char* op : {">=", "<=", "==", "!=", ">", "<"}) {
    if (text.compare(i, std::char_traits<char>::length(op), op) == 0) {
      c.op = op;
      i += c.op.size();
      break;
    }
  }
  if (c.op.empty())
    throw UsageError("--fail-if \"" + text + "\": expected one of > >= < <= == != after \"" + c.metric + "\"");
  std::string value = trim(text.substr(i));
  if (value.empty()) throw UsageError("--fail-if \"" + text + "\": expected a value after \"" + c.op + "\"");
  const bool signed_change = value[0] == '+' || value[0] == '-';
  const char* begin = value.c_str();
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(v))
    throw UsageError("--fail-if \"" + text + "\": \"" + value + "\" is not a number");
  const std::string suffix = trim(std::string(end));
  double scale = 1;
  if (suffix == "%") {
    if (signed_change) {
      c.against = Condition::Against::kChangePct;
    } else if (unit != Unit::kPct) {
      throw UsageError("--fail-if \"" + text + "\": \"%\" on " + c.metric +
                       " needs a sign: +N% or -N% is a change against --compare's run");
    }
  } else if (suffix == "ns" || suffix == "us" || suffix == "ms" || suffix == "s") {
    if (unit != Unit::kMs)
      throw UsageError("--fail-if \"" + text + "\": a time unit on " + c.metric + ", which is not a time");
    scale = suffix == "ns" ? 1e-6 : suffix == "us" ? 1e-3 : suffix == "ms" ? 1 : 1e3;
  } else if (!suffix.empty()) {
    throw UsageError("--fail-if \"" + text + "\": unknown unit \"" + suffix + "\" (use ns, us, ms, s or %)");
  }
  if (signed_change && c.against == Condition::Against::kValue) c.against = Condition::Against::kChange;
  c.value = v * scale;
  return c;
}

// A per-step distribution's spread: (p90 - p50) / p50, in percent; nullopt without a median.
std::optional<double> spread_of(const Dist& d) {
  if (d.n == 0 || d.p50 <= 0) return std::nullopt;
  return (d.p90 - d.p50) / d.p50 * 100;
}

// One metric's change from the baseline run's value `b` to this run's `m`.
MetricChange metric_change(const Metric& m, const Metric& b) {
  MetricChange c;
  c.name = m.name;
  c.unit = m.unit;
  c.now = m.value;
  c.base = b.value;
  if (c.now && c.base) {
    c.change = *c.now - *c.base;
    if (*c.base != 0) c.change_pct = *c.change / std::fabs(*c.base) * 100;
    if (m.spread_pct || b.spread_pct) {
      // Beyond the spread when the relative change exceeds this metric's own step-to-step
      // spread in either run.
      c.spread_pct = std::max(m.spread_pct.value_or(0), b.spread_pct.value_or(0));
      const double rel = *c.base != 0 ? std::fabs(*c.change) / std::fabs(*c.base) * 100 : (*c.change != 0 ? 1e9 : 0);
      c.beyond_spread = rel > *c.spread_pct;
    }
  }
  return c;
}

}  // namespace

std::string human_ms(double ms) {
  const double a = std::fabs(ms);
  if (a == 0) return "0 ms";
  if (a < 1e-3) return fmt("%.0f ns", ms * 1e6);
  if (a < 1) return fmt("%.1f us", ms * 1e3);
  if (a < 1e3) return fmt("%.3f ms", ms);
  return fmt("%.2f s", ms / 1e3);
}

std::string human(double v, Unit u) {
  switch (u) {
    case Unit::kMs: return human_ms(v);
    case Unit::kPct: return fmt("%.1f", v) + "%";
    case Unit::kRate: return fmt("%.1f", v) + "/s";
    case Unit::kCount: return v == std::floor(v) && std::fabs(v) < 1e15 ? fmt("%.0f", v) : num(v);
  }
  return num(v);
}

const char* unit_label(Unit u) {
  switch (u) {
    case Unit::kMs: return "ms";
    case Unit::kPct: return "%";
    case Unit::kRate: return "/s";
    case Unit::kCount: return "";
  }
  return "";
}

std::vector<std::string> metric_names() {
  std::vector<std::string> out;
  for (const MetricDef& d : kMetrics) out.push_back(d.name);
  for (std::string& n : module_figure_names()) out.push_back(std::move(n));  // <module>_<figure>
  return out;
}

std::vector<Metric> headline_metrics(const Report& r) {
  std::map<std::string, std::optional<double>> v;
  std::map<std::string, std::string> why;
  std::map<std::string, std::optional<double>> spread;
  const Dist& step = r.steps.step();
  const bool steps = step.n > 0;
  const std::string no_steps = "no step after warm-up in the rank files (the job marks steps with tt_step)";
  v["step_time_p50"] = steps ? std::optional<double>(step.p50) : std::nullopt;
  v["step_time_p90"] = steps ? std::optional<double>(step.p90) : std::nullopt;
  v["step_time_mean"] = steps ? std::optional<double>(step.mean) : std::nullopt;
  v["step_time_max"] = steps ? std::optional<double>(step.max) : std::nullopt;
  for (const char* n : {"step_time_p50", "step_time_p90", "step_time_mean", "step_time_max"}) {
    why[n] = no_steps;
    spread[n] = spread_of(step);
  }
  // Rates are the step time's inverse: its spread.
  for (const char* n : {"samples_per_s", "tokens_per_s", "tflops", "mfu_pct", "hfu_pct"}) spread[n] = spread_of(step);
  spread["exposed_comm_pct"] = spread_of(r.steps.exposed_comm_pct);
  spread["comm_pct"] = spread_of(r.steps.comm_pct);
  spread["compute_pct"] = spread_of(r.steps.compute_pct);
  spread["idle_pct"] = spread_of(r.steps.idle_pct);
  const bool gpu = r.ranks > 0 && (r.compute_pct > 0 || r.comm_pct > 0 || r.idle_pct > 0);
  const std::string no_gpu = "no GPU step time in the rank files (no GPU capture)";
  for (auto [n, x] : {std::pair<const char*, double>{"exposed_comm_pct", r.exposed_comm_pct},
                      {"comm_pct", r.comm_pct},
                      {"compute_pct", r.compute_pct},
                      {"idle_pct", r.idle_pct},
                      {"unattributed_pct", r.unattributed_pct}}) {
    v[n] = gpu ? std::optional<double>(x) : std::nullopt;
    why[n] = no_gpu;
  }
  v["samples_per_s"] = r.throughput.samples_per_s > 0 ? std::optional<double>(r.throughput.samples_per_s) : std::nullopt;
  v["tokens_per_s"] = r.throughput.tokens_per_s > 0 ? std::optional<double>(r.throughput.tokens_per_s) : std::nullopt;
  why["samples_per_s"] = "no samples in the rank files (tt_step(samples, tokens) not given)";
  why["tokens_per_s"] = "no tokens in the rank files (tt_step(samples, tokens) not given)";
  v["tflops"] = r.throughput.ranks_with_flops ? std::optional<double>(r.throughput.tflops) : std::nullopt;
  why["tflops"] = "no model FLOPs in the rank files (tt_set_flops or TRAINTIME_FLOPS_PER_TOKEN not given)";
  v["mfu_pct"] = r.throughput.mfu_rank.n ? std::optional<double>(100 * r.throughput.job_mfu) : std::nullopt;
  why["mfu_pct"] = "no MFU in the rank files (model FLOPs and the GPU's peak are both needed)";
  v["hfu_pct"] = r.throughput.hfu_rank.n ? std::optional<double>(100 * r.throughput.job_hfu) : std::nullopt;
  why["hfu_pct"] = "no HFU in the rank files (it needs MFU and recompute: activation checkpointing)";
  if (r.stragglers.measured) {
    v["straggler_cost_ms"] = r.stragglers.found.empty() ? 0.0 : r.stragglers.found.front().cost_ms_per_step;
    v["stragglers"] = static_cast<double>(r.stragglers.found.size());
  }
  for (const char* n : {"straggler_cost_ms", "stragglers"})
    why[n] = "stragglers were not measured: no rank has GPU time or a collective timed on the CPU (gloo, MPI), "
             "and they are found from the durations of collectives and of GPU compute";
  v["hangs"] = static_cast<double>(r.hangs.found.size());
  v["missing_ranks"] = static_cast<double>(r.missing_ranks.size());
  v["dropped_records"] = static_cast<double>(r.dropped_records);
  v["bad_files"] = static_cast<double>(r.problems.size());
  v["memory_headroom_pct"] = r.memory.empty() || !r.memory.front().nvml
                                 ? std::nullopt : std::optional<double>(r.memory.front().headroom_pct);
  why["memory_headroom_pct"] = "no GPU memory figures in the rank files (gpu_health: NVML sampled while GPU capture ran)";
  v["self_cost_pct"] = r.self_cost.has_pct ? std::optional<double>(r.self_cost.max_pct) : std::nullopt;
  why["self_cost_pct"] = "no self_cost.pct in the rank files (an older traintime, or no step after warm-up)";
  v["ranks"] = static_cast<double>(r.ranks);
  std::vector<Metric> out;
  for (const MetricDef& d : kMetrics) out.push_back({d.name, d.unit, d.what, v[d.name], why[d.name], spread[d.name]});
  // Each module's report half: the figures of the modules whose data a rank file of the job holds.
  for (const ModuleFigures& mf : r.module_figures)
    for (const ModuleFigures::Row& row : mf.rows) out.push_back(module_metric(r, module_figure_name(mf.module, row.key)));
  return out;
}

std::vector<Condition> parse_fail_if(const std::string& expr) {
  std::vector<Condition> out;
  for (const std::string& part : split_conditions(expr)) out.push_back(parse_condition(part));
  return out;
}

std::vector<Verdict> evaluate(const std::vector<Condition>& conditions, const Report& now, const Report* base) {
  const std::vector<Metric> mn = headline_metrics(now);
  const std::vector<Metric> mb = base ? headline_metrics(*base) : std::vector<Metric>{};
  std::vector<Verdict> out;
  for (const Condition& c : conditions) {
    Verdict v{c, false, ""};
    const Metric now_m = metric_of(mn, now, c.metric);
    const Metric* m = &now_m;
    if (c.against != Condition::Against::kValue && base == nullptr)
      throw UsageError("--fail-if \"" + c.text + "\": a signed value is a change against another run; give --compare DIR");
    // A gate never passes on missing data: a condition that cannot be judged counts as holding.
    if (!m->value) {
      v.holds = true;
      v.explanation = c.text + ": cannot be judged, " + m->missing_why + "; counted as holding";
      out.push_back(v);
      continue;
    }
    if (c.against == Condition::Against::kValue) {
      v.holds = compare_op(*m->value, c.op, c.value);
      v.explanation = c.metric + " = " + with_unit(*m->value, m->unit) + (v.holds ? " " : ", not ") + c.op + " " +
                      with_unit(c.value, m->unit);
    } else {
      const Metric base_m = metric_of(mb, *base, c.metric);
      const Metric* b = &base_m;
      if (!b->value) {
        v.holds = true;
        v.explanation = c.text + ": cannot be judged, the --compare run has " + b->missing_why + "; counted as holding";
        out.push_back(v);
        continue;
      }
      const double change = *m->value - *b->value;
      if (c.against == Condition::Against::kChange) {
        v.holds = compare_op(change, c.op, c.value);
        v.explanation = c.metric + " changed by " + (change >= 0 ? "+" : "") + with_unit(change, m->unit) + " (" +
                        with_unit(*b->value, m->unit) + " -> " + with_unit(*m->value, m->unit) + ")" +
                        (v.holds ? " " : ", not ") + c.op + " " + (c.value >= 0 ? "+" : "") + with_unit(c.value, m->unit);
      } else if (*b->value == 0) {
        v.holds = true;
        v.explanation = c.text + ": cannot be judged, the --compare run's " + c.metric + " is 0; counted as holding";
      } else {
        const double pct = change / std::fabs(*b->value) * 100;
        v.holds = compare_op(pct, c.op, c.value);
        v.explanation = c.metric + " changed by " + (pct >= 0 ? "+" : "") + fmt("%.1f", pct) + "% (" + with_unit(*b->value, m->unit) +
                        " -> " + with_unit(*m->value, m->unit) + ")" + (v.holds ? " " : ", not ") + c.op + " " +
                        (c.value >= 0 ? "+" : "") + num(c.value) + "%";
      }
    }
    out.push_back(v);
  }
  return out;
}

Comparison compare(const Report& now, const Report& base) {
  Comparison cmp;
  cmp.base_dir = base.dir;
  cmp.base_job = base.job_id;
  const std::vector<Metric> mn = headline_metrics(now), mb = headline_metrics(base);
  // Every metric of either run, by name: a module figure only one run has is n/a in the other.
  for (const Metric& m : mn) cmp.metrics.push_back(metric_change(m, metric_of(mb, base, m.name)));
  for (const Metric& b : mb)
    if (std::none_of(mn.begin(), mn.end(), [&](const Metric& m) { return m.name == b.name; }))
      cmp.metrics.push_back(metric_change(metric_of(mn, now, b.name), b));
  // The region and the collective whose per-step time (mean over ranks) moved most.
  std::map<std::string, const RegionAcross*> base_regions;
  for (const RegionAcross& r : base.regions) base_regions[r.path] = &r;
  double best = 0;
  for (const RegionAcross& r : now.regions) {
    const auto it = base_regions.find(r.path);
    const double gpu_b = it == base_regions.end() ? 0 : it->second->gpu_busy_ms.mean();
    const double cpu_b = it == base_regions.end() ? 0 : it->second->cpu_ms.mean();
    const bool gpu = r.gpu_busy_ms.mean() > 0 || gpu_b > 0;
    const double a = gpu ? r.gpu_busy_ms.mean() : r.cpu_ms.mean(), b = gpu ? gpu_b : cpu_b;
    if (std::fabs(a - b) > best) {
      best = std::fabs(a - b);
      cmp.region = Mover{r.path, a, b, gpu ? "GPU busy" : "CPU wall"};
    }
  }
  // A region only the baseline has went from its time to nothing.
  std::map<std::string, const RegionAcross*> now_regions;
  for (const RegionAcross& r : now.regions) now_regions[r.path] = &r;
  for (const RegionAcross& r : base.regions) {
    if (now_regions.count(r.path)) continue;
    const bool gpu = r.gpu_busy_ms.mean() > 0;
    const double b = gpu ? r.gpu_busy_ms.mean() : r.cpu_ms.mean();
    if (b > best) {
      best = b;
      cmp.region = Mover{r.path, 0, b, gpu ? "GPU busy" : "CPU wall"};
    }
  }
  best = 0;
  for (const CommView& c : now.comm) {
    if (!c.backend.empty()) continue;  // collectives timed on the CPU have no GPU time to compare
    double b = 0;
    for (const CommView& o : base.comm)
      if (o.op == c.op && o.comm_size == c.comm_size && o.backend.empty()) b = o.gpu_ms.mean();
    if (std::fabs(c.gpu_ms.mean() - b) > best) {
      best = std::fabs(c.gpu_ms.mean() - b);
      cmp.collective = Mover{c.op + " on " + std::to_string(c.comm_size) + " ranks", c.gpu_ms.mean(), b, "GPU time"};
    }
  }
  return cmp;
}

}  // namespace traintime::report
