// How each rank ended, or that it still runs (docs/report.md, "Ranks that died"): a dead rank is
// the report's headline. A rank's newest file is final (a normal exit), a signal's, a
// suspected-hang file, a periodic snapshot or its always-current record (rank-*.live). A running
// rank leaves the same kind of record as a killed one, so a rank is called killed only when its
// process is gone: its pid no longer runs on this host, or (another host) every other rank has
// ended, or its record stopped being refreshed well before the job's newest file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "analysis.h"
#include "job.h"

namespace traintime::report {

// A record is refreshed about every second while its process lives: one this far behind the job's
// newest file belongs to a process that is gone.
inline constexpr uint64_t kStaleRecordNs = 30'000'000'000ull;

// Whether the process that wrote a rank file still runs, when that can be seen from here: its
// host is this host and its pid is in /proc, started no later than the file's start time (so a
// recycled pid is not taken for it). nullopt for another host or an unknown pid.
std::optional<bool> process_running(const core::RankFile& f);

// The reader's words for a known terminating signal's exit_reason (kSigterm -> "stopped by
// SIGTERM (launcher teardown)"); the reason's name when it is not a known signal's.
std::string signal_words(core::ExitReason exit_reason);

// Report::fates and each RankView's state ("exit", "signal SIG…", "killed", "suspected hang",
// "running"), from the job's newest files and RankInput::running.
void find_rank_fates(const Job& job, Report& rep);

}  // namespace traintime::report
