// The rank-file reader's fast path (core/src/rank_file_json.cpp) for read_rank_file
// (core/src/rank_file_read.cpp): the same reader on a simdjson DOM. Private to core: only
// traintime_core_read, which links libsimdjson, parses with it; libtraintime.so never does.
#pragma once

#include <optional>

#include <simdjson.h>

#include "traintime/core/rank_file.h"

namespace traintime::core {

// nullopt when the document does not follow the schema; rank_file_from_text then says why.
std::optional<RankFile> rank_file_from_simdjson(simdjson::dom::element root);

// The fast path as read_rank_file takes it: rank_file_from_simdjson, but nullopt as well when an
// object names a member twice (simdjson's lookup would take the first, nlohmann's the last; both
// refuse, and rank_file_from_text names the key). Defined in rank_file_read.cpp.
std::optional<RankFile> rank_file_fast(simdjson::dom::element root);

}  // namespace traintime::core
