// Assembling this process's core::RankFile and writing it under a name no other process owns
// (DESIGN §6): rank-%05d.json for the first process of a job to claim the rank, else
// rank-%05d.pid%d.json with role "aux" (a DataLoader worker or helper that inherited RANK).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

#include "log.h"
#include "runtime_state.h"
#include "traintime/core/rank_file_json.h"

namespace traintime::rt::detail {
namespace {

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

// mkdir -p; returns 0 or the errno of the failing step.
int make_dirs(const std::string& dir) {
  std::string partial;
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    partial = dir.substr(0, pos);
    if (partial.empty()) continue;
    if (mkdir(partial.c_str(), 0777) != 0 && errno != EEXIST) return errno;
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) return errno;
  return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

void report_write_error(State& s, const std::string& what) {
  if (s.write_error_reported) return;
  s.write_error_reported = true;
  log(LogLevel::kError,
      "cannot write the rank file into %s (%s); set TRAINTIME_OUTPUT to a writable directory",
      s.output_dir.c_str(), what.c_str());
}

std::string claim_text(const State& s) {
  return s.job_id + " " + std::to_string(getpid()) + " " + host_name() + "\n";
}

std::string read_small(const std::string& path) {
  std::string out;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[512];
  ssize_t n = read(fd, buf, sizeof buf);
  if (n > 0) out.assign(buf, static_cast<std::size_t>(n));
  close(fd);
  return out;
}

bool write_all(int fd, const std::string& text) {
  return write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

// Who owns rank `rank` in this directory. The claim file is created with O_EXCL, so of two
// processes only one gets it; a claim left by another job (an earlier run into the same
// directory) is taken over by an atomic rename, and re-read to see who won a race.
bool claim_main_name(State& s, const std::string& claim) {
  const std::string mine = claim_text(s);
  int fd = open(claim.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd >= 0) {
    const bool ok = write_all(fd, mine);
    close(fd);
    return ok;
  }
  if (errno != EEXIST) return false;
  const std::string theirs = read_small(claim);
  const std::string their_job = theirs.substr(0, theirs.find(' '));
  if (their_job == s.job_id || theirs.empty()) return false;  // same job: never clobber
  const std::string tmp = claim + ".tmp" + std::to_string(getpid());
  fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const bool ok = write_all(fd, mine);
  close(fd);
  if (!ok || rename(tmp.c_str(), claim.c_str()) != 0) {
    unlink(tmp.c_str());
    return false;
  }
  return read_small(claim) == mine;
}

}  // namespace

void claim_locked(State& s) {
  int64_t rank = 0, world = 1;
  effective_rank(s, &rank, &world);
  if (!s.file_path.empty() && s.claimed_rank == rank) return;
  if (!s.file_path.empty()) {
    // The rank became known after a snapshot claimed rank 0 (a communicator told us): move.
    unlink(s.file_path.c_str());
    if (s.role == "rank") {
      char old_claim[64];
      std::snprintf(old_claim, sizeof old_claim, "/.rank-%05" PRId64 ".claim", s.claimed_rank);
      unlink((s.output_dir + old_claim).c_str());
    }
    s.file_path.clear();
  }
  const int err = make_dirs(s.output_dir);
  if (err != 0) {
    report_write_error(s, std::string("cannot create it: ") + std::strerror(err));
    return;
  }
  char name[96];
  std::snprintf(name, sizeof name, "/.rank-%05" PRId64 ".claim", rank);
  // A fork child inherited its parent's rank and is never the rank's owner.
  if (!s.forked_child && claim_main_name(s, s.output_dir + name)) {
    std::snprintf(name, sizeof name, "/rank-%05" PRId64 ".json", rank);
    s.role = "rank";
  } else {
    std::snprintf(name, sizeof name, "/rank-%05" PRId64 ".pid%d.json", rank,
                  static_cast<int>(getpid()));
    s.role = "aux";
  }
  s.file_path = s.output_dir + name;
  s.claimed_rank = rank;
}

core::RankFile assemble_rank_file(State& s, bool snapshot, const char* exit_reason) {
  core::RankFile f;
  f.job_id = s.job_id;
  effective_rank(s, &f.rank, &f.world_size);
  f.role = s.role;
  f.host = host_name();
  f.pid = getpid();
  f.snapshot = snapshot;
  f.exit_reason = exit_reason;
  f.gpu_capture = "none";
  f.gpu_capture_reason = "no GPU activity was captured in this process";
  f.start_unix_ns = s.load_unix_ns;
  f.end_unix_ns = unix_ns();
  for (std::size_t i = 0; i < core::kCategoryCount; ++i)
    f.categories[std::string(core::kCategoryNames[i])] = core::CategoryTotals{};
  for (const char* k : {"HtoD", "DtoH", "DtoD", "PtoP"}) f.memcpy[k] = core::MemcpyStat{};
  f.warnings = s.config_warnings;
  if (core::RegionRegistry* r = s.registry.load(std::memory_order_acquire)) {
    f.regions = r->snapshot_rows();
    f.unbalanced_pops = r->unbalanced_pops();
    f.steps = r->steps().summary();
    if (f.unbalanced_pops)
      f.warnings.push_back(std::to_string(f.unbalanced_pops) +
                           " tt_pop() call(s) with no open region on their thread were ignored");
    if (uint64_t n = r->depth_overflows())
      f.warnings.push_back(std::to_string(n) + " region(s) nested deeper than " +
                           std::to_string(core::ThreadState::kMaxDepth) + " were not timed");
    if (uint64_t n = r->unknown_range_ends())
      f.warnings.push_back(std::to_string(n) +
                           " tt_range_end() call(s) named no open range (unknown or ended twice)");
    if (uint64_t n = r->dropped_names())
      f.warnings.push_back(std::to_string(n) + " region name(s) or path(s) were dropped: table full");
  } else {
    f.steps.warmup = s.config.warmup_steps;
  }
  if (f.steps.count > 0 && f.steps.count <= f.steps.warmup)
    f.warnings.push_back("only " + std::to_string(f.steps.count) +
                         " step(s), all within TRAINTIME_WARMUP_STEPS=" +
                         std::to_string(f.steps.warmup) + ": no step statistics");
  run_fillers(f);
  return f;
}

bool write_rank_file_locked(State& s, bool snapshot, const char* exit_reason) {
  if (s.final_written) return false;
  claim_locked(s);
  if (s.file_path.empty()) return false;
  const core::RankFile f = assemble_rank_file(s, snapshot, exit_reason);
  std::string error;
  if (!core::write_rank_file(s.file_path, f, &error, core::WriteMode::kReplace)) {
    report_write_error(s, error);
    return false;
  }
  ++s.files_written;
  return true;
}

}  // namespace traintime::rt::detail
