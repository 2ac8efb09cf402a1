// libFuzzer target: the report's rank-file reader (simdjson) against the library's (nlohmann) on
// arbitrary bytes (rank_file_readers_agree.h): what the fast one accepts, the other accepts as
// the same rank file. A key named twice in an object is refused by both (simdjson's lookup would
// take the first, nlohmann's the last). Any disagreement aborts with what differed.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "rank_file_readers_agree.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string diff =
      traintime::fuzz::rank_file_readers_disagree(std::string(reinterpret_cast<const char*>(data), size));
  if (!diff.empty()) {
    std::fprintf(stderr, "fuzz_rank_file_differential: %s\n", diff.c_str());
    std::abort();
  }
  return 0;
}
