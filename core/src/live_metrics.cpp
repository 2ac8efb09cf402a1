#include "traintime/core/live_metrics.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace traintime::core {
namespace {

struct Help {
  const char* name;
  const char* help;
};

// Every name live_metrics() can produce, in its order (docs/metrics.md lists the same).
constexpr Help kHelp[] = {
    {"traintime/step", "index (0-based) of the last completed step: the CPU figures' step"},
    {"traintime/step_ms", "wall time of that step in ms"},
    {"traintime/samples_per_s", "samples of that step per second of its wall time"},
    {"traintime/tokens_per_s", "tokens of that step per second of its wall time"},
    {"traintime/tflops", "achieved model TFLOP/s of that step on this rank"},
    {"traintime/mfu", "model FLOPs utilisation: tflops / the GPU's peak (0 to 1)"},
    {"traintime/hfu", "hardware FLOPs utilisation: mfu x (1 + gpu_recompute_ms / gpu_forward_ms); only with recompute"},
    {"traintime/gpu_step", "index of the step the gpu_* figures belong to"},
    {"traintime/gpu_lag_steps", "step - gpu_step: how far the GPU figures trail"},
    {"traintime/gpu_span_ms", "GPU span of gpu_step: first start to last end of its work, per device"},
    {"traintime/gpu_busy_ms", "GPU busy time of gpu_step (union of all its work)"},
    {"traintime/gpu_compute_ms", "GPU compute time of gpu_step (forward, backward, optimizer, other, recompute)"},
    {"traintime/gpu_comm_ms", "GPU communication time of gpu_step"},
    {"traintime/gpu_exposed_comm_ms", "communication of gpu_step not hidden behind compute"},
    {"traintime/gpu_io_ms", "GPU copy and memset time of gpu_step in io regions"},
    {"traintime/gpu_idle_ms", "GPU idle time inside the span of gpu_step"},
    {"traintime/gpu_compute_pct", "gpu_compute_ms as % of gpu_span_ms"},
    {"traintime/gpu_exposed_comm_pct", "gpu_exposed_comm_ms as % of gpu_span_ms"},
    {"traintime/gpu_io_pct", "gpu_io_ms as % of gpu_span_ms"},
    {"traintime/gpu_idle_pct", "gpu_idle_ms as % of gpu_span_ms"},
    {"traintime/gpu_forward_ms", "GPU busy time of gpu_step in the forward category"},
    {"traintime/gpu_backward_ms", "GPU busy time of gpu_step in the backward category"},
    {"traintime/gpu_optimizer_ms", "GPU busy time of gpu_step in the optimizer category"},
    {"traintime/gpu_other_ms", "GPU busy time of gpu_step in the other category"},
    {"traintime/gpu_recompute_ms", "GPU busy time of gpu_step in the recompute category (part of compute)"},
    {"traintime/gpu_unattributed_ms", "GPU busy time of gpu_step launched with no region open"},
    {"traintime/gpu_memory_peak_bytes", "most device memory in use within gpu_step, all devices (CUPTI allocation records; absent before any)"},
    {"traintime/gpu_late_records", "GPU records that arrived after their step's figures were published"},
    {"traintime/health_step", "index of the step the health_* figures belong to: the newest finished step NVML sampled"},
    {"traintime/health_sm_clock_mhz", "median SM clock of health_step in MHz (NVML)"},
    {"traintime/health_power_w", "median power draw of health_step in W (NVML)"},
    {"traintime/health_temperature_c", "highest GPU temperature of health_step in degrees C (NVML)"},
    {"traintime/health_throttled", "1 when NVML reported a clock-event (throttle) reason other than gpu_idle in health_step, else 0"},
    {"traintime/self_cost_pct", "traintime's own estimated time on the application's threads since warm-up, % of those steps' wall time (self_cost.pct so far)"},
};

constexpr const char* kCategoryMetric[kCategoryCount] = {
    "traintime/gpu_forward_ms", "traintime/gpu_backward_ms", "traintime/gpu_optimizer_ms",
    nullptr /* comm: gpu_comm_ms */, nullptr /* io: gpu_io_ms */, "traintime/gpu_other_ms",
    "traintime/gpu_recompute_ms", "traintime/gpu_unattributed_ms"};

class Sink {
 public:
  Sink(LiveMetric* out, std::size_t capacity) : out_(out), cap_(capacity) {}
  void add(const char* name, double value, int32_t device = -1) {
    if (n_ < cap_) out_[n_] = LiveMetric{name, value, device};
    ++n_;
  }
  std::size_t count() const { return n_; }

