// Headline metrics, `--compare` (this run against a baseline) and `--fail-if` (the CI gate);
// the grammar is in docs/report.md.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis.h"

namespace traintime::report {

enum class Unit { kMs, kPct, kRate, kCount };

struct Metric {
  std::string name;  // as written in --fail-if
  Unit unit = Unit::kCount;
  std::string what;  // one line for the docs and --help
  std::optional<double> value;  // nullopt: the rank files do not have what it needs
  std::string missing_why;      // when value is nullopt
  // The metric's own step-to-step spread, (p90 - p50) / p50 of its per-step values, in percent;
  // rates use the step time's. nullopt: no per-step values (counts, totals).
  std::optional<double> spread_pct;
};

// The built-in metrics, then the figures of each module whose data a rank file of `r` holds.
std::vector<Metric> headline_metrics(const Report& r);
// The metric names --fail-if accepts: the built-in ones, then every compiled-in module's figures
// (one a job lacks cannot be judged).
std::vector<std::string> metric_names();
const char* unit_label(Unit u);

// A malformed --fail-if expression: the message says what was expected where.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Condition {
  std::string text;    // the condition as written
  std::string metric;
  std::string op;      // > >= < <= == !=
  double value = 0;    // in the metric's unit (ms for times, percent for percentages)
  enum class Against { kValue, kChange, kChangePct } against = Against::kValue;
};

// Throws UsageError naming the bad part of EXPR.
std::vector<Condition> parse_fail_if(const std::string& expr);

struct Verdict {
  Condition condition;
  bool holds = false;
  std::string explanation;  // "step_time_p50 = 12.3 ms > 10 ms", or why it could not be judged
};

// A value as people read it: counts as integers, percentages with one decimal, times in the
// unit their size calls for (ns, us, ms, s), rates with one decimal.
std::string human(double v, Unit u);
// A time given in ms, in the unit its size calls for: "65.2 us", "3.32 ms", "1.25 s".
std::string human_ms(double ms);

// base may be null; a condition on a change then throws UsageError (it needs --compare).
std::vector<Verdict> evaluate(const std::vector<Condition>& conditions, const Report& now, const Report* base);

struct MetricChange {
  std::string name;
  Unit unit = Unit::kCount;
  std::optional<double> now, base;
  std::optional<double> change, change_pct;
  // The larger of the two runs' spread of this metric (Metric::spread_pct).
  std::optional<double> spread_pct;
  // |change| larger than that spread; nullopt when the metric has no spread (counts).
  std::optional<bool> beyond_spread;
};

struct Mover {  // the region or collective whose per-step time changed most
  std::string name;
  double now_ms = 0, base_ms = 0;
  std::string measure;  // "GPU busy", "CPU wall", "GPU time"
};

struct Comparison {
  std::string base_dir, base_job;
  std::vector<MetricChange> metrics;
  std::optional<Mover> region, collective;
};

Comparison compare(const Report& now, const Report& base);

}  // namespace traintime::report
