// Start-up. Runs in every process of the job tree (launchers, shells, compilers), so it only
// reads the environment and sets a few variables: no threads, no signal handlers, no files.
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <cstring>
#include <mutex>
#include <string>

#include "log.h"
#include "runtime_state.h"

namespace traintime::rt::detail {
namespace {

std::string own_path() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void*>(&initialize), &info) || !info.dli_fname) return {};
  char resolved[PATH_MAX];
  if (!realpath(info.dli_fname, resolved)) return {};
  return resolved;
}

// Whether this library defines `symbol` (the CUPTI and NVTX entry points come with GPU capture;
// pointing the driver at a library without them would be worse than leaving the variable unset).
bool exports_symbol(const std::string& path, const char* symbol) {
  void* self = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (!self) return false;
  const bool found = dlsym(self, symbol) != nullptr;
  dlclose(self);
  return found;
}

bool same_file(const char* a, const std::string& b) {
  char resolved[PATH_MAX];
  return realpath(a, resolved) && b == resolved;
}

// Points `var` at this library unless it is set; returns whether it ends up naming us, and
// records a conflict when another tool holds it.
bool claim_injection_var(const char* var, const std::string& self, State& s) {
  const char* current = getenv(var);
  if (!current || !*current) {
    setenv(var, self.c_str(), 1);
    return true;
  }
  if (same_file(current, self)) return true;
  if (s.injection_conflict.empty()) s.injection_conflict = std::string(var) + "=" + current;
  return false;
}

void do_initialize() {
  auto env = [](const char* name) -> const char* { return getenv(name); };
  auto* s = new State();
  s->config = core::parse_config(env, s->config_warnings);
  set_log_level(s->config.log_level.c_str());
  if (s->config.disable) {
    delete s;
    mark_initialized(nullptr, false);
    return;
  }
  s->load_mono_ns = mono_ns();
  s->load_unix_ns = unix_ns();
  s->launcher_rank = core::detect_rank(env);
  s->job_id = core::detect_job_id(env);
  if (s->job_id.empty()) {
    // First process of a launch without a launcher job id: children share this one.
    s->job_id = core::generate_job_id();
    setenv("TRAINTIME_JOB_ID", s->job_id.c_str(), 0);
  }
  bool cuda_owned = false;
  const std::string self = own_path();
  if (!self.empty()) {
    if (s->config.cupti && exports_symbol(self, "InitializeInjection"))
      cuda_owned = claim_injection_var("CUDA_INJECTION64_PATH", self, *s);
    if (exports_symbol(self, "InitializeInjectionNvtx2"))
      claim_injection_var("NVTX_INJECTION64_PATH", self, *s);
  }
  register_fork_handler();
  mark_initialized(s, cuda_owned);
}

__attribute__((constructor)) void traintime_constructor() { initialize(); }

}  // namespace

void initialize() {
  static std::once_flag once;
  std::call_once(once, do_initialize);
}

}  // namespace traintime::rt::detail