 private:
  LiveMetric* out_;
  std::size_t cap_;
  std::size_t n_ = 0;
};

double ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

// HFU with the recompute share of the published GPU step; 0 without one.
double live_hfu(const LiveInput& in, double mfu) {
  if (!in.gpu_valid) return 0;
  const auto& busy = in.gpu.category_busy_ns;
  return hfu_from_mfu(mfu, busy[static_cast<std::size_t>(Category::kRecompute)],
                      busy[static_cast<std::size_t>(Category::kForward)]);
}
double pct(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

}  // namespace

double hfu_from_mfu(double mfu, uint64_t recompute_ns, uint64_t forward_ns) {
  if (!(mfu > 0) || recompute_ns == 0 || forward_ns == 0) return 0;
  return mfu * (1.0 + static_cast<double>(recompute_ns) / static_cast<double>(forward_ns));
}

double model_flops(double flops_per_step, double flops_per_token, uint64_t steps, uint64_t tokens) {
  if (flops_per_step > 0) return flops_per_step * static_cast<double>(steps);
  if (flops_per_token > 0) return flops_per_token * static_cast<double>(tokens);
  return 0;
}

std::size_t live_metrics(const LiveInput& in, LiveMetric* out, std::size_t capacity) {
  Sink s(out, capacity);
  if (in.totals.steps > 0) {
    const double secs = static_cast<double>(in.last_wall_ns) / 1e9;
    s.add("traintime/step", static_cast<double>(in.totals.steps - 1));
    s.add("traintime/step_ms", ms(in.last_wall_ns));
    s.add("traintime/samples_per_s", secs > 0 ? static_cast<double>(in.last_samples) / secs : 0);
    s.add("traintime/tokens_per_s", secs > 0 ? static_cast<double>(in.last_tokens) / secs : 0);
    const double flops = model_flops(in.flops_per_step, in.flops_per_token, 1, in.last_tokens);
    if (flops > 0 && secs > 0) {
      const double tflops = flops / secs / 1e12;
      s.add("traintime/tflops", tflops);
      if (in.peak_tflops > 0) {
        const double mfu = tflops / in.peak_tflops;
        s.add("traintime/mfu", mfu);
        if (const double hfu = live_hfu(in, mfu); hfu > 0) s.add("traintime/hfu", hfu);
      }
    }
  }
  if (in.gpu_valid) {
    const GpuStepFigures& g = in.gpu;
    s.add("traintime/gpu_step", static_cast<double>(g.step));
    if (in.totals.steps > 0 && in.totals.steps - 1 >= g.step)
      s.add("traintime/gpu_lag_steps", static_cast<double>(in.totals.steps - 1 - g.step));
    s.add("traintime/gpu_span_ms", ms(g.span_ns));
    s.add("traintime/gpu_busy_ms", ms(g.busy_ns));
    s.add("traintime/gpu_compute_ms", ms(g.compute_ns));
    s.add("traintime/gpu_comm_ms", ms(g.comm_ns));
    s.add("traintime/gpu_exposed_comm_ms", ms(g.exposed_comm_ns));
    s.add("traintime/gpu_io_ms", ms(g.io_ns));
    s.add("traintime/gpu_idle_ms", ms(g.idle_ns));
    s.add("traintime/gpu_compute_pct", pct(g.compute_ns, g.span_ns));
    s.add("traintime/gpu_exposed_comm_pct", pct(g.exposed_comm_ns, g.span_ns));
    s.add("traintime/gpu_io_pct", pct(g.io_ns, g.span_ns));
    s.add("traintime/gpu_idle_pct", pct(g.idle_ns, g.span_ns));
    for (std::size_t c = 0; c < kCategoryCount; ++c)
      if (kCategoryMetric[c]) s.add(kCategoryMetric[c], ms(g.category_busy_ns[c]));
    if (g.memory_valid) s.add("traintime/gpu_memory_peak_bytes", static_cast<double>(g.memory_peak_bytes));
    s.add("traintime/gpu_late_records", static_cast<double>(in.gpu_late_records));
  }
  if (in.health_valid) {
    const StepHealth& h = in.health;
    const int32_t d = h.cuda_device;
    s.add("traintime/health_step", static_cast<double>(in.health_step), d);
    s.add("traintime/health_sm_clock_mhz", h.sm_clock_mhz_median, d);
    s.add("traintime/health_power_w", h.power_w_median, d);
    s.add("traintime/health_temperature_c", static_cast<double>(h.temperature_c_max), d);
    s.add("traintime/health_throttled", h.clock_event_reasons.throttled() ? 1.0 : 0.0, d);
  }
  if (in.self_cost_valid) s.add("traintime/self_cost_pct", in.self_cost_pct);
  return s.count();
}

const char* live_metric_help(const char* name) {
  for (const Help& h : kHelp)
    if (std::strcmp(h.name, name) == 0) return h.help;
  return "";
}

std::vector<std::pair<std::string, std::string>> live_metric_docs() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Help& h : kHelp) out.emplace_back(h.name, h.help);
  return out;
}

