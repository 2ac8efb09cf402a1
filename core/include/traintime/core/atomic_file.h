// The atomic, non-clobbering file write the rank file and the files beside it use (POSIX:
// temporary file, fsync, link() or rename(), SIGXFSZ blocked for the write). Schema-free: the
// rank file's JSON is rank_file_json.h's.
#pragma once

#include <string>

namespace traintime::core {

enum class WriteMode {
  kCreateNew,  // fail if `path` exists: claiming a rank's file, never clobbering another's
  kReplace,    // replace `path` atomically: the owner rewriting its own file (snapshots, exit)
};

// Writes `text` to a hidden temporary file in the same directory (created exclusively, never
// through a symlink, mode 0644), fsyncs it, then moves it into place (link() for kCreateNew, so a
// racing writer can never be overwritten; rename() for kReplace). Readers therefore see either no
// file or a complete one. On failure returns false, sets *error (when not null) to one line
// naming the path and the reason, and leaves no temporary file. errno is preserved: this runs
// inside the profiled application. Used for the rank file and any text the profiler puts beside
// it (the TRAINTIME_TRACE=1 timeline).
bool write_text_file(const std::string& path, const std::string& text, std::string* error,
                     WriteMode mode);

}  // namespace traintime::core
