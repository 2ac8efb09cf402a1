// The rank file as JSON (schema "traintime/1", documented field by field in docs/schema.md) and
// its atomic, non-clobbering write. The writer and the reader live together so they cannot drift.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "traintime/core/atomic_file.h"
#include "traintime/core/rank_file.h"

namespace traintime::core {

// Every category key is always written (zeros included), as are the four memcpy keys.
// Non-finite rates are written as 0 so the file stays valid JSON.
nlohmann::json rank_file_to_json(const RankFile& f);

// Accepts schema "traintime/1". Throws std::runtime_error naming the field (e.g.
// `regions[2].cpu_ns`) on a missing contract field, a wrong type or an unknown category, and
// naming the schema on an unsupported one. Fields outside the contract may be absent (older
// writers) and then keep their defaults; unknown extra fields are ignored.
RankFile rank_file_from_json(const nlohmann::json& j);

// JSON text parsed as a rank file's must be: like nlohmann::json::parse (which throws its
// parse_error on bad syntax), but a key named twice in one object throws DuplicateKey naming the
// key and the object ("duplicate key \"rank\" in the top-level object"). The fast path
// (read_rank_file's simdjson) refuses the same files.
struct DuplicateKey : std::runtime_error {
  using std::runtime_error::runtime_error;
};
nlohmann::json parse_rank_file_json(const char* begin, const char* end);

// Serializes `f` and writes it with write_text_file (atomic_file.h): a hidden temporary file in
// the same directory, fsynced, then moved into place (link() for kCreateNew, so a racing writer
// can never be overwritten; rename() for kReplace). Readers therefore see either no file or a
// complete one. On failure returns false, sets *error (when not null) to one line naming the
// path and the reason, and leaves no temporary file. errno is preserved.
bool write_rank_file(const std::string& path, const RankFile& f, std::string* error);  // kCreateNew
bool write_rank_file(const std::string& path, const RankFile& f, std::string* error, WriteMode mode);

// Why a rank file was not read: what went wrong, the file, and the reason alone. A caller that
// lists problems by file (traintime-report) takes `detail`; read_error_line is the one line.
struct ReadError {
  enum class Kind : uint8_t {
    kUnreadable,    // cannot open or read the file
    kNotJson,       // not JSON: truncated or corrupt text, a number no type holds
    kDuplicateKey,  // a key named twice in one object
    kSchema,        // not the contract: a field missing or of the wrong type, another schema
    kBadRecord,     // a record (core/live_record.h) that cannot be decoded
    // A reader's checks before it reads (traintime-report's load, by the file's stat):
    kNotRegular,  // a directory, a FIFO, a device: never read (a FIFO would block the reader)
    kEmpty,       // no bytes: a rank file is written whole (atomic_file.h), so it was truncated
    kTooLarge,    // larger than a rank file can be: not read at all
  };
  Kind kind = Kind::kUnreadable;
  std::string file;
  std::string detail;  // e.g. `missing field "memcpy.PtoP"`, `cannot open: No such file or directory`
};

// "<file>: <detail>", a schema refusal's detail after "rank file: " (what rank_file_from_json
// throws): the line a reader that keeps only text reports.
std::string read_error_line(const ReadError& e);

// nullopt with *error set when the file cannot be read, is not JSON (e.g. truncated) or does not
// follow the schema. errno is preserved. Reads the always-current record (core/live_record.h) as
// well. Parses with simdjson: defined in traintime_core_read (core/src/rank_file_read.cpp),
// which links libsimdjson; libtraintime.so, which must not, uses the functions below instead.
std::optional<RankFile> read_rank_file(const std::string& path, ReadError* error);
// The same, with *error = read_error_line of the failure.
std::optional<RankFile> read_rank_file(const std::string& path, std::string* error);

// The whole file into *bytes; false with *error (kUnreadable: "cannot open: <reason>" or
// "read failed") otherwise. errno is preserved.
bool read_file_bytes(const std::string& path, std::string* bytes, ReadError* error);
bool read_file_bytes(const std::string& path, std::string* bytes, std::string* error);

// read_rank_file on bytes already read, through nlohmann::json: the same reader and errors,
// without simdjson's speed.
std::optional<RankFile> rank_file_from_text(const std::string& path, const std::string& bytes,
                                            ReadError* error);
std::optional<RankFile> rank_file_from_text(const std::string& path, const std::string& bytes,
                                            std::string* error);

}  // namespace traintime::core
