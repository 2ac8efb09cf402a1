// The null module (null/): its counters, its hot path's promises and its section, read back
// from a rank file the builder made of it. A module copied from null/ keeps these tests.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "traintime/core/rank_file_builder.h"
#include "traintime/core/rank_file_json.h"
#include "traintime/null/null_format.h"
#include "traintime/null/null_module.h"
#include "traintime/modules/module_report.h"

#include <nlohmann/json.hpp>

using namespace traintime;

namespace traintime::null {
extern const modules::ModuleReport kReport;  // null_report.cpp
}  // namespace traintime::null

namespace {

int g_first_calls = 0;
void count_first_call() noexcept {
  ++g_first_calls;
  errno = EIO;  // a hook that clobbers errno: note_call() must restore it
}

void configure_counting() {
  g_first_calls = 0;
  null::Hooks hooks;
  hooks.on_first_call = &count_first_call;
  null::configure(true, hooks);
}

}  // namespace

TEST_CASE("a module that saw no call contributes no counters", "[null]") {
  configure_counting();
  const core::Section s = null::section();
  CHECK(s.name == "null");
  CHECK(s.counters.counters.empty());
  CHECK(s.warnings.empty());
  const core::RankFile f = core::build_rank_file({}, {}, {}, {}, {s});
  CHECK(f.modules.count("null") == 0);
}

TEST_CASE("calls are counted by key, and the first one is announced exactly once", "[null]") {
  configure_counting();
  errno = 42;
  null::note_call(100, true);
  CHECK(errno == 42);
  null::note_call(28, true);
  null::note_call(0, false);
  CHECK(errno == 42);
  CHECK(g_first_calls == 1);

  const core::Section s = null::section();
  CHECK(s.counters.counters == std::map<std::string, uint64_t>{
                                   {"bytes", 128}, {"calls", 3}, {"failed_calls", 1}});
  CHECK(s.warnings ==
        std::vector<std::string>{"1 of 3 null-module call(s) failed (the null module's example warning)"});
}

TEST_CASE("a counter at zero is written, with no warning", "[null]") {
  configure_counting();
  null::note_call(5, true);
  const core::Section s = null::section();
  CHECK(s.counters.counters.at("failed_calls") == 0);
  CHECK(s.warnings.empty());
}

TEST_CASE("disabled, the module counts nothing and never announces", "[null]") {
  g_first_calls = 0;
  null::Hooks hooks;
  hooks.on_first_call = &count_first_call;
  null::configure(false, hooks);
  null::note_call(10, false);
  CHECK(g_first_calls == 0);
  CHECK(null::section().counters.counters.empty());
}

TEST_CASE("configure starts the module clean (a fork child)", "[null]") {
  configure_counting();
  null::note_call(7, false);
  configure_counting();
  CHECK(null::section().counters.counters.empty());
  null::note_call(1, true);
  CHECK(g_first_calls == 1);  // announced again in the new process image
}

TEST_CASE("only the outermost of nested calls on a thread counts", "[null]") {
  configure_counting();
  CHECK(null::begin_call());
  CHECK_FALSE(null::begin_call());  // an entry point the first one calls
  null::end_call(8, true);
  CHECK(null::section().counters.counters.empty());
  null::end_call(16, true);
  CHECK(null::section().counters.counters.at("calls") == 1);
  CHECK(null::section().counters.counters.at("bytes") == 16);
  null::end_call(32, false);  // nothing open: nothing counted
  CHECK(null::section().counters.counters.at("calls") == 1);
}

TEST_CASE("fork with state open: the child starts clean, the parent keeps its own", "[null][fork]") {
  // The parent has counted a call, announced it, and is inside another when it forks. In the
  // child, the composition root's fork handler configures the module again (preload/session.cpp,
  // kModules); the parent's open call then ends there without counting or announcing anything,
  // and the child's own calls count from zero. The child reports through a pipe.
  configure_counting();
  null::note_call(100, false);
  REQUIRE(null::begin_call());
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(pipe_fds[0]);
    configure_counting();  // what the fork handler does
    null::end_call(5, false);  // the parent's call, ending in the child
    const core::Section after_parents = null::section();
    const bool clean = after_parents.counters.counters.empty() && after_parents.warnings.empty() &&
                       g_first_calls == 0;
    const bool outermost = null::begin_call();
    null::end_call(7, true);
    const auto counters = null::section().counters.counters;
    const bool counted = outermost && counters.size() == 3 && counters.at("calls") == 1 &&
                         counters.at("bytes") == 7 && counters.at("failed_calls") == 0 && g_first_calls == 1;
    const char answer[2] = {clean ? 'c' : 'x', counted ? 'c' : 'x'};
    const bool sent = write(pipe_fds[1], answer, sizeof answer) == sizeof answer;
    _exit(sent ? 0 : 1);
  }
  close(pipe_fds[1]);
  char answer[2] = {};
  const bool got = read(pipe_fds[0], answer, sizeof answer) == sizeof answer;
  close(pipe_fds[0]);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(got);
  CHECK(WIFEXITED(status));
  INFO("the child's section after the parent's open call ended there ('c': empty, nothing announced)");
  CHECK(answer[0] == 'c');
  INFO("the child's own call ('c': counted from zero and announced once)");
  CHECK(answer[1] == 'c');
  // The parent's state is its own: its open call still counts.
  null::end_call(20, true);
  const auto counters = null::section().counters.counters;
  CHECK(counters.at("calls") == 2);
  CHECK(counters.at("bytes") == 120);
  CHECK(counters.at("failed_calls") == 1);
  CHECK(g_first_calls == 1);
}

