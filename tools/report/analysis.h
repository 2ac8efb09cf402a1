// What the report says about a job (docs/report.md): statistics across ranks and the diagnosis
// — waits per collective, wait-free bandwidth, stragglers, exposed comm, hangs — computed once
// from a loaded Job; every output format renders this.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hang_progress.h"
#include "job.h"
#include "self_cost_view.h"

namespace traintime::report {

// A distribution over (rank, step) samples, in ms.
struct Dist {
  uint64_t n = 0;
  double mean = 0, p50 = 0, p90 = 0, max = 0;
};

// Per-step distributions of step time and of every component of the breakdown.
struct StepView {
  // Where the step time comes from: "steps.detail" (the per-step rows of the ranks, warm-up and
  // partial steps skipped) or "wall_ns" (the ranks' own statistics when their rows carry no wall
  // time: p50/p90 are then the median of the ranks' p50/p90).
  std::string wall_source;
  // Where the components come from: "steps.detail", or "totals" (each rank's mean per step).
  std::string component_source;
  Dist wall, span, gpu_busy, compute, comm, exposed_comm, io, idle;  // span: GPU busy + idle
  Dist recompute;  // part of compute (activation checkpointing); all zero without it
  // Per (rank, step) shares of the GPU step span, in percent: each share's own step-to-step
  // spread, for --compare.
  Dist exposed_comm_pct, comm_pct, compute_pct, idle_pct;
  // The job's one step time: the GPU step span when GPU capture gave one (the CPU wall then only
  // measures how fast the host enqueues work), else the CPU wall.
  bool gpu = false;
  const Dist& step() const { return gpu ? span : wall; }
  const char* step_source() const { return gpu ? "GPU step span" : "CPU wall"; }
  double reference_ms() const { return step().p50; }
};

struct Throughput {
  double samples_per_s = 0;  // summed over the ranks (data parallelism: each rank its own samples)
  double tokens_per_s = 0;
  uint64_t ranks_with_rates = 0;
  Across samples_per_s_rank;  // per rank
  // Model FLOPs (ranks whose files carry steps.tflops): achieved TFLOP/s summed over the ranks,
  // and per rank; MFU per rank (ranks with a known peak) and the job's: total TFLOP/s over the
  // summed peaks of those ranks.
  double tflops = 0;
  uint64_t ranks_with_flops = 0;
  Across tflops_rank;
  Across mfu_rank;  // as a fraction
  double job_mfu = 0;
  // HFU (recompute counted, docs/attribution.md) per rank, for the ranks whose files carry
  // steps.hfu, and the job's: summed hfu x peak over the summed peaks of those ranks.
  Across hfu_rank;  // as a fraction
  double job_hfu = 0;
  std::string peak_sources;  // distinct peak sources, "; "-joined
};

struct CategoryView {
  std::string name;
  Across busy_ms;  // GPU busy per step
};

struct CommView {  // one (op, communicator size, backend) row merged over ranks
  std::string op;
  uint32_t comm_size = 0;
  // "" for NCCL; "gloo", "mpi", ... for collectives run on the CPU, as traintime.torch recorded
  // them: their time is cpu_ms (waiting included), gpu_ms and busbw_gbps stay 0.
  std::string backend;
  Across cpu_ms;       // per step
  Across calls;        // per step
  Across gpu_ms;       // per step, waiting included
  Across busbw_gbps;   // as recorded: a lower bound, waiting included
  uint64_t bytes = 0;  // summed over ranks
  uint64_t calls_total = 0;
  bool bytes_known = true;
};

// Wait-free bus bandwidth of one op at one message size (a power-of-two bucket).
struct BandwidthView {
  std::string op;
  uint32_t comm_size = 0;
  uint64_t lo_bytes = 0;       // messages of lo_bytes <= size < 2 lo_bytes
  uint64_t collectives = 0;    // (communicator, seq) matched across all members
  double waitfree_busbw_gbps = 0;  // from the shortest duration of each collective
  double recorded_busbw_gbps = 0;  // from every rank's duration, waiting included
};

// How a rank ended, or that it still runs (rank_fates.h): its file's exit reason where the file
// says it (an exit, a signal), else what the report concludes from the files: killed, hung, or
// running. name() is the word the per-rank table and the JSON summary write.
struct RankState {
  enum class Kind : uint8_t { kAsWritten, kKilled, kSuspectedHang, kRunning };
  Kind kind = Kind::kAsWritten;
  core::ExitReason reason = core::ExitReason::kNone;  // kAsWritten: the file's
  std::string reason_text;  // kAsWritten with ExitReason::kOther: the reason as the file wrote it
  std::string name() const;  // "exit", "signal SIGTERM", "killed", "suspected hang", "running"
};

struct RankView {
  int64_t rank = 0;
  std::string host;
  std::string file;
  RankState state;
  std::string gpu_capture, gpu_capture_reason;  // as in the rank file ("cupti", "unavailable", "none")
  uint64_t steps = 0;       // tt_step calls in the newest file
  double step_p50_ms = 0;   // median step time, from the job's step source (StepView::step)
  double cpu_wall_p50_ms = 0;
  double compute_ms = 0, exposed_comm_ms = 0, io_other_ms = 0, idle_ms = 0;  // per step
  double comm_ms = 0, gpu_busy_ms = 0;                                       // per step
  double exposed_comm_pct = 0, idle_pct = 0;
  // The waits view's row of this rank (RankWaits), per step:
  double wait_ms = 0;    // per step, waiting for peers in matched collectives
  double caused_ms = 0;  // per step, the others' wait this rank alone caused (arrived last)
  uint64_t matched = 0, last_arrivals = 0;
  double samples_per_s = 0;
  double tflops = 0, mfu = 0;  // 0: not known
  double hfu = 0;              // 0: not known (no recompute seen, or no MFU)
  double recompute_ms = 0;     // per step, GPU busy in the recompute category (part of compute_ms)
  std::string device;
  uint64_t dropped_records = 0;
  std::vector<std::pair<uint64_t, double>> step_ms;  // (index, ms) from steps.detail, the job's step source
  std::vector<std::pair<uint64_t, double>> cpu_wall_ms;  // (index, ms): the steps.detail rows with a CPU wall time
  std::vector<std::pair<std::string, double>> top_cpu_ms;  // its top-level regions' CPU ms per step
  // GPU health (rank file gpu_health, NVML's samples over the run) of the rank's first device;
  // sm_clock_mhz 0: not sampled.
  double sm_clock_mhz = 0;  // median
  uint32_t sm_clock_min_mhz = 0;
  double power_w = 0, power_limit_w = 0;  // median draw, enforced limit
  uint32_t temperature_max_c = 0;
  core::ClockEventReasons clock_event_reasons;  // seen in any sample, gpu_idle left out
  uint64_t memory_used_bytes = 0, memory_total_bytes = 0;  // NVML's, every process on the GPU
  // CUPTI's memory records (rank file memory): the most device memory the rank's own allocations
  // held at once, on the device NVML's figures are of (else all its devices together).
  bool allocated_known = false;
  uint64_t allocated_peak_bytes = 0;
  bool mig = false;  // a MIG instance: the clocks, power and temperature are the whole GPU's
  // Per-step throttling, from the steps.detail rows after warm-up (partial steps skipped) that
  // carry gpu_health: such a step is throttled when any of its devices reported a clock-event
  // reason other than gpu_idle (core::ClockEventReasons::throttled). Its step time is the job's step source.
  uint64_t sampled_steps = 0, throttled_steps = 0;
  core::ClockEventReasons throttle_reasons;  // seen in the throttled steps, gpu_idle left out
  double throttled_step_ms = 0, other_step_ms = 0;  // mean step time of the throttled, the other sampled steps
  // Median time of the unthrottled sampled steps outside exposed comm (the CPU wall without GPU
  // step times); 0 with none.
  double unthrottled_own_ms = 0;
};

// A rank whose newest file is not a normal exit's (rank_fates.h): how it ended, or that it still
// runs. A dead rank is the report's headline.
struct RankFate {
  int64_t rank = 0;
  std::string host;
  RankState state;       // a signal's (as written), killed, suspected hang (still running), running
  std::string how;       // as people read it: "killed", "stopped by SIGTERM (launcher teardown)", ...
  std::string evidence;  // why it is taken for dead or running, one clause
  uint64_t steps = 0;         // steps it finished
  uint64_t others_steps = 0;  // the most steps another rank finished
  std::optional<double> last_step_age_s;  // running: from its newest step's end to its file's time
  bool running() const { return state.kind == RankState::Kind::kRunning; }
};

// A kernel's GPU time summed over the ranks (top_kernels of every region of every rank file).
struct KernelView {
  std::string name;
  uint64_t count = 0;
  double gpu_ms = 0;        // over the whole run, all ranks
  double per_step_ms = 0;   // per step, mean over the ranks that ran it
  uint64_t ranks = 0;
};

// A rank's GPU memory against its device's capacity, from NVML's whole-GPU view (gpu_health):
// the highest used memory sampled over the run (every process on the GPU, the CUDA context,
// NCCL's and cuBLAS's workspaces and PyTorch's cached blocks included) and what was left then.
// Beside it, CUPTI's peak of the rank's own allocations (rank file memory). A rank with CUPTI's
// figure and no NVML's has nvml false (no headroom) and comes after those that have it.
struct MemoryHeadroom {
  int64_t rank = 0;
  std::string host;
  bool nvml = true;
  uint64_t used_bytes_max = 0, total_bytes = 0;
  uint64_t headroom_bytes = 0;  // total - used at the highest
  double headroom_pct = 0;      // of total
  bool allocated_known = false;
  uint64_t allocated_peak_bytes = 0;
};
// Headroom below this share of the device's memory is named as near capacity.
inline constexpr double kNearCapacityPct = 10.0;

struct Straggler {
  int64_t rank = 0;
  std::string host;
  double cost_ms_per_step = 0;  // how much shorter the job's step would be without the delay:
                                // step - step_ms_without when that is known, else the wait it caused
  double cost_pct = 0;          // of the median step time
  uint64_t last_arrivals = 0, matched = 0;
  double compute_ms = 0, median_compute_ms = 0;
  // The counterfactual: the job's step time had this rank spent the median of its peers' time
  // outside exposed comm (compute, I/O, idle), keeping its own wait-free exposed comm; never
  // below what the peers take without their waits (docs/report.md). 0: not known.
  double step_ms_without = 0;
  // "rank": the only straggler, slow by itself; "group": one of several slow ranks (stage
  // imbalance: Report::group_step_ms_without says what removing them together gains).
  std::string kind;
  // What cost_ms_per_step is: "counterfactual" (the step had it run at its peers' median),
  // "waits" (the others' waits it alone caused, without GPU step time) or "compute" (its GPU
  // compute above the median's). The report says it in one sentence beside the one figure.
  std::string cost_basis;
  std::vector<std::string> reasons;  // one sentence each: the evidence
  // The GPU-side cause seen in gpu_health (both 0: no clocks sampled): its median SM clock
  // against the median of the other ranks', and the clock-event reasons it reported.
  double sm_clock_mhz = 0, others_sm_clock_mhz = 0;
  core::ClockEventReasons clock_event_reasons;
  bool clock_slower = false;  // its clock is below the others' (else: slower at equal clocks)
  // Its per-step throttling (RankView): steps with an NVML sample, those with a clock-event
  // reason other than gpu_idle, the reasons, the mean step time of those and of the others.
  uint64_t sampled_steps = 0, throttled_steps = 0;
  core::ClockEventReasons throttle_reasons;
  double throttled_step_ms = 0, other_step_ms = 0;
};

// One rank's waits in the collectives lined up across ranks, per step.
struct RankWaits {
  double wait_ms = 0;    // waiting for peers in matched collectives
  double caused_ms = 0;  // the others' wait this rank alone caused (arrived last)
  uint64_t matched = 0, last_arrivals = 0;
};

// The waits view (comm_view.cpp): collectives lined up across ranks by (communicator, seq), the
// shortest duration of each the wait-free time, each rank's excess its wait.
struct WaitsView {
  std::vector<RankWaits> per_rank;  // by Job::ranks index (the per-rank table's rows take them)
  std::vector<BandwidthView> bandwidth;
  uint64_t collectives_matched = 0;
  // Collectives lined up from CPU durations (process groups whose collectives ran on the CPU:
  // gloo, MPI, as traintime.torch recorded them), and their backends.
  uint64_t cpu_collectives_matched = 0;
  std::string cpu_backends;  // distinct, ", "-joined
};

// The stragglers view (stragglers_view.cpp): the ranks that hold the job back, from the per-rank
// rows and the waits.
struct StragglersView {
  // Whether stragglers could be looked for at all: they are found from the durations of
  // collectives lined up across ranks (GPU durations, or CPU ones of gloo and MPI collectives)
  // and from GPU compute, so a job with neither has none to find (the gate calls stragglers and
  // straggler_cost_ms "cannot be judged" then).
  bool measured = false;
  std::vector<Straggler> found;  // largest cost first
  // Two or more stragglers: the job's step had all of them run at the median of the other ranks.
  std::vector<int64_t> group;
  double group_step_ms_without = 0;
};

struct MissingMember {
  int64_t rank = -1;         // global rank, -1 when not known
  int64_t comm_rank = -1;    // rank in the communicator
  bool has_file = false;
  uint64_t last_enqueued = 0;  // last seq it entered on this communicator
  std::string last_op;         // op of that seq, "" when not known
  std::string doing;           // one sentence: what it was doing
};

struct Hang {
  std::string communicator;
  uint32_t comm_size = 0;
  std::string op;
  uint64_t seq = 0;
  uint64_t bytes = 0;
  std::vector<int64_t> waiting_ranks;  // entered seq, not completed
  std::vector<int64_t> missing_ranks;  // global ranks that never entered seq (known ones)
  std::vector<MissingMember> missing;  // every member that never entered, with what it was doing
  bool from_snapshots = false;         // some files are periodic snapshots of a running job
  // Every member entered it and it never completed (a member's suspected-hang file says no
  // progress): missing is empty, and progress says which channel and peer stopped moving.
  bool all_entered = false;
  // A transfer of it moved part way and has not moved since for kStalledInsideNs (its rows, in a
  // running job's records or snapshots): a hang seen from inside, before any watchdog fires.
  bool stalled_inside = false;
  HangProgress progress;  // each member's channels of it (rank file proxy_progress)
};

// The hangs view (hangs_view.cpp): the collectives the job hangs in, from the files' threads[],
// in-flight collectives and proxy progress.
struct HangsView {
  bool data = false;  // some file has threads[], communicators[].in_flight or proxy progress rows
  std::vector<Hang> found;
  std::vector<std::string> p2p_waits;  // ranks stuck in a Send/Recv (peer unknown), one line each
};

// The rank files' warnings grouped, so that 4096 ranks each counting dropped records with their
// own count are one line. A warning a module counted (one of its counter table's messages,
// core/module_format.h) groups by its counter, `key` "<module>.<key>": the ranks' counts are
// summed and ranked, and the text is rendered from the counters of the rank that counted most. A
// warning with nothing counted (a condition, a configuration warning, or a file from a writer
// before module counters) groups by its exact text.
struct WarningGroup {
  std::string key;    // "<module>.<key>" of a counted warning; empty for a text
  std::string text;   // rendered for the rank with the largest count (the first rank's text without)
  std::vector<int64_t> ranks;  // that wrote it, ascending
  bool has_number = false;     // counted
  double total = 0;  // of the counts over the ranks
  struct Worst {
    int64_t rank = -1;
    double value = 0;
  };
  std::vector<Worst> worst;  // the (at most 3) largest counts, largest first
  // Whether a number is written as an integer (a count) rather than with decimals.
  static bool whole(double v) { return std::fabs(v) < 1e15 && v == std::floor(v); }
};

struct Report {
  std::string dir, job_id;
  int64_t world_size = 0;
  uint64_t ranks = 0;  // merged
  uint64_t warmup = 0, steps_max = 0;
  std::vector<int64_t> missing_ranks;
  std::vector<Problem> problems;
  std::vector<std::string> aux_files;
  std::map<std::string, uint64_t> other_jobs;
  uint64_t files_seen = 0;

