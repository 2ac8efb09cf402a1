// Internal to preload/, the composition root of libtraintime.so (docs/architecture.md): the
// process's session and the functions the lifecycle files share. The adapters (cupti/, nccl/,
// nvtx/) never include this: the session wires them at start-up with hooks and reads their
// typed summaries when it writes the rank file.
//
// Lifecycle (DESIGN §2, §6): the constructor only reads config and environment and configures
// the adapters. The first record (a region, a step, the first GPU launch or NCCL call)
// activates the process: exit and signal hooks are installed and the rank file will be written
// at exit. A fork child starts clean (one fork strategy: on_fork_child() in session.cpp).
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "traintime/core/comm_stats.h"
#include "traintime/core/config.h"
#include "traintime/core/cpu_collectives.h"
#include "traintime/core/live_metrics.h"
#include "traintime/core/lock_order.h"
#include "traintime/core/rank_detect.h"
#include "traintime/core/fast_clock.h"
#include "traintime/core/region_registry.h"
#include "traintime/core/step_feed.h"
#include "traintime/core/summaries.h"
#include "traintime/nvtx/nvtx_injection.h"
#include "traintime/traintime.h"

namespace traintime::preload {

// CLOCK_MONOTONIC nanoseconds, from the CPU's counter where it can be trusted (fast_clock.h):
// the two time reads of every annotation pair are most of its cost.
inline uint64_t mono_ns() { return core::process_clock().now_ns(); }

inline uint64_t unix_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Who this process is: fixed at start-up, copied into a fork child.
struct ProcessIdentity {
  core::Config config;
  std::vector<std::string> config_warnings;
  core::RankInfo launcher_rank;
  std::string job_id;
  uint64_t load_mono_ns = 0;
  uint64_t load_unix_ns = 0;
  std::string injection_conflict;  // "CUDA_INJECTION64_PATH=..." when another tool owns it
  bool cuda_injection_owned = false;  // the driver will call InitializeInjection
  bool forked_child = false;
};

// What this process records: the region registry (created at the first annotation), the NCCL
// call table (nccl/ fills it), and whether it has anything to write.
struct Recorder {
  std::mutex registry_mu;  // creating the registry only
  std::atomic<core::RegionRegistry*> registry{nullptr};
  core::CommCallTable comm_table;
  std::atomic<bool> activated{false};
  std::atomic<bool> gpu_recorded{false};
  std::atomic<int64_t> comm_rank{-1};  // rank in the largest communicator (no launcher rank)
  std::atomic<int64_t> comm_world{0};
  core::CpuCollectives cpu_collectives;  // gloo's and MPI's, as traintime.torch times them
};

// The rank file this process owns. Every field under `mu`.
struct Output {
  std::mutex mu;  // activation, the rank-file claim and every write
  std::string dir;        // absolute; resolved at activation (the application may chdir later)
  std::string file_path;  // the file this process owns, once claimed
  int64_t claimed_rank = -1;
  core::Role role = core::Role::kRank;
  bool final_written = false;
  bool write_error_reported = false;
};

// Live metrics (live_metrics.cpp): the model's FLOPs and rank 0's last console line.
struct Live {
  std::atomic<double> flops_per_step{0};
  std::atomic<double> flops_per_token{0};  // TRAINTIME_FLOPS_PER_TOKEN until tt_set_flops
  std::mutex print_mu;
  core::StepCounters printed;  // counters at the last console line
};

// One per process image; a fork child gets a fresh one (the parent's is leaked there, since
// its mutexes may have been held by threads that do not exist in the child).
struct Session {
  ProcessIdentity identity;
  Recorder recorder;
  Output output;
  Live live;
};

// Null when TRAINTIME_DISABLE=1 (initialises on first call if the constructor has not run).
extern std::atomic<Session*> g_session;
Session* session_slow();
inline Session* session() {
  Session* s = g_session.load(std::memory_order_acquire);
  return s ? s : session_slow();
}

// The calling thread's recording state, read by every annotation (hot path): its registry
// state, set once the thread has one and the process is active (so one test covers both); the
// same when region times are read from the CPU's counter (the hot path's test: else record's
// slow path reads the clock), the registry, and the thread's copy of the clock's anchor (for
// nanosecond readings: tt_step). Zero until the thread's first record; reset in a fork child.
// __thread, not thread_local: no initialisation check on each access.
struct HotThread {
  core::ThreadState* counted;
  core::ThreadState* ts;
  core::RegionRegistry* registry;
  core::FastClock::Anchor clock;
};
extern __thread HotThread t_hot __attribute__((tls_model("initial-exec")));
// The slow path of t_hot.ts: the thread's ThreadState, after activating the process when this
// is its first record (step 0 measured from the library's load when `from_load`, else from
// now). Null when profiling is off.
core::ThreadState* begin_recording(bool from_load);
core::RegionRegistry* registry();  // creates it on first use; null when profiling is off

// Start-up (constructor.cpp): idempotent, cheap, no threads, no signal handlers.
void initialize();
// nothing_recorded.cpp, from the constructor: marks the process the user started under the
// preload for its children (TRAINTIME_ROOT_PID) and, in that process, registers the exit check
// that says in one line when the whole job recorded nothing.
void note_process_root();
// Publishes the session made by initialize() (null when disabled) and wires the adapters to it.
void publish(Session* s);

// First record of the process. `origin_ns` starts step 0's wall time.
void activate(uint64_t origin_ns);
// The region operations NVTX ranges record through (annotation_api.cpp).
const nvtx::Regions& nvtx_regions();

// tt_step and each new NCCL communicator: where GPU capture may start lazily when the driver
// will never call InitializeInjection (another tool owns CUDA_INJECTION64_PATH, DESIGN §2).
void gpu_start_point() noexcept;

// At each step's end: when the loader has unloaded an object since the last look, the registry
// stops trusting the name addresses it found in read-only memory (set_constant_text).
void notice_unloads() noexcept;

// The sections of the modules with nothing to join (NVTX, the null template, the next API
// family), in the order of the module table (kModules): core::build_rank_file's `modules`.
std::vector<core::Section> module_sections();
// Every module's hot paths' time so far (core::Module::cost_so_far), for self_cost.
void module_costs_so_far(core::CostSoFar& c, uint64_t pair_ticks, bool calls) noexcept;
// finish(): every module's stop (core/module.h), in the reverse of the table's order; false when
// one could not hand in all it holds by `deadline` (a terminating signal's bounded flush).
bool stop_modules(const char* reason, bool signal, const core::Deadline& deadline);

// Effective rank and world size: launcher, else communicator, else 0 of 1.
void effective_rank(const Session& s, int64_t* rank, int64_t* world_size);

// TRAINTIME_STEPS=off: no steps anywhere (docs/attribution.md). The markers the program calls end
// none in the rank file (core/rank_file_builder.cpp), nor in the live outputs (live_metrics.cpp)
// and the always-current record (live_record.cpp); the samples and tokens they report stay.
inline bool steps_off(const Session& s) {
  return core::steps_mode_named(s.identity.config.steps) == core::StepsMode::kOff;
}

// rank_file_output.cpp. What the modules measured for one rank file, taken with no lock of
// the output held (core/lock_order.h: Output::mu is never held while a module's summary is
// taken, so a thread stopped by a signal inside a summary never keeps the writer from it).
struct Measured {
  core::CpuSummary cpu;
  core::GpuSummary gpu;
  core::CommSummary comm;
  std::vector<core::Section> modules;
  core::HealthSummary health;
  core::ProcessCost cost;
};
// `flush_gpu`: complete CUPTI buffers flushed and ingested first (a snapshot, the watchdog's
// refresh). `deadline`: bounded for a terminating signal's write only (every summary then falls
// back to what its module last published for a lock it does not get in time).
Measured measure(Session& s, bool flush_gpu, const core::Deadline& deadline);
// Claims this process's file name if not yet done and writes the rank file (and, for the final
// write with TRAINTIME_TRACE=1, the trace). Needs output.mu held.
bool write_rank_file_locked(Session& s, bool snapshot, core::ExitReason exit_reason, const Measured& m);
// The rank file as it would be written now (needs output.mu: role and rank), and its write.
// The final write (f.snapshot false) also drops the always-current record and the rank's claim.
core::RankFile assemble_locked(Session& s, bool snapshot, core::ExitReason exit_reason, const Measured& m);
bool write_assembled_locked(Session& s, const core::RankFile& f);
// This host's name, as rank files and the Prometheus labels give it ("unknown" if none).
std::string host_name();
// Claims rank-%05d.json early (at activation) when the launcher gave the rank. Needs output.mu.
void claim_locked(Session& s);
// At the first record: creates the output directory and says now
// (not at exit, hours later) when no rank file can be written there.
void check_output_dir_locked(Session& s);

// cpu_collectives.cpp: tt_api_v1::collective, a collective run on the CPU (gloo, MPI) as the
// Python package timed it.
void api_collective(const tt_collective* c) noexcept;

// live_metrics.cpp. At activation: GPU figures are published when an output needs them.
void enable_live_outputs(Session& s);
void set_flops(double flops_per_step, double flops_per_token) noexcept;
uint32_t metrics(tt_metric* out, uint32_t capacity) noexcept;
// After every step: rank 0's console line every TRAINTIME_PRINT_EVERY steps.
void after_step() noexcept;
// TRAINTIME_PROMETHEUS_FILE, written atomically (snapshot thread, and at exit).
void write_prometheus(Session& s);

// live_record.cpp: the always-current record (core/live_record.h) beside the rank file.
// Creates it (named after the claimed rank file) or moves it, then refreshes its rank-file slot
// with `f`. Needs output.mu.
void live_record_update_locked(Session& s, const core::RankFile& f);
void live_record_signal(int sig) noexcept;  // async-signal-safe: the process is ending by `sig`
void live_record_remove_locked(Session& s);  // the final rank file replaced it. Needs output.mu.
void live_record_reset_after_fork();

// hang_watchdog.cpp: the thread (tt-hang) that keeps the record current and writes the rank
// file once, marked as a suspected hang, after TRAINTIME_HANG_SEC seconds without progress.
void start_watchdog(Session& s);
// Asks it to stop; a terminating signal's write gives up on its control lock at `deadline`.
void stop_watchdog(const core::Deadline& deadline);
void reset_watchdog_after_fork();

// self_cost.cpp: what traintime itself cost (docs/schema.md "self_cost") beyond each module's
// own rows. Bytes written to a file (the rank file's written_bytes).
void note_written(uint64_t bytes) noexcept;
// The marks that share the callbacks' time out over the steps after warm-up: at activation
// (the start of the measured steps when there is no warm-up) and after each step ends (`steps`:
// steps completed), on the thread that ended it, or, for steps detected without a marker, on
// the processing thread as detection ends them (cupti::Hooks::on_detected_steps).
void mark_cost_at_activation() noexcept;
void mark_step_cost(uint64_t steps) noexcept;
// The live metric traintime/self_cost_pct: the callbacks' time over the steps after warm-up
// so far, in percent of their wall time; false before a step after warm-up has ended.
bool live_self_cost_pct(double* pct) noexcept;
// tt_api_v1.report_cost: a caller's own row (the Python package's hooks), its figures so far.
void report_cost(const char* module, const char* what, uint64_t calls, uint64_t every, uint64_t samples,
                 uint64_t sum_ns, double sum_squares_ns) noexcept;
// The rows reported through report_cost, by module, and the preload's own memory.
std::vector<core::Section> cost_sections(const Session& s);
// Our threads' CPU time, the bytes written, the callbacks' time in the measured steps.
core::ProcessCost process_cost(const core::Deadline& deadline);
void reset_cost_after_fork() noexcept;
// live_record.cpp: the always-current record's own memory (its mapping and the largest text
// written into a slot).
uint64_t live_record_bytes(const Session& s);

// exit_hooks.cpp (threads of ours start through support/threads.h)
void install_exit_hooks(Session& s);  // atexit, signal handlers, writer and snapshot threads
// The final write, once per process. At exit GPU capture is shut down first (forced flush, all
// delivered records ingested); on a terminating signal (`signal` true) the file is written from
// what has been processed and CUPTI is never waited on.
void finish(core::ExitReason exit_reason, bool signal);
// At the process's first GPU launch: registers the exit hook again, once, so that it runs before
// the atexit teardown CUDA registered at cuInit (DESIGN §2), even when the process was activated
// (and registered it) before CUDA initialised.
void exit_hook_after_cuda() noexcept;
void reset_exit_hooks_after_fork();

}  // namespace traintime::preload
