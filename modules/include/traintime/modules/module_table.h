// The one table of traintime's modules (docs/architecture.md "Where a new intercepted API family
// goes"): one line per module, by the name of its folder and namespace. Each module defines, in
// that namespace, `kFormat` (its data format: core/module_format.h, in traintime_formats) and
// `kModule` (its runtime half: core/module.h, in libtraintime.so). The composition root
// (preload/session.cpp) configures, starts and stops the modules in this order and stops them in
// the reverse; traintime-report finds each module's counters and warnings through it
// (core/module_format.h module_formats). A new API family copied from null/ adds its line here.
#pragma once

#define TRAINTIME_MODULES(X) \
  X(nvtx)                    \
  X(cupti)                   \
  X(nccl)                    \
  X(nvml)                    \
  X(null)
