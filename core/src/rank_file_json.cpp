// The rank file's JSON, both ways (docs/schema.md): writer and reader with one clear message per
// problem; the atomic file write under it is atomic_file.cpp's. Over ~500 lines on purpose: the
// writer and the reader of every field sit side by side, so a field changed in one is seen to
// need changing in the other.
#include "traintime/core/rank_file_json.h"
#include "traintime/core/json_read.h"
#include "traintime/core/live_record.h"
#include "traintime/core/module_format.h"

#include "file_errors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <simdjson.h>

namespace traintime::core {
namespace {

using nlohmann::json;

// Objects made only of unsigned counters are described once, here, and both written and read
// from these tables, so a field name cannot differ between the writer and the reader.
template <class T>
struct U64Field {
  std::string_view name;
  uint64_t T::*member;
  bool required = true;  // false: added after the contract; absent in older files reads as 0
};

constexpr U64Field<CategoryTotals> kCategoryTotalsFields[] = {
    {"gpu_busy_ns", &CategoryTotals::gpu_busy_ns},
    {"gpu_sum_ns", &CategoryTotals::gpu_sum_ns},
    {"count", &CategoryTotals::count}};

constexpr U64Field<StepTotals> kStepTotalsFields[] = {
    {"gpu_busy_ns", &StepTotals::gpu_busy_ns},
    {"compute_ns", &StepTotals::compute_ns},
    {"comm_ns", &StepTotals::comm_ns},
    {"comm_overlapped_ns", &StepTotals::comm_overlapped_ns},
    {"exposed_comm_ns", &StepTotals::exposed_comm_ns},
    {"io_ns", &StepTotals::io_ns},
    {"idle_ns", &StepTotals::idle_ns},
    {"gpu_sum_ns", &StepTotals::gpu_sum_ns, false},
    {"compute_sum_ns", &StepTotals::compute_sum_ns, false},
    {"comm_sum_ns", &StepTotals::comm_sum_ns, false},
    {"io_sum_ns", &StepTotals::io_sum_ns, false}};

constexpr U64Field<DurationStats> kDurationFields[] = {
    {"count", &DurationStats::count},     {"total_ns", &DurationStats::total_ns},
    {"min_ns", &DurationStats::min_ns},   {"max_ns", &DurationStats::max_ns},
    {"mean_ns", &DurationStats::mean_ns}, {"p50_ns", &DurationStats::p50_ns},
    {"p90_ns", &DurationStats::p90_ns}};

constexpr U64Field<StepDetection> kDetectionFields[] = {
    {"steps", &StepDetection::steps},
    {"period_calls", &StepDetection::period_calls},
    {"period_ns", &StepDetection::period_ns},
    {"relocks", &StepDetection::relocks},
    {"warmup_launches", &StepDetection::warmup_launches},
    {"late_launches", &StepDetection::late_launches},
    {"folded_blocks", &StepDetection::folded_blocks},
    {"folded_launches", &StepDetection::folded_launches},
    {"marker_from_step", &StepDetection::marker_from_step},
    {"undecided_launches", &StepDetection::undecided_launches, false},  // added later
    {"tokens_over_cap", &StepDetection::tokens_over_cap, false}};

constexpr U64Field<MemcpyStat> kMemcpyFields[] = {
    {"count", &MemcpyStat::count}, {"bytes", &MemcpyStat::bytes}, {"gpu_ns", &MemcpyStat::gpu_ns}};

constexpr U64Field<SizeBucket> kSizeBucketFields[] = {{"lo_bytes", &SizeBucket::lo_bytes},
                                                      {"calls", &SizeBucket::calls},
                                                      {"bytes", &SizeBucket::bytes},
                                                      {"gpu_ns", &SizeBucket::gpu_ns}};

template <class T, std::size_t N>
json u64_object(const T& value, const U64Field<T> (&fields)[N]) {
  json out = json::object();
  for (const U64Field<T>& f : fields) out[std::string(f.name)] = value.*f.member;
  return out;
}

// ---- writing ---------------------------------------------------------------------------------

using json_read::finite;

json totals_json(const CategoryTotals& t) { return u64_object(t, kCategoryTotalsFields); }

json by_category_json(const ByCategory<CategoryTotals>& m) {
  json out = json::object();
  m.each([&out](Category c, const CategoryTotals& t) { out[std::string(category_name(c))] = totals_json(t); });
  return out;
}

json step_totals_json(const StepTotals& t) { return u64_object(t, kStepTotalsFields); }

json kernels_json(const std::vector<KernelStat>& kernels) {
  json top = json::array();
  for (const KernelStat& k : kernels)
    top.push_back({{"name", k.name}, {"count", k.count}, {"gpu_sum_ns", k.gpu_sum_ns}});
  return top;
}

json region_json(const RegionRow& r) {
  json top = kernels_json(r.top_kernels);
  return {{"path", r.path},
          {"category", std::string(category_name(r.category))},
          {"count", r.count},
          {"cpu_ns", r.cpu_ns},
          {"cpu_min_ns", r.cpu_min_ns},
          {"cpu_max_ns", r.cpu_max_ns},
          {"gpu_busy_ns", r.gpu_busy_ns},
          {"gpu_sum_ns", r.gpu_sum_ns},
          {"gpu_span_ns", r.gpu_span_ns},
          {"kernels", r.kernels},
          {"by_category", by_category_json(r.by_category)},
          {"top_kernels", std::move(top)}};
}

// steps.detail[].gpu_health (docs/schema.md): the figures gpu_health.devices[].steps[] has, in
// their shape, for the fields a step's reader wants beside its time.
json step_health_json(const std::vector<StepHealth>& health) {
  json out = json::array();
  for (const StepHealth& h : health)
    out.push_back({{"cuda_device", h.cuda_device},
                   {"samples", h.samples},
                   {"sm_clock_mhz", {{"median", finite(h.sm_clock_mhz_median)}, {"min", h.sm_clock_mhz_min}}},
                   {"power_w", {{"median", finite(h.power_w_median)}}},
                   {"temperature_c", {{"max", h.temperature_c_max}}},
                   {"clock_event_reasons", clock_event_reason_names(h.clock_event_reasons)}});
  return out;
}

// steps.detail[].memory and the top-level memory (docs/schema.md "memory").
json memory_json(const MemoryFigures& m) {
  json devices = json::array();
  for (const DeviceMemory& d : m.devices)
    devices.push_back({{"cuda_device", d.cuda_device}, {"peak_bytes", d.peak_bytes}, {"in_use_bytes", d.in_use_bytes}});
  return {{"peak_bytes", m.peak_bytes}, {"in_use_bytes", m.in_use_bytes}, {"devices", std::move(devices)}};
}

json steps_json(const Steps& s) {
  json detail = json::array();
  for (const Steps::Detail& d : s.detail) {
    json busy = json::object();
    d.busy_ns_by_category.each([&busy](Category c, uint64_t ns) { busy[std::string(category_name(c))] = ns; });
    detail.push_back({{"index", d.index},
                      {"wall_ns", d.wall_ns},
                      {"span_ns", d.span_ns},
                      {"partial", d.partial},
                      {"totals", step_totals_json(d.totals)},
                      {"busy_ns_by_category", std::move(busy)}});
    if (!d.gpu_health.empty()) detail.back()["gpu_health"] = step_health_json(d.gpu_health);
    if (d.memory.present || d.torch_memory.present) {
      json memory = d.memory.present ? memory_json(d.memory) : json::object();
      if (const TorchMemory& t = d.torch_memory; t.present) {
        json torch = {{"allocated_peak_bytes", t.allocated_peak_bytes},
                      {"reserved_peak_bytes", t.reserved_peak_bytes},
                      {"peaks", t.peaks_per_step ? "step" : "run"}};
        if (t.has_current) {
          torch["allocated_bytes"] = t.allocated_bytes;
          torch["reserved_bytes"] = t.reserved_bytes;
        }
        memory["torch"] = std::move(torch);
      }
      detail.back()["memory"] = std::move(memory);
    }
  }
  json out = {{"source", s.source},
              {"count", s.count},
              {"warmup", s.warmup},
              {"wall_ns", u64_object(s.wall_ns, kDurationFields)},
              {"samples", s.samples},
              {"tokens", s.tokens},
              {"samples_per_s", finite(s.samples_per_s)},
              {"tokens_per_s", finite(s.tokens_per_s)},
              {"totals", step_totals_json(s.totals)},
              {"partial_final_step", s.partial_final_step},
              {"detail", std::move(detail)}};
  if (s.last_end_unix_ns > 0) out["last_end_unix_ns"] = s.last_end_unix_ns;
  if (s.detection.present) {
    json d = u64_object(s.detection, kDetectionFields);
    d["coverage"] = finite(s.detection.coverage);
    d["reason"] = s.detection.reason;
    if (!s.detection.numbering.empty()) d["numbering"] = s.detection.numbering;
    if (!s.detection.anchor.empty()) d["anchor"] = s.detection.anchor;
    out["detection"] = std::move(d);
  }
  if (s.flops_per_step > 0) {
    out["flops_per_step"] = finite(s.flops_per_step);
    out["tflops"] = finite(s.tflops);
    if (s.mfu > 0) out["mfu"] = finite(s.mfu);
    if (s.hfu > 0) out["hfu"] = finite(s.hfu);
  }
  return out;
}

json comm_json(const CommRow& c) {
  json sizes = json::array();
  for (const SizeBucket& b : c.sizes) sizes.push_back(u64_object(b, kSizeBucketFields));
  json out = {{"op", comm_op_name(c.op)},
              {"comm_size", c.comm_size},
              {"calls", c.calls},
              {"bytes", c.bytes},
              {"bytes_known", c.bytes_known},
              {"gpu_ns", c.gpu_ns},
              {"algbw_gbps", finite(c.algbw_gbps)},
              {"busbw_gbps", finite(c.busbw_gbps)},
              {"sizes", std::move(sizes)}};
  if (!c.backend.empty()) {  // a collective run on the CPU (gloo, MPI)
    out["backend"] = c.backend;
    out["cpu_ns"] = c.cpu_ns;
  }
  if (c.seen_by != 0) out["seen_by"] = seen_by_name(c.seen_by);
  return out;
}

json communicator_json(const Communicator& c) {
  json recent = json::array();
  for (const RecentCollective& r : c.recent) {
    json row = {{"seq", r.seq},
                {"op", comm_op_name(r.op)},
                {"bytes", r.bytes},
                {"gpu_start_ns", r.gpu_start_ns},
                {"gpu_end_ns", r.gpu_end_ns}};
    if (r.kernel_ch_ns != 0) row["kernel_ch_ns"] = r.kernel_ch_ns;  // optional: measured only
    recent.push_back(std::move(row));
  }
  json out = {{"id", c.id},
              {"size", c.size},
              {"rank", c.rank},
              {"ops_enqueued", c.ops_enqueued},
              {"ops_completed", c.ops_completed},
              {"recent", std::move(recent)}};
  if (!c.in_flight.empty()) {  // optional: omitted when nothing is in flight
    json in_flight = json::array();
    for (const InFlightOp& op : c.in_flight)
      in_flight.push_back({{"seq", op.seq}, {"op", comm_op_name(op.op)}, {"bytes", op.bytes}});
    out["in_flight"] = std::move(in_flight);
  }
  if (c.cpu_clock) {
    out["clock"] = "cpu";
    out["backend"] = c.backend;
  }
  return out;
}

json threads_json(const std::vector<ThreadSnapshot>& threads) {
  json out = json::array();
  for (const ThreadSnapshot& t : threads)
    out.push_back({{"tid", t.tid}, {"step", t.step}, {"open_regions", t.open_regions}});
  return out;
}

// self_cost (docs/schema.md): a row's estimate is absent when it is not measured (n/a, never 0).
json self_cost_json(const SelfCost& c) {
  json threads = json::array();
  for (const ThreadCost& t : c.threads) threads.push_back({{"name", t.name}, {"cpu_ns", t.cpu_ns}});
  json callbacks = json::array();
  bool estimated = false;
  for (const CallbackCost& r : c.callbacks) {
    json row = {{"module", r.module},   {"what", r.what},       {"calls", r.calls},
                {"sampled_every", r.sampled_every}, {"samples", r.samples}, {"interrupted", r.interrupted},
                {"estimated", r.estimated}};
    if (r.measured) {
      row["estimated_ns"] = r.estimated_ns;
      row["spread_ns"] = r.spread_ns;
    }
    estimated = estimated || (r.measured && r.estimated);
    callbacks.push_back(std::move(row));
  }
  json memory = json::array();
  for (const MemoryCost& m : c.memory)
    memory.push_back({{"module", m.module}, {"what", m.what}, {"peak_bytes", m.peak_bytes}});
  json out = {{"threads", std::move(threads)},  {"callbacks", std::move(callbacks)},
              {"memory", std::move(memory)},    {"peak_bytes", c.peak_bytes},
              {"written_bytes", c.written_bytes}, {"callbacks_ns", c.callbacks_ns},
              {"estimated", estimated}};
  if (c.has_pct) {
    out["pct"] = finite(c.pct);
    out["steps_wall_ns"] = c.steps_wall_ns;
    out["steps_callbacks_ns"] = c.steps_callbacks_ns;
  }
  return out;
}

// ---- reading ---------------------------------------------------------------------------------
// ---- reading ---------------------------------------------------------------------------------
// The primitives (Path, find, need, u64, ...) are json_read.h's, shared with the modules' own
// section readers.
using namespace json_read;

Category category_named(std::string_view name, const Path& where) {
  const std::optional<Category> c = category_from_name(name);
  if (!c) fail("unknown category \"" + std::string(name) + "\" in \"" + where.str() + "\"");
  return *c;
}

// One walk over the object's members finds every field of the table (a lookup per field would
// walk the members once each); the fields are then read in table order, so a file with several
// problems is refused for the same one as by a lookup per field. The first of duplicate keys wins.
template <class T, std::size_t N, class J>
T u64_object_from(const J& j, const Path& w, const U64Field<T> (&fields)[N]) {
  expect_object(j, w);
  decltype(find(j, std::string_view())) found[N]{};
  each_member(j, [&](std::string_view key, const J& v) {
    for (std::size_t i = 0; i < N; ++i)
      if (!found[i] && key == fields[i].name) {
        found[i] = ref_to(v);
        break;
      }
  });
  T value{};
  for (std::size_t i = 0; i < N; ++i) {
    const U64Field<T>& f = fields[i];
    if (found[i])
      value.*f.member = as_u64(deref(found[i]), join(w, f.name));
    else if (f.required)
      fail("missing field \"" + join(w, f.name).str() + "\"");
  }
  return value;
}

template <class J>
CategoryTotals totals_from(const J& j, const Path& w) {
  return u64_object_from(j, w, kCategoryTotalsFields);
}

template <class J>
ByCategory<CategoryTotals> by_category_from(const J& j, const Path& w) {
  ByCategory<CategoryTotals> out;
  each_member(j, [&](std::string_view name, const J& t) {
    out.set(category_named(name, w)) = totals_from(t, join(w, name));
  });
  return out;
}

template <class J>
StepTotals step_totals_from(const J& j, const Path& w) {
  return u64_object_from(j, w, kStepTotalsFields);
}

// A top_kernels array (a region's, or the rank's own) of the object j at w.
template <class J>
std::vector<KernelStat> kernels_from(const J& j, const Path& w) {
  std::vector<KernelStat> out;
  const Path tw = join(w, "top_kernels");
  each_in_array(j, "top_kernels", w, [&](std::size_t i, const J& k) {
    const Path kw = indexed(tw, i);
    expect_object(k, kw);
    out.push_back({str(k, "name", kw), u64(k, "count", kw), u64(k, "gpu_sum_ns", kw)});
  });
  return out;
}

template <class J>
RegionRow region_from(const J& j, const Path& w) {
  expect_object(j, w);
  RegionRow r;
  r.path = str(j, "path", w);
  r.category = category_named(str(j, "category", w), join(w, "category"));
  r.count = u64(j, "count", w);
  r.cpu_ns = u64(j, "cpu_ns", w);
  r.cpu_min_ns = opt_u64(j, "cpu_min_ns", w, 0);
  r.cpu_max_ns = opt_u64(j, "cpu_max_ns", w, 0);
  r.gpu_busy_ns = u64(j, "gpu_busy_ns", w);
  r.gpu_sum_ns = u64(j, "gpu_sum_ns", w);
  r.gpu_span_ns = u64(j, "gpu_span_ns", w);
  r.kernels = u64(j, "kernels", w);
  r.by_category = by_category_from(need_object(j, "by_category", w), join(w, "by_category"));
  r.top_kernels = kernels_from(j, w);
  return r;
}

template <class J>
StepHealth step_health_from(const J& j, const Path& w) {
  StepHealth h = shared_health_from(j, w);
  h.cuda_device = static_cast<int32_t>(i64(j, "cuda_device", w));
  return h;
}

// steps.detail[].memory and the top-level memory: optional (added with the memory records),
// absent = not present.
template <class J>
MemoryFigures memory_from(const J& parent, const Path& pw, TorchMemory* torch = nullptr) {
  MemoryFigures m;
  const auto found = find(parent, "memory");
  if (!found) return m;
  const J& j = deref(found);
  const Path w = join(pw, "memory");
  expect_object(j, w);
  // A step row may hold only PyTorch's figures (memory.torch) and no CUPTI figures.
  if (torch != nullptr) {
    if (const auto t = find(j, "torch")) {
      const Path tw = join(w, "torch");
      expect_object(deref(t), tw);
      const J& tj = deref(t);
      torch->present = true;
      torch->allocated_peak_bytes = u64(tj, "allocated_peak_bytes", tw);
      torch->reserved_peak_bytes = u64(tj, "reserved_peak_bytes", tw);
      // "peaks" came with the step-end figures; a file from before says nothing: per step.
      if (find(tj, "peaks")) {
        const std::string peaks = str(tj, "peaks", tw);
        if (peaks != "step" && peaks != "run")
          fail("field \"" + name_of(join(tw, "peaks")) + "\" must be \"step\" or \"run\" (got \"" + peaks + "\")");
        torch->peaks_per_step = peaks == "step";
      }
      if (find(tj, "allocated_bytes")) {
        torch->has_current = true;
        torch->allocated_bytes = u64(tj, "allocated_bytes", tw);
        torch->reserved_bytes = u64(tj, "reserved_bytes", tw);
      }
    }
    if (!find(j, "peak_bytes")) return m;
  }
  m.present = true;
  m.peak_bytes = u64(j, "peak_bytes", w);
  m.in_use_bytes = u64(j, "in_use_bytes", w);
  const Path dw = join(w, "devices");
  each_in_opt_array(j, "devices", w, m.devices, [&](std::size_t i, const J& d) {
    const Path iw = indexed(dw, i);
    expect_object(d, iw);
    m.devices.push_back({static_cast<int32_t>(i64(d, "cuda_device", iw)), u64(d, "peak_bytes", iw),
                         u64(d, "in_use_bytes", iw)});
  });
  return m;
}

template <class J>
Steps steps_from(const J& j, const Path& w) {
  expect_object(j, w);
  Steps s;
  // Added with step detection: older files' steps are their markers'.
  if (find(j, "source")) s.source = str(j, "source", w);
  if (const auto d = find(j, "detection")) {
    const Path dw = join(w, "detection");
    expect_object(deref(d), dw);
    s.detection = u64_object_from(deref(d), dw, kDetectionFields);
    s.detection.present = true;
    s.detection.coverage = dbl(deref(d), "coverage", dw);
    s.detection.reason = str(deref(d), "reason", dw);
    if (find(deref(d), "numbering")) s.detection.numbering = str(deref(d), "numbering", dw);
    if (find(deref(d), "anchor")) s.detection.anchor = str(deref(d), "anchor", dw);
  }
  s.count = u64(j, "count", w);
  s.warmup = u64(j, "warmup", w);
  s.wall_ns = u64_object_from(need(j, "wall_ns", w), join(w, "wall_ns"), kDurationFields);
  s.samples = opt_u64(j, "samples", w, 0);
  s.tokens = opt_u64(j, "tokens", w, 0);
  s.samples_per_s = opt_dbl(j, "samples_per_s", w, 0);
  s.tokens_per_s = opt_dbl(j, "tokens_per_s", w, 0);
  s.flops_per_step = opt_dbl(j, "flops_per_step", w, 0);
  s.tflops = opt_dbl(j, "tflops", w, 0);
  s.mfu = opt_dbl(j, "mfu", w, 0);
  s.hfu = opt_dbl(j, "hfu", w, 0);  // added after 1.0: older files read as unknown
  s.totals = step_totals_from(need(j, "totals", w), join(w, "totals"));
  s.partial_final_step = opt_bool(j, "partial_final_step", w, false);
  s.last_end_unix_ns = opt_u64(j, "last_end_unix_ns", w, 0);  // added after 1.0: older files read as unknown
  const Path detail_w = join(w, "detail");
  each_in_opt_array(j, "detail", w, s.detail, [&](std::size_t i, const J& dj) {
    const Path dw = indexed(detail_w, i);
    expect_object(dj, dw);
    Steps::Detail d;
    d.index = u64(dj, "index", dw);
    d.wall_ns = u64(dj, "wall_ns", dw);
    d.span_ns = u64(dj, "span_ns", dw);
    d.partial = opt_bool(dj, "partial", dw, false);
    d.totals = step_totals_from(need(dj, "totals", dw), join(dw, "totals"));
    const Path bw = join(dw, "busy_ns_by_category");
    each_member(need_object(dj, "busy_ns_by_category", dw), [&](std::string_view name, const J& ns) {
      d.busy_ns_by_category.set(category_named(name, bw)) = as_u64(ns, join(bw, name));
    });
    // Added with the nvml module: older files have none.
    const Path hw = join(dw, "gpu_health");
    each_in_opt_array(dj, "gpu_health", dw, d.gpu_health, [&](std::size_t k, const J& hj) {
      d.gpu_health.push_back(step_health_from(hj, indexed(hw, k)));
    });
    d.memory = memory_from(dj, dw, &d.torch_memory);
    s.detail.push_back(std::move(d));
  });
  return s;
}

template <class J>
CommRow comm_from(const J& j, const Path& w) {
  expect_object(j, w);
  CommRow c;
  c.op = comm_op_from_name(str(j, "op", w));
  c.comm_size = u32(j, "comm_size", w);
  c.calls = u64(j, "calls", w);
  c.bytes = u64(j, "bytes", w);
  c.bytes_known = opt_bool(j, "bytes_known", w, true);
  c.gpu_ns = u64(j, "gpu_ns", w);
  c.algbw_gbps = dbl(j, "algbw_gbps", w);
  c.busbw_gbps = dbl(j, "busbw_gbps", w);
  const Path sw = join(w, "sizes");
  each_in_opt_array(j, "sizes", w, [&](std::size_t i, const J& b) {
    c.sizes.push_back(u64_object_from(b, indexed(sw, i), kSizeBucketFields));
  });
  // Added after 1.0: a row of collectives run on the CPU (gloo, MPI).
  c.backend = opt_str(j, "backend", w, "");
  c.cpu_ns = opt_u64(j, "cpu_ns", w, 0);
  // Added with NCCL's profiler plugin: which path saw the calls.
  c.seen_by = seen_by_from_name(opt_str(j, "seen_by", w, ""));
  return c;
}

template <class J>
Communicator communicator_from(const J& j, const Path& w) {
  expect_object(j, w);
  Communicator c;
  c.id = str(j, "id", w);
  c.size = u32(j, "size", w);
  c.rank = u32(j, "rank", w);
  c.ops_enqueued = opt_u64(j, "ops_enqueued", w, 0);
  c.ops_completed = opt_u64(j, "ops_completed", w, 0);
  const Path recent_w = join(w, "recent");
  each_in_opt_array(j, "recent", w, c.recent, [&](std::size_t i, const J& rj) {
    const Path rw = indexed(recent_w, i);
    expect_object(rj, rw);
    c.recent.push_back({u64(rj, "seq", rw), comm_op_from_name(str(rj, "op", rw)), u64(rj, "bytes", rw),
                        u64(rj, "gpu_start_ns", rw), u64(rj, "gpu_end_ns", rw), opt_u64(rj, "kernel_ch_ns", rw, 0)});
  });
  const Path in_flight_w = join(w, "in_flight");
  each_in_opt_array(j, "in_flight", w, [&](std::size_t i, const J& ij) {
    const Path iw = indexed(in_flight_w, i);
    expect_object(ij, iw);
    c.in_flight.push_back({u64(ij, "seq", iw), comm_op_from_name(str(ij, "op", iw)), u64(ij, "bytes", iw)});
  });
  // Added after 1.0: a process group whose collectives ran on the CPU.
  c.cpu_clock = opt_str(j, "clock", w, "gpu") == "cpu";
  c.backend = opt_str(j, "backend", w, "");
  return c;
}

template <class J>
std::vector<ThreadSnapshot> threads_from(const J& top) {
  std::vector<ThreadSnapshot> out;
  const Path threads_w = "threads";
  each_in_opt_array(top, "threads", Path(), [&](std::size_t i, const J& tj) {
    const Path tw = indexed(threads_w, i);
    expect_object(tj, tw);
    ThreadSnapshot t;
    t.tid = u64(tj, "tid", tw);
    t.step = u64(tj, "step", tw);
    const Path ow = join(tw, "open_regions");
    each_in_array(tj, "open_regions", tw, [&](std::size_t k, const J& open) {
      t.open_regions.push_back(as_string(open, indexed(ow, k)));
    });
    out.push_back(std::move(t));
  });
  return out;
}

// modules: {"<name>": {"version": n, "counters": {"<key>": count, ...}}, ...}; optional (added
// with the module sections), and so is each module's version and counters object.
template <class J>
std::map<std::string, ModuleCounters> modules_from(const J& top) {
  std::map<std::string, ModuleCounters> out;
  const auto found = find(top, "modules");
  if (!found) return out;
  const Path mw = "modules";
  expect_object(deref(found), mw);
  each_member(deref(found), [&](std::string_view name, const J& m) {
    const Path nw = join(mw, name);
    expect_object(m, nw);
    ModuleCounters& mc = out[std::string(name)];
    mc.version = static_cast<uint32_t>(opt_u64(m, "version", nw, 0));  // added with the data sections
    const auto counters = find(m, "counters");
    if (!counters) return;
    const Path cw = join(nw, "counters");
    expect_object(deref(counters), cw);
    each_member(deref(counters), [&](std::string_view key, const J& n) {
      mc.counters[std::string(key)] = as_u64(n, join(cw, key));
    });
  });
  return out;
}

// Each module's data section, by its own reader (DataSectionFormat::read): the modules of this build
// that have one. A section whose modules.<name>.version is above the reader's own is left out
// and said so in read_notes (a newer writer's: its shape may have changed); the rest is read.
std::shared_ptr<const ModuleData> module_data_from(const ModuleFormat& m, const json& top) {
  return m.data.read ? m.data.read(top) : nullptr;
}
std::shared_ptr<const ModuleData> module_data_from(const ModuleFormat& m, const SimdValue& top) {
  return m.data.read_fast ? m.data.read_fast(top) : nullptr;
}

template <class J>
void module_sections_from(const J& top, RankFile& f) {
  for (const ModuleFormat* m : module_formats()) {
    const auto it = f.modules.find(std::string(m->name));
    const uint32_t version = it == f.modules.end() ? 0 : it->second.version;
    if (version > m->version) {
      f.read_notes.push_back(
          "module \"" + std::string(m->name) + "\" is at format version " + std::to_string(version) +
          ", newer than this reader's " + std::to_string(m->version) + ": its counters are read" +
          (m->data.keys.empty() ? std::string()
                                : ", its section (" + std::string(m->data.keys) + ") is left out") +
          "; read the file with the traintime-report of the release that wrote it, or a newer one");
      continue;
    }
    if (std::shared_ptr<const ModuleData> d = module_data_from(*m, top))
      f.module_data[std::string(m->name)] = std::move(d);
  }
}

// self_cost: optional (added with it); within it every field but pct and the rows' estimates.
template <class J>
SelfCost self_cost_from(const J& top) {
  SelfCost c;
  const auto found = find(top, "self_cost");
  if (!found) return c;
  const J& j = deref(found);
  const Path w = "self_cost";
  expect_object(j, w);
  c.present = true;
  const Path tw = join(w, "threads");
  each_in_array(j, "threads", w, [&](std::size_t i, const J& t) {
    const Path iw = indexed(tw, i);
    expect_object(t, iw);
    c.threads.push_back({str(t, "name", iw), u64(t, "cpu_ns", iw)});
  });
  const Path cw = join(w, "callbacks");
  each_in_array(j, "callbacks", w, [&](std::size_t i, const J& r) {
    const Path iw = indexed(cw, i);
    expect_object(r, iw);
    CallbackCost row;
    row.module = str(r, "module", iw);
    row.what = str(r, "what", iw);
    row.calls = u64(r, "calls", iw);
    row.sampled_every = u64(r, "sampled_every", iw);
    row.samples = u64(r, "samples", iw);
    row.interrupted = opt_u64(r, "interrupted", iw, 0);
    row.estimated = boolean(r, "estimated", iw);
    row.measured = static_cast<bool>(find(r, "estimated_ns"));
    if (row.measured) {
      row.estimated_ns = u64(r, "estimated_ns", iw);
      row.spread_ns = u64(r, "spread_ns", iw);
    }
    c.callbacks.push_back(std::move(row));
  });
  const Path mw = join(w, "memory");
  each_in_array(j, "memory", w, [&](std::size_t i, const J& m) {
    const Path iw = indexed(mw, i);
    expect_object(m, iw);
    c.memory.push_back({str(m, "module", iw), str(m, "what", iw), u64(m, "peak_bytes", iw)});
  });
  c.peak_bytes = u64(j, "peak_bytes", w);
  c.written_bytes = u64(j, "written_bytes", w);
  c.callbacks_ns = u64(j, "callbacks_ns", w);
  if (find(j, "pct")) {
    c.has_pct = true;
    c.pct = dbl(j, "pct", w);
    c.steps_wall_ns = u64(j, "steps_wall_ns", w);
    c.steps_callbacks_ns = u64(j, "steps_callbacks_ns", w);
  }
  return c;
}

template <class J>
RankFile rank_file_from(const J& j) {
  expect_object(j, "");
  const auto schema = find(j, "schema");
  if (!schema) fail("not a traintime rank file (no \"schema\" field)");
  std::string schema_text;
  if (!get_string(deref(schema), &schema_text) || schema_text != kSchema)
    fail("unsupported schema " + dump(deref(schema)) + " (this reader understands \"" +
         std::string(kSchema) + "\")");

  const Path w;  // top level
  RankFile f;
  f.schema = kSchema;
  f.job_id = str(j, "job_id", w);
  f.rank = i64(j, "rank", w);
  f.world_size = i64(j, "world_size", w);
  const std::string role = str(j, "role", w);
  const std::optional<Role> r = role_from_name(role);
  if (!r) fail("field \"role\" must be \"rank\" or \"aux\" (got \"" + role + "\")");
  f.role = *r;
  f.host = str(j, "host", w);
  f.pid = i64(j, "pid", w);
  f.snapshot = boolean(j, "snapshot", w);
  const std::string exit_reason = str(j, "exit_reason", w);
  f.exit_reason = exit_reason.empty() ? ExitReason::kNone : exit_reason_from_name(exit_reason);
  if (f.exit_reason == ExitReason::kOther) f.exit_reason_text = exit_reason;
  const std::string capture = str(j, "gpu_capture", w);
  const std::optional<GpuCapture> c = gpu_capture_from_name(capture);
  if (!c)
    fail("field \"gpu_capture\" must be \"cupti\", \"unavailable\" or \"none\" (got \"" + capture +
         "\")");
  f.gpu_capture = *c;
  f.gpu_capture_reason = str(j, "gpu_capture_reason", w);
  f.gpu_records_complete = opt_bool(j, "gpu_records_complete", w, true);  // added after 1.0
  f.start_unix_ns = opt_u64(j, "start_unix_ns", w, 0);
  f.end_unix_ns = opt_u64(j, "end_unix_ns", w, 0);

  const auto& categories = need_object(j, "categories", w);
  for (std::string_view name : kCategoryNames)
    if (name != category_name(Category::kRecompute)) need(categories, name, "categories");
  each_member(categories, [&](std::string_view name, const J& t) {
    const CategoryTotals totals = totals_from(t, join("categories", name));
    // A category this reader does not know (a newer writer's) is read and left out.
    if (const std::optional<Category> c = category_from_name(name)) f.categories.set(*c) = totals;
  });
  f.categories.set(Category::kRecompute);  // added after 1.0: absent reads as zero

  each_in_array(j, "regions", w, [&](std::size_t i, const J& r) {
    f.regions.push_back(region_from(r, indexed("regions", i)));
  });
  if (find(j, "top_kernels")) f.top_kernels = kernels_from(j, w);  // optional, added after 1.0
  f.unbalanced_pops = opt_u64(j, "unbalanced_pops", w, 0);

  f.steps = steps_from(need(j, "steps", w), "steps");
  if (const auto device = find(j, "device")) {  // optional, added with MFU
    const J& d = deref(device);
    expect_object(d, "device");
    f.device_name = str(d, "name", "device");
    f.peak_tflops = opt_dbl(d, "peak_tflops", "device", 0);
    f.peak_source = str(d, "peak_source", "device");
  }

  each_in_array(j, "comm", w, [&](std::size_t i, const J& c) {
    f.comm.push_back(comm_from(c, indexed("comm", i)));
  });
  each_in_array(j, "communicators", w, [&](std::size_t i, const J& c) {
    f.communicators.push_back(communicator_from(c, indexed("communicators", i)));
  });

  const auto& memcpy_stats = need_object(j, "memcpy", w);
  for (const CopyKind kind : kStandardCopyKinds) {
    const std::string_view name = copy_kind_name(kind);
    f.memcpy[kind] =
        u64_object_from(need(memcpy_stats, name, "memcpy"), join("memcpy", name), kMemcpyFields);
  }

  f.dropped_records = u64(j, "dropped_records", w);
  if (const auto found = find(j, "capture_stats")) {  // optional, added with the GPU validation
    const J& c = deref(found);
    expect_object(c, "capture_stats");
    const Path cw = "capture_stats";
    CaptureStats& s = f.capture_stats;
    s.present = true;
    s.buffers = opt_u64(c, "buffers", cw, 0);
    s.records = opt_u64(c, "records", cw, 0);
    s.launch_callbacks = opt_u64(c, "launch_callbacks", cw, 0);
    s.correlation_ids_per_callback = opt_dbl(c, "correlation_ids_per_callback", cw, 0);
    s.joined = opt_u64(c, "joined", cw, 0);
    s.graph_node_context = opt_u64(c, "graph_node_context", cw, 0);
    s.missing_context = opt_u64(c, "missing_context", cw, 0);
    s.overwritten = opt_u64(c, "overwritten", cw, 0);
  }
  f.modules = modules_from(j);
  module_sections_from(j, f);
  each_in_array(j, "warnings", w, [&](std::size_t i, const J& warning) {
    f.warnings.push_back(as_string(warning, indexed("warnings", i)));
  });
  f.threads = threads_from(j);
  f.memory = memory_from(j, Path());
  f.self_cost = self_cost_from(j);
  return f;
}

}  // namespace

json rank_file_to_json(const RankFile& f) {
  json categories = json::object();  // every category, listed or not
  for (std::size_t c = 0; c < kCategoryCount; ++c)
    categories[std::string(kCategoryNames[c])] = totals_json(f.categories[static_cast<Category>(c)]);

  json memcpy_stats = json::object();
  for (const CopyKind kind : kStandardCopyKinds) {
    const auto it = f.memcpy.find(kind);
    const MemcpyStat m = it == f.memcpy.end() ? MemcpyStat{} : it->second;
    memcpy_stats[std::string(copy_kind_name(kind))] = u64_object(m, kMemcpyFields);
  }

  json regions = json::array();
  for (const RegionRow& r : f.regions) regions.push_back(region_json(r));
  json comm = json::array();
  for (const CommRow& c : f.comm) comm.push_back(comm_json(c));
  json communicators = json::array();
  for (const Communicator& c : f.communicators) communicators.push_back(communicator_json(c));

  // nlohmann keeps keys sorted; the order of fields is not part of the schema.
  json out = {{"schema", f.schema},
             {"job_id", f.job_id},
             {"rank", f.rank},
             {"world_size", f.world_size},
             {"role", role_name(f.role)},
             {"host", f.host},
             {"pid", f.pid},
             {"snapshot", f.snapshot},
             {"exit_reason", f.exit_reason_written()},
             {"gpu_capture", gpu_capture_name(f.gpu_capture)},
             {"gpu_capture_reason", f.gpu_capture_reason},
             {"gpu_records_complete", f.gpu_records_complete},
             {"start_unix_ns", f.start_unix_ns},
             {"end_unix_ns", f.end_unix_ns},
             {"categories", std::move(categories)},
             {"regions", std::move(regions)},
             {"top_kernels", kernels_json(f.top_kernels)},
             {"unbalanced_pops", f.unbalanced_pops},
             {"steps", steps_json(f.steps)},
             {"comm", std::move(comm)},
             {"communicators", std::move(communicators)},
             {"memcpy", std::move(memcpy_stats)},
             {"dropped_records", f.dropped_records},
             {"warnings", f.warnings}};
  if (!f.threads.empty()) out["threads"] = threads_json(f.threads);  // optional, omitted when empty
  if (f.memory.present) out["memory"] = memory_json(f.memory);  // optional
  if (f.self_cost.present) out["self_cost"] = self_cost_json(f.self_cost);  // optional
  // Each module's data section, by its own writer (DataSectionFormat::write), and modules.<name>
  // of each module that counted (core/section.h): its counters and its version. A module that
  // recorded nothing has no modules entry, even with a data section (nvml off: gpu_health says
  // "off"); its section then reads at version 1. A module this build has no format for (a
  // hand-made file) keeps the version it was read with.
  json modules = json::object();
  for (const auto& [name, data] : f.module_data) {
    const ModuleFormat* m = find_module_format(name);
    if (m && m->data.write && data) m->data.write(*data, &out);
  }
  for (const auto& [name, c] : f.modules) {
    json& entry = modules[name];
    entry["counters"] = c.counters;
    const ModuleFormat* m = find_module_format(name);
    if (const uint32_t version = m ? m->version : c.version; version > 0) entry["version"] = version;
  }
  if (!modules.empty()) out["modules"] = std::move(modules);  // optional
  if (const CaptureStats& c = f.capture_stats; c.present) {
    out["capture_stats"] = {{"buffers", c.buffers},
                            {"records", c.records},
                            {"launch_callbacks", c.launch_callbacks},
                            {"correlation_ids_per_callback", finite(c.correlation_ids_per_callback)},
                            {"joined", c.joined},
                            {"graph_node_context", c.graph_node_context},
                            {"missing_context", c.missing_context},
                            {"overwritten", c.overwritten}};
  }
  if (!f.device_name.empty() || f.peak_tflops > 0 || !f.peak_source.empty()) {
    out["device"] = {{"name", f.device_name},
                     {"peak_tflops", finite(f.peak_tflops)},
                     {"peak_source", f.peak_source}};
  }
  return out;
}

RankFile rank_file_from_json(const json& j) { return rank_file_from(j); }

json parse_rank_file_json(const char* begin, const char* end) {
  // Where the parser is, to name a duplicate: per open object its keys so far and the key being
  // read, per open array the index of the element being read.
  struct Frame {
    bool object;
    std::vector<std::string> keys;
    std::size_t index;
  };
  std::vector<Frame> open;
  auto where = [&open]() {
    std::string w;
    for (std::size_t i = 0; i + 1 < open.size(); ++i) {
      const Frame& f = open[i];
      if (f.object) w += (w.empty() ? "" : ".") + f.keys.back();
      else w += "[" + std::to_string(f.index - 1) + "]";
    }
    return w;
  };
  const json::parser_callback_t check = [&](int, json::parse_event_t event, json& parsed) {
    using E = json::parse_event_t;
    const bool starts_value = event == E::object_start || event == E::array_start || event == E::value;
    if (starts_value && !open.empty() && !open.back().object) ++open.back().index;
    switch (event) {
      case E::object_start: open.push_back({true, {}, 0}); break;
      case E::array_start: open.push_back({false, {}, 0}); break;
      case E::object_end:
      case E::array_end: open.pop_back(); break;
      case E::key: {
        std::vector<std::string>& keys = open.back().keys;
        const std::string& k = parsed.get_ref<const std::string&>();
        if (std::find(keys.begin(), keys.end(), k) != keys.end()) {
          const std::string in = where();
          throw DuplicateKey("duplicate key \"" + k + "\" in " + (in.empty() ? "the top-level object" : "\"" + in + "\"") +
                             " (JSON names each member once; which value was meant is unknown)");
        }
        keys.push_back(k);
        break;
      }
      case E::value: break;
    }
    return true;
  };
  return json::parse(begin, end, check);
}

bool write_rank_file(const std::string& path, const RankFile& f, std::string* error) {
  return write_rank_file(path, f, error, WriteMode::kCreateNew);
}

bool write_rank_file(const std::string& path, const RankFile& f, std::string* error,
                     WriteMode mode) {
  ErrnoGuard keep_errno;
  std::string text;
  try {
    // Region and kernel names are arbitrary bytes; invalid UTF-8 is replaced, never fatal.
    text = rank_file_to_json(f).dump(1, ' ', false, json::error_handler_t::replace);
    text.push_back('\n');
  } catch (const std::exception& e) {
    return set_error(error, path + ": cannot serialize rank file: " + e.what());
  }
  return write_text_file(path, text, error, mode);
}

namespace {

bool read_failed(ReadError* error, ReadError::Kind kind, const std::string& path, std::string detail) {
  if (error) *error = ReadError{kind, path, std::move(detail)};
  return false;
}

}  // namespace

std::string read_error_line(const ReadError& e) {
  return e.file + (e.kind == ReadError::Kind::kSchema ? ": rank file: " : ": ") + e.detail;
}

bool read_file_bytes(const std::string& path, std::string* bytes, ReadError* error) {
  using Kind = ReadError::Kind;
  ErrnoGuard keep_errno;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return read_failed(error, Kind::kUnreadable, path, "cannot open: " + errno_text(errno));
  // Read straight into the string, sized from fstat (one read for a file that does not grow),
  // with simdjson's padding reserved behind the text so its parser never copies it.
  struct stat st {};
  const std::size_t expect =
      ::fstat(fd, &st) == 0 && st.st_size > 0 ? static_cast<std::size_t>(st.st_size) + 1 : std::size_t{1} << 16;
  // Not cleared first: a reused buffer is then only zero-filled where it grows.
  bytes->reserve(expect + simdjson::SIMDJSON_PADDING);
  bytes->resize(expect);
  std::size_t got = 0;
  for (;;) {
    if (got == bytes->size()) bytes->resize(bytes->size() * 2);
    const ssize_t n = ::read(fd, bytes->data() + got, bytes->size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      bytes->clear();
      return read_failed(error, Kind::kUnreadable, path, "read failed");
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  bytes->resize(got);
  return true;
}

bool read_file_bytes(const std::string& path, std::string* bytes, std::string* error) {
  return as_line(error, [&](ReadError* e) { return read_file_bytes(path, bytes, e); });
}

std::optional<RankFile> rank_file_from_text(const std::string& path, const std::string& bytes,
                                            ReadError* error) {
  using Kind = ReadError::Kind;
  ErrnoGuard keep_errno;
  if (is_live_record(bytes)) {  // the record a killed process left (core/live_record.h)
    std::string why;
    std::optional<RankFile> f = rank_file_from_live_record(bytes, &why);
    if (!f) read_failed(error, Kind::kBadRecord, path, why);
    return f;
  }
  json j;
  try {
    j = parse_rank_file_json(bytes.data(), bytes.data() + bytes.size());
  } catch (const DuplicateKey& e) {
    read_failed(error, Kind::kDuplicateKey, path, e.what());
    return std::nullopt;
  } catch (const json::out_of_range&) {
    // nlohmann's lexer throws this one, not a parse_error, for a number no type holds (1E400).
    read_failed(error, Kind::kNotJson, path,
                "not valid JSON: a number too large for any type (a double holds up to 1.8e308)");
    return std::nullopt;
  } catch (const json::parse_error& e) {
    // The parser's own message ("[json.exception.parse_error.101] ...") means nothing to a
    // person; where the text stops making sense does.
    read_failed(error, Kind::kNotJson, path,
                "not valid JSON (truncated or corrupt?): unreadable from byte " +
                    std::to_string(e.byte > 0 ? e.byte - 1 : 0) + " of " + std::to_string(bytes.size()));
    return std::nullopt;
  }
  try {
    return rank_file_from_json(j);
  } catch (const SchemaError& e) {
    read_failed(error, Kind::kSchema, path, e.detail);
  } catch (const std::exception& e) {  // not one of the reader's own refusals: said as it is
    read_failed(error, Kind::kSchema, path, e.what());
  }
  return std::nullopt;
}

std::optional<RankFile> rank_file_from_text(const std::string& path, const std::string& bytes,
                                            std::string* error) {
  return as_line(error, [&](ReadError* e) { return rank_file_from_text(path, bytes, e); });
}

std::optional<RankFile> rank_file_from_simdjson(simdjson::dom::element root) {
  try {
    return rank_file_from(SimdValue{root});
  } catch (const std::exception&) {
    return std::nullopt;  // the caller reads it again through rank_file_from_text, for the message
  }
}

}  // namespace traintime::core
