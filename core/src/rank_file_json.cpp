// The rank file's JSON, both ways (docs/schema.md): writer and reader with one clear message per
// problem; the atomic file write under it is atomic_file.cpp's. Over ~500 lines on purpose: the
// writer and the reader of every field sit side by side, so a field changed in one is seen to
// need changing in the other.
#include "traintime/core/rank_file_json.h"
#include "traintime/core/live_record.h"

#include "file_errors.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace traintime::core {
namespace {

using nlohmann::json;

constexpr const char* kMemcpyKinds[] = {"HtoD", "DtoH", "DtoD", "PtoP"};

// Objects made only of unsigned counters are described once, here, and both written and read
// from these tables, so a field name cannot differ between the writer and the reader.
template <class T>
struct U64Field {
  const char* name;
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

constexpr U64Field<MemcpyStat> kMemcpyFields[] = {
    {"count", &MemcpyStat::count}, {"bytes", &MemcpyStat::bytes}, {"gpu_ns", &MemcpyStat::gpu_ns}};

constexpr U64Field<SizeBucket> kSizeBucketFields[] = {{"lo_bytes", &SizeBucket::lo_bytes},
                                                      {"calls", &SizeBucket::calls},
                                                      {"bytes", &SizeBucket::bytes},
                                                      {"gpu_ns", &SizeBucket::gpu_ns}};

template <class T, std::size_t N>
json u64_object(const T& value, const U64Field<T> (&fields)[N]) {
  json out = json::object();
  for (const U64Field<T>& f : fields) out[f.name] = value.*f.member;
  return out;
}

// ---- writing ---------------------------------------------------------------------------------

double finite(double v) { return std::isfinite(v) ? v : 0.0; }

json totals_json(const CategoryTotals& t) { return u64_object(t, kCategoryTotalsFields); }

json by_category_json(const std::map<std::string, CategoryTotals>& m) {
  json out = json::object();
  for (const auto& [name, t] : m) out[name] = totals_json(t);
  return out;
}

json step_totals_json(const StepTotals& t) { return u64_object(t, kStepTotalsFields); }

json region_json(const RegionRow& r) {
  json top = json::array();
  for (const KernelStat& k : r.top_kernels)
    top.push_back({{"name", k.name}, {"count", k.count}, {"gpu_sum_ns", k.gpu_sum_ns}});
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

json steps_json(const Steps& s) {
  json detail = json::array();
  for (const Steps::Detail& d : s.detail) {
    json busy = json::object();
    for (const auto& [name, ns] : d.busy_ns_by_category) busy[name] = ns;
    detail.push_back({{"index", d.index},
                      {"wall_ns", d.wall_ns},
                      {"span_ns", d.span_ns},
                      {"partial", d.partial},
                      {"totals", step_totals_json(d.totals)},
                      {"busy_ns_by_category", std::move(busy)}});
  }
  json out = {{"count", s.count},
              {"warmup", s.warmup},
              {"wall_ns", u64_object(s.wall_ns, kDurationFields)},
              {"samples", s.samples},
              {"tokens", s.tokens},
              {"samples_per_s", finite(s.samples_per_s)},
              {"tokens_per_s", finite(s.tokens_per_s)},
              {"totals", step_totals_json(s.totals)},
              {"partial_final_step", s.partial_final_step},
              {"detail", std::move(detail)}};
  if (s.flops_per_step > 0) {
    out["flops_per_step"] = finite(s.flops_per_step);
    out["tflops"] = finite(s.tflops);
    if (s.mfu > 0) out["mfu"] = finite(s.mfu);
  }
  return out;
}

json comm_json(const CommRow& c) {
  json sizes = json::array();
  for (const SizeBucket& b : c.sizes) sizes.push_back(u64_object(b, kSizeBucketFields));
  return {{"op", comm_op_name(c.op)},
          {"comm_size", c.comm_size},
          {"calls", c.calls},
          {"bytes", c.bytes},
          {"bytes_known", c.bytes_known},
          {"gpu_ns", c.gpu_ns},
          {"algbw_gbps", finite(c.algbw_gbps)},
          {"busbw_gbps", finite(c.busbw_gbps)},
          {"sizes", std::move(sizes)}};
}

json communicator_json(const Communicator& c) {
  json recent = json::array();
  for (const RecentCollective& r : c.recent)
    recent.push_back({{"seq", r.seq},
                      {"op", comm_op_name(r.op)},
                      {"bytes", r.bytes},
                      {"gpu_start_ns", r.gpu_start_ns},
                      {"gpu_end_ns", r.gpu_end_ns}});
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
  return out;
}

json threads_json(const std::vector<ThreadSnapshot>& threads) {
  json out = json::array();
  for (const ThreadSnapshot& t : threads)
    out.push_back({{"tid", t.tid}, {"step", t.step}, {"open_regions", t.open_regions}});
  return out;
}

// ---- reading ---------------------------------------------------------------------------------
// Every accessor names the field by its full path ("regions[3].cpu_ns") in its error.

[[noreturn]] void fail(const std::string& message) {
  throw std::runtime_error("rank file: " + message);
}

std::string join(const std::string& where, std::string_view key) {
  return where.empty() ? std::string(key) : where + "." + std::string(key);
}

std::string indexed(const std::string& where, std::size_t i) {
  return where + "[" + std::to_string(i) + "]";
}

void expect_object(const json& j, const std::string& where) {
  if (!j.is_object())
    fail(where.empty() ? std::string("top level must be an object (got ") + j.type_name() + ")"
                       : "field \"" + where + "\" must be an object (got " + j.type_name() + ")");
}

const json* find(const json& obj, std::string_view key) {
  const auto it = obj.find(std::string(key));
  return it == obj.end() ? nullptr : &*it;
}

const json& need(const json& obj, std::string_view key, const std::string& where) {
  const json* v = find(obj, key);
  if (v == nullptr) fail("missing field \"" + join(where, key) + "\"");
  return *v;
}

[[noreturn]] void wrong_type(const json& v, const std::string& name, const char* expected) {
  fail("field \"" + name + "\" must be " + expected + " (got " + v.type_name() + " " +
       v.dump(-1, ' ', false, json::error_handler_t::replace) + ")");
}

uint64_t as_u64(const json& v, const std::string& name) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  wrong_type(v, name, "an unsigned integer");
}

int64_t as_i64(const json& v, const std::string& name) {
  if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return static_cast<int64_t>(v.get<uint64_t>());
  wrong_type(v, name, "an integer");
}

uint32_t as_u32(const json& v, const std::string& name) {
  const uint64_t x = as_u64(v, name);
  if (x > std::numeric_limits<uint32_t>::max()) wrong_type(v, name, "an unsigned 32-bit integer");
  return static_cast<uint32_t>(x);
}

double as_double(const json& v, const std::string& name) {
  if (!v.is_number()) wrong_type(v, name, "a number");
  return v.get<double>();
}

bool as_bool(const json& v, const std::string& name) {
  if (!v.is_boolean()) wrong_type(v, name, "a boolean");
  return v.get<bool>();
}

std::string as_string(const json& v, const std::string& name) {
  if (!v.is_string()) wrong_type(v, name, "a string");
  return v.get<std::string>();
}

// Required fields.
uint64_t u64(const json& o, std::string_view k, const std::string& w) { return as_u64(need(o, k, w), join(w, k)); }
uint32_t u32(const json& o, std::string_view k, const std::string& w) { return as_u32(need(o, k, w), join(w, k)); }
int64_t i64(const json& o, std::string_view k, const std::string& w) { return as_i64(need(o, k, w), join(w, k)); }
double dbl(const json& o, std::string_view k, const std::string& w) { return as_double(need(o, k, w), join(w, k)); }
bool boolean(const json& o, std::string_view k, const std::string& w) { return as_bool(need(o, k, w), join(w, k)); }
std::string str(const json& o, std::string_view k, const std::string& w) { return as_string(need(o, k, w), join(w, k)); }

// Optional fields: outside the contract, so files from writers that predate them still read.
uint64_t opt_u64(const json& o, std::string_view k, const std::string& w, uint64_t d) {
  const json* v = find(o, k);
  return v ? as_u64(*v, join(w, k)) : d;
}
double opt_dbl(const json& o, std::string_view k, const std::string& w, double d) {
  const json* v = find(o, k);
  return v ? as_double(*v, join(w, k)) : d;
}
bool opt_bool(const json& o, std::string_view k, const std::string& w, bool d) {
  const json* v = find(o, k);
  return v ? as_bool(*v, join(w, k)) : d;
}

const json& need_object(const json& o, std::string_view k, const std::string& w) {
  const json& v = need(o, k, w);
  expect_object(v, join(w, k));
  return v;
}

const json& need_array(const json& o, std::string_view k, const std::string& w) {
  const json& v = need(o, k, w);
  if (!v.is_array()) wrong_type(v, join(w, k), "an array");
  return v;
}

// An absent optional array reads as empty.
const json& opt_array(const json& o, std::string_view k, const std::string& w) {
  static const json kEmpty = json::array();
  const json* v = find(o, k);
  if (v == nullptr) return kEmpty;
  if (!v->is_array()) wrong_type(*v, join(w, k), "an array");
  return *v;
}

Category category_named(const std::string& name, const std::string& where) {
  const std::optional<Category> c = category_from_name(name);
  if (!c) fail("unknown category \"" + name + "\" in \"" + where + "\"");
  return *c;
}

template <class T, std::size_t N>
T u64_object_from(const json& j, const std::string& w, const U64Field<T> (&fields)[N]) {
  expect_object(j, w);
  T value{};
  for (const U64Field<T>& f : fields)
    value.*f.member = f.required ? u64(j, f.name, w) : opt_u64(j, f.name, w, 0);
  return value;
}

CategoryTotals totals_from(const json& j, const std::string& w) {
  return u64_object_from(j, w, kCategoryTotalsFields);
}

std::map<std::string, CategoryTotals> by_category_from(const json& j, const std::string& w) {
  std::map<std::string, CategoryTotals> out;
  for (const auto& [name, t] : j.items()) {
    category_named(name, w);
    out[name] = totals_from(t, join(w, name));
  }
  return out;
}

StepTotals step_totals_from(const json& j, const std::string& w) {
  return u64_object_from(j, w, kStepTotalsFields);
}

RegionRow region_from(const json& j, const std::string& w) {
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
  const json& top = need_array(j, "top_kernels", w);
  for (std::size_t i = 0; i < top.size(); ++i) {
    const std::string kw = indexed(join(w, "top_kernels"), i);
    expect_object(top[i], kw);
    r.top_kernels.push_back({str(top[i], "name", kw), u64(top[i], "count", kw),
                             u64(top[i], "gpu_sum_ns", kw)});
  }
  return r;
}

Steps steps_from(const json& j, const std::string& w) {
  expect_object(j, w);
  Steps s;
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
  s.totals = step_totals_from(need(j, "totals", w), join(w, "totals"));
  s.partial_final_step = opt_bool(j, "partial_final_step", w, false);
  const json& detail = opt_array(j, "detail", w);
  for (std::size_t i = 0; i < detail.size(); ++i) {
    const std::string dw = indexed(join(w, "detail"), i);
    const json& dj = detail[i];
    expect_object(dj, dw);
    Steps::Detail d;
    d.index = u64(dj, "index", dw);
    d.wall_ns = u64(dj, "wall_ns", dw);
    d.span_ns = u64(dj, "span_ns", dw);
    d.partial = opt_bool(dj, "partial", dw, false);
    d.totals = step_totals_from(need(dj, "totals", dw), join(dw, "totals"));
    const std::string bw = join(dw, "busy_ns_by_category");
    for (const auto& [name, ns] : need_object(dj, "busy_ns_by_category", dw).items()) {
      category_named(name, bw);
      d.busy_ns_by_category[name] = as_u64(ns, join(bw, name));
    }
    s.detail.push_back(std::move(d));
  }
  return s;
}

CommRow comm_from(const json& j, const std::string& w) {
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
  const json& sizes = opt_array(j, "sizes", w);
  for (std::size_t i = 0; i < sizes.size(); ++i)
    c.sizes.push_back(u64_object_from(sizes[i], indexed(join(w, "sizes"), i), kSizeBucketFields));
  return c;
}

Communicator communicator_from(const json& j, const std::string& w) {
  expect_object(j, w);
  Communicator c;
  c.id = str(j, "id", w);
  c.size = u32(j, "size", w);
  c.rank = u32(j, "rank", w);
  c.ops_enqueued = opt_u64(j, "ops_enqueued", w, 0);
  c.ops_completed = opt_u64(j, "ops_completed", w, 0);
  const json& recent = opt_array(j, "recent", w);
  for (std::size_t i = 0; i < recent.size(); ++i) {
    const std::string rw = indexed(join(w, "recent"), i);
    const json& rj = recent[i];
    expect_object(rj, rw);
    c.recent.push_back({u64(rj, "seq", rw), comm_op_from_name(str(rj, "op", rw)), u64(rj, "bytes", rw),
                        u64(rj, "gpu_start_ns", rw), u64(rj, "gpu_end_ns", rw)});
  }
  const json& in_flight = opt_array(j, "in_flight", w);
  for (std::size_t i = 0; i < in_flight.size(); ++i) {
    const std::string iw = indexed(join(w, "in_flight"), i);
    const json& ij = in_flight[i];
    expect_object(ij, iw);
    c.in_flight.push_back({u64(ij, "seq", iw), comm_op_from_name(str(ij, "op", iw)), u64(ij, "bytes", iw)});
  }
  return c;
}

std::vector<ThreadSnapshot> threads_from(const json& threads) {
  std::vector<ThreadSnapshot> out;
  for (std::size_t i = 0; i < threads.size(); ++i) {
    const std::string tw = indexed("threads", i);
    const json& tj = threads[i];
    expect_object(tj, tw);
    ThreadSnapshot t;
    t.tid = u64(tj, "tid", tw);
    t.step = u64(tj, "step", tw);
    const json& open = need_array(tj, "open_regions", tw);
    for (std::size_t k = 0; k < open.size(); ++k)
      t.open_regions.push_back(as_string(open[k], indexed(join(tw, "open_regions"), k)));
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

json rank_file_to_json(const RankFile& f) {
  json categories = json::object();
  for (std::string_view name : kCategoryNames) {
    const auto it = f.categories.find(std::string(name));
    categories[std::string(name)] = totals_json(it == f.categories.end() ? CategoryTotals{} : it->second);
  }
  // Categories outside the fixed set are kept rather than silently dropped.
  for (const auto& [name, t] : f.categories)
    if (!categories.contains(name)) categories[name] = totals_json(t);

  json memcpy_stats = json::object();
  for (const char* kind : kMemcpyKinds) {
    const auto it = f.memcpy.find(kind);
    const MemcpyStat m = it == f.memcpy.end() ? MemcpyStat{} : it->second;
    memcpy_stats[kind] = u64_object(m, kMemcpyFields);
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
             {"role", f.role},
             {"host", f.host},
             {"pid", f.pid},
             {"snapshot", f.snapshot},
             {"exit_reason", f.exit_reason},
             {"gpu_capture", f.gpu_capture},
             {"gpu_capture_reason", f.gpu_capture_reason},
             {"gpu_records_complete", f.gpu_records_complete},
             {"start_unix_ns", f.start_unix_ns},
             {"end_unix_ns", f.end_unix_ns},
             {"categories", std::move(categories)},
             {"regions", std::move(regions)},
             {"unbalanced_pops", f.unbalanced_pops},
             {"steps", steps_json(f.steps)},
             {"comm", std::move(comm)},
             {"communicators", std::move(communicators)},
             {"memcpy", std::move(memcpy_stats)},
             {"dropped_records", f.dropped_records},
             {"warnings", f.warnings}};
  if (!f.threads.empty()) out["threads"] = threads_json(f.threads);  // optional, omitted when empty
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

RankFile rank_file_from_json(const json& j) {
  expect_object(j, "");
  const json* schema = find(j, "schema");
  if (schema == nullptr) fail("not a traintime rank file (no \"schema\" field)");
  if (!schema->is_string() || schema->get<std::string>() != kSchema)
    fail("unsupported schema " + schema->dump(-1, ' ', false, json::error_handler_t::replace) +
         " (this reader understands \"" + std::string(kSchema) + "\")");

  const std::string w;  // top level
  RankFile f;
  f.schema = kSchema;
  f.job_id = str(j, "job_id", w);
  f.rank = i64(j, "rank", w);
  f.world_size = i64(j, "world_size", w);
  f.role = str(j, "role", w);
  f.host = str(j, "host", w);
  f.pid = i64(j, "pid", w);
  f.snapshot = boolean(j, "snapshot", w);
  f.exit_reason = str(j, "exit_reason", w);
  f.gpu_capture = str(j, "gpu_capture", w);
  f.gpu_capture_reason = str(j, "gpu_capture_reason", w);
  f.gpu_records_complete = opt_bool(j, "gpu_records_complete", w, true);  // added after 1.0
  f.start_unix_ns = opt_u64(j, "start_unix_ns", w, 0);
  f.end_unix_ns = opt_u64(j, "end_unix_ns", w, 0);

  const json& categories = need_object(j, "categories", w);
  for (std::string_view name : kCategoryNames) need(categories, name, "categories");
  for (const auto& [name, t] : categories.items())
    f.categories[name] = totals_from(t, join("categories", name));

  const json& regions = need_array(j, "regions", w);
  for (std::size_t i = 0; i < regions.size(); ++i)
    f.regions.push_back(region_from(regions[i], indexed("regions", i)));
  f.unbalanced_pops = opt_u64(j, "unbalanced_pops", w, 0);

  f.steps = steps_from(need(j, "steps", w), "steps");
  if (const json* device = find(j, "device")) {  // optional, added with MFU
    expect_object(*device, "device");
    f.device_name = str(*device, "name", "device");
    f.peak_tflops = opt_dbl(*device, "peak_tflops", "device", 0);
    f.peak_source = str(*device, "peak_source", "device");
  }

  const json& comm = need_array(j, "comm", w);
  for (std::size_t i = 0; i < comm.size(); ++i)
    f.comm.push_back(comm_from(comm[i], indexed("comm", i)));
  const json& communicators = need_array(j, "communicators", w);
  for (std::size_t i = 0; i < communicators.size(); ++i)
    f.communicators.push_back(communicator_from(communicators[i], indexed("communicators", i)));

  const json& memcpy_stats = need_object(j, "memcpy", w);
  for (const char* kind : kMemcpyKinds) {
    f.memcpy[kind] =
        u64_object_from(need(memcpy_stats, kind, "memcpy"), join("memcpy", kind), kMemcpyFields);
  }

  f.dropped_records = u64(j, "dropped_records", w);
  if (const json* c = find(j, "capture_stats")) {  // optional, added with the GPU validation
    expect_object(*c, "capture_stats");
    const std::string cw = "capture_stats";
    CaptureStats& s = f.capture_stats;
    s.present = true;
    s.buffers = opt_u64(*c, "buffers", cw, 0);
    s.records = opt_u64(*c, "records", cw, 0);
    s.launch_callbacks = opt_u64(*c, "launch_callbacks", cw, 0);
    s.correlation_ids_per_callback = opt_dbl(*c, "correlation_ids_per_callback", cw, 0);
    s.joined = opt_u64(*c, "joined", cw, 0);
    s.graph_node_context = opt_u64(*c, "graph_node_context", cw, 0);
    s.missing_context = opt_u64(*c, "missing_context", cw, 0);
    s.overwritten = opt_u64(*c, "overwritten", cw, 0);
  }
  const json& warnings = need_array(j, "warnings", w);
  for (std::size_t i = 0; i < warnings.size(); ++i)
    f.warnings.push_back(as_string(warnings[i], indexed("warnings", i)));
  f.threads = threads_from(opt_array(j, "threads", w));
  return f;
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

std::optional<RankFile> read_rank_file(const std::string& path, std::string* error) {
  ErrnoGuard keep_errno;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    set_error(error, path + ": cannot open: " + errno_text(errno));
    return std::nullopt;
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) {
    set_error(error, path + ": read failed");
    return std::nullopt;
  }
  const std::string bytes = buffer.str();
  if (is_live_record(bytes)) {  // the record a killed process left (core/live_record.h)
    std::string why;
    std::optional<RankFile> f = rank_file_from_live_record(bytes, &why);
    if (!f) set_error(error, path + ": " + why);
    return f;
  }
  json j;
  try {
    j = json::parse(bytes);
  } catch (const json::parse_error& e) {
    // The parser's own message ("[json.exception.parse_error.101] ...") means nothing to a
    // person; where the text stops making sense does.
    const std::size_t size = buffer.str().size();
    set_error(error, path + ": not valid JSON (truncated or corrupt?): unreadable from byte " +
                         std::to_string(e.byte > 0 ? e.byte - 1 : 0) + " of " + std::to_string(size));
    return std::nullopt;
  }
  try {
    return rank_file_from_json(j);
  } catch (const std::exception& e) {
    set_error(error, path + ": " + e.what());
    return std::nullopt;
  }
}

}  // namespace traintime::core
