// read_rank_file: a rank file's bytes through simdjson's DOM parser (about ten times nlohmann's
// speed; traintime-report reads thousands of files per job) into the project's one reader. A file
// simdjson or the schema refuses is read again through nlohmann::json (rank_file_from_text), so
// every refusal keeps its one message (the field, the byte where the text stops making sense).
#include <algorithm>
#include <cerrno>
#include <string_view>
#include <vector>

#include "rank_file_simdjson.h"
#include "traintime/core/live_record.h"
#include "traintime/core/rank_file_json.h"

namespace traintime::core {
namespace {

// True when any object in the document names a member twice.
bool has_duplicate_key(simdjson::dom::element e) {
  simdjson::dom::array a;
  if (e.get_array().get(a) == simdjson::SUCCESS) {
    for (simdjson::dom::element el : a)
      if ((el.is_array() || el.is_object()) && has_duplicate_key(el)) return true;
    return false;
  }
  simdjson::dom::object o;
  if (e.get_object().get(o) != simdjson::SUCCESS) return false;
  // A rank file's objects have a few dozen members at most: compared pairwise; a larger one sorted.
  constexpr std::size_t kSmall = 64;
  std::string_view keys[kSmall];
  std::size_t n = 0;
  std::vector<std::string_view> many;
  for (simdjson::dom::key_value_pair kv : o) {
    if (n < kSmall) keys[n++] = kv.key;
    else many.push_back(kv.key);
    if ((kv.value.is_object() || kv.value.is_array()) && has_duplicate_key(kv.value)) return true;
  }
  if (!many.empty()) {
    many.insert(many.end(), keys, keys + n);
    std::sort(many.begin(), many.end());
    return std::adjacent_find(many.begin(), many.end()) != many.end();
  }
  for (std::size_t i = 1; i < n; ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (keys[i] == keys[j]) return true;
  return false;
}

}  // namespace

std::optional<RankFile> rank_file_fast(simdjson::dom::element root) {
  if (has_duplicate_key(root)) return std::nullopt;
  return rank_file_from_simdjson(root);
}

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
  // A record is written in place while it is read: read again, against its sequence words.
  if (is_live_record(bytes) && !read_live_record(path, &bytes, error)) return std::nullopt;
  if (!is_live_record(bytes)) {
    // One parser per thread, reused: its buffers grow to the largest file once.
    thread_local simdjson::dom::parser parser;
    simdjson::dom::element root;
    if (parser.parse(bytes).get(root) == simdjson::SUCCESS) {
      std::optional<RankFile> f = rank_file_fast(root);
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
