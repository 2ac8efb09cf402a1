#include "capture_log.h"

#include <atomic>
#include <cerrno>

namespace traintime::cupti {
namespace {

std::atomic<LogSink> g_sink{nullptr};

void emit(LogSeverity severity, const std::string& message) {
  if (LogSink sink = g_sink.load(std::memory_order_acquire)) {
    const int saved_errno = errno;
    sink(severity, message);
    errno = saved_errno;
  }
}

}  // namespace

void set_log_sink(LogSink sink) { g_sink.store(sink, std::memory_order_release); }
void log_warning(const std::string& message) { emit(LogSeverity::kWarning, message); }
void log_info(const std::string& message) { emit(LogSeverity::kInfo, message); }
void log_debug(const std::string& message) { emit(LogSeverity::kDebug, message); }

}  // namespace traintime::cupti