std::string console_line(const StepCounters& interval, const LiveInput& now) {
  // Each piece is formatted with its own literal format (no format string is ever computed).
  char buf[192];
  std::string line;
  std::snprintf(buf, sizeof buf, "step %" PRIu64, now.totals.steps ? now.totals.steps - 1 : 0);
  line += buf;
  const double secs = static_cast<double>(interval.wall_ns) / 1e9;
  if (interval.steps > 0) {
    std::snprintf(buf, sizeof buf, " | %.1f ms/step", ms(interval.wall_ns) / static_cast<double>(interval.steps));
    line += buf;
    if (secs > 0 && interval.samples > 0) {
      std::snprintf(buf, sizeof buf, " | %.1f samples/s", static_cast<double>(interval.samples) / secs);
      line += buf;
    }
    if (secs > 0 && interval.tokens > 0) {
      std::snprintf(buf, sizeof buf, " | %.0f tokens/s", static_cast<double>(interval.tokens) / secs);
      line += buf;
    }
    const double flops =
        model_flops(now.flops_per_step, now.flops_per_token, interval.steps, interval.tokens);
    if (flops > 0 && secs > 0) {
      const double tflops = flops / secs / 1e12;
      std::snprintf(buf, sizeof buf, " | %.1f TFLOP/s", tflops);
      line += buf;
      if (now.peak_tflops > 0) {
        const double mfu = tflops / now.peak_tflops;
        const double hfu = live_hfu(now, mfu);
        if (hfu > 0)
          std::snprintf(buf, sizeof buf, " (MFU %.1f%%, HFU %.1f%%)", 100.0 * mfu, 100.0 * hfu);
        else
          std::snprintf(buf, sizeof buf, " (MFU %.1f%%)", 100.0 * mfu);
        line += buf;
      }
    }
  }
  if (now.gpu_valid) {
    const GpuStepFigures& g = now.gpu;
    std::snprintf(buf, sizeof buf,
                  " | GPU step %" PRIu64 ": compute %.1f%%, exposed comm %.1f%%, io %.1f%%, idle %.1f%%",
                  g.step, pct(g.compute_ns, g.span_ns), pct(g.exposed_comm_ns, g.span_ns),
                  pct(g.io_ns, g.span_ns), pct(g.idle_ns, g.span_ns));
    line += buf;
  }
  if (now.health_valid) {
    const StepHealth& h = now.health;
    std::snprintf(buf, sizeof buf, " | health step %" PRIu64 ": SM %.0f MHz, %.0f W, %u C%s",
                  now.health_step, h.sm_clock_mhz_median, h.power_w_median, h.temperature_c_max,
                  h.clock_event_reasons.throttled() ? ", throttled" : "");
    line += buf;
  }
  // No GPU step yet (or no GPU capture at all): the line says nothing about the GPU rather than
  // repeat "none yet" on every print of a CPU-only run.
  return line;
}

namespace {

std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string prom_name(const char* name) {
  std::string out;
  for (const char* p = name; *p; ++p) {
    const char c = *p;
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_';
    out += ok ? c : '_';
  }
  return out;
}

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

std::string prometheus_text(const LiveMetric* metrics, std::size_t n, const StepCounters& totals,
                            const PrometheusLabels& labels) {
  const std::string lbl = "{job=\"" + escape_label(labels.job) + "\",rank=\"" +
                          std::to_string(labels.rank) + "\",host=\"" + escape_label(labels.host) +
                          "\"}";
  std::string out;
  auto one = [&](const std::string& name, const char* type, const char* help, double v,
                 int32_t device = -1) {
    out += "# HELP " + name + " " + help + "\n";
    out += "# TYPE " + name + " " + type + "\n";
    out += name + lbl;
    if (device >= 0) {
      out.pop_back();  // the closing brace: the device label joins the others
      out += ",device=\"" + std::to_string(device) + "\"}";
    }
    out += " " + number(v) + "\n";
  };
  one("traintime_steps_total", "counter", "training steps completed", static_cast<double>(totals.steps));
  one("traintime_step_seconds_total", "counter", "wall time of all completed steps in seconds",
      static_cast<double>(totals.wall_ns) / 1e9);
  one("traintime_samples_total", "counter", "samples of all completed steps",
      static_cast<double>(totals.samples));
  one("traintime_tokens_total", "counter", "tokens of all completed steps",
      static_cast<double>(totals.tokens));
  for (std::size_t i = 0; i < n; ++i)
    one(prom_name(metrics[i].name), "gauge", live_metric_help(metrics[i].name), metrics[i].value,
        metrics[i].device);
  return out;
}

}  // namespace traintime::core
