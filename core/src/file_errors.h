// What the rank file's reader and writer (rank_file_json.cpp) and the atomic write
// (atomic_file.cpp) share: errno kept across every return, and one error line per failure.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>

namespace traintime::core {

// Restores errno on every return path: the writer runs inside the profiled application.
struct ErrnoGuard {
  int saved = errno;
  ~ErrnoGuard() { errno = saved; }
};

inline bool set_error(std::string* error, const std::string& message) {
  if (error) *error = message;
  return false;
}

inline std::string errno_text(int err) { return std::strerror(err); }

}  // namespace traintime::core
