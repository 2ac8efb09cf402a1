#include "traintime/support/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cerrno>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "traintime/core/config.h"

namespace traintime::support {
namespace {

static_assert(core::kLogLevelNames.size() == static_cast<std::size_t>(LogLevel::kOff) + 1);

std::atomic<int> g_level{static_cast<int>(LogLevel::kWarn)};

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

spdlog::level::level_enum to_spdlog(LogLevel l) {
  switch (l) {
    case LogLevel::kTrace: return spdlog::level::trace;
    case LogLevel::kDebug: return spdlog::level::debug;
    case LogLevel::kInfo: return spdlog::level::info;
    case LogLevel::kWarn: return spdlog::level::warn;
    case LogLevel::kError: return spdlog::level::err;
    case LogLevel::kOff: break;
  }
  return spdlog::level::err;
}

void emit(LogLevel level, fmt::string_view format, fmt::format_args args) {
  const int saved = errno;
  std::string text;
  try {
    text = fmt::vformat(format, args);
  } catch (const std::exception& e) {
    text = std::string("(unformattable message: ") + e.what() + ")";
  }
  logger()->log(to_spdlog(level), "{}", text);
  errno = saved;
}

}  // namespace

void set_log_level(std::string_view level) {
  for (std::size_t i = 0; i < core::kLogLevelNames.size(); ++i)
    if (level == core::kLogLevelNames[i]) g_level.store(static_cast<int>(i), std::memory_order_relaxed);
}

bool log_enabled(LogLevel level) {
  return level != LogLevel::kOff && static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

namespace detail {

void vlog(LogLevel level, fmt::string_view format, fmt::format_args args) { emit(level, format, args); }

void vwarn_once(std::string_view key, fmt::string_view format, fmt::format_args args) {
  static std::mutex* mu = new std::mutex();
  static auto* seen = new std::set<std::string, std::less<>>();
  {
    const int saved = errno;
    std::lock_guard<std::mutex> lock(*mu);
    const bool fresh = seen->emplace(key).second;
    errno = saved;
    if (!fresh) return;
  }
  emit(LogLevel::kWarn, format, args);
}

void vnotice(fmt::string_view format, fmt::format_args args) {
  if (g_level.load(std::memory_order_relaxed) == static_cast<int>(LogLevel::kOff)) return;
  emit(LogLevel::kInfo, format, args);
}

}  // namespace detail
}  // namespace traintime::support
