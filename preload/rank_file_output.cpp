// The output owner: this process's rank file, assembled from the modules' typed summaries by
// core::build_rank_file and written under a name no other process owns (DESIGN §6):
// rank-%05d.json for the first process of a job to claim the rank, else rank-%05d.pid%d.json
// with role "aux" (a DataLoader worker or helper that inherited RANK). The TRAINTIME_TRACE=1
// timeline is written beside it, named like it, with the final rank file.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

#include "session.h"
#include "traintime/core/rank_file_builder.h"
#include "traintime/core/rank_file_json.h"
#include "traintime/cupti/gpu_capture.h"
#include "traintime/nccl/nccl_interposer.h"
#include "traintime/nvml/nvml_sampler.h"
#include "traintime/support/log.h"

namespace traintime::preload {
namespace {

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

void report_write_error(Session& s, const std::string& what) {
  if (s.output.write_error_reported) return;
  s.output.write_error_reported = true;
  support::log(support::LogLevel::kError,
      "cannot write the rank file into {} ({}); set TRAINTIME_OUTPUT to a writable directory",
      s.output.dir, what);
}

std::string claim_text(const Session& s) {
  return s.identity.job_id + " " + std::to_string(getpid()) + " " + host_name() + "\n";
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
// The claim is released once the rank's final file is written (no claim files are left after
// a clean run): a later process of the same job (a torchrun restart, a second program with the
// same RANK) then finds the final file of its job there and takes an aux name.
bool claim_main_name(Session& s, const std::string& claim, const std::string& rank_file) {
  const std::string mine = claim_text(s);
  int fd = open(claim.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd >= 0) {
    const bool ok = write_all(fd, mine);
    close(fd);
    if (ok && access(rank_file.c_str(), F_OK) == 0) {
      // read_rank_file's simdjson path is not linked into this library: the same reader on
      // nlohmann::json.
      std::string bytes;
      core::ReadError* const unread = nullptr;  // a file that cannot be read is not this job's
      const std::optional<core::RankFile> earlier =
          core::read_file_bytes(rank_file, &bytes, unread)
              ? core::rank_file_from_text(rank_file, bytes, unread)
              : std::nullopt;
      if (earlier && earlier->job_id == s.identity.job_id) {
        unlink(claim.c_str());
        return false;
      }
    }
    return ok;
  }
  if (errno != EEXIST) return false;
  const std::string theirs = read_small(claim);
  const std::string their_job = theirs.substr(0, theirs.find(' '));
  if (their_job == s.identity.job_id || theirs.empty()) return false;  // same job: never clobber
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

Measured measure(Session& s, bool flush_gpu, const core::Deadline& deadline) {
  // Lock order (core/lock_order.h): each module's summary with no lock of ours held; CUPTI's
  // flush and drain first, as everything else is read after it.
  Measured m;
  m.gpu = cupti::summary(flush_gpu, deadline);
  if (const core::RegionRegistry* r = s.recorder.registry.load(std::memory_order_acquire))
    m.cpu = r->summary(deadline);
  else
    m.cpu.steps.warmup = s.identity.config.warmup_steps;
  // The newest step's end on the wall clock: the registry's clock is monotonic, read now too.
  if (m.cpu.last_step_clock_ns > 0) {
    const uint64_t now = mono_ns();
    const uint64_t wall = unix_ns();
    const uint64_t ago = now > m.cpu.last_step_clock_ns ? now - m.cpu.last_step_clock_ns : 0;
    m.cpu.steps.last_end_unix_ns = wall > ago ? wall - ago : 0;
  }
  m.comm = nccl::summary();  // lock-free
  m.comm.cpu = s.recorder.cpu_collectives.summary(deadline);
  m.modules = module_sections();
  m.health = nvml::summary(deadline);
  for (core::Section& c : cost_sections(s)) m.modules.push_back(std::move(c));
  m.cost = process_cost(deadline);
  return m;
}

core::RankFile assemble_locked(Session& s, bool snapshot, core::ExitReason exit_reason, const Measured& m) {
  core::Identity id;
  id.job_id = s.identity.job_id;
  effective_rank(s, &id.rank, &id.world_size);
  id.role = s.output.role;
  id.host = host_name();
  id.pid = getpid();
  id.snapshot = snapshot;
  id.exit_reason = exit_reason;
  id.start_unix_ns = s.identity.load_unix_ns;
  id.end_unix_ns = unix_ns();
  id.warnings = s.identity.config_warnings;
  id.model.flops_per_step = s.live.flops_per_step.load(std::memory_order_relaxed);
  id.model.flops_per_token = s.live.flops_per_token.load(std::memory_order_relaxed);
  id.model.peak_tflops = s.identity.config.peak_tflops;
  id.model.dtype = s.identity.config.dtype;
  id.cost = m.cost;
  return core::build_rank_file(id, m.cpu, m.gpu, m.comm, m.modules, m.health);
}

namespace {

// TRAINTIME_TRACE=1: rank-00003.json -> rank-00003.trace.json (an aux file rank-00003.pid123.json
// -> rank-00003.pid123.trace.json), written as safely as the rank file itself.
void write_trace(Session& s) {
  const nlohmann::json trace = cupti::trace_json();
  if (trace.is_null()) return;
  std::string path = s.output.file_path;
  if (path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0) path.resize(path.size() - 5);
  path += ".trace.json";
  std::string error;
  // Kernel names are arbitrary bytes: invalid UTF-8 is replaced, never fatal.
  const std::string text =
      trace.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (!core::write_text_file(path, text, &error, core::WriteMode::kReplace))
    support::log_warn("cannot write the trace: {}", error);
  else
    note_written(text.size());
}

}  // namespace

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

void check_output_dir_locked(Session& s) {
  const int err = make_dirs(s.output.dir);
  if (err != 0)
    report_write_error(s, std::string("cannot create it: ") + std::strerror(err));
  else if (access(s.output.dir.c_str(), W_OK | X_OK) != 0)
    report_write_error(s, std::string("not writable: ") + std::strerror(errno));
}

void claim_locked(Session& s) {
  Output& out = s.output;
  int64_t rank = 0, world = 1;
  effective_rank(s, &rank, &world);
  if (!out.file_path.empty() && out.claimed_rank == rank) return;
  if (!out.file_path.empty()) {
    // The rank became known after a snapshot claimed rank 0 (a communicator told us): move.
    unlink(out.file_path.c_str());
    if (out.role == core::Role::kRank) {
      char old_claim[64];
      std::snprintf(old_claim, sizeof old_claim, "/.rank-%05" PRId64 ".claim", out.claimed_rank);
      unlink((out.dir + old_claim).c_str());
    }
    out.file_path.clear();
  }
  const int err = make_dirs(out.dir);
  if (err != 0) {
    report_write_error(s, std::string("cannot create it: ") + std::strerror(err));
    return;
  }
  char name[96], main_name[96];
  std::snprintf(name, sizeof name, "/.rank-%05" PRId64 ".claim", rank);
  std::snprintf(main_name, sizeof main_name, "/rank-%05" PRId64 ".json", rank);
  // A fork child inherited its parent's rank and is never the rank's owner.
  if (!s.identity.forked_child && claim_main_name(s, out.dir + name, out.dir + main_name)) {
    std::snprintf(name, sizeof name, "%s", main_name);
    out.role = core::Role::kRank;
  } else {
    std::snprintf(name, sizeof name, "/rank-%05" PRId64 ".pid%d.json", rank,
                  static_cast<int>(getpid()));
    out.role = core::Role::kAux;
  }
  out.file_path = out.dir + name;
  out.claimed_rank = rank;
}

bool write_rank_file_locked(Session& s, bool snapshot, core::ExitReason exit_reason, const Measured& m) {
  if (s.output.final_written) return false;
  claim_locked(s);
  if (s.output.file_path.empty()) return false;
  return write_assembled_locked(s, assemble_locked(s, snapshot, exit_reason, m));
}

bool write_assembled_locked(Session& s, const core::RankFile& f) {
  if (s.output.final_written || s.output.file_path.empty()) return false;
  std::string error;
  if (!core::write_rank_file(s.output.file_path, f, &error, core::WriteMode::kReplace)) {
    report_write_error(s, error);
    return false;
  }
  struct stat written {};
  if (stat(s.output.file_path.c_str(), &written) == 0) note_written(static_cast<uint64_t>(written.st_size));
  if (f.snapshot) return true;
  if (s.identity.config.trace) write_trace(s);
  // The final file replaces the always-current record, and the rank's claim is done with.
  live_record_remove_locked(s);
  if (s.output.role == core::Role::kRank) {
    char claim[64];
    std::snprintf(claim, sizeof claim, "/.rank-%05" PRId64 ".claim", s.output.claimed_rank);
    unlink((s.output.dir + claim).c_str());
  }
  return true;
}

}  // namespace traintime::preload
