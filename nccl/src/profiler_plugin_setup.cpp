// How NCCL is made to find traintime's profiler plugin, and the user's plugin loaded for
// chaining (profiler_plugin.h says the rules; NCCL's own are in its src/plugin/plugin_open.cc,
// src/plugin/profiler.cc and src/misc/param.cc).
#include <dlfcn.h>
#include <strings.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>

#include "profiler_plugin.h"
#include "traintime/support/log.h"

namespace traintime::nccl::plugin {
namespace {

namespace np = traintime::nccl_profiler;

Chained g_chained;

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
    void* lib = open_like_nccl(name, "libnccl-profiler");
    std::string what = name ? *name : "libnccl-profiler.so";
    if (!lib && !name) {
      // The net plugin's own profiler (NCCL's ncclGetNetPluginLib), when the net plugin has one.
      const std::optional<std::string> net = nccl_variable("NCCL_NET_PLUGIN");
      if (!(net && strcasecmp(net->c_str(), "none") == 0)) {
        lib = open_like_nccl(net, "libnccl-net");
        what = net ? *net : "libnccl-net.so";
        int newest = 0;
        if (lib && probe(lib, &newest).version == 0 && newest == 0) {
          dlclose(lib);  // a net plugin without a profiler: NCCL loads none
          lib = nullptr;
        }
      }
    }
    if (lib) {
      int newest = 0;
      Chained c = probe(lib, &newest);
      if (c.version == 0) {
        support::warn_once("nccl_profiler_plugin_version",
                       "the NCCL profiler plugin {} offers ncclProfiler_v{}, a version traintime cannot "
                       "pass calls to (it knows v3 ... v7); NCCL loads it as before and traintime counts NCCL calls "
                       "by interposition only",
                       what, newest);
        dlclose(lib);
        return;
      }
      g_chained = c;
    } else if (name) {
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
