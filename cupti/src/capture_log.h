// Messages of the CUPTI adapter. The adapter's core is also linked into the fixture replay and
// the unit tests, so it does not own a logger: libtraintime.so routes these into rt::log
// (TRAINTIME_LOG_LEVEL, default warn: a healthy run prints nothing), a tool into its own.
// Until a sink is set, messages are discarded.
#pragma once

#include <string>

namespace traintime::cupti {

enum class LogSeverity { kDebug, kInfo, kWarning };
using LogSink = void (*)(LogSeverity severity, const std::string& message);
void set_log_sink(LogSink sink);

void log_warning(const std::string& message);
void log_info(const std::string& message);
void log_debug(const std::string& message);

}  // namespace traintime::cupti
