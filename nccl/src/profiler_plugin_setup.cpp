// How NCCL is made to find traintime's profiler plugin, and the user's plugin loaded for
// chaining (profiler_plugin.h says the rules; NCCL's own are in its src/plugin/plugin_open.cc,
// src/plugin/profiler.cc and src/misc/param.cc).
#include <dlfcn.h>
#include <strings.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>

#include "profiler_plugin.h"
#include "traintime/support/log.h"

namespace traintime::nccl::plugin {
namespace {

namespace np = traintime::nccl_profiler;

Chained g_chained;
// No plugin named (NCCL_PROFILER_PLUGIN unset): the loader-path search for the user's plugin is left
// to NCCL's first init of ours (resolve_chained), not made in every process at start.
bool g_search_pending = false;
std::mutex g_search_mu;

// A variable's value in one of NCCL's configuration files (NAME=VALUE lines, # comments).
std::optional<std::string> conf_value(const std::string& path, const char* name) {
  std::ifstream in(path);
  std::string line;
  const size_t n = std::strlen(name);
  while (std::getline(in, line)) {
    if (line.size() > n && line.compare(0, n, name) == 0 && line[n] == '=') return line.substr(n + 1);
  }
  return std::nullopt;
}

// The value NCCL will use for `name`: the environment's, else the configuration files' in the
// order NCCL applies them (a file never overrides a value already set).
std::optional<std::string> nccl_variable(const char* name) {
  if (const char* v = std::getenv(name)) return std::string(v);
  if (const char* file = std::getenv("NCCL_CONF_FILE")) {
    if (auto v = conf_value(file, name)) return v;
  } else if (const char* home = std::getenv("HOME")) {
    if (auto v = conf_value(std::string(home) + "/.nccl.conf", name)) return v;
  }
  return conf_value("/etc/nccl.conf", name);
}

bool names_the_process(const std::string& name) {
  return !name.empty() && strncasecmp(name.c_str(), "STATIC_PLUGIN", name.size()) == 0;
}

// NCCL's openPluginLib: the name as given, then as <prefix>-<name>.so when it is a bare name.
void* open_like_nccl(const std::optional<std::string>& name, const char* prefix) {
  const std::string given = name.value_or("");
  auto open = [](const std::string& n) { return n.empty() ? nullptr : dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL); };
  if (void* h = open(given.empty() ? std::string(prefix) + ".so" : given)) return h;
  const bool lib_so = given.rfind("lib", 0) == 0 && given.size() >= 3 && given.compare(given.size() - 3, 3, ".so") == 0;
  if (!given.empty() && given.find('/') == std::string::npos && !lib_so) return open(std::string(prefix) + "-" + given + ".so");
  return nullptr;
}

// The newest ncclProfiler_vN `lib` exports; version 0 with `newest_seen` set when it exports
// only versions traintime cannot call.
Chained probe(void* lib, int* newest_seen) {
  Chained c;
  *newest_seen = 0;
  for (int v = 16; v >= 1; --v) {
    const std::string symbol = "ncclProfiler_v" + std::to_string(v);
    void* t = dlsym(lib, symbol.c_str());
    if (!t) continue;
    if (*newest_seen == 0) *newest_seen = v;
    if (v <= 7 && v >= 3) {
      c.version = v;
      c.table = t;
      c.lib = lib;
      return c;
    }
  }
  return c;
}

}  // namespace

const Chained& chained() noexcept { return g_chained; }

namespace {

// `lib` probed: chained when traintime can call its version, else closed with one warning. `taken`:
// traintime's plugin already holds NCCL's slot (the search came after NCCL_PROFILER_PLUGIN was set).
bool adopt(void* lib, const std::string& what, bool taken) {
  int newest = 0;
  Chained c = probe(lib, &newest);
  if (c.version == 0) {
    if (taken)
      support::warn_once("nccl_profiler_plugin_version",
                         "the NCCL profiler plugin {} offers ncclProfiler_v{}, a version traintime cannot pass calls "
                         "to (it knows v3 ... v7), so NCCL calls traintime's plugin in its place; name it in "
                         "NCCL_PROFILER_PLUGIN to have NCCL load it instead (traintime then counts NCCL calls by "
                         "interposition only)",
                         what, newest);
    else
      support::warn_once("nccl_profiler_plugin_version",
                         "the NCCL profiler plugin {} offers ncclProfiler_v{}, a version traintime cannot "
                         "pass calls to (it knows v3 ... v7); NCCL loads it as before and traintime counts NCCL calls "
                         "by interposition only",
                         what, newest);
    dlclose(lib);
    return false;
  }
  g_chained = c;
  return true;
}

// The plugin NCCL would load with no NCCL_PROFILER_PLUGIN: a libnccl-profiler.so on the loader
// path, else the net plugin's own profiler (NCCL's ncclGetNetPluginLib), when it has one.
void search_loader_path() {
  if (void* lib = open_like_nccl(std::nullopt, "libnccl-profiler")) {
    adopt(lib, "libnccl-profiler.so", true);
    return;
  }
  const std::optional<std::string> net = nccl_variable("NCCL_NET_PLUGIN");
  if (net && strcasecmp(net->c_str(), "none") == 0) return;
  void* lib = open_like_nccl(net, "libnccl-net");
  if (!lib) return;
  int newest = 0;
  if (probe(lib, &newest).version == 0 && newest == 0) {
    dlclose(lib);  // a net plugin without a profiler: NCCL loads none
    return;
  }
  adopt(lib, net ? *net : "libnccl-net.so", true);
}

}  // namespace

void resolve_chained() noexcept {
  std::lock_guard<std::mutex> lock(g_search_mu);
  if (!g_search_pending) return;
  g_search_pending = false;
  try {
    search_loader_path();
  } catch (...) {
    // Allocation failure: no plugin chained.
  }
}

void setup(bool enabled) noexcept {
  static bool done = false;  // a fork child inherits the decision (and its environment)
  if (!enabled || done) return;
  done = true;
  try {
    const std::optional<std::string> name = nccl_variable("NCCL_PROFILER_PLUGIN");
    if (name && strcasecmp(name->c_str(), "none") == 0) return;  // the user's choice: no plugin
    if (name && names_the_process(*name)) {
      // Already pointing NCCL at the process (traintime's own setting inherited, or the
      // program's own static plugin, which NCCL would find before traintime's): nothing to add.
      return;
    }
    if (!name) {
      // Whether NCCL would find a plugin on the loader path is settled at its first init of ours:
      // two failed dlopen searches cost every process, NCCL or not, about 0.2 ms at start.
      g_search_pending = true;
    } else if (void* lib = open_like_nccl(name, "libnccl-profiler")) {
      if (!adopt(lib, *name, false)) return;  // left to NCCL
    } else {
      // NCCL would fail to load it too (it reports that itself): traintime takes the empty slot.
      support::warn_once("nccl_profiler_plugin_missing",
                         "NCCL_PROFILER_PLUGIN={} names no loadable library; traintime's own NCCL profiler "
                         "plugin is used instead",
                         *name);
    }
    setenv("NCCL_PROFILER_PLUGIN", "STATIC_PLUGIN", 1);
  } catch (...) {
    // Allocation failure: leave NCCL's plugin lookup as it was.
  }
}

}  // namespace traintime::nccl::plugin
