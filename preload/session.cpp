// The session: lazy registry, activation at the first record, the hooks that wire the adapters
// to it, and the one fork strategy.
#include "session.h"

#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include "traintime/cupti/gpu_capture.h"
#include "traintime/nccl/nccl_interposer.h"
#include "traintime/core/module.h"
#include "traintime/modules/module_table.h"
#include "traintime/support/loader.h"
#include "traintime/support/log.h"

// Each module's runtime half (core/module.h), defined in its own folder.
#define TRAINTIME_DECLARE_MODULE(m) \
  namespace traintime::m {          \
  extern const core::Module kModule; \
  }
TRAINTIME_MODULES(TRAINTIME_DECLARE_MODULE)
#undef TRAINTIME_DECLARE_MODULE

namespace traintime::preload {

std::atomic<Session*> g_session{nullptr};
__thread HotThread t_hot __attribute__((tls_model("initial-exec")));

namespace {

// The one table of modules (modules/include/traintime/modules/module_table.h): configured in this
// order, started at the first GPU launch, stopped by finish() in the reverse order; the order of
// the sections of those with nothing to join (module_sections()) and so of their warnings.
#define TRAINTIME_MODULE_OF(m) &traintime::m::kModule,
constexpr const core::Module* kModules[] = {TRAINTIME_MODULES(TRAINTIME_MODULE_OF)};
#undef TRAINTIME_MODULE_OF

std::atomic<bool> g_published{false};
// The loader's count of unloaded objects at the last look (notice_unloads).
std::atomic<unsigned long long> g_unloads_seen{0};

// The registry if one was made, without making it: the GPU-side readers (launch callback,
// activity ingest) must not create state for a process that never recorded a region.
const core::RegionRegistry* existing_registry() noexcept {
  Session* s = g_session.load(std::memory_order_acquire);
  return s ? s->recorder.registry.load(std::memory_order_acquire) : nullptr;
}

// The process has something to write (GPU work, an NCCL call): activates it like a region does.
void mark_recorded() noexcept {
  Session* s = g_session.load(std::memory_order_acquire);
  if (!s) return;
  const int saved = errno;
  if (!s->recorder.gpu_recorded.exchange(true, std::memory_order_relaxed) &&
      !s->identity.injection_conflict.empty()) {
    support::warn_once("injection-conflict",
                       "{} belongs to another tool; GPU capture subscribes lazily instead of at "
                       "CUDA start-up, so work launched before that may be missed",
                       s->identity.injection_conflict);
  }
  if (!s->recorder.activated.load(std::memory_order_acquire)) activate(mono_ns());
  errno = saved;
}

// --- Hooks given to cupti/ -------------------------------------------------------------------

// DESIGN §4 rules 1-4: the calling thread's innermost region (else the step thread's) and its
// category, the step count, the region entry, and the NCCL call the thread is inside.
// The launching thread's last path and its category (region_registry.h): one registry per
// process, never replaced, so the memo never goes stale.
__thread core::RegionRegistry::CategoryMemo t_category_memo __attribute__((tls_model("initial-exec")));

constexpr core::LaunchContext kNoContext{};  // copied, not built on the stack at every launch

void launch_context(core::LaunchContext* out) noexcept {
  if (const core::RegionRegistry* r = existing_registry())
    r->launch_context(t_hot.ts, out, &t_category_memo);
  else
    *out = kNoContext;
  if (const nccl::Call* c = nccl::current_call()) out->comm = *c;
}

// An NCCL kernel launched by NCCL's own thread (nonblocking communicators): the call that
// waits for it on its stream, in the comm fields of the launching context.
bool pending_comm_call(const void* stream, core::LaunchContext* ctx) noexcept {
  nccl::Call c;
  if (!nccl::take_pending_call(stream, &c)) return false;
  ctx->comm = c;
  return true;
}

// The members of an NCCL group kernel's group, from the session's call table.
bool comm_group(uint64_t group_id, core::CommGroupRecord* out) noexcept {
  const Session* s = g_session.load(std::memory_order_acquire);
  return s != nullptr && s->recorder.comm_table.find_group(group_id, *out);
}

uint32_t steps_completed() noexcept {
  const core::RegionRegistry* r = existing_registry();
  return r ? r->steps().count() : 0;
}

std::string path_name(core::PathId path) {
  const core::RegionRegistry* r = existing_registry();
  return r ? r->path_string(path) : std::string();
}

// --- Hooks given to nccl/ --------------------------------------------------------------------

void on_world_rank(int64_t rank, int64_t world_size) noexcept {
  Session* s = g_session.load(std::memory_order_acquire);
  if (!s || s->identity.launcher_rank.from_launcher || rank < 0 || world_size <= rank) return;
  s->recorder.comm_world.store(world_size, std::memory_order_relaxed);
  s->recorder.comm_rank.store(rank, std::memory_order_relaxed);
}

// The first GPU launch: the process uses CUDA (CUDA registered its own atexit teardown at
// cuInit, before this): it is activated, the exit hook is registered again so that it runs
// before that teardown, and the modules waiting for CUDA start (NVML's sampler, on its own
// thread; NVML is never loaded by a process that does not use CUDA).
void on_first_gpu_launch() noexcept {
  mark_recorded();
  const int saved = errno;
  exit_hook_after_cuda();
  for (const core::Module* m : kModules)
    if (m->start) m->start();
  errno = saved;
}

// What every module is given (core/module.h): the configuration and the root's functions,
// among them the joins across modules (a launch's region and NCCL call, an NCCL kernel's call).
core::ModuleHost module_host(Session& s, bool fork_child) {
  core::ModuleHost h;
  h.config = &s.identity.config;
  h.fork_child = fork_child;
  h.comm_table = &s.recorder.comm_table;
  h.on_first_record = &mark_recorded;
  h.on_first_gpu_launch = &on_first_gpu_launch;
  h.on_communicator = &gpu_start_point;
  h.on_world_rank = &on_world_rank;
  h.steps_completed = &steps_completed;
  h.path_name = &path_name;
  h.launch_context = &launch_context;
  h.pending_comm_call = &pending_comm_call;
  h.comm_calls_waiting = &nccl::calls_waiting;
  h.comm_group = &comm_group;
  h.on_capture_begin = &nccl::note_capture_begin;
  h.capture_watch = &nccl::set_capture_watch;
  h.on_detected_steps = &mark_step_cost;
  h.gpu_clock_ns = &cupti::clock_now;
  h.step_at = &cupti::step_at;
  return h;
}

void configure_modules(Session& s, bool fork_child) {
  const core::ModuleHost host = module_host(s, fork_child);
  for (const core::Module* m : kModules) m->configure(host);
}

// The one fork strategy (DESIGN §2): the child starts clean — a fresh session with the same
// configuration, no registry, no claim, a fresh NCCL table; GPU capture state belongs to the
// parent. The child writes only if it records something itself, and then as an aux process.
void on_fork_child() {
  Session* parent = g_session.load(std::memory_order_relaxed);
  t_hot = HotThread{};
  reset_exit_hooks_after_fork();
  reset_watchdog_after_fork();
  live_record_reset_after_fork();
  reset_cost_after_fork();
  if (!parent) return;
  auto* s = new Session();
  s->identity = parent->identity;
  s->identity.load_mono_ns = mono_ns();
  s->identity.load_unix_ns = unix_ns();
  s->identity.forked_child = true;
  s->live.flops_per_step.store(parent->live.flops_per_step.load(std::memory_order_relaxed),
                               std::memory_order_relaxed);
  s->live.flops_per_token.store(parent->live.flops_per_token.load(std::memory_order_relaxed),
                                std::memory_order_relaxed);
  s->recorder.comm_rank.store(parent->recorder.comm_rank.load(std::memory_order_relaxed),
                              std::memory_order_relaxed);
  s->recorder.comm_world.store(parent->recorder.comm_world.load(std::memory_order_relaxed),
                               std::memory_order_relaxed);
  g_session.store(s, std::memory_order_release);
  configure_modules(*s, true);
}

}  // namespace

Session* session_slow() {
  if (!g_published.load(std::memory_order_acquire)) initialize();
  return g_session.load(std::memory_order_acquire);
}

void publish(Session* s) {
  if (s) {
    configure_modules(*s, false);
    // Registrations are inherited by fork children, so once per process image is enough.
    pthread_atfork(nullptr, nullptr, on_fork_child);
  }
  g_session.store(s, std::memory_order_release);
  g_published.store(true, std::memory_order_release);
}

core::RegionRegistry* registry() {
  Session* s = session();
  if (!s) return nullptr;
  core::RegionRegistry* r = s->recorder.registry.load(std::memory_order_acquire);
  if (r) return r;
  const int saved = errno;
  std::lock_guard<std::mutex> lock(s->recorder.registry_mu);
  r = s->recorder.registry.load(std::memory_order_relaxed);
  if (!r) {
    std::string error;
    const core::Config& c = s->identity.config;
    auto rules = core::CategoryRules::parse(c.category_rules, &error);
    // parse_config validated the rules already and warned; an invalid spec means defaults.
    r = new core::RegionRegistry(rules ? std::move(*rules) : core::CategoryRules::defaults(),
                                 c.warmup_steps, c.step_detail);
    // Regions are timed in the process clock's ticks (the CPU's counter where it is trusted),
    // made nanoseconds only when the rank file is built.
    core::Timebase tb;
    tb.duration_ns = [](uint64_t ticks) { return core::process_clock().ticks_to_ns(ticks); };
    tb.now_ns = [] { return core::process_clock().now_ns(); };
    r->set_timebase(tb);
    g_unloads_seen.store(support::loaded_object_subs(), std::memory_order_relaxed);
    r->set_constant_text(&support::in_read_only_segment);
    s->recorder.registry.store(r, std::memory_order_release);
  }
  errno = saved;
  return r;
}

core::ThreadState* begin_recording(bool from_load) {
  Session* s = session();
  core::RegionRegistry* r = registry();
  if (!s || !r) return nullptr;
  const int saved = errno;
  // Activation first: its one-off cost (claiming the file, starting the writer thread) comes
  // before the caller reads the clock, so no region is charged with it.
  if (!s->recorder.activated.load(std::memory_order_acquire))
    activate(from_load ? s->identity.load_mono_ns : mono_ns());
  core::ThreadState* ts = r->thread_state();
  t_hot.registry = r;
  t_hot.ts = ts;
  // The hot path's one test: set when readings are the counter itself (a process that cannot
  // trust it reads clock_gettime on record's slow path).
  t_hot.counted = core::process_clock().ticks_from_counter() ? ts : nullptr;
  errno = saved;
  return ts;
}

void activate(uint64_t origin_ns) {
  Session* s = session();
  if (!s) return;
  const int saved = errno;
  core::RegionRegistry* r = registry();
  {
    std::lock_guard<std::mutex> lock(s->output.mu);
    if (!s->recorder.activated.load(std::memory_order_relaxed)) {
      if (r) r->steps().set_origin(origin_ns);
      // Resolve the output directory now: the application may chdir before it exits.
      s->output.dir = s->identity.config.output_dir;
      if (s->output.dir.empty() || s->output.dir[0] != '/') {
        char cwd[PATH_MAX];
        if (getcwd(cwd, sizeof cwd)) s->output.dir = std::string(cwd) + "/" + s->output.dir;
      }
      // Config warnings wait until here so that shells and launchers stay silent.
      for (const auto& w : s->identity.config_warnings) support::log_warn("{}", w);
      check_output_dir_locked(*s);
      if (s->identity.launcher_rank.from_launcher) claim_locked(*s);
      enable_live_outputs(*s);
      install_exit_hooks(*s);
      mark_cost_at_activation();
      s->recorder.activated.store(true, std::memory_order_release);
    }
  }
  errno = saved;
}

void notice_unloads() noexcept {
  Session* s = g_session.load(std::memory_order_acquire);
  core::RegionRegistry* r = s ? s->recorder.registry.load(std::memory_order_acquire) : nullptr;
  if (!r) return;
  const int saved = errno;
  const unsigned long long subs = support::loaded_object_subs();
  if (g_unloads_seen.exchange(subs, std::memory_order_relaxed) != subs) r->forget_constant_text();
  errno = saved;
}

void gpu_start_point() noexcept {
  Session* s = g_session.load(std::memory_order_acquire);
  if (s && !s->identity.cuda_injection_owned) cupti::lazy_start_point();
}

bool stop_modules(const char* reason, bool signal, const core::Deadline& deadline) {
  bool complete = true;
  for (std::size_t i = std::size(kModules); i-- > 0;)
    if (kModules[i]->stop && !kModules[i]->stop(reason, signal, deadline)) complete = false;
  return complete;
}

void module_costs_so_far(core::CostSoFar& c, uint64_t pair_ticks, bool calls) noexcept {
  for (const core::Module* m : kModules)
    if (m->cost_so_far) m->cost_so_far(c, pair_ticks, calls);
}

std::vector<core::Section> module_sections() {
  std::vector<core::Section> out;
  for (const core::Module* m : kModules)
    if (m->section) out.push_back(m->section());
  return out;
}

void effective_rank(const Session& s, int64_t* rank, int64_t* world_size) {
  if (s.identity.launcher_rank.from_launcher) {
    *rank = s.identity.launcher_rank.rank;
    *world_size = s.identity.launcher_rank.world_size;
    return;
  }
  const int64_t cr = s.recorder.comm_rank.load(std::memory_order_relaxed);
  if (cr >= 0) {
    *rank = cr;
    *world_size = s.recorder.comm_world.load(std::memory_order_relaxed);
    return;
  }
  *rank = 0;
  *world_size = 1;
}

}  // namespace traintime::preload
