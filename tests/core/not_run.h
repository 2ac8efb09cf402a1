// A Catch2 test case whose path this machine cannot run says so and returns, and CTest reports
// it as not run, never as passed: every unit test is registered with the marker below as its
// SKIP_REGULAR_EXPRESSION (tests/core/CMakeLists.txt). Catch2 v2 has no SKIP of its own; its
// console reporter prints a WARN's message whatever the outcome.
#pragma once

#include <catch2/catch.hpp>

#define TT_NOT_RUN(reason)                   \
  do {                                       \
    WARN("traintime-not-run: " << (reason)); \
    return;                                  \
  } while (0)
