// TRAINTIME_TRACE=1: the capped timeline of every activity ("traintime-trace/1",
// docs/attribution.md "Trace dump").
#include "aggregator_internal.h"
#include "traintime/core/gpu_aggregator.h"
#include <nlohmann/json.hpp>

namespace traintime::core {

using namespace aggregator_detail;

nlohmann::json GpuAggregator::trace_json(const std::function<std::string(PathId)>& path_name) const {
  using nlohmann::json;
  json j;
  j["format"] = "traintime-trace/1";
  j["events_kept"] = trace_.size();
  j["events_dropped"] = trace_dropped_;
  j["truncated"] = trace_dropped_ > 0;
  j["late_records"] = acc_.late_records;
  json cats = json::array();
  for (auto n : kCategoryNames) cats.push_back(std::string(n));
  j["categories"] = cats;
  j["kinds"] = {"kernel", "memcpy", "memset"};
  json copies = json::array();
  for (auto k = static_cast<uint8_t>(CopyKind::kNone); k <= static_cast<uint8_t>(CopyKind::kOther); ++k) {
    const std::string_view n = copy_kind_name(static_cast<CopyKind>(k));
    copies.push_back(n.empty() ? std::string("none") : std::string(n));
  }
  j["copy_kinds"] = copies;
  json ops = json::array();
  for (std::size_t o = 0; o < kCommOpCount; ++o) {
    auto n = comm_op_name(static_cast<CommOp>(o));
    ops.push_back(n.empty() ? std::string("none") : std::string(n));
  }
  j["comm_ops"] = ops;
  json names = json::array();
  for (std::size_t id = 0; id < name_end_.size(); ++id)
    names.push_back(std::string(name_of(static_cast<uint32_t>(id))));
  j["names"] = std::move(names);
  json paths = json::object();
  json events = json::array();
  for (const TraceEvent& e : trace_) {
    if (e.path != kNoPath) {
      std::string key = std::to_string(e.path);
      if (!paths.contains(key)) paths[key] = path_name(e.path);
    }
    events.push_back({e.start, e.end, e.device, e.stream, e.cat, e.path, e.step, e.kind, e.name,
                      e.bytes, e.correlation, e.copy, e.comm_op});
  }
  j["paths"] = paths;
  j["columns"] = {"start_ns", "end_ns",  "device", "stream", "category", "path",      "step",
                  "kind",     "name",    "bytes",  "correlation_id", "copy_kind", "comm_op"};
  j["events"] = std::move(events);
  return j;
}

}  // namespace traintime::core
