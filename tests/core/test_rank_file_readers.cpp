// The project's one rank-file reader has two parsers under it (core/rank_file_json.h): simdjson
// for the report, nlohmann for the library and for every refusal's message. They read the same
// files the same way: the differential fuzz target's corpus replayed here (every build, not only
// the fuzzing one), and a key named twice, which each parser alone would resolve differently
// (simdjson's lookup takes the first, nlohmann the last), refused by both, naming the key.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "rank_file_readers_agree.h"
#include "traintime/core/rank_file_json.h"

using namespace traintime;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// read_rank_file (the report's reader, simdjson first) on `text` written to a file.
std::optional<core::RankFile> read_as_file(const std::string& text, std::string* error) {
  const fs::path p = fs::temp_directory_path() / ("tt-readers-" + std::to_string(::getpid()) + ".json");
  std::ofstream(p, std::ios::binary) << text;
  std::optional<core::RankFile> f = core::read_rank_file(p.string(), error);
  fs::remove(p);
  return f;
}

}  // namespace

TEST_CASE("the report's and the library's readers agree on the differential corpus", "[rank_file][readers]") {
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(TT_DIFFERENTIAL_CORPUS)) {
    INFO(e.path().string());
    CHECK(fuzz::rank_file_readers_disagree(slurp(e.path())) == "");
    ++files;
  }
  CHECK(files >= 5);
}

TEST_CASE("a key named twice is refused by both readers, naming the key", "[rank_file][readers]") {
  const std::string golden = slurp(fs::path(TT_DIFFERENTIAL_CORPUS) / "golden-rank0.json");
  std::string error;
  REQUIRE(read_as_file(golden, &error));

  const std::size_t at = golden.find("\n \"rank\":") + 2;  // the top level's (indented once)
  REQUIRE(at != std::string::npos + 2);
  const std::string top = golden.substr(0, at) + "\"rank\": 7,\n " + golden.substr(at);
  CHECK_FALSE(read_as_file(top, &error));
  INFO(error);
  CHECK(error.find("duplicate key \"rank\" in the top-level object") != std::string::npos);
  CHECK_FALSE(core::rank_file_from_text("rank-00000.json", top, &error));
  CHECK(error.find("rank-00000.json: duplicate key \"rank\" in the top-level object") == 0);

  // Nested: named by where it sits, in either reader.
  const std::string nested = slurp(fs::path(TT_DIFFERENTIAL_CORPUS) / "duplicate-key-in-region.json");
  CHECK_FALSE(read_as_file(nested, &error));
  CHECK(error.find("duplicate key \"path\" in \"regions[0]\"") != std::string::npos);

  // The same key in two different objects is no duplicate.
  CHECK(read_as_file(R"({"a": {"k": 1}, "b": {"k": 2}, )" + golden.substr(golden.find('{') + 1), &error));
}

TEST_CASE("a number too large for any type is a refusal, not an exception", "[rank_file][readers]") {
  // Found by the differential fuzz target: nlohmann throws out_of_range (not parse_error) for it,
  // and simdjson refuses it, so the report's reader fell through to an uncaught exception.
  std::string error;
  const std::string text = R"({"schema": "traintime/1", "rank": 1E48576})";
  CHECK_FALSE(read_as_file(text, &error));
  CHECK(error.find("a number too large for any type") != std::string::npos);
  CHECK(fuzz::rank_file_readers_disagree(text) == "");
}
