// Callgrind's instrumentation switches for the benchmarks scripts/count_instructions.py counts
// (run with --instr-atstart=no). Without valgrind's headers they are statements that do nothing,
// so `if (x) CALLGRIND_START_INSTRUMENTATION;` has a body.
#pragma once

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_START_INSTRUMENTATION \
  do {                                  \
  } while (0)
#define CALLGRIND_STOP_INSTRUMENTATION \
  do {                                 \
  } while (0)
#endif
