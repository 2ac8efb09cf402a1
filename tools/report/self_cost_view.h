// The view "traintime's own cost" (docs/report.md): what traintime itself cost each rank and the
// job, from the rank files' self_cost (docs/schema.md): per rank, job-wide, and per hot path
// summed over the ranks. One view, whole here: its figures, its diagnosis line, its tables and
// its JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "job.h"

namespace traintime::report {

struct Document;

// Above this pct on any rank, the diagnosis says so.
inline constexpr double kSelfCostDiagnosePct = 1.0;

struct SelfCostRank {
  int64_t rank = 0;
  std::string host;
  bool has_pct = false;  // the rank measured steps after warm-up
  double pct = 0;        // self_cost.pct
  double callbacks_ms = 0;      // over the run (self_cost.callbacks_ns)
  double threads_cpu_ms = 0;    // traintime's threads' CPU time, summed
  uint64_t peak_bytes = 0, written_bytes = 0;
  std::string costliest;        // the callbacks row with the most time, "what (module)"
  double costliest_ms = 0;
  uint64_t unmeasured = 0;      // rows with calls and no timed call (n/a)
};

// One hot path (module, what) summed over the ranks that have it.
struct SelfCostPath {
  std::string module, what;
  uint64_t ranks = 0, calls = 0, samples = 0, interrupted = 0;
  uint64_t unmeasured_ranks = 0;  // ranks where it had calls and no timed call
  double ms = 0;         // estimated, over the run, all ranks
  double spread_ms = 0;  // the ranks' standard errors combined (root of the sum of squares)
  bool estimated = false;
};

struct SelfCostThread {
  std::string name;
  uint64_t ranks = 0;
  double cpu_ms = 0;  // summed over the ranks
};

struct SelfCostView {
  uint64_t ranks = 0;                // rank files with self_cost
  std::vector<SelfCostRank> per_rank;  // highest pct first; ranks without pct after, by rank
  // Job-wide: the callbacks' time in the steps after warm-up over those steps' wall time, all
  // ranks together (sum over sum); and the highest rank's pct (the gate's self_cost_pct).
  bool has_pct = false;
  double job_pct = 0;
  double max_pct = 0;
  int64_t max_rank = -1;
  std::vector<SelfCostPath> paths;      // costliest first
  std::vector<SelfCostThread> threads;  // by name, in the rank files' order
};

SelfCostView self_cost_view(const Job& job);

// The view in the document: a diagnosis line when a rank's pct is above kSelfCostDiagnosePct,
// and the tables "traintime's own cost" (job-wide and per rank, always there) and its hot paths.
void add_self_cost_diagnosis(const SelfCostView& v, Document& d);
void add_self_cost_tables(const SelfCostView& v, Document& d);
// --format json's "self_cost".
nlohmann::json self_cost_json(const SelfCostView& v);
// One line for --watch ("" without figures).
std::string self_cost_watch_line(const SelfCostView& v);

}  // namespace traintime::report
