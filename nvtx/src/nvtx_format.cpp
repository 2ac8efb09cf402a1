// The nvtx module's format (nvtx_format.h): its warning's text, made only here.
#include "traintime/nvtx/nvtx_format.h"

namespace traintime::nvtx {

std::string messages::untracked_ranges(uint64_t n, const core::ModuleCounters&) {
  return std::to_string(n) + " NVTX range(s) opened beyond " + std::to_string(kMaxOpen) +
         " open on one thread were not recorded";
}

namespace {
constexpr core::CounterTable kTables[] = {core::counter_table(kCounters)};
}  // namespace
const core::ModuleFormat kFormat{"nvtx", 1, kTables, 1};

}  // namespace traintime::nvtx
