// libFuzzer target: the project's one rank-file reader (core/rank_file_json.h) on arbitrary
// bytes. Any input may be refused, but only with std::runtime_error naming the problem; a file it
// accepts must survive the writer and be accepted again (what traintime-report and the tests
// rely on). Crashes, sanitizer reports and other exceptions are bugs.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "traintime/core/rank_file_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  traintime::core::RankFile f;
  try {
    f = traintime::core::rank_file_from_json(j);
  } catch (const std::runtime_error&) {
    return 0;  // refused, with a message
  }
  const nlohmann::json again = traintime::core::rank_file_to_json(f);
  try {
    (void)traintime::core::rank_file_from_json(again);
  } catch (const std::runtime_error&) {
    std::abort();  // the writer produced a file the reader refuses
  }
  return 0;
}
