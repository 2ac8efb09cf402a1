// The nccl module's format (nccl_format.h): each warning's text, made only here, and its data
// section, proxy_progress and proxy_steps (proxy_progress_section.h), written and read only here.
#include "traintime/nccl/nccl_format.h"

#include <memory>

#include "traintime/core/json_read.h"
#include "traintime/nccl/proxy_progress_section.h"

namespace traintime::nccl {

using core::ModuleCounters;

std::string messages::missing_real(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) +
         " NCCL call(s) found no NCCL function in the process and returned ncclSystemError; "
         "load the NCCL the program was built with";
}
std::string messages::unregistered(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) +
         " NCCL call(s) on a communicator whose size and rank could not be read were not counted";
}
std::string messages::pending_dropped(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) +
         " NCCL call(s) launched later by NCCL's own thread could not wait for their kernel "
         "(queue full); some kernels may be linked to a later call";
}
std::string messages::children_unnamed(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) + " communicator(s) made by ncclCommSplit/Shrink were not used before " +
         std::to_string(kMaxPending) + " newer ones: their ids are per process, not the same on every rank";
}
std::string messages::calls_without_communicator(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) + " NCCL call(s) beyond the communicator table's capacity were not counted";
}
std::string messages::groups_lost(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) +
         " NCCL group(s) could not be recorded (two threads raced for one slot); their kernels "
         "count for the group's first op";
}
std::string messages::profiler_plugin_chained_init_failures(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) +
         " communicator(s): the chained NCCL profiler plugin's init failed; it sees no events "
         "of those communicators, as it would see none without traintime";
}
std::string messages::profiler_plugin_progress_dropped(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) +
         " NCCL proxy operation(s) or kernel channel(s) found the progress table full and are missing "
         "from proxy_progress (the hang report may not name every channel)";
}

std::string messages::profiler_plugin_kernel_ch_lost(uint64_t n, const ModuleCounters&) {
  return std::to_string(n) +
         " NCCL kernel(s) still ran when 512 newer ones had been planned, or had more than 64 tasks: "
         "NCCL's kernel-channel timers of those collectives were not kept (their GPU time is missing "
         "where CUPTI did not capture)";
}

const ProxyProgressSection* proxy_progress(const core::RankFile& f) {
  const auto it = f.module_data.find(std::string(kFormat.name));
  // Only this module's reader and its summary() put data under its name.
  return it == f.module_data.end() ? nullptr : static_cast<const ProxyProgressSection*>(it->second.get());
}

namespace {

using namespace core::json_read;

// ---- writing ----
// proxy_progress (docs/schema.md): a figure not measured is absent (n/a, never 0).
json proxy_progress_json(const std::vector<ProxyProgress>& rows) {
  json out = json::array();
  for (const ProxyProgress& p : rows) {
    json row = {{"communicator", p.communicator}, {"rank", p.rank},     {"channel", p.channel},
                {"peer", p.peer},                 {"direction", p.direction}, {"state", p.state},
                {"source", p.source},             {"since_ns", p.since_ns}, {"idle_ns", p.idle_ns}};
    if (p.op != core::CommOp::kUnknown) row["op"] = core::comm_op_name(p.op);
    if (p.pxn) row["pxn"] = true;
    const auto known = [&row](const char* key, uint64_t v) {
      if (v != ProxyProgress::kUnknown) row[key] = v;
    };
    known("nccl_seq", p.nccl_seq);
    known("steps_total", p.steps_total);
    known("steps_posted", p.steps_posted);
    known("steps_done", p.steps_done);
    known("bytes_done", p.bytes_done);
    out.push_back(std::move(row));
  }
  return out;
}

void proxy_progress_section_json(const core::ModuleData& data, json* top) {
  const auto& s = static_cast<const ProxyProgressSection&>(data);  // the module's own (Section::data)
  if (!s.rows.empty()) (*top)["proxy_progress"] = proxy_progress_json(s.rows);  // omitted when none
  if (!s.proxy_steps.empty()) (*top)["proxy_steps"] = s.proxy_steps;
}

// ---- reading (core/json_read.h: the same template for both documents) ----
// proxy_progress and proxy_steps: both optional (added with the profiler plugin); null when
// the file has neither.
template <class J>
std::shared_ptr<const core::ModuleData> proxy_progress_section_from(const J& top) {
  if (!find(top, "proxy_progress") && !find(top, "proxy_steps")) return nullptr;
  auto out = std::make_shared<ProxyProgressSection>();
  const Path rows_w = "proxy_progress";
  each_in_opt_array(top, "proxy_progress", Path(), [&](std::size_t i, const J& pj) {
    const Path pw = indexed(rows_w, i);
    expect_object(pj, pw);
    ProxyProgress p;
    p.communicator = str(pj, "communicator", pw);
    p.rank = static_cast<int32_t>(i64(pj, "rank", pw));
    p.channel = u32(pj, "channel", pw);
    p.peer = static_cast<int32_t>(i64(pj, "peer", pw));
    p.direction = str(pj, "direction", pw);
    p.state = str(pj, "state", pw);
    p.source = str(pj, "source", pw);
    p.since_ns = u64(pj, "since_ns", pw);
    p.idle_ns = u64(pj, "idle_ns", pw);
    p.op = core::comm_op_from_name(opt_str(pj, "op", pw, "unknown"));
    p.pxn = opt_bool(pj, "pxn", pw, false);
    constexpr uint64_t u = ProxyProgress::kUnknown;
    p.nccl_seq = opt_u64(pj, "nccl_seq", pw, u);
    p.steps_total = opt_u64(pj, "steps_total", pw, u);
    p.steps_posted = opt_u64(pj, "steps_posted", pw, u);
    p.steps_done = opt_u64(pj, "steps_done", pw, u);
    p.bytes_done = opt_u64(pj, "bytes_done", pw, u);
    out->rows.push_back(std::move(p));
  });
  out->proxy_steps = opt_str(top, "proxy_steps", Path(), "");
  return out;
}

constexpr core::CounterTable kTables[] = {core::counter_table(kCounters)};

}  // namespace

const core::ModuleFormat kFormat{
    "nccl", 1, kTables, 1,
    {"proxy_progress, proxy_steps", &proxy_progress_section_json, &proxy_progress_section_from<json>,
     &proxy_progress_section_from<SimdValue>}};

}  // namespace traintime::nccl
