// --format html: one self-contained page (no network): the diagnosis, inline SVG charts with
// axes, units and legends, and every table. Every string from the data goes through escape().
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "render.h"

namespace traintime::report {
namespace {

std::string escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v, const char* f = "%.3g") {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// A round axis maximum and step (1, 2 or 5 times a power of ten) for about five ticks.
std::pair<double, double> axis(double max) {
  if (!(max > 0)) return {1, 0.2};
  const double raw = max / 5;
  const double p = std::pow(10, std::floor(std::log10(raw)));
  double step = p;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) {
      step = m * p;
      break;
    }
  return {std::ceil(max / step) * step, step};
}

constexpr int kW = 960, kH = 340, kLeft = 72, kRight = 190, kTop = 34, kBottom = 56;
constexpr int kPlotW = kW - kLeft - kRight, kPlotH = kH - kTop - kBottom;
// A signature cell (a kernel's name) shows at most this many characters before it is unfolded.
constexpr std::size_t kSignatureWidth = 90;

struct Series {
  std::string name, color;
  std::vector<double> values;
};

std::string frame(const std::string& id, const std::string& title, const std::string& x_title,
                  const std::string& y_title, double ymax, double ystep) {
  std::string s = "<figure id=\"" + id + "\"><svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                  std::to_string(kW) + "\" height=\"" + std::to_string(kH) + "\" viewBox=\"0 0 " + std::to_string(kW) +
                  " " + std::to_string(kH) + "\" role=\"img\" aria-label=\"" + escape(title) + "\">";
  s += "<text x=\"" + std::to_string(kLeft) + "\" y=\"20\" class=\"title\">" + escape(title) + "</text>";
  for (double t = 0; t <= ymax * 1.0000001; t += ystep) {
    const double y = kTop + kPlotH - t / ymax * kPlotH;
    s += "<line x1=\"" + std::to_string(kLeft) + "\" x2=\"" + std::to_string(kLeft + kPlotW) + "\" y1=\"" + num(y, "%.1f") +
         "\" y2=\"" + num(y, "%.1f") + "\" class=\"grid\"/>";
    s += "<text x=\"" + std::to_string(kLeft - 6) + "\" y=\"" + num(y + 4, "%.1f") + "\" class=\"tick\" text-anchor=\"end\">" +
         num(t, "%g") + "</text>";
  }
  s += "<line x1=\"" + std::to_string(kLeft) + "\" x2=\"" + std::to_string(kLeft) + "\" y1=\"" + std::to_string(kTop) +
       "\" y2=\"" + std::to_string(kTop + kPlotH) + "\" class=\"axis\"/>";
  s += "<line x1=\"" + std::to_string(kLeft) + "\" x2=\"" + std::to_string(kLeft + kPlotW) + "\" y1=\"" +
       std::to_string(kTop + kPlotH) + "\" y2=\"" + std::to_string(kTop + kPlotH) + "\" class=\"axis\"/>";
  s += "<text x=\"" + std::to_string(kLeft + kPlotW / 2) + "\" y=\"" + std::to_string(kH - 8) +
       "\" text-anchor=\"middle\" class=\"label\">" + escape(x_title) + "</text>";
  s += "<text transform=\"translate(16 " + std::to_string(kTop + kPlotH / 2) +
       ") rotate(-90)\" text-anchor=\"middle\" class=\"label\">" + escape(y_title) + "</text>";
  return s;
}

// A legend entry: its name, its colour, and how its series is drawn: a filled square (bars), or
// a line sample, solid or dashed, as the series' own line is.
struct Key {
  std::string name, color;
  enum class Mark { kBox, kLine, kDashed } mark = Mark::kBox;
};

std::string legend(const std::vector<Key>& items) {
  std::string s = "<g class=\"legend\">";
  int y = kTop + 4;
  for (const Key& k : items) {
    const std::string& name = k.name;
    const std::string x = std::to_string(kLeft + kPlotW + 16);
    if (k.mark == Key::Mark::kBox)
      s += "<rect x=\"" + x + "\" y=\"" + std::to_string(y) + "\" width=\"12\" height=\"12\" fill=\"" + k.color + "\"/>";
    else
      s += "<line x1=\"" + x + "\" x2=\"" + std::to_string(kLeft + kPlotW + 30) + "\" y1=\"" + std::to_string(y + 6) +
           "\" y2=\"" + std::to_string(y + 6) + "\" stroke=\"" + k.color + "\" stroke-width=\"2\"" +
           (k.mark == Key::Mark::kDashed ? " stroke-dasharray=\"5 3\"" : "") + "/>";
    s += "<text x=\"" + std::to_string(kLeft + kPlotW + 34) + "\" y=\"" + std::to_string(y + 10) + "\" class=\"tick\">" +
         escape(name) + "</text>";
    y += 18;
  }
  return s + "</g>";
}

std::string empty_chart(const std::string& id, const std::string& title, const std::string& why) {
  return frame(id, title, "", "", 1, 1) + "<text x=\"" + std::to_string(kLeft + 20) + "\" y=\"" +
         std::to_string(kTop + kPlotH / 2) + "\" class=\"label\">" + escape(why) + "</text></svg></figure>";
}

// Bars per x label, the series stacked or side by side.
std::string bar_chart(const std::string& id, const std::string& title, const std::vector<std::string>& labels,
                      const std::vector<Series>& series, bool stacked, const std::string& x_title,
                      const std::string& y_title) {
  double max = 0;
  for (std::size_t k = 0; k < labels.size(); ++k) {
    double sum = 0;
    for (const Series& s : series) {
      sum = stacked ? sum + s.values[k] : std::max(sum, s.values[k]);
    }
    max = std::max(max, sum);
  }
  const auto [ymax, ystep] = axis(max);
  std::string s = frame(id, title, x_title, y_title, ymax, ystep);
  const double slot = static_cast<double>(kPlotW) / static_cast<double>(std::max<std::size_t>(labels.size(), 1));
  const std::size_t label_every = std::max<std::size_t>(1, labels.size() / 24);
  for (std::size_t k = 0; k < labels.size(); ++k) {
    const double x0 = kLeft + slot * static_cast<double>(k) + slot * 0.1;
    const double bw = slot * 0.8;
    double base = 0;
    for (std::size_t si = 0; si < series.size(); ++si) {
      const double v = series[si].values[k];
      const double h = v / ymax * kPlotH;
      const double w = stacked ? bw : bw / static_cast<double>(series.size());
      const double x = stacked ? x0 : x0 + w * static_cast<double>(si);
      const double y = kTop + kPlotH - (stacked ? base + h : h);
      s += "<rect x=\"" + num(x, "%.2f") + "\" y=\"" + num(y, "%.2f") + "\" width=\"" + num(std::max(w, 0.5), "%.2f") +
           "\" height=\"" + num(h, "%.2f") + "\" fill=\"" + series[si].color + "\" class=\"data\"><title>" +
           escape(labels[k] + " " + series[si].name + ": " + num(v, "%.4g") + " " + y_title) + "</title></rect>";
      if (stacked) base += h;
    }
    if (k % label_every == 0)
      s += "<text x=\"" + num(x0 + bw / 2, "%.1f") + "\" y=\"" + std::to_string(kTop + kPlotH + 16) +
           "\" text-anchor=\"middle\" class=\"tick\">" + escape(labels[k]) + "</text>";
  }
  std::vector<Key> items;
  for (const Series& se : series) items.push_back({se.name, se.color});
  return s + legend(items) + "</svg></figure>";
}

struct Line {
  std::string name, color;
  std::vector<std::pair<double, double>> points;
  bool dashed = false;
};

std::string line_chart(const std::string& id, const std::string& title, const std::vector<Line>& lines,
                       const std::string& x_title, const std::string& y_title) {
  double xmin = 1e300, xmax = -1e300, ymaxv = 0;
  for (const Line& l : lines)
    for (const auto& [x, y] : l.points) {
      xmin = std::min(xmin, x);
      xmax = std::max(xmax, x);
      ymaxv = std::max(ymaxv, y);
    }
  const auto [ymax, ystep] = axis(ymaxv);
  std::string s = frame(id, title, x_title, y_title, ymax, ystep);
  const double span = xmax > xmin ? xmax - xmin : 1;
  auto px = [&](double x) { return kLeft + (x - xmin) / span * kPlotW; };
  // x is a step index: whole-number ticks, about five of them.
  const double xstep = std::max(1.0, axis(span).second);
  for (double xv = std::ceil(xmin / xstep) * xstep; xv <= xmax + 1e-9; xv += xstep)
    s += "<text x=\"" + num(px(xv), "%.1f") + "\" y=\"" + std::to_string(kTop + kPlotH + 16) +
         "\" text-anchor=\"middle\" class=\"tick\">" + num(xv, "%.0f") + "</text>";
  for (const Line& l : lines) {
    std::string pts;
    for (const auto& [x, y] : l.points) pts += num(px(x), "%.1f") + "," + num(kTop + kPlotH - y / ymax * kPlotH, "%.1f") + " ";
    s += "<polyline class=\"data\" fill=\"none\" stroke=\"" + l.color + "\" stroke-width=\"1.5\"" +
         (l.dashed ? " stroke-dasharray=\"5 3\"" : "") + " points=\"" + pts + "\"><title>" +
         escape(l.name) + "</title></polyline>";
  }
  std::vector<Key> items;
  for (const Line& l : lines) items.push_back({l.name, l.color, l.dashed ? Key::Mark::kDashed : Key::Mark::kLine});
  return s + legend(items) + "</svg></figure>";
}

const char* kPalette[] = {"#4e79a7", "#e15759", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2",
                          "#edc948", "#ff9da7", "#9c755f", "#bab0ac", "#1f77b4", "#d62728",
                          "#2ca02c", "#9467bd", "#8c564b", "#17becf"};

// A job without GPU time: per rank, its top-level regions' CPU wall time per step, stacked (the
// 8 largest over the job by name, the rest as "other regions"). They nest the others and do not
// overlap on one thread, so they stack. Comm regions are left out: a collective's completes on
// another thread while the step's thread waits in backward, so it would be counted twice (the
// waits chart has them).
std::string cpu_region_chart(const Report& r, const std::vector<std::string>& labels) {
  std::map<std::string, std::string> category;
  for (const RegionAcross& ra : r.regions) category[ra.path] = ra.category;
  std::map<std::string, double> total;
  for (const RankView& v : r.per_rank)
    for (const auto& [path, ms] : v.top_cpu_ms)
      if (category[path] != "comm") total[path] += ms;
  std::vector<std::pair<double, std::string>> order;
  for (const auto& [path, ms] : total) order.emplace_back(ms, path);
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  constexpr std::size_t kShown = 8;
  std::vector<Series> series;
  std::map<std::string, std::size_t> index;
  for (std::size_t k = 0; k < order.size() && k < kShown; ++k) {
    index[order[k].second] = series.size();
    series.push_back({order[k].second, kPalette[k], {}});
  }
  if (series.empty())
    return empty_chart("chart-breakdown", "CPU time per step by rank and region", "no region with CPU time in the rank files");
  const bool other = order.size() > kShown;
  if (other) series.push_back({"other regions", "#bab0ac", {}});
  for (Series& s : series) s.values.assign(r.per_rank.size(), 0.0);
  for (std::size_t k = 0; k < r.per_rank.size(); ++k)
    for (const auto& [path, ms] : r.per_rank[k].top_cpu_ms) {
      if (category[path] == "comm") continue;
      const auto it = index.find(path);
      series[it != index.end() ? it->second : series.size() - 1].values[k] += ms;
    }
  return bar_chart("chart-breakdown", "CPU time per step by rank: its top-level regions, comm left out (CPU wall)",
                   labels, series, true, "rank", "ms per step");
}

// Who waits in collectives and who makes the others wait, per rank.
std::string waits_chart(const Report& r, const std::vector<std::string>& labels) {
  std::vector<Series> s{{"waited for others", "#76b7b2", {}}, {"made the job wait", "#e15759", {}}};
  for (const RankView& v : r.per_rank) {
    s[0].values.push_back(v.wait_ms);
    s[1].values.push_back(v.caused_ms);
  }
  return bar_chart("chart-waits", "Stragglers: collective wait per rank", labels, s, false, "rank", "ms per step");
}

// --compare: each headline metric both runs measured, this run against the baseline's 100.
std::string compare_chart(const Comparison& c) {
  std::vector<std::string> labels;
  std::vector<Series> s{{"baseline", "#bab0ac", {}}, {"this run", "#4e79a7", {}}};
  for (const MetricChange& m : c.metrics) {
    if (!m.now || !m.base || *m.base <= 0 || *m.now < 0) continue;
    labels.push_back(m.name);
    s[0].values.push_back(100.0);
    s[1].values.push_back(*m.now / *m.base * 100.0);
  }
  if (labels.empty())
    return empty_chart("chart-compare", "This run against the baseline", "no metric measured in both runs");
  return bar_chart("chart-compare", "This run against the baseline (each metric's baseline = 100)", labels, s, false,
                   "metric", "% of the baseline");
}

// 1. Per-rank breakdown of a step (GPU time).
std::string breakdown_chart(const Report& r, const std::vector<std::string>& labels) {
  // With activation checkpointing, recompute is its own series, taken out of compute.
  const bool rc = r.has_recompute;
  std::vector<Series> s{{rc ? "compute without recompute" : "compute", "#4e79a7", {}}, {"exposed comm", "#e15759", {}},
                        {"io + other", "#f28e2b", {}}, {"idle", "#bab0ac", {}}};
  if (rc) s.insert(s.begin() + 1, Series{"recompute", "#9c755f", {}});
  for (const RankView& v : r.per_rank) {
    std::size_t k = 0;
    s[k++].values.push_back(rc ? std::max(0.0, v.compute_ms - v.recompute_ms) : v.compute_ms);
    if (rc) s[k++].values.push_back(v.recompute_ms);
    s[k++].values.push_back(v.exposed_comm_ms);
    s[k++].values.push_back(v.io_other_ms);
    s[k++].values.push_back(v.idle_ms);
  }
  return bar_chart("chart-breakdown",
                   std::string("GPU time per step by rank: compute, ") + (rc ? "recompute, " : "") + "exposed comm, io, idle",
                   labels, s, true, "rank", "ms per step");
}

// 2. Step time over the run, for at most 16 ranks: the stragglers first, then spread over the ranks.
// On a GPU run each rank's GPU step span (solid), and beside it its CPU wall time per step
// (dashed, the same colour) when the rank files carry one, for at most 8 ranks.
std::string steps_chart(const Report& r) {
  bool with_wall = false;
  if (r.steps.gpu)
    for (const RankView& v : r.per_rank) with_wall = with_wall || !v.cpu_wall_ms.empty();
  const std::size_t most = with_wall ? 8 : 16;
  std::vector<const RankView*> pick;
  for (const Straggler& st : r.stragglers.found)
    for (const RankView& v : r.per_rank)
      if (v.rank == st.rank && pick.size() < most) pick.push_back(&v);
  const std::size_t n = r.per_rank.size();
  for (std::size_t k = 0; k < n && pick.size() < most; k += std::max<std::size_t>(1, n / most))
    if (std::find(pick.begin(), pick.end(), &r.per_rank[k]) == pick.end()) pick.push_back(&r.per_rank[k]);
  std::vector<Line> lines;
  for (std::size_t k = 0; k < pick.size(); ++k) {
    const std::string rank = "rank " + std::to_string(pick[k]->rank);
    Line l{with_wall ? rank + " GPU span" : rank, kPalette[k % 16], {}};
    for (const auto& [idx, ms] : pick[k]->step_ms) l.points.emplace_back(static_cast<double>(idx), ms);
    if (!l.points.empty()) lines.push_back(l);
    if (!with_wall) continue;
    Line w{rank + " CPU wall", kPalette[k % 16], {}, true};
    for (const auto& [idx, ms] : pick[k]->cpu_wall_ms) w.points.emplace_back(static_cast<double>(idx), ms);
    if (!w.points.empty()) lines.push_back(w);
  }
  const std::string title = "Step time over the run" + std::string(n > pick.size() ? " (" + std::to_string(pick.size()) +
                                                                                          " of " + std::to_string(n) + " ranks)"
                                                                                    : "");
  return lines.empty() ? empty_chart("chart-steps", title, "no per-step rows (steps.detail) in the rank files")
                       : line_chart("chart-steps", title, lines, "step",
                                    with_wall ? std::string("step time, ms (GPU step span; CPU wall dashed)")
                                              : std::string("step time, ms (") + r.steps.step_source() + ")");
}

// 3. Bus bandwidth by op and message size.
std::string bandwidth_chart(const Report& r) {
  std::vector<std::string> bl;
  std::vector<Series> s{{"wait-free", "#59a14f", {}}, {"recorded (incl. waiting)", "#bab0ac", {}}};
  for (const BandwidthView& b : r.waits.bandwidth) {
    const double lo = static_cast<double>(b.lo_bytes);
    const std::string size = lo >= 1 << 20 ? num(lo / (1 << 20), "%g") + " MiB"
                             : lo >= 1 << 10 ? num(lo / (1 << 10), "%g") + " KiB" : num(lo, "%g") + " B";
    bl.push_back(b.op + " " + size);
    s[0].values.push_back(b.waitfree_busbw_gbps);
    s[1].values.push_back(b.recorded_busbw_gbps);
  }
  return bl.empty() ? empty_chart("chart-bandwidth", "Bus bandwidth by op and message size",
                                  "no collective lined up across ranks (one rank, or no communicators[].recent)")
                    : bar_chart("chart-bandwidth", "Bus bandwidth by op and message size (messages from the size shown)",
                                bl, s, false, "op and message size", "busbw, GB/s (1e9 B/s)");
}

// 5-6. GPU health (gpu_health), only when some rank sampled it: clocks and NVML's memory, with
// CUPTI's peak allocated beside it (or alone, when only CUPTI's memory records are there).
std::string health_charts(const Report& r, const std::vector<std::string>& labels) {
  std::string out;
  bool health = false, allocated = false;
  for (const RankView& v : r.per_rank) {
    health = health || v.sm_clock_mhz > 0;
    allocated = allocated || v.allocated_known;
  }
  if (health) {
    std::vector<Series> clocks{{"SM clock median", "#4e79a7", {}}, {"SM clock min", "#e15759", {}}};
    for (const RankView& v : r.per_rank) {
      clocks[0].values.push_back(v.sm_clock_mhz);
      clocks[1].values.push_back(v.sm_clock_min_mhz);
    }
    out += bar_chart("chart-clocks", "GPU health: SM clock per rank (NVML, over the run)", labels, clocks, false,
                     "rank", "MHz");
  }
  if (health || allocated) {
    std::vector<Series> memory;
    if (health) memory = {{"used (NVML, whole GPU)", "#f28e2b", {}}, {"total", "#bab0ac", {}}};
    if (allocated) memory.push_back({"peak allocated (CUPTI)", "#59a14f", {}});
    for (const RankView& v : r.per_rank) {
      std::size_t k = 0;
      if (health) {
        memory[k++].values.push_back(static_cast<double>(v.memory_used_bytes) / (1ull << 30));
        memory[k++].values.push_back(static_cast<double>(v.memory_total_bytes) / (1ull << 30));
      }
      if (allocated) memory[k].values.push_back(static_cast<double>(v.allocated_peak_bytes) / (1ull << 30));
    }
    out += bar_chart("chart-memory", health ? "GPU memory per rank (NVML's highest used, whole GPU; CUPTI's peak allocated)"
                                            : "GPU memory per rank (CUPTI's peak allocated)",
                     labels, memory, false, "rank", "GiB");
  }
  return out;
}

std::string charts(const Report& r) {
  std::string out;
  std::vector<std::string> labels;
  for (const RankView& v : r.per_rank) labels.push_back(std::to_string(v.rank));
  if (!r.gpu_data) {
    out += "<p class=\"note\">No GPU time on any rank: the charts of GPU time (bus bandwidth, GPU breakdown) are "
           "left out; the step's CPU time is shown per rank by its top-level regions, and the step time is CPU "
           "wall time.</p>";
    out += cpu_region_chart(r, labels);
  } else {
    out += breakdown_chart(r, labels);
  }
  out += steps_chart(r);
  if (!r.gpu_data) {
    // Collectives timed on the CPU (gloo, MPI) still tell who waited for whom.
    if (r.waits.cpu_collectives_matched > 0) out += waits_chart(r, labels);
    return out;
  }
  out += bandwidth_chart(r);
  out += waits_chart(r, labels);  // 4. Who waits and who makes the others wait.
  out += health_charts(r, labels);
  return out;
}

std::string table_html(const Table& t) {
  std::string s = "<section id=\"table-" + escape(t.id) + "\"><h2>" + escape(t.title) + "</h2>";
  if (t.rows.empty())
    return s + "<p>(none)</p>" + (t.note.empty() ? "" : "<p class=\"note\">" + escape(t.note) + "</p>") + "</section>";
  s += "<table><thead><tr>";
  for (std::size_t c = 0; c < t.headers.size(); ++c)
    s += std::string("<th") + (t.numeric[c] ? " class=\"n\"" : "") + ">" + escape(t.headers[c]) + "</th>";
  s += "</tr></thead><tbody>";
  std::vector<std::string> signatures;
  if (t.signature_column < t.headers.size()) {
    for (const auto& row : t.rows) signatures.push_back(row[t.signature_column]);
    signatures = short_signatures(signatures, kSignatureWidth);
  }
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    const auto& row = t.rows[r];
    s += "<tr>";
    for (std::size_t c = 0; c < row.size(); ++c) {
      s += std::string("<td") + (t.numeric[c] ? " class=\"n\"" : "") + ">";
      const std::string shown = c == t.signature_column ? signatures[r] : row[c];
      // A long signature: its short form, the whole name folded under it (no script needed).
      s += shown == row[c] ? escape(row[c])
                           : "<details><summary><code>" + escape(shown) + "</code></summary><code class=\"sig\">" +
                                 escape(row[c]) + "</code></details>";
      s += "</td>";
    }
    s += "</tr>";
  }
  s += "</tbody></table>";
  if (!t.note.empty()) s += "<p class=\"note\">" + escape(t.note) + "</p>";
  return s + "</section>";
}

}  // namespace

