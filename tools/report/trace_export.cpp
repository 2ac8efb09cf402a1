// Chrome trace-event JSON (the format chrome://tracing and ui.perfetto.dev open) from the
// "traintime-trace/1" dumps. Written event by event, so memory holds one rank's dump at a time.
#include "trace_export.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

namespace traintime::report {
namespace {

using nlohmann::json;

std::string trace_path_of(const std::string& rank_file) {
  const std::string ext = ".json";
  return rank_file.substr(0, rank_file.size() - ext.size()) + ".trace.json";
}

std::optional<json> read_trace(const std::string& path, std::vector<std::string>& problems) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;  // no timeline kept for this rank: not a problem
  json j;
  try {
    in >> j;
  } catch (const std::exception& e) {
    problems.push_back(path + ": not valid JSON (truncated or corrupt?); rank left out of the trace");
    return std::nullopt;
  }
  if (!j.is_object() || j.value("format", "") != "traintime-trace/1") {
    problems.push_back(path + ": not a \"traintime-trace/1\" dump; rank left out of the trace");
    return std::nullopt;
  }
  if (!j.contains("events") || !j["events"].is_array() || !j.contains("columns") || !j["columns"].is_array()) {
    problems.push_back(path + ": no \"events\"/\"columns\" arrays; rank left out of the trace");
    return std::nullopt;
  }
  return j;
}

// Index of each column by name (the dump names its columns, so their order may change).
struct Columns {
  int start = -1, end = -1, device = -1, stream = -1, category = -1, path = -1, step = -1, kind = -1, name = -1,
      bytes = -1, copy = -1, comm_op = -1;
  bool usable() const { return start >= 0 && end >= 0; }
};

Columns columns_of(const json& cols) {
  Columns c;
  for (std::size_t k = 0; k < cols.size(); ++k) {
    if (!cols[k].is_string()) continue;
    const std::string n = cols[k].get<std::string>();
    const int i = static_cast<int>(k);
    if (n == "start_ns") c.start = i;
    if (n == "end_ns") c.end = i;
    if (n == "device") c.device = i;
    if (n == "stream") c.stream = i;
    if (n == "category") c.category = i;
    if (n == "path") c.path = i;
    if (n == "step") c.step = i;
    if (n == "kind") c.kind = i;
    if (n == "name") c.name = i;
    if (n == "bytes") c.bytes = i;
    if (n == "copy_kind") c.copy = i;
    if (n == "comm_op") c.comm_op = i;
  }
  return c;
}

uint64_t u64_at(const json& row, int col) {
  if (col < 0 || static_cast<std::size_t>(col) >= row.size() || !row[col].is_number()) return 0;
  return row[col].is_number_unsigned() ? row[col].get<uint64_t>()
                                       : static_cast<uint64_t>(std::max<int64_t>(0, row[col].get<int64_t>()));
}

std::string name_at(const json& table, uint64_t i) {
  if (table.is_array() && i < table.size() && table[i].is_string()) return table[i].get<std::string>();
  return std::string();
}

// Kernel names are kept raw (mangled) in the dump; the trace shows them as a person reads them.
std::string demangled(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string result = status == 0 && out ? out : name;
  std::free(out);
  return result;
}

class Writer {
 public:
  explicit Writer(std::ofstream& out) : out_(out) {}
  void event(const json& e) {
    out_ << (first_ ? "\n" : ",\n") << e.dump(-1, ' ', false, json::error_handler_t::replace);
    first_ = false;
  }

