// traintime-config-table: prints the library's config table (core/src/config.cpp: name, default,
// description of every TRAINTIME_* setting) as JSON. The wheel's build runs it and ships the
// result as traintime/_config_table.json, from which `traintime run` makes one option per setting
// (TRAINTIME_LOG_LEVEL -> --log-level), so the options cannot drift from the table.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "traintime/core/config.h"

int main() {
  nlohmann::json rows = nlohmann::json::array();
  for (const traintime::core::ConfigVar& v : traintime::core::config_vars())
    rows.push_back({{"name", v.name}, {"default", v.default_text}, {"doc", v.doc}});
  const std::string text = rows.dump(1) + "\n";
  return std::fwrite(text.data(), 1, text.size(), stdout) == text.size() ? 0 : 1;
}
