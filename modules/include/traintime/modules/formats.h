// Every data format a rank file's modules section can hold: the modules' (module_table.h) and
// the sections core fills on its own (annotations, collectives). For the writer's tests and
// traintime-report, which renders each counted warning from these tables.
#pragma once

#include <string_view>
#include <vector>

#include "traintime/core/module_format.h"

namespace traintime::modules {

// The format of section modules.<name>; null for a name no module of this version writes (a
// newer writer's: its counters still merge, its warnings are grouped by their text).
const core::ModuleFormat* find_format(std::string_view name);
const std::vector<const core::ModuleFormat*>& all_formats();

}  // namespace traintime::modules
