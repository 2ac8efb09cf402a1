// The two rank-file readers on the same bytes (core/rank_file_json.h): the report's fast path
// (simdjson, read_rank_file) and the nlohmann one the library uses (rank_file_from_text), which
// also gives every refusal its message. The fast path may refuse more (read_rank_file then reads
// the bytes again through nlohmann, so the user sees that one's answer); what it accepts, the
// other must accept too, as the same rank file. Used by the differential fuzz target and by the
// unit test that replays its corpus (tests/core/test_rank_file_readers.cpp).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "rank_file_simdjson.h"  // core/src: the fast path alone, without its fallback
#include "traintime/core/live_record.h"
#include "traintime/core/rank_file_json.h"

namespace traintime::fuzz {

// "" when the readers agree on `bytes`, else what differs.
inline std::string rank_file_readers_disagree(const std::string& bytes) {
  if (core::is_live_record(bytes)) return "";  // records are read by the one (nlohmann) path
  std::optional<core::RankFile> fast;
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element root;
  const simdjson::padded_string padded(bytes);
  if (parser.parse(padded).get(root) == simdjson::SUCCESS) fast = core::rank_file_fast(root);
  std::string error;
  const std::optional<core::RankFile> slow = core::rank_file_from_text("input", bytes, &error);
  if (!fast) return "";
  if (!slow) return "the fast path accepts what the library's reader refuses (" + error + ")";
  const nlohmann::json a = core::rank_file_to_json(*fast), b = core::rank_file_to_json(*slow);
  if (a != b) return "the readers read different rank files: fast " + a.dump() + "\nlibrary " + b.dump();
  return "";
}

}  // namespace traintime::fuzz
