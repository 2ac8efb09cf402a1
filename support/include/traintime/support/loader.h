// What the dynamic loader has done: a cheap "has anything been loaded since?" test, so code that
// looks for a library (the real NCCL behind a wrapper, libcuda for a lazy CUPTI start) repeats
// its dlsym/dlopen only when the set of loaded objects may have changed.
#pragma once

namespace traintime::support {

// Number of objects the loader has ever added to this process (dl_iterate_phdr's dlpi_adds);
// it only grows. errno untouched.
unsigned long long loaded_object_adds() noexcept;

}  // namespace traintime::support