TEST_CASE("the section reaches the rank file under modules.null, its warning in warnings",
          "[null]") {
  configure_counting();
  null::note_call(64, false);
  core::Identity id;
  id.warnings = {"config"};
  const core::RankFile built = core::build_rank_file(id, {}, {}, {}, {null::section()});
  const nlohmann::json j = core::rank_file_to_json(built);
  CHECK(j.at("modules").at("null").at("counters") ==
        nlohmann::json({{"bytes", 64}, {"calls", 1}, {"failed_calls", 1}}));
  CHECK(j.at("warnings") ==
        nlohmann::json({"config", "1 of 1 null-module call(s) failed (the null module's example warning)"}));
  // And back through the one reader.
  const core::RankFile read = core::rank_file_from_json(j);
  REQUIRE(read.modules.count("null") == 1);
  CHECK(read.modules.at("null").counters.at("failed_calls") == 1);
}

TEST_CASE("its data section is written and read by its own format, through both readers", "[null][schema]") {
  configure_counting();
  null::note_call(64, true);
  null::note_call(4096, true);
  null::note_call(100, false);
  const core::RankFile built = core::build_rank_file({}, {}, {}, {}, {null::section()});
  const nlohmann::json j = core::rank_file_to_json(built);
  CHECK(j.at("null") == nlohmann::json({{"largest_call_bytes", 4096}}));
  CHECK(j.at("modules").at("null").at("version") == null::kFormat.version);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("null-data-" + std::to_string(getpid()) + ".json")).string();
  std::string error;
  REQUIRE(core::write_rank_file(path, built, &error));
  const std::optional<core::RankFile> fast = core::read_rank_file(path, &error);
  std::filesystem::remove(path);
  REQUIRE(fast);
  for (const core::RankFile& f : {core::rank_file_from_json(j), *fast}) {
    REQUIRE(null::data(f));
    CHECK(null::data(f)->largest_call_bytes == 4096);
  }
  // A file without it (an older writer) reads as none; a mistyped one is refused naming it.
  nlohmann::json old = j;
  old.erase("null");
  CHECK(null::data(core::rank_file_from_json(old)) == nullptr);
  old["null"] = {{"largest_call_bytes", "big"}};
  CHECK_THROWS_WITH(core::rank_file_from_json(old),
                    Catch::Contains("\"null.largest_call_bytes\" must be an unsigned integer"));
}

TEST_CASE("its report half merges the ranks' data sections into its figures", "[null][report]") {
  // The report half alone (module_report.h); traintime-report's use of it is tested with the
  // report (tests/report/test_module_reports.cpp).
  std::unique_ptr<modules::ReportMerge> merged = null::kReport.start();
  REQUIRE(null::kReport.figure_count == 2);
  CHECK(null::kReport.figures[0].key == "largest_call_bytes");
  CHECK_FALSE(null::kReport.value(*merged, 0));  // no rank yet: n/a
  for (int64_t rank : {0, 1, 2}) {
    configure_counting();
    null::note_call(rank == 1 ? 900 : 10 * static_cast<uint64_t>(rank + 1), true);
    core::Identity id;
    id.rank = rank;
    id.world_size = 3;
    null::kReport.merge(core::build_rank_file(id, {}, {}, {}, {null::section()}), *merged);
  }
  CHECK(null::kReport.value(*merged, 0) == 900.0);
  CHECK(null::kReport.value(*merged, 1) == 1.0);  // rank 1 made it
}

TEST_CASE("docs/schema.md lists the module and every key it counts", "[null][doc]") {
  const std::filesystem::path doc_path =
      std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "docs" / "schema.md";
  std::ifstream in(doc_path);
  REQUIRE(in.good());
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  configure_counting();
  null::note_call(1, false);
  const core::Section s = null::section();
  CHECK(doc.find("| `" + std::string(s.name) + "` |") != std::string::npos);
  for (const auto& [key, count] : s.counters.counters) {
    INFO("counter " << key);
    CHECK(doc.find("`" + key + "`") != std::string::npos);
  }
}
