// The header's calls when the profiler is absent: none, after the one look-up.
#include <catch2/catch.hpp>

#include <traintime/traintime.h>
#include "fake_profiler.h"

namespace {

int g_name_evaluations = 0;

const char* counted(const char* name) {
  ++g_name_evaluations;
  return name;
}

}  // namespace

TEST_CASE("without the profiler the annotations call nothing and a scope's name is never evaluated",
          "[annotate]") {
  fake::present = false;
  for (int i = 0; i < 3; ++i) {
    TT_SCOPE(counted("forward"));
    tt_push("layer");
    tt_pop();
    TT_PUSH_STATIC("optimizer");
    tt_pop();
    tt_step(1, 1);
  }
  CHECK(fake::calls.empty());
  CHECK(g_name_evaluations == 0);
  CHECK(fake::lookups == 1);
}
