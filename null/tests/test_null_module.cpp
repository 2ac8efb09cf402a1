// The null module (null/): its counters, its hot path's promises and its section, read back
// from a rank file the builder made of it. A module copied from null/ keeps these tests.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "traintime/core/rank_file_builder.h"
#include "traintime/core/rank_file_json.h"
#include "traintime/null/null_module.h"

#include <nlohmann/json.hpp>

using namespace traintime;

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