std::string render_html(const Document& d, const Report& r, const Extras& x) {
  std::string s =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
      "script-src 'unsafe-inline'; img-src data:\">"
      "<title>" + escape(d.heading) + "</title><style>"
      "body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}"
      "h1{font-size:20px}h2{font-size:16px;margin-top:28px}h3{font-size:14px;margin:12px 0 4px}"
      "table{border-collapse:collapse;font-size:13px}th,td{border-bottom:1px solid #ddd;padding:3px 8px;text-align:left}"
      "td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}.note{color:#555;font-size:12px}"
      "svg .title{font-size:14px;font-weight:600}svg .tick{font-size:11px;fill:#333}svg .label{font-size:12px;fill:#333}"
      "svg .grid{stroke:#e5e5e5}svg .axis{stroke:#333}figure{margin:16px 0}ul{margin:0 0 8px}"
      ".sim{background:#fff3cd;padding:6px 10px}code.sig{display:block;max-width:700px;word-break:break-all;font-size:12px}"
      "li.sub{margin-left:24px;list-style:circle}"
      "</style></head><body>\n";
  s += "<h1>" + escape(d.heading) + "</h1>\n";
  if (r.simulated)
    s += "<p class=\"sim\" id=\"simulated\">SIMULATED GPU: these rank files come from simgpu, a simulation of CUDA, "
         "CUPTI and NCCL. Every GPU number on this page is simulated, not measured on hardware.</p>\n";
  // The answer first: the straggler, the largest share (its HTML line is this page).
  s += "<section id=\"summary\"><h2>The answer</h2><ul>";
  for (std::size_t k = 0; k + 1 < d.summary.lines.size(); ++k) s += "<li>" + escape(d.summary.lines[k]) + "</li>";
  s += "</ul></section>\n";
  s += "<section id=\"diagnosis\"><h2>Diagnosis</h2>";
  for (const Section& sec : d.diagnosis) {
    s += "<h3>" + escape(sec.title) + "</h3><ul>";
    for (const std::string& l : sec.lines)  // "  ..." is the evidence of the line above
      s += (l.rfind("  ", 0) == 0 ? "<li class=\"sub\">" + escape(l.substr(2)) : "<li>" + escape(l)) + "</li>";
    s += "</ul>";
  }
  s += "</section>\n<section id=\"charts\"><h2>Charts</h2>" + charts(r) +
       (x.comparison ? compare_chart(*x.comparison) : std::string()) + "</section>\n";
  std::string left_out;
  for (const Table* t : shown_tables(d, &left_out)) s += table_html(*t) + "\n";
  if (!left_out.empty()) s += "<p class=\"note\" id=\"left-out\">" + escape(left_out) + "</p>\n";
  // Marks the page as rendered with its chart count (the headless-browser test reads it back).
  s += "<script>document.body.setAttribute('data-charts', String(document.querySelectorAll('svg.chart').length));"
       "</script>\n</body></html>\n";
  return s;
}

}  // namespace traintime::report
