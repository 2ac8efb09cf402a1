// The header's calls when the profiler is there (the stand-in hands out its table).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <traintime/traintime.h>
#include "fake_profiler.h"

namespace {

int g_name_evaluations = 0;

const char* counted(const char* name) {
  ++g_name_evaluations;
  return name;
}

void scoped_work() {
  TT_SCOPE(counted("forward"));
  fake::calls.push_back("work");
}

void refused_scope() { TT_SCOPE("refused"); }

}  // namespace

TEST_CASE("TT_SCOPE registers its site's name once and pushes and pops by id on every pass", "[annotate]") {
  fake::present = true;
  for (int i = 0; i < 3; ++i) scoped_work();
  const std::vector<std::string> expected = {"register forward", "push_id 1", "work", "pop",
                                             "push_id 1",        "work",      "pop",  "push_id 1",
                                             "work",             "pop"};
  CHECK(fake::calls == expected);
  CHECK(g_name_evaluations == 1);
  CHECK(fake::lookups == 1);
}

TEST_CASE("a TT_SCOPE site whose name is refused opens and closes nothing and asks once", "[annotate]") {
  fake::present = true;
  fake::refuse_names = true;
  for (int i = 0; i < 3; ++i) refused_scope();
  // No pop either: it would close the region around the scope.
  CHECK(fake::calls == std::vector<std::string>{"register refused"});
}

TEST_CASE("tt_push and tt_pop reach the profiler's push and pop", "[annotate]") {
  fake::present = true;
  tt_push("layer");
  tt_pop();
  tt_step(1, 1);
  CHECK(fake::calls == std::vector<std::string>{"push layer", "pop", "step"});
}
