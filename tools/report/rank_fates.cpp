#include "rank_fates.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace traintime::report {
namespace {

std::string this_host() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

// The boot time (/proc/stat btime) in seconds since the epoch; 0 unknown.
uint64_t boot_time_s() {
  std::ifstream in("/proc/stat");
  std::string key;
  uint64_t value = 0;
  while (in >> key) {
    if (key == "btime" && (in >> value)) return value;
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

// When /proc/<pid> started, in seconds since the epoch (field 22 of its stat: clock ticks since
// boot); nullopt when there is no such process.
std::optional<double> process_start_s(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!in || !std::getline(in, text)) return std::nullopt;
  // The command name may hold spaces and parentheses: the fields follow the last ')'.
  const std::size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  uint64_t start_ticks = 0;
  for (int k = 3; k <= 22 && fields >> field; ++k)
    if (k == 22) start_ticks = std::strtoull(field.c_str(), nullptr, 10);
  const long hz = sysconf(_SC_CLK_TCK);
  const uint64_t boot = boot_time_s();
  if (hz <= 0 || boot == 0) return 0.0;  // it exists; when it started is not known
  return static_cast<double>(boot) + static_cast<double>(start_ticks) / static_cast<double>(hz);
}

bool final_file(const core::RankFile& f) { return !f.snapshot; }
// Ended by a signal the file names (a record of another signal reads as "signal" alone).
bool named_signal_exit(core::ExitReason reason) { return !core::exit_signal_name(reason).empty(); }

// What the rank's newest data is, for the evidence: "its newest file is a periodic snapshot".
std::string newest_source(const RankInput& r) {
  const std::string& p = r.file;
  if (p.size() >= 5 && p.compare(p.size() - 5, 5, ".live") == 0) return "its newest data is its always-current record";
  if (r.data.exit_reason == core::ExitReason::kSuspectedHang) return "its newest file is its suspected-hang file";
  return "its newest file is a periodic snapshot";
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 10 ? "%.1f" : "%.0f", s);
  return buf;
}

// Why a rank whose newest file is not final is taken for dead; "" when it may still run.
std::string gone_because(const Job& job, std::size_t i, uint64_t newest_end_ns) {
  const RankInput& r = job.ranks[i];
  if (r.running == false)
    return "its process (pid " + std::to_string(r.data.pid) + ") no longer runs on this host";
  if (r.running == true) return "";
  bool others = false, others_ended = true;
  for (std::size_t k = 0; k < job.ranks.size(); ++k) {
    if (k == i) continue;
    others = true;
    others_ended = others_ended && final_file(job.ranks[k].data);
  }
  if (others && others_ended) return "every other rank has ended";
  const uint64_t end = r.data.end_unix_ns;
  if (end > 0 && newest_end_ns > end + kStaleRecordNs)
    return "its record stopped " + seconds_text(static_cast<double>(newest_end_ns - end) / 1e9) +
           " s before the job's newest file";
  return "";
}

}  // namespace

std::optional<bool> process_running(const core::RankFile& f) {
  static const std::string host = this_host();
  if (f.pid <= 0 || host.empty() || f.host != host) return std::nullopt;
  const std::optional<double> started = process_start_s(f.pid);
  if (!started) return false;
  // A pid recycled by a later process started after the file's writer was loaded.
  if (f.start_unix_ns > 0 && *started > static_cast<double>(f.start_unix_ns) / 1e9 + 2.0) return false;
  return true;
}

std::string RankState::name() const {
  switch (kind) {
    case Kind::kKilled: return "killed";
    case Kind::kSuspectedHang: return "suspected hang";
    case Kind::kRunning: return "running";
    case Kind::kAsWritten: break;
  }
  return reason == core::ExitReason::kOther ? reason_text : std::string(core::exit_reason_name(reason));
}

std::string signal_words(core::ExitReason exit_reason) {
  if (!named_signal_exit(exit_reason)) return std::string(core::exit_reason_name(exit_reason));
  const std::string sig(core::exit_signal_name(exit_reason));
  std::string why;
  if (sig == "SIGTERM") why = " (launcher teardown)";
  if (sig == "SIGINT") why = " (Ctrl-C)";
  if (sig == "SIGABRT") why = " (abort(): PyTorch's NCCL watchdog or a failed assertion)";
  return "stopped by " + sig + why;
}

void find_rank_fates(const Job& job, Report& rep) {
  uint64_t newest_end = 0;
  for (const RankInput& r : job.ranks) newest_end = std::max(newest_end, r.data.end_unix_ns);
  for (std::size_t i = 0; i < job.ranks.size(); ++i) {
    const core::RankFile& f = job.ranks[i].data;
    RankView& view = rep.per_rank[i];
    if (final_file(f) && !named_signal_exit(f.exit_reason)) {
      view.state = {RankState::Kind::kAsWritten, f.exit_reason, f.exit_reason_text};  // an exit
      continue;
    }
    RankFate fate;
    fate.rank = f.rank;
    fate.host = f.host;
    fate.steps = f.steps.count;
    for (const RankInput& o : job.ranks)
      if (&o != &job.ranks[i]) fate.others_steps = std::max(fate.others_steps, o.data.steps.count);
    const bool hang = f.exit_reason == core::ExitReason::kSuspectedHang;
    const std::string gone = final_file(f) ? std::string() : gone_because(job, i, newest_end);
    if (final_file(f) || (!gone.empty() && named_signal_exit(f.exit_reason))) {
      fate.state = {RankState::Kind::kAsWritten, f.exit_reason, f.exit_reason_text};
      fate.how = signal_words(f.exit_reason);
      fate.evidence = final_file(f) ? "it wrote its file on the signal" : newest_source(job.ranks[i]) + " and " + gone;
    } else if (!gone.empty()) {
      fate.state.kind = RankState::Kind::kKilled;
      fate.how = hang ? "killed after a suspected hang" : "killed";
      fate.evidence = newest_source(job.ranks[i]) + " and " + gone;
    } else if (hang) {
      fate.state.kind = RankState::Kind::kSuspectedHang;
      fate.how = "hung: no progress for TRAINTIME_HANG_SEC seconds (its suspected-hang file), still running";
      fate.evidence = job.ranks[i].running ? "its process still runs on this host" : "";
    } else {
      fate.state.kind = RankState::Kind::kRunning;
      fate.how = "running";
      fate.evidence = job.ranks[i].running ? "its process still runs on this host"
                                           : "its record is as recent as the job's other files";
      if (f.steps.last_end_unix_ns > 0 && f.end_unix_ns >= f.steps.last_end_unix_ns)
        fate.last_step_age_s = static_cast<double>(f.end_unix_ns - f.steps.last_end_unix_ns) / 1e9;
    }
    view.state = fate.state;
    rep.fates.push_back(std::move(fate));
  }
  // The dead first (their headline), then by rank.
  std::stable_sort(rep.fates.begin(), rep.fates.end(), [](const RankFate& a, const RankFate& b) {
    return a.running() != b.running() ? b.running() : a.rank < b.rank;
  });
}

}  // namespace traintime::report
