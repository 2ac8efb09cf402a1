// Process-wide state behind runtime.h: lazy registry, activation at the first record, fork.
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "log.h"
#include "traintime/cupti/gpu_capture.h"
#include "runtime_state.h"

namespace traintime::rt {
namespace detail {

std::atomic<State*> g_state{nullptr};
thread_local core::ThreadState* t_thread_state __attribute__((tls_model("initial-exec"))) = nullptr;

namespace {
std::atomic<bool> g_initialized{false};
std::atomic<bool> g_injection_owned{false};

constexpr int kMaxHooks = 16;
std::atomic<RankFileFiller> g_fillers[kMaxHooks];
std::atomic<int> g_filler_count{0};
std::atomic<ShutdownHook> g_hooks[kMaxHooks];
std::atomic<int> g_hook_count{0};
}  // namespace

State* state_slow() {
  if (!g_initialized.load(std::memory_order_acquire)) initialize();
  return g_state.load(std::memory_order_acquire);
}

void mark_initialized(State* s, bool injection_owned) {
  g_injection_owned.store(injection_owned, std::memory_order_relaxed);
  g_state.store(s, std::memory_order_release);
  g_initialized.store(true, std::memory_order_release);
}

bool initialized() { return g_initialized.load(std::memory_order_acquire); }

core::RegionRegistry* registry() {
  State* s = state();
  if (!s) return nullptr;
  core::RegionRegistry* r = s->registry.load(std::memory_order_acquire);
  if (r) return r;
  const int saved = errno;
  std::lock_guard<std::mutex> lock(s->registry_mu);
  r = s->registry.load(std::memory_order_relaxed);
  if (!r) {
    std::string error;
    auto rules = core::CategoryRules::parse(s->config.category_rules, &error);
    // parse_config validated the rules already and warned; an invalid spec means defaults.
    r = new core::RegionRegistry(rules ? std::move(*rules) : core::CategoryRules::defaults(),
                                 s->config.warmup_steps);
    s->registry.store(r, std::memory_order_release);
  }
  errno = saved;
  return r;
}

core::ThreadState* thread_state_slow() {
  core::RegionRegistry* r = registry();
  if (!r) return nullptr;
  const int saved = errno;
  core::ThreadState* ts = r->thread_state();
  t_thread_state = ts;
  errno = saved;
  return ts;
}

void activate(uint64_t origin_ns) {
  State* s = state();
  if (!s) return;
  const int saved = errno;
  core::RegionRegistry* r = registry();
  {
    std::lock_guard<std::mutex> lock(s->mu);
    if (!s->activated.load(std::memory_order_relaxed)) {
      if (r) r->steps().set_origin(origin_ns);
      // Resolve the output directory now: the application may chdir before it exits.
      s->output_dir = s->config.output_dir;
      if (s->output_dir.empty() || s->output_dir[0] != '/') {
        char cwd[PATH_MAX];
        if (getcwd(cwd, sizeof cwd)) s->output_dir = std::string(cwd) + "/" + s->output_dir;
      }
      // Config warnings wait until here so that shells and launchers stay silent.
      for (const auto& w : s->config_warnings) log(LogLevel::kWarn, "%s", w.c_str());
      if (s->launcher_rank.from_launcher) claim_locked(*s);
      install_exit_hooks(*s);
      s->activated.store(true, std::memory_order_release);
    }
  }
  errno = saved;
}

void effective_rank(const State& s, int64_t* rank, int64_t* world_size) {
  if (s.launcher_rank.from_launcher) {
    *rank = s.launcher_rank.rank;
    *world_size = s.launcher_rank.world_size;
    return;
  }
  const int64_t cr = s.comm_rank.load(std::memory_order_relaxed);
  if (cr >= 0) {
    *rank = cr;
    *world_size = s.comm_world.load(std::memory_order_relaxed);
    return;
  }
  *rank = 0;
  *world_size = 1;
}

void run_fillers(core::RankFile& f) {
  const int n = g_filler_count.load(std::memory_order_acquire);
  for (int i = 0; i < n && i < kMaxHooks; ++i)
    if (RankFileFiller fn = g_fillers[i].load(std::memory_order_acquire)) fn(f);
}

void run_shutdown_hooks(const char* reason) {
  const int n = g_hook_count.load(std::memory_order_acquire);
  for (int i = 0; i < n && i < kMaxHooks; ++i)
    if (ShutdownHook fn = g_hooks[i].load(std::memory_order_acquire)) fn(reason);
}

namespace {
// A fork child starts clean (DESIGN §2): fresh state with the same configuration, no registry,
// no claim; it writes only if it records something itself, and then as an aux process.
void on_fork_child() {
  State* parent = g_state.load(std::memory_order_relaxed);
  t_thread_state = nullptr;
  reset_exit_hooks_after_fork();
  if (!parent) return;
  auto* s = new State();
  s->config = parent->config;
  s->config_warnings = parent->config_warnings;
  s->launcher_rank = parent->launcher_rank;
  s->job_id = parent->job_id;
  s->load_mono_ns = mono_ns();
  s->load_unix_ns = unix_ns();
  s->injection_conflict = parent->injection_conflict;
  s->forked_child = true;
  s->comm_rank.store(parent->comm_rank.load(std::memory_order_relaxed), std::memory_order_relaxed);
  s->comm_world.store(parent->comm_world.load(std::memory_order_relaxed), std::memory_order_relaxed);
  g_state.store(s, std::memory_order_release);
}
}  // namespace

void register_fork_handler() {
  // Registrations are inherited by fork children, so once per process image is enough.
  static bool registered = false;
  if (registered) return;
  registered = true;
  pthread_atfork(nullptr, nullptr, on_fork_child);
}

}  // namespace detail

using detail::State;

bool active() {
  State* s = detail::state();
  return s != nullptr;
}

namespace {
// The registry if one was made, without making it: the GPU-side readers below (launch callback,
// activity ingest) must not create state for a process that never recorded a region.
const core::RegionRegistry* existing_registry() {
  State* s = detail::g_state.load(std::memory_order_acquire);
  return s ? s->registry.load(std::memory_order_acquire) : nullptr;
}
}  // namespace

core::LaunchContext launch_context() {
  const core::RegionRegistry* r = existing_registry();
  return r ? r->launch_context(detail::t_thread_state) : core::LaunchContext{};
}

void mark_recorded() {
  State* s = detail::state();
  if (!s) return;
  if (!s->gpu_recorded.exchange(true, std::memory_order_relaxed)) {
    const int saved = errno;
    if (!s->injection_conflict.empty()) {
      warn_once("injection-conflict",
                "%s belongs to another tool; GPU capture subscribes lazily instead of at CUDA "
                "start-up, so work launched before that may be missed",
                s->injection_conflict.c_str());
    }
    errno = saved;
  }
  if (!s->activated.load(std::memory_order_acquire)) detail::activate(detail::mono_ns());
}

core::Category category_of(core::PathId path) {
  const core::RegionRegistry* r = existing_registry();
  return r ? r->category_of(path) : core::Category::kOther;
}

std::string path_string(core::PathId path) {
  const core::RegionRegistry* r = existing_registry();
  return r ? r->path_string(path) : std::string();
}

const core::Config& config() {
  static const core::Config* const kDefaults = new core::Config();  // never destroyed
  State* s = detail::state();
  return s ? s->config : *kDefaults;
}

void set_rank_from_communicator(int64_t rank, int64_t world_size) {
  State* s = detail::state();
  if (!s || s->launcher_rank.from_launcher || rank < 0 || world_size <= rank) return;
  s->comm_world.store(world_size, std::memory_order_relaxed);
  s->comm_rank.store(rank, std::memory_order_relaxed);
}

void add_rank_file_filler(RankFileFiller filler) {
  if (!filler) return;
  // Readers skip a slot whose pointer is not stored yet, so a racing registration is safe.
  const int i = detail::g_filler_count.fetch_add(1, std::memory_order_acq_rel);
  if (i < detail::kMaxHooks) detail::g_fillers[i].store(filler, std::memory_order_release);
}

void add_shutdown_hook(ShutdownHook hook) {
  if (!hook) return;
  // Readers skip a slot whose pointer is not stored yet, so a racing registration is safe.
  const int i = detail::g_hook_count.fetch_add(1, std::memory_order_acq_rel);
  if (i < detail::kMaxHooks) detail::g_hooks[i].store(hook, std::memory_order_release);
}

bool cuda_injection_owned() { return detail::g_injection_owned.load(std::memory_order_relaxed); }

void gpu_start_point() noexcept {
  if (!cuda_injection_owned()) cupti::lazy_start_point();
}

}  // namespace traintime::rt
