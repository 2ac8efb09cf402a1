// traintime-report --watch's parse cache (job.h, ParseCache): a rank file unchanged since the last
// read is taken from the cache; one replaced by rename is read again; a record (rank-*.live),
// changed in place with its modification time unmoved, is read again every time; a file gone
// from the folder is forgotten.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "job.h"
#include "traintime/core/live_record.h"
#include "traintime/core/rank_file_json.h"

using namespace traintime;
using namespace traintime::report;
namespace fs = std::filesystem;

namespace {

core::RankFile rank(int64_t r, uint64_t steps) {
  core::RankFile f;
  f.schema = "traintime/1";
  f.job_id = "job-cache";
  f.rank = r;
  f.world_size = 4;
  f.role = core::Role::kRank;
  f.host = "node";
  f.pid = 100 + r;
  f.snapshot = true;
  f.steps.count = steps;
  return f;
}

uint64_t steps_of_rank(const Job& job, int64_t r) {
  for (const RankInput& in : job.ranks)
    if (in.data.rank == r) return in.data.steps.count;
  return UINT64_MAX;
}

}  // namespace

TEST_CASE("the watch's parse cache reads again only what changed", "[report][watch]") {
  const fs::path dir = fs::temp_directory_path() / ("tt-parse-cache-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto path = [&](int r, const char* ext) {
    char name[32];
    std::snprintf(name, sizeof name, "rank-%05d%s", r, ext);
    return (dir / name).string();
  };
  for (int r = 0; r < 3; ++r) REQUIRE(core::write_rank_file(path(r, ".json"), rank(r, 5), nullptr));

  // Rank 3 runs without a rank file yet: its record only, written in place.
  const int fd = ::open(path(3, ".live").c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, core::kLiveRecordHeaderBytes) == 0);
  void* page = ::mmap(nullptr, core::kLiveRecordHeaderBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  REQUIRE(page != MAP_FAILED);
  auto* h = static_cast<core::LiveRecordHeader*>(page);
  core::live_record_init(h);
  uint64_t end = core::kLiveRecordHeaderBytes;
  REQUIRE(core::live_record_write_slot(h, fd, &end, core::rank_file_to_json(rank(3, 5)).dump()));
  core::live_record_store_steps(h, {6, 0, 0, 0, 0, 0, 0, 0, 0});

  ParseCache cache;
  LoadOptions options;
  options.cache = &cache;
  options.threads = 2;
  Job job = load_job(dir.string(), options);
  REQUIRE(job.ranks.size() == 4);
  CHECK(steps_of_rank(job, 3) == 6);
  CHECK(cache.hits() == 0);

  job = load_job(dir.string(), options);
  CHECK(job.ranks.size() == 4);
  CHECK(cache.hits() == 3);  // the three rank files; the record is read again

  // Rank 1 writes a newer snapshot (replaced by rename: a new inode); rank 3 stores a step into
  // its mapping, and its file's modification time is put back as it was.
  struct stat before {};
  REQUIRE(::stat(path(3, ".live").c_str(), &before) == 0);
  REQUIRE(core::write_rank_file(path(1, ".json"), rank(1, 9), nullptr, core::WriteMode::kReplace));
  core::live_record_store_steps(h, {7, 0, 0, 0, 0, 0, 0, 0, 0});
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  REQUIRE(::utimensat(AT_FDCWD, path(3, ".live").c_str(), times, 0) == 0);
  job = load_job(dir.string(), options);
  CHECK(steps_of_rank(job, 1) == 9);
  CHECK(steps_of_rank(job, 3) == 7);
  CHECK(steps_of_rank(job, 0) == 5);
  CHECK(cache.hits() == 5);  // ranks 0 and 2 only

  // A file that went away is forgotten, not reported from memory.
  fs::remove(path(2, ".json"));
  job = load_job(dir.string(), options);
  CHECK(job.ranks.size() == 3);
  CHECK(steps_of_rank(job, 2) == UINT64_MAX);
  CHECK(cache.size() == 2);

  ::munmap(page, core::kLiveRecordHeaderBytes);
  ::close(fd);
  fs::remove_all(dir);
}

TEST_CASE("the checks before a file is read refuse it as the reader's errors do, by kind", "[report]") {
  using Kind = core::ReadError::Kind;
  const fs::path dir = fs::temp_directory_path() / ("tt-pre-read-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "rank-00001.json");  // a directory named like a rank file
  const std::string empty = (dir / "rank-00002.json").string(), good = (dir / "rank-00003.json").string();
  { std::FILE* f = std::fopen(empty.c_str(), "w"); REQUIRE(f); std::fclose(f); }
  std::string why;
  REQUIRE(core::write_rank_file(good, rank(3, 1), &why));
  struct stat st {};
  const auto refused = [&](const fs::path& p, uint64_t max) { return check_before_read(p.string(), max, &st); };

  const std::optional<core::ReadError> gone = refused(dir / "rank-00000.json", 1 << 20);
  REQUIRE(gone);
  CHECK(gone->kind == Kind::kUnreadable);
  CHECK(gone->detail == "cannot read: No such file or directory");
  const std::optional<core::ReadError> folder = refused(dir / "rank-00001.json", 1 << 20);
  REQUIRE(folder);
  CHECK(folder->kind == Kind::kNotRegular);
  CHECK(folder->detail == "not a regular file; skipped");
  const std::optional<core::ReadError> none = refused(empty, 1 << 20);
  REQUIRE(none);
  CHECK(none->kind == Kind::kEmpty);
  CHECK(none->file == empty);
  CHECK(none->detail == "empty file (a rank file is never empty: was it truncated?); skipped");
  const std::optional<core::ReadError> big = refused(good, 10);
  REQUIRE(big);
  CHECK(big->kind == Kind::kTooLarge);
  CHECK(big->detail.find(", larger than a rank file can be (limit 0.0 MiB); skipped without reading") != std::string::npos);
  CHECK_FALSE(refused(good, 1 << 20));
  CHECK(st.st_size > 10);  // the stat it read, for the parse cache's key

  // load_job's problem lines are those details, after the file.
  LoadOptions options;
  const Job job = load_job(dir.string(), options);
  REQUIRE(job.ranks.size() == 1);
  for (const auto& [file, detail] : {std::pair<fs::path, std::string>{dir / "rank-00001.json", folder->detail},
                                     {fs::path(empty), none->detail}})
    CHECK(std::any_of(job.problems.begin(), job.problems.end(),
                      [&](const Problem& p) { return p.file == file.string() && p.message == detail; }));
  fs::remove_all(dir);
}
