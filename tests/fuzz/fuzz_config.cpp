// libFuzzer target: TRAINTIME_* configuration parsing (core/config.h) with arbitrary values. The
// input is "NAME=VALUE" lines; names are mapped onto the real variables so every parser sees
// hostile text (huge numbers, signs, invalid UTF-8, 10 MB strings). A bad value must become one
// warning per variable, never an exception or a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "traintime/core/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& vars = traintime::core::config_vars();
  std::map<std::string, std::string> env;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  size_t line = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view l = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    const size_t eq = l.find('=');
    const std::string value(eq == std::string_view::npos ? l : l.substr(eq + 1));
    env[vars[line++ % vars.size()].name] = value;
  }
  std::vector<std::string> warnings;
  (void)traintime::core::parse_config(
      [&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      warnings);
  if (warnings.size() > env.size()) std::abort();  // at most one warning per variable
  return 0;
}
