// Inside a hung collective: where each rank's channels had got to (rank file proxy_progress,
// from NCCL's profiler plugin: ProxyOp/ProxyStep for network transfers, KernelCh for every
// channel), attached to each hang of find_hangs (analysis.cpp) and said by the text, HTML, JSON
// and --watch views (docs/report.md "Hang forensics").
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "traintime/core/rank_file.h"
#include "traintime/nccl/proxy_progress_section.h"

namespace traintime::report {

// One channel of a hung collective on one rank (a row of the rank's proxy_progress).
struct ChannelProgress {
  int64_t rank = 0;
  nccl::ProxyProgress row;
  bool stopped_short = false;  // it moved part of its steps, then stopped (steps known)
};

// The rows of one hang, as the views say them.
struct HangProgress {
  std::vector<ChannelProgress> rows;  // by rank, then channel; network rows before kernel channels
  std::set<std::string> sources;  // the rows' ProxyProgress::source values
  // What they come from: "proxy_step" (network steps with bytes), "proxy_op" (network ops, no
  // bytes: ProxyStep was off), "kernel_channel" (no network proxy: intra-node transports), a
  // "+"-joined mix, or "none" (no member file has proxy_progress for it).
  std::string detail() const;
};

// How long a network transfer that moved part of its steps must have stood still for its
// collective, entered by every member and completed by none, to be a hang without any watchdog's
// word (a healthy transfer moves a step every few microseconds to milliseconds).
inline constexpr uint64_t kStalledInsideNs = 5'000'000'000ull;

// Whether some transfer of `p` moved part way and has stood still for kStalledInsideNs.
bool stalled_inside(const HangProgress& p);
// How the views say it: "a transfer inside it moved part way, then not for 5.0 s or more".
std::string stalled_inside_words();

// The rows of the collective `op` (CommOp name) a rank's file shows in flight on communicator
// `communicator`: the oldest NCCL seq of that op there (what follows it queues behind it).
std::vector<nccl::ProxyProgress> rows_of_hung(const core::RankFile& f, const std::string& communicator,
                                              const std::string& op);

// Adds a rank's rows to `p` (keeping the order above).
void add_rank_progress(HangProgress& p, int64_t rank, std::vector<nccl::ProxyProgress> rows);

// One line per row, at most `max` (then one line counting the rest): "rank 0 channel 3 send to
// rank 1: 2 of 8 steps done (128.0 KiB), 8 posted; in send_wait for 41.2 s".
std::vector<std::string> progress_lines(const HangProgress& p, std::size_t max);

// Whether every network transfer with steps known (two or more) stopped at the same step: nobody
// is behind, so no one of them is named as the one that stopped.
bool stopped_together(const HangProgress& p);

// Who stopped, as one line (empty without rows): "stopped together: ..." (stopped_together);
// else "stopped moving: <row>" for the transfer that got least far (fewest steps done; a send
// before a receive at the same step, then by rank and channel), or the only network row; with
// several network rows and no steps, which stopped first is n/a; without network rows, the
// kernel channels that never finished.
std::string stopped_line(const HangProgress& p);

}  // namespace traintime::report
