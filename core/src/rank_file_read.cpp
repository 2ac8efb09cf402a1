// read_rank_file: a rank file's bytes through simdjson's DOM parser (about ten times nlohmann's
// speed; traintime-report reads thousands of files per job) into the project's one reader. A file
// simdjson or the schema refuses is read again through nlohmann::json (rank_file_from_text), so
// every refusal keeps its one message (the field, the byte where the text stops making sense).
#include <cerrno>

#include "rank_file_simdjson.h"
#include "traintime/core/live_record.h"
#include "traintime/core/rank_file_json.h"

namespace traintime::core {

std::optional<RankFile> read_rank_file(const std::string& path, std::string* error) {
  const int saved_errno = errno;
  // One buffer per thread, reused: no allocation per file (traintime-report reads thousands).
  thread_local std::string bytes;
  struct Release {  // a buffer grown by an unusually large file is not kept
    ~Release() {
      if (bytes.capacity() > (16u << 20)) std::string().swap(bytes);
    }
  } release;
  if (!read_file_bytes(path, &bytes, error)) return std::nullopt;
  if (!is_live_record(bytes)) {
    // One parser per thread, reused: its buffers grow to the largest file once.
    thread_local simdjson::dom::parser parser;
    simdjson::dom::element root;
    if (parser.parse(bytes).get(root) == simdjson::SUCCESS) {
      std::optional<RankFile> f = rank_file_from_simdjson(root);
      if (f) {
        errno = saved_errno;
        return f;
      }
    }
  }
  std::optional<RankFile> f = rank_file_from_text(path, bytes, error);
  errno = saved_errno;
  return f;
}

}  // namespace traintime::core
