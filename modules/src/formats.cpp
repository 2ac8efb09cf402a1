// The formats of modules.<name>, from the one module table (module_table.h).
#include "traintime/modules/formats.h"

#include "traintime/core/core_counters.h"
#include "traintime/modules/module_table.h"

#define TRAINTIME_DECLARE_FORMAT(m) \
  namespace traintime::m {          \
  extern const core::ModuleFormat kFormat; \
  }
TRAINTIME_MODULES(TRAINTIME_DECLARE_FORMAT)
#undef TRAINTIME_DECLARE_FORMAT

namespace traintime::modules {

const std::vector<const core::ModuleFormat*>& all_formats() {
#define TRAINTIME_FORMAT_OF(m) &traintime::m::kFormat,
  static const std::vector<const core::ModuleFormat*> all = {
      &core::kAnnotationsFormat, &core::kCollectivesFormat, TRAINTIME_MODULES(TRAINTIME_FORMAT_OF)};
#undef TRAINTIME_FORMAT_OF
  return all;
}

const core::ModuleFormat* find_format(std::string_view name) {
  for (const core::ModuleFormat* f : all_formats())
    if (f->name == name) return f;
  return nullptr;
}

}  // namespace traintime::modules
