// traintime-report DIR --watch [SECONDS] [--once] (docs/report.md): one terminal screen kept
// current from the newest rank files of a running job.
#pragma once

#include <set>
#include <string>

#include "analysis.h"
#include "job.h"

namespace traintime::report {

// The screen for one read of the job: ranks and their state, step reached, step time p50 and
// the slowest ranks, exposed comm, and the diagnosis so far (stragglers, hangs). interval_s 0:
// a single screen (--once), without the refresh line.
// `before`: the hangs (hang_key) of the previous read, an interval ago: a hang in both is named
// as one; one first seen now as possible (a snapshot taken mid-step can show a collective some
// rank simply has not reached yet). nullptr for a single read (--once): every hang is named.
std::string watch_screen(const Job& job, const Report& r, double interval_s, const std::set<std::string>* before);

// The screen's lines wrapped to `width` columns (the terminal's; 0: as they are): a long line goes
// on below, indented two more spaces than it, broken at spaces (a word wider than the line at the
// width).
std::string fit_width(const std::string& screen, std::size_t width);

// The width of the terminal on stdout, else $COLUMNS, else 0: no terminal to fit (a script reads
// the screen's lines whole).
std::size_t terminal_width();

// (communicator, seq) of a hang, to recognise it from one read to the next.
std::string hang_key(const Hang& h);

// True when every rank of 0..world_size-1 has its final rank file (not a snapshot, no record).
bool every_rank_final(const Job& job);

// Re-reads DIR every interval_s seconds until `q`, SIGINT/SIGTERM or every rank's final file;
// with once, prints one screen and returns. Returns the exit status.
int run_watch(const std::string& dir, const LoadOptions& options, double interval_s, bool once);

}  // namespace traintime::report
