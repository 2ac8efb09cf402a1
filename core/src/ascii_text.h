// ASCII-only text helpers shared by the parsers of core/ (config values, category rules).
// Locale-free on purpose: the profiler runs inside applications that may call setlocale(), and
// the meaning of a variable or of a region name must not depend on that.
#pragma once

#include <string>
#include <string_view>

namespace traintime::core::ascii {

inline bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }
inline bool is_lower(char c) { return c >= 'a' && c <= 'z'; }
inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_alnum(char c) { return is_upper(c) || is_lower(c) || is_digit(c); }
inline char to_lower(char c) { return is_upper(c) ? static_cast<char>(c - 'A' + 'a') : c; }

inline std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = to_lower(c);
  return out;
}

inline std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace traintime::core::ascii
