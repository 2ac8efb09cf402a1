// A job's rank files as the report reads them (tools/report/load.cpp): the rank files of one
// job, their regions merged as they are read, and one line per file that was left out and why.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "module_reports.h"
#include "traintime/core/rank_file.h"
#include "traintime/core/rank_file_json.h"

namespace traintime::report {

// The steps a rank's totals are spread over: its tt_step calls, plus the final partial step
// when there is one (at least 1, so a file without steps reads as one step).
inline double steps_of(const core::RankFile& f) {
  const uint64_t n = f.steps.count + (f.steps.partial_final_step ? 1 : 0);
  return n > 0 ? static_cast<double>(n) : 1.0;
}

// A region at the top of a step: no '/' in its path once a leading "step/" (the step marker's
// region) is taken off; "step" itself is the whole step, not a part of it. The report's CPU view
// (the largest share, the per-rank chart) is of these, which nest everything else.
inline bool top_level_region(const std::string& path) {
  const bool under_step = path.size() > 5 && (path.compare(0, 5, "step/") == 0 || path.compare(0, 5, "Step/") == 0);
  const std::string rest = under_step ? path.substr(5) : path;
  return rest.find('/') == std::string::npos && rest != "step" && rest != "Step" && !rest.empty();
}

// A value across ranks: min / mean / max, which rank holds the extremes.
struct Across {
  uint64_t n = 0;  // ranks that have the value
  double sum = 0;
  double min = 0;
  double max = 0;
  int64_t min_rank = -1;
  int64_t max_rank = -1;

  void add(double v, int64_t rank);
  double mean() const { return n ? sum / static_cast<double>(n) : 0; }
  // (max - min) / mean, in percent; 0 when the mean is 0.
  double spread_pct() const;
};

// One region path merged over the ranks that have it. Values are per step of each rank
// (the rank's total / steps_of()).
struct RegionAcross {
  std::string path;
  std::string category;
  Across gpu_busy_ms;  // self GPU busy, ms per step
  Across cpu_ms;       // inclusive CPU wall time, ms per step
  Across entries;      // times entered per step
};

// One kernel name over the ranks: top_kernels of every region, merged as files are read.
struct KernelAcross {
  uint64_t count = 0;
  uint64_t gpu_sum_ns = 0;
  double per_step_ms_sum = 0;  // sum over ranks of the rank's ms per step
  uint64_t ranks = 0;
  int64_t last_rank = -1;      // to count each rank once
};

// One problem with one input, printed as "FILE: MESSAGE".
struct Problem {
  std::string file;  // path as given (directory + name), or the directory itself
  std::string message;
};

struct RankInput {
  std::string file;  // path of the rank file
  core::RankFile data;  // regions moved into Job::regions, their top_kernels into Job::kernels
  // Whether the process that wrote a newest file that is not final (a snapshot, a record) still
  // runs, where this host can see it (rank_fates.h); nullopt otherwise.
  std::optional<bool> running;
  // Its top-level regions' CPU wall time, ms per step (top_level_region), kept as the regions are
  // merged away: the HTML's per-rank chart of a job without GPU time.
  std::vector<std::pair<std::string, double>> top_cpu_ms;
};

// One module counter merged across the ranks (report JSON modules.<module>.counters.<key>): its
// sum, its largest value and the lowest rank that has it (-1 when every rank wrote 0), and how
// many ranks wrote it non-zero. Merged typed, from the rank files' modules.<module>.counters.
struct CounterAcross {
  uint64_t sum = 0;
  uint64_t max = 0;
  int64_t max_rank = -1;
  uint64_t ranks_nonzero = 0;
  void add(uint64_t v, int64_t rank) {
    sum += v;
    if (v == 0) return;
    ++ranks_nonzero;
    if (v > max || (v == max && rank < max_rank)) {
      max = v;
      max_rank = rank;
    }
  }
};
// By module name, then counter key.
using ModuleCountersAcross = std::map<std::string, std::map<std::string, CounterAcross>>;

struct Job {
  std::string dir;
  std::string job_id;
  int64_t world_size = 0;
  std::vector<RankInput> ranks;  // role "rank", one per rank, sorted by rank
  std::map<std::string, RegionAcross> regions;  // by path
  std::map<std::string, KernelAcross> kernels;  // by name
  ModuleCountersAcross modules;  // every module counter any merged rank wrote
  std::vector<ModuleFigures> module_figures;  // the modules' report halves (module_reports.h)
  std::vector<std::string> aux_files;  // "FILE (rank R, pid P, host H)": listed, not merged
  std::vector<std::string> trace_files;  // rank-*.trace.json beside the rank files
  std::vector<Problem> problems;  // files left out or doubtful, one line each
  std::vector<int64_t> missing_ranks;  // of 0..world_size-1, no rank file merged
  std::map<std::string, uint64_t> other_jobs;  // job id -> rank files left out
  uint64_t files_seen = 0;  // rank-*.json files found (traces excluded)
};

// Rank files parsed by an earlier load_job, for the next (traintime-report --watch re-reads the
// job every interval; most of its files have not changed since). A file is known again by (path,
// inode, size, modification time in ns): rank files and snapshots are replaced by rename, which
// changes the inode. Records (rank-*.live) are written in place through a shared mapping whose
// modification time need not move: they are never cached, but read again every time. A file
// gone from the folder is forgotten at the next load. Used by one load_job at a time.
class ParseCache {
 public:
  ParseCache();
  ~ParseCache();
  ParseCache(const ParseCache&) = delete;
  ParseCache& operator=(const ParseCache&) = delete;
  std::size_t size() const;  // files held
  uint64_t hits() const;     // files taken from it rather than parsed, over its lifetime

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

struct LoadOptions {
  std::optional<std::string> job;  // --job
  bool latest = false;             // --latest: without --job, the job whose files were written last
  bool progress = false;           // a progress line on stderr after a second
  uint64_t max_file_bytes = 256ull << 20;
  unsigned threads = 0;  // 0: one per core
  ParseCache* cache = nullptr;  // --watch: files unchanged since the last load are not parsed again
};

// Reads every rank file of DIR and keeps the job asked for (else the one written last with
// options.latest, else the one with the most rank files). Never throws for bad input: each problem becomes a Problem naming the file; a missing
// or unreadable directory is one Problem naming the directory.
Job load_job(const std::string& dir, const LoadOptions& options);

// load_job's checks of one file before it reads it, by its stat (*st): nullopt when the file may
// be read; else why not, as the reader's own errors say it (kUnreadable: the stat failed;
// kNotRegular, kEmpty, kTooLarge: over `max_bytes`), its detail the problem's line.
std::optional<core::ReadError> check_before_read(const std::string& path, uint64_t max_bytes, struct stat* st);

}  // namespace traintime::report
