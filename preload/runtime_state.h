// Internal to preload/: the state behind runtime.h and the annotation API, and the functions
// the lifecycle files share. Other parts of the library use runtime.h only.
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>
#include <mutex>
#include <string>
#include <vector>

#include "traintime/core/config.h"
#include "traintime/core/rank_detect.h"
#include "traintime/core/region_registry.h"
#include "runtime.h"

namespace traintime::rt::detail {

inline uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t unix_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// One per process image; a fork child gets a fresh one (the parent's is leaked there, since
// its mutexes may have been held by threads that do not exist in the child).
struct State {
  // Fixed at start-up (copied into a fork child's state).
  core::Config config;
  std::vector<std::string> config_warnings;
  core::RankInfo launcher_rank;
  std::string job_id;
  uint64_t load_mono_ns = 0;
  uint64_t load_unix_ns = 0;
  std::string injection_conflict;  // "CUDA_INJECTION64_PATH=..." when another tool owns it
  bool forked_child = false;

  std::mutex registry_mu;  // creating the registry only
  std::atomic<core::RegionRegistry*> registry{nullptr};
  std::atomic<bool> activated{false};
  std::atomic<bool> gpu_recorded{false};
  std::atomic<int64_t> comm_rank{-1};
  std::atomic<int64_t> comm_world{0};

  std::mutex mu;  // activation, the rank-file claim and every write
  std::string output_dir;  // absolute; resolved at activation (the app may chdir later)
  std::string file_path;   // the file this process owns, once claimed
  int64_t claimed_rank = -1;
  std::string role = "rank";
  bool final_written = false;
  bool write_error_reported = false;
  uint32_t files_written = 0;
};

// Null when TRAINTIME_DISABLE=1 (initialises on first call if the constructor has not run).
extern std::atomic<State*> g_state;
State* state_slow();
inline State* state() {
  State* s = g_state.load(std::memory_order_acquire);
  return s ? s : state_slow();
}

// The calling thread's registry state (hot path). Null when profiling is off.
extern thread_local core::ThreadState* t_thread_state __attribute__((tls_model("initial-exec")));
core::ThreadState* thread_state_slow();
inline core::ThreadState* thread_state() {
  core::ThreadState* ts = t_thread_state;
  return ts ? ts : thread_state_slow();
}
core::RegionRegistry* registry();  // creates it on first use; null when profiling is off

// Start-up (constructor.cpp): idempotent, cheap, no threads, no signal handlers.
void initialize();
bool initialized();
// Publishes the state made by initialize() (null when disabled).
void mark_initialized(State* s, bool cuda_injection_owned);
void register_fork_handler();

// First record of the process (runtime.cpp). `origin_ns` starts step 0's wall time.
// Callers of ensure_active() have a ThreadState, hence a state.
void activate(uint64_t origin_ns);
// Returns the time to record: `now_ns`, or a fresh reading when activation just ran, so its
// one-off cost (claiming the file, starting the writer thread) is not charged to a region.
inline uint64_t ensure_active(uint64_t now_ns, uint64_t origin_ns) {
  State* s = g_state.load(std::memory_order_relaxed);
  if (__builtin_expect(s->activated.load(std::memory_order_acquire), 1)) return now_ns;
  activate(origin_ns);
  return mono_ns();
}
inline uint64_t ensure_active(uint64_t now_ns) { return ensure_active(now_ns, now_ns); }

// Effective rank and world size: launcher, else communicator, else 0 of 1.
void effective_rank(const State& s, int64_t* rank, int64_t* world_size);

// rank_file_output.cpp
core::RankFile assemble_rank_file(State& s, bool snapshot, const char* exit_reason);
// Claims this process's file name if not yet done and writes. Needs s.mu held.
bool write_rank_file_locked(State& s, bool snapshot, const char* exit_reason);
// Claims rank-%05d.json early (at activation) when the launcher gave the rank. Needs s.mu.
void claim_locked(State& s);

// exit_hooks.cpp
void install_exit_hooks(State& s);  // atexit, signal handlers, writer and snapshot threads
void finish(const char* exit_reason);  // shutdown hooks + final write, once per process
void run_shutdown_hooks(const char* reason);
void run_fillers(core::RankFile& f);
void reset_exit_hooks_after_fork();

}  // namespace traintime::rt::detail
