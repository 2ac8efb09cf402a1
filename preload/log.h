// The library's own messages: to stderr, prefixed "traintime: ", filtered by
// TRAINTIME_LOG_LEVEL. printf-style so only log.cpp compiles spdlog. Never call from a signal
// handler or a hot path; hot-path problems become counters in the rank file instead.
#pragma once

namespace traintime::rt {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kOff };

// Sets the threshold from the TRAINTIME_LOG_LEVEL spelling (config has validated it).
void set_log_level(const char* level);
bool log_enabled(LogLevel level);

void log(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Logs a warning the first time `key` is seen in this process; later calls with the same key
// are silent. Keys are compared by content.
void warn_once(const char* key, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// A line the user asked for (the rank-0 summary): printed unless the level is "off".
void notice(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace traintime::rt
