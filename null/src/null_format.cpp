// The null module's format (null_format.h): its warning's text, made only here, and its data
// section's writer and reader.
#include "traintime/null/null_format.h"

#include <memory>

#include "traintime/core/json_read.h"

namespace traintime::null {

std::string messages::failed_calls(uint64_t n, const core::ModuleCounters& all) {
  return std::to_string(n) + " of " + std::to_string(core::counter(all, kCounters, Counter::calls)) +
         " null-module call(s) failed (the null module's example warning)";
}

const NullData* data(const core::RankFile& f) {
  const auto it = f.module_data.find(std::string(kFormat.name));
  // Only its reader and its section() put data under its name.
  return it == f.module_data.end() ? nullptr : static_cast<const NullData*>(it->second.get());
}

namespace {

using namespace core::json_read;

void write(const core::ModuleData& d, json* top) {
  (*top)["null"] = {{"largest_call_bytes", static_cast<const NullData&>(d).largest_call_bytes}};
}

// One template for both documents (json_read.h): absent (an older writer, no call) reads as none.
template <class J>
std::shared_ptr<const core::ModuleData> read(const J& top) {
  const auto found = find(top, "null");
  if (!found) return nullptr;
  const Path w = "null";
  expect_object(deref(found), w);
  auto out = std::make_shared<NullData>();
  out->largest_call_bytes = u64(deref(found), "largest_call_bytes", w);
  return out;
}

constexpr core::CounterTable kTables[] = {core::counter_table(kCounters)};

}  // namespace

const core::ModuleFormat kFormat{"null", 1, kTables, 1, {"null", &write, &read<json>, &read<SimdValue>}};

}  // namespace traintime::null
