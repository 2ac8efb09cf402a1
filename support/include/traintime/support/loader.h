// What the dynamic loader has done: a cheap "has anything been loaded since?" test, so code that
// looks for a library (the real NCCL behind a wrapper, libcuda for a lazy CUPTI start) repeats
// its dlsym/dlopen only when the set of loaded objects may have changed.
#pragma once

namespace traintime::support {

// Number of objects the loader has ever added to this process (dl_iterate_phdr's dlpi_adds);
// it only grows. errno untouched.
unsigned long long loaded_object_adds() noexcept;

// Number of objects the loader has ever removed (dlpi_subs); it only grows. errno untouched.
unsigned long long loaded_object_subs() noexcept;

// Whether `p` lies in a segment of a loaded object that is mapped without write permission:
// its code and read-only data, where a string literal's text cannot change while the object
// stays loaded. False for the heap, stacks, anonymous and writable memory. Takes the loader's
// lock (dl_iterate_phdr): not for a hot path. errno untouched.
bool in_read_only_segment(const void* p) noexcept;

}  // namespace traintime::support
