// A stand-in for libtraintime.so: the table traintime.h dispatches to, recording every call.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fake {

// Whether traintime_get_api_v1 hands out the table (set before a translation unit's first
// call: each resolves the profiler once).
extern bool present;
// Whether register_name refuses every name (returns 0).
extern bool refuse_names;
// The calls the header made, in order: "register forward", "push_id 1", "pop", "push x".
extern std::vector<std::string> calls;
extern int lookups;  // calls of traintime_get_api_v1

}  // namespace fake
