// Start-up. Runs in every process of the job tree (launchers, shells, compilers), so it only
// reads the environment, sets a few variables and hands the adapters their configuration: no
// threads, no signal handlers, no files.
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "session.h"
#include "traintime/support/log.h"

namespace traintime::preload {
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
bool claim_injection_var(const char* var, const std::string& self, ProcessIdentity& s) {
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
  std::vector<std::string> warnings;
  core::Config config = core::parse_config(env, warnings);
  std::vector<std::string> names;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "TRAINTIME_", 10) == 0) names.emplace_back(*e, std::strcspn(*e, "="));
  for (std::string& w : core::unknown_variable_warnings(names)) warnings.push_back(std::move(w));
  support::set_log_level(config.log_level);
  if (config.disable) {
    publish(nullptr);
    return;
  }
  auto* s = new Session();
  ProcessIdentity& id = s->identity;
  id.config = std::move(config);
  id.config_warnings = std::move(warnings);
  s->live.flops_per_token.store(id.config.flops_per_token, std::memory_order_relaxed);
  // Not mono_ns(): its first reading calibrates the counter (CPUID, a sysfs read), work for
  // the first annotation, not for every process the preload starts in.
  id.load_mono_ns = core::FastClock::clock_gettime_ns();
  id.load_unix_ns = unix_ns();
  id.launcher_rank = core::detect_rank(env);
  id.job_id = core::detect_job_id(env);
  if (id.job_id.empty()) {
    // First process of a launch without a launcher job id: children share this one.
    id.job_id = core::generate_job_id();
    setenv("TRAINTIME_JOB_ID", id.job_id.c_str(), 0);
  }
  const std::string self = own_path();
  if (!self.empty()) {
    if (id.config.cupti && exports_symbol(self, "InitializeInjection"))
      id.cuda_injection_owned = claim_injection_var("CUDA_INJECTION64_PATH", self, id);
    if (exports_symbol(self, "InitializeInjectionNvtx2"))
      claim_injection_var("NVTX_INJECTION64_PATH", self, id);
  }
  note_process_root();
  publish(s);
}

__attribute__((constructor)) void traintime_constructor() { initialize(); }

}  // namespace

void initialize() {
  static std::once_flag once;
  std::call_once(once, do_initialize);
}

}  // namespace traintime::preload
