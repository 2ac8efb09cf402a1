// read_rank_file: a rank file's bytes through simdjson's DOM parser (about ten times nlohmann's
// speed; traintime-report reads thousands of files per job) into the project's one reader. A file
// simdjson or the schema refuses is read again through nlohmann::json (rank_file_from_text), so
// every refusal keeps its one message (the field, the byte where the text stops making sense).
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string_view>
#include <vector>

#include "file_errors.h"
#include "rank_file_simdjson.h"
#include "traintime/core/live_record.h"
#include "traintime/core/rank_file_json.h"

namespace traintime::core {
namespace {

// True when any object in the document names a member twice. On the report's hot path: each key
// sets one bit of a 64-bit mask by a hash of its length and end bytes, and only a key whose bit
// was already set is compared with the keys before it, so a usual object costs one pass.
bool nests(simdjson::dom::element e) {
  const simdjson::dom::element_type t = e.type();
  return t == simdjson::dom::element_type::OBJECT || t == simdjson::dom::element_type::ARRAY;
}

bool has_duplicate_key(simdjson::dom::element e) {
  simdjson::dom::array a;
  if (e.get_array().get(a) == simdjson::SUCCESS) {
    for (simdjson::dom::element el : a)
      if (nests(el) && has_duplicate_key(el)) return true;
    return false;
  }
  simdjson::dom::object o;
  if (e.get_object().get(o) != simdjson::SUCCESS) return false;
  constexpr std::size_t kKept = 64;  // keys kept for the exact comparison; beyond, a sorted copy
  std::string_view keys[kKept];
  std::size_t n = 0;
  uint64_t seen = 0;
  bool maybe = false;
  for (simdjson::dom::key_value_pair kv : o) {
    const std::string_view k = kv.key;
    const std::size_t h = (k.size() * 7 + (k.empty() ? 0 : static_cast<unsigned char>(k.front()) * 3 +
                                                              static_cast<unsigned char>(k.back()))) & 63;
    maybe = maybe || (seen >> h & 1) != 0 || n >= kKept;
    seen |= uint64_t{1} << h;
    if (n < kKept) keys[n] = k;
    ++n;
    if (nests(kv.value) && has_duplicate_key(kv.value)) return true;
  }
  if (!maybe) return false;
  std::vector<std::string_view> all;
  all.reserve(n);
  for (simdjson::dom::key_value_pair kv : o) all.push_back(kv.key);
  std::sort(all.begin(), all.end());
  return std::adjacent_find(all.begin(), all.end()) != all.end();
}

}  // namespace

std::optional<RankFile> rank_file_fast(simdjson::dom::element root) {
  if (has_duplicate_key(root)) return std::nullopt;
  return rank_file_from_simdjson(root);
}

std::optional<RankFile> read_rank_file(const std::string& path, ReadError* error) {
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
  if (is_live_record(bytes)) {
    std::string why;
    if (!read_live_record(path, &bytes, &why)) {
      if (error) *error = ReadError{ReadError::Kind::kUnreadable, path, std::move(why)};
      return std::nullopt;
    }
  }
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

std::optional<RankFile> read_rank_file(const std::string& path, std::string* error) {
  return as_line(error, [&](ReadError* e) { return read_rank_file(path, e); });
}

}  // namespace traintime::core
