// The null module's format (null_format.h): its warning's text, made only here.
#include "traintime/null/null_format.h"

namespace traintime::null {

std::string messages::failed_calls(uint64_t n, const core::ModuleCounters& all) {
  return std::to_string(n) + " of " + std::to_string(core::counter(all, kCounters, Counter::calls)) +
         " null-module call(s) failed (the null module's example warning)";
}

namespace {
constexpr core::CounterTable kTables[] = {core::counter_table(kCounters)};
}  // namespace
const core::ModuleFormat kFormat{"null", 1, kTables, 1};

}  // namespace traintime::null
