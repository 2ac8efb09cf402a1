// Every module format of this build (core/module_format.h module_formats), from the one module
// table (module_table.h) and core's own sections.
#include "traintime/core/core_counters.h"
#include "traintime/core/module_format.h"
#include "traintime/modules/module_table.h"

#include <iterator>

#define TRAINTIME_DECLARE_FORMAT(m) \
  namespace traintime::m {          \
  extern const core::ModuleFormat kFormat; \
  }
TRAINTIME_MODULES(TRAINTIME_DECLARE_FORMAT)
#undef TRAINTIME_DECLARE_FORMAT

namespace traintime::core {

namespace {
// Constant-initialised (addresses only): nothing to construct at start or destroy at exit.
#define TRAINTIME_FORMAT_OF(m) &traintime::m::kFormat,
constexpr const ModuleFormat* kAll[] = {&kAnnotationsFormat, &kCollectivesFormat,
                                        TRAINTIME_MODULES(TRAINTIME_FORMAT_OF)};
#undef TRAINTIME_FORMAT_OF
}  // namespace

ModuleFormatList module_formats() { return {kAll, std::size(kAll)}; }

const ModuleFormat* find_module_format(std::string_view name) {
  for (const ModuleFormat* f : module_formats())
    if (f->name == name) return f;
  return nullptr;
}

}  // namespace traintime::core
