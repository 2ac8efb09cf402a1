#include "log.h"

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace traintime::rt {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kWarn)};
std::mutex g_mu;

// Leaked on purpose: messages are logged from exit handlers, after static destructors may
// have run, so nothing here may be destroyed before the process ends.
spdlog::logger* logger() {
  static spdlog::logger* l = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    auto* lg = new spdlog::logger("traintime", std::move(sink));
    lg->set_pattern("traintime: %v");
    lg->set_level(spdlog::level::trace);
    lg->flush_on(spdlog::level::trace);
    return lg;
  }();
  return l;
}

std::set<std::string>& seen_keys() {
  static auto* s = new std::set<std::string>();
  return *s;
}

spdlog::level::level_enum to_spdlog(LogLevel l) {
  switch (l) {
    case LogLevel::kTrace: return spdlog::level::trace;
    case LogLevel::kDebug: return spdlog::level::debug;
    case LogLevel::kInfo: return spdlog::level::info;
    case LogLevel::kWarn: return spdlog::level::warn;
    case LogLevel::kError: return spdlog::level::err;
    case LogLevel::kOff: break;
  }
  return spdlog::level::off;
}

void emit(LogLevel level, const char* fmt, va_list ap) {
  const int saved = errno;
  char buf[1024];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  logger()->log(to_spdlog(level == LogLevel::kOff ? LogLevel::kError : level), "{}", buf);
  errno = saved;
}

}  // namespace

void set_log_level(const char* level) {
  static const char* const kNames[] = {"trace", "debug", "info", "warn", "error", "off"};
  for (int i = 0; i < 6; ++i)
    if (level && std::strcmp(level, kNames[i]) == 0) g_level.store(i, std::memory_order_relaxed);
}

bool log_enabled(LogLevel level) {
  return level != LogLevel::kOff && static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

void log(LogLevel level, const char* fmt, ...) {
  if (!log_enabled(level)) return;
  va_list ap;
  va_start(ap, fmt);
  emit(level, fmt, ap);
  va_end(ap);
}

void warn_once(const char* key, const char* fmt, ...) {
  if (!log_enabled(LogLevel::kWarn)) return;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!seen_keys().insert(key).second) return;
  }
  va_list ap;
  va_start(ap, fmt);
  emit(LogLevel::kWarn, fmt, ap);
  va_end(ap);
}

void notice(const char* fmt, ...) {
  if (g_level.load(std::memory_order_relaxed) == static_cast<int>(LogLevel::kOff)) return;
  va_list ap;
  va_start(ap, fmt);
  emit(LogLevel::kInfo, fmt, ap);
  va_end(ap);
}

}  // namespace traintime::rt