 private:
  std::ofstream& out_;
  bool first_ = true;
};

double us(uint64_t ns, uint64_t origin) { return static_cast<double>(ns - std::min(ns, origin)) / 1000.0; }

using Span = std::pair<uint64_t, uint64_t>;

// Why no trace is written when no merged rank kept a timeline.
void say_no_trace(const Job& job, const std::string& out_path, std::vector<std::string>& problems) {
  bool gpu = false;
  for (const RankInput& r : job.ranks) gpu = gpu || r.data.steps.totals.gpu_busy_ns > 0;
  // Without GPU work there is nothing TRAINTIME_TRACE=1 could have kept: never send someone who
  // ran with it back to run with it again.
  if (!gpu)
    problems.push_back(out_path + ": not written: no rank ran GPU work, and the trace is a timeline of GPU "
                                  "activities (the kernels, copies and memsets TRAINTIME_TRACE=1 keeps); traintime "
                                  "keeps no timeline of CPU regions, only their time per step (the report's regions "
                                  "table)");
  else
    problems.push_back(out_path + ": not written: no merged rank has a timeline (run with TRAINTIME_TRACE=1 to keep "
                                  "rank-*.trace.json beside the rank files)");
}

// The earliest recorded start over every rank (parsing each dump once more when writing keeps one
// dump in memory at a time); 0 when none.
uint64_t earliest_start(const std::vector<std::pair<const RankInput*, std::string>>& with_trace) {
  uint64_t origin = std::numeric_limits<uint64_t>::max();
  std::vector<std::string> ignored;  // reported by the second pass
  for (const auto& [rank, path] : with_trace) {
    const std::optional<json> dump = read_trace(path, ignored);
    if (!dump) continue;
    const Columns c = columns_of((*dump)["columns"]);
    for (const json& e : (*dump)["events"])
      if (c.usable() && e.is_array()) origin = std::min(origin, u64_at(e, c.start));
  }
  return origin == std::numeric_limits<uint64_t>::max() ? 0 : origin;
}

// One rank's timeline as trace events. Tracks: tid 1 = steps, 2.. = regions (by path), 1000.. =
// GPU streams (by device, stream).
class RankTrace {
 public:
  RankTrace(Writer& w, const json& dump, const Columns& c, int64_t pid, uint64_t origin)
      : w_(w), j_(dump), c_(c), pid_(pid), origin_(origin),
        paths_(dump.contains("paths") && dump["paths"].is_object() ? dump["paths"] : empty_) {}

  void write(const std::string& host) {
    w_.event({{"ph", "M"}, {"name", "process_name"}, {"pid", pid_},
              {"args", {{"name", "rank " + std::to_string(pid_) + " (" + host + ")"}}}});
    w_.event({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid_}, {"args", {{"sort_index", pid_}}}});
    for (const json& e : j_["events"])
      if (e.is_array()) activity(e);
    spans();
  }

 private:
  static void widen(Span& s, uint64_t a, uint64_t b, bool fresh) {
    if (fresh) s = {a, b};
    s.first = std::min(s.first, a);
    s.second = std::max(s.second, b);
  }

  std::string path_name(uint64_t path) const {
    const std::string key = std::to_string(path);
    return path && paths_.contains(key) && paths_[key].is_string() ? paths_[key].get<std::string>() : "";
  }

  int stream_track(uint64_t device, uint64_t stream) {
    auto [st, fresh] = stream_tid_.try_emplace({device, stream}, 1000 + static_cast<int>(stream_tid_.size()));
    if (fresh)
      w_.event({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid_}, {"tid", st->second},
                {"args", {{"name", "GPU " + std::to_string(device) + " stream " + std::to_string(stream)}}}});
    return st->second;
  }

  std::string name_of(const json& e) const {
    std::string name = demangled(name_at(j_["names"], u64_at(e, c_.name)));
    const std::string kind_name = name_at(j_["kinds"], u64_at(e, c_.kind));
    if (kind_name == "memcpy") name = "memcpy " + name_at(j_["copy_kinds"], u64_at(e, c_.copy));
    if (kind_name == "memset") name = "memset";
    if (name.empty()) name = kind_name.empty() ? "activity" : kind_name;
    return name;
  }

  // One GPU activity on its stream's track; its step's and region's spans widened.
  void activity(const json& e) {
    const uint64_t start = u64_at(e, c_.start), end = std::max(start, u64_at(e, c_.end));
    const uint64_t step = u64_at(e, c_.step), path = u64_at(e, c_.path);
    const int tid = stream_track(u64_at(e, c_.device), u64_at(e, c_.stream));
    const std::string region = path_name(path);
    json args = {{"step", step}, {"region", region}};
    if (u64_at(e, c_.bytes)) args["bytes"] = u64_at(e, c_.bytes);
    const std::string op = name_at(j_["comm_ops"], u64_at(e, c_.comm_op));
    if (!op.empty() && op != "none") args["comm_op"] = op;
    w_.event({{"ph", "X"}, {"pid", pid_}, {"tid", tid}, {"ts", us(start, origin_)},
              {"dur", static_cast<double>(end - start) / 1000.0}, {"name", name_of(e)},
              {"cat", name_at(j_["categories"], u64_at(e, c_.category))}, {"args", args}});
    auto [ss, fresh_step] = step_span_.try_emplace(step);
    widen(ss->second, start, end, fresh_step);
    if (!path) return;
    auto [rs, fresh_region] = region_span_.try_emplace({step, path});
    widen(rs->second, start, end, fresh_region);
    if (path_tid_.try_emplace(path, 2 + static_cast<int>(path_tid_.size())).second)
      w_.event({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid_}, {"tid", path_tid_[path]},
                {"args", {{"name", "region " + region}}}});
  }

  // The steps' and the regions' [first start, last end].
  void spans() {
    w_.event({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid_}, {"tid", 1}, {"args", {{"name", "steps (GPU span)"}}}});
    for (const auto& [step, span] : step_span_)
      w_.event({{"ph", "X"}, {"pid", pid_}, {"tid", 1}, {"ts", us(span.first, origin_)},
                {"dur", static_cast<double>(span.second - span.first) / 1000.0}, {"name", "step " + std::to_string(step)},
                {"cat", "step"}});
    for (const auto& [key, span] : region_span_) {
      const std::string k = std::to_string(key.second);
      w_.event({{"ph", "X"}, {"pid", pid_}, {"tid", path_tid_[key.second]}, {"ts", us(span.first, origin_)},
                {"dur", static_cast<double>(span.second - span.first) / 1000.0},
                {"name", paths_.contains(k) && paths_[k].is_string() ? paths_[k].get<std::string>() : "region"},
                {"cat", "region"}, {"args", {{"step", key.first}}}});
    }
  }

  inline static const json empty_ = json::object();
  Writer& w_;
  const json& j_;
  const Columns& c_;
  const int64_t pid_;
  const uint64_t origin_;
  const json& paths_;
  std::map<std::pair<uint64_t, uint64_t>, int> stream_tid_;
  std::map<uint64_t, int> path_tid_;
  std::map<uint64_t, Span> step_span_;                          // per step
  std::map<std::pair<uint64_t, uint64_t>, Span> region_span_;  // per (step, path)
};