  StepView steps;
  Throughput throughput;
  std::vector<CategoryView> categories;
  std::vector<RegionAcross> regions;  // by mean GPU busy, largest first
  std::vector<CommView> comm;
  WaitsView waits;
  std::vector<RankView> per_rank;
  StragglersView stragglers;
  HangsView hangs;
  std::vector<RankFate> fates;  // ranks not ended by a normal exit: the dead first, then running
  // The ranks whose gpu_health has NVML's memory figures, least headroom first, then those with
  // CUPTI's memory figures only, by rank.
  std::vector<MemoryHeadroom> memory;
  std::vector<KernelView> kernels;  // by GPU time, largest first
  // Whether any rank has GPU step time; without it the report is about CPU time only.
  bool gpu_data = false;
  std::vector<std::string> devices;  // distinct "NAME: N rank(s)"
  bool simulated = false;            // a device is simgpu's simulation
  // Some rank has GPU time in the recompute category (activation checkpointing): the per-rank
  // table and the breakdown chart then show it on its own.
  bool has_recompute = false;
  // TFLOP/s known but MFU not, on some ranks: why (their peak is not known), one line.
  std::string mfu_missing_why;

  // Job-wide shares of the GPU step span (busy + idle, summed over ranks), in percent.
  double exposed_comm_pct = 0, idle_pct = 0, comm_pct = 0, compute_pct = 0;
  double unattributed_pct = 0;  // of GPU busy time
  uint64_t dropped_records = 0;
  std::vector<int64_t> ranks_dropping;
  std::vector<int64_t> incomplete_ranks;  // gpu_records_complete false
  std::vector<WarningGroup> rank_warnings;  // by key, then text
  ModuleCountersAcross modules;  // every module counter merged typed (JSON modules)
  std::vector<ModuleFigures> module_figures;  // the modules' report halves (module_reports.h)
  std::vector<std::string> capture;  // distinct "gpu_capture: reason" lines with rank counts
  SelfCostView self_cost;            // traintime's own cost (self_cost_view.h)
};

Report analyze(const Job& job);

}  // namespace traintime::report
