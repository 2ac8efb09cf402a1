// The library's one logging path (every module of libtraintime.so and the tools linking the
// adapters): messages go to stderr prefixed "traintime: ", filtered by TRAINTIME_LOG_LEVEL
// (default warn, so a healthy run prints nothing but rank 0's exit line).
//
// fmt-style: log_warn("cannot write {}: {}", path, reason). Only log.cpp compiles spdlog and
// fmt's formatting code; callers see fmt/core.h alone (argument capture, no formatting), so the
// library carries no DT_NEEDED on libfmt and no fmt symbol is exported.
//
// Never call from a signal handler or a hot path (launch callback, region push/pop, NCCL
// wrapper): problems there become counters in the rank file. Every call keeps errno.
#pragma once

#include <fmt/core.h>

#include <string_view>

namespace traintime::support {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kOff };  // core::kLogLevelNames order

// Sets the threshold from a TRAINTIME_LOG_LEVEL spelling (core::parse_config validated it);
// an unknown spelling leaves it unchanged.
void set_log_level(std::string_view level);
bool log_enabled(LogLevel level);

namespace detail {
void vlog(LogLevel level, fmt::string_view format, fmt::format_args args);
// Logs at warn level unless `key` was seen before in this process.
void vwarn_once(std::string_view key, fmt::string_view format, fmt::format_args args);
// A line the user asked for: printed unless the level is "off".
void vnotice(fmt::string_view format, fmt::format_args args);
}  // namespace detail

template <typename... Args>
void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (log_enabled(level)) detail::vlog(level, format, fmt::make_format_args(args...));
}
// The common case: log_warn("...", ...) is log(LogLevel::kWarn, "...", ...).
template <typename... Args>
void log_warn(fmt::format_string<Args...> format, Args&&... args) {
  log(LogLevel::kWarn, format, std::forward<Args>(args)...);
}
template <typename... Args>
void warn_once(std::string_view key, fmt::format_string<Args...> format, Args&&... args) {
  if (log_enabled(LogLevel::kWarn)) detail::vwarn_once(key, format, fmt::make_format_args(args...));
}
template <typename... Args>
void notice(fmt::format_string<Args...> format, Args&&... args) {
  detail::vnotice(format, fmt::make_format_args(args...));
}

}  // namespace traintime::support
