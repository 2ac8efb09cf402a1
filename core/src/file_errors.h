// What the rank file's reader and writer (rank_file_json.cpp) and the atomic write
// (atomic_file.cpp) share: errno kept across every return, and one error line per failure.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>

#include "traintime/core/rank_file_json.h"

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

// A reader's overload that says its failure as one line: `read` run with a ReadError, the
// failure (when `error` is not null) made read_error_line.
template <class Read>
auto as_line(std::string* error, Read read) {
  ReadError e;
  auto result = read(error ? &e : nullptr);
  if (!result && error) *error = read_error_line(e);
  return result;
}

}  // namespace traintime::core