void write_metadata(std::ofstream& out, const Job& job, uint64_t origin) {
  out << "\n],\"metadata\":"
      << json({{"producer", "traintime-report"},
               {"job_id", job.job_id},
               {"clock", "timestamps per rank as recorded by CUPTI on that rank's host; ranks are NOT aligned to "
                         "a common clock. ts = recorded ns - origin_ns (one constant for every rank), in us."},
               {"origin_ns", origin},
               {"tracks", "one process per rank; tid 1 = steps (GPU span), 2.. = regions (GPU span of the work "
                          "launched in the region, per step), 1000.. = GPU streams"}})
             .dump(-1, ' ', false, json::error_handler_t::replace)
      << "}\n";
}

}  // namespace

std::size_t export_trace(const Job& job, const std::string& out_path, std::vector<std::string>& problems) {
  std::vector<std::pair<const RankInput*, std::string>> with_trace;
  for (const RankInput& r : job.ranks) {
    const std::string path = trace_path_of(r.file);
    std::ifstream probe(path);
    if (probe) with_trace.emplace_back(&r, path);
  }
  if (with_trace.empty()) {
    say_no_trace(job, out_path, problems);
    return 0;
  }
  // One constant origin for every rank keeps microsecond timestamps exact in a double; ranks are
  // never shifted against each other.
  const uint64_t origin = earliest_start(with_trace);
  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  if (!out) {
    problems.push_back(out_path + ": cannot write the trace here (check the folder exists and is writable)");
    return 0;
  }
  std::size_t written = 0;
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
  Writer w(out);
  for (const auto& [rank, path] : with_trace) {
    const std::optional<json> dump = read_trace(path, problems);
    if (!dump) continue;
    const Columns c = columns_of((*dump)["columns"]);
    if (!c.usable()) {
      problems.push_back(path + ": no start_ns/end_ns columns; rank left out of the trace");
      continue;
    }
    RankTrace(w, *dump, c, rank->data.rank, origin).write(rank->data.host);
    if (dump->value("truncated", false))
      problems.push_back(path + ": the timeline was capped while recording (events_dropped " +
                         std::to_string(dump->value("events_dropped", 0)) + "); its trace shows the first events only");
    ++written;
  }
  write_metadata(out, job, origin);
  out.close();
  if (!out) {
    problems.push_back(out_path + ": write failed (disk full?)");
    return 0;
  }
  return written;
}

}  // namespace traintime::report
