// The README's configuration table must list every variable of the config table, with the same
// default and description, and nothing else (DESIGN: one typed table; the README mirrors it).
#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "traintime/core/config.h"

namespace {

std::string readme_text() {
  std::string here = __FILE__;  // .../tests/<folder>/test_readme_config_table.cpp
  const std::string root = here.substr(0, here.rfind("/tests/"));
  std::ifstream in(root + "/README.md");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("README config table matches config_vars()", "[config][readme]") {
  const std::string readme = readme_text();
  REQUIRE_FALSE(readme.empty());
  std::set<std::string> documented;
  std::istringstream lines(readme);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("| `TRAINTIME_", 0) == 0) documented.insert(line);

  std::set<std::string> expected;
  for (const auto& v : traintime::core::config_vars()) {
    const std::string def = *v.default_text ? std::string("`") + v.default_text + "`" : "(empty)";
    expected.insert(std::string("| `") + v.name + "` | " + def + " | " + v.doc + " |");
  }
  for (const auto& row : expected) CHECK(documented.count(row) == 1);
  for (const auto& row : documented) CHECK(expected.count(row) == 1);
}
