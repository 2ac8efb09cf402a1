// The nvml module's format (nvml_format.h): its warning's text, made only here.
#include "traintime/nvml/nvml_format.h"

namespace traintime::nvml {

std::string messages::summary_from_last_publish(uint64_t, const core::ModuleCounters& all) {
  return core::last_publish_message("the GPU health figures", all);
}

namespace {
constexpr core::CounterTable kTables[] = {core::counter_table(kCounters)};
}  // namespace
const core::ModuleFormat kFormat{"nvml", 1, kTables, 1};

}  // namespace traintime::nvml
