// SIMULATION: simgpu's NCCL calling a profiler plugin as NCCL does (nccl_profiler.h says what is
// followed, from which NCCL source file).
#include "nccl_profiler.h"
#include "nccl_net.h"

#include <dlfcn.h>
#include <strings.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include "simgpu/engine.h"
#include "traintime/nccl/profiler_plugin_api.h"
#include "traintime/nccl/profiler_plugin_convert.h"

namespace np = traintime::nccl_profiler;

namespace simgpu_prof {
namespace {

// Between the kernel's start and the first channel's start timestamp, and between the last
// channel's stop timestamp and the kernel's end (what NCCL's kernel spends before writing its
// first and after writing its last timer): KernelCh spans a little less than the whole kernel.
constexpr uint64_t kFirstChannelLagNs = 300;
constexpr uint64_t kLastChannelLeadNs = 200;
constexpr uint64_t kChannelSkewNs = 15;  // channel c starts c x this after channel 0
// In a stalled collective (SIMGPU_NET_STALL), how long the channels that finish take.
constexpr uint64_t kStalledChannelNs = 100000;

// NCCL's initEnv (src/misc/param.cc): configuration files set only variables not already set.
void apply_conf_file(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    setenv(line.substr(0, eq).c_str(), line.substr(eq + 1).c_str(), 0);
  }
}
void init_env() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (const char* file = std::getenv("NCCL_CONF_FILE")) {
      apply_conf_file(file);
    } else if (const char* home = std::getenv("HOME")) {
      apply_conf_file(std::string(home) + "/.nccl.conf");
    }
    apply_conf_file("/etc/nccl.conf");
  });
}

void nccl_log(int, unsigned long, const char*, int, const char*, ...) {}

struct Plugin {
  std::mutex mu;
  int status = 0;  // 0 not tried, 1 loaded, -1 failed (never tried again)
  int refs = 0;
  void* lib = nullptr;
  int version = 0;
  const void* table = nullptr;
};
Plugin& plugin() {
  static Plugin* p = new Plugin();
  return *p;
}

// The process's one activation mask (NCCL's ncclProfilerEventMask), handed to every init.
int g_mask = 0;

int live_mask() { return __atomic_load_n(&g_mask, __ATOMIC_RELAXED); }

// NCCL's openPluginLib for the profiler: returns the library or NULL.
void* open_lib(const char* name) {
  auto try_open = [](const std::string& n) -> void* {
    if (n.empty()) return nullptr;
    const bool self = strncasecmp(n.c_str(), "STATIC_PLUGIN", n.size()) == 0;
    return dlopen(self ? nullptr : n.c_str(), RTLD_NOW | RTLD_LOCAL);
  };
  const std::string given = name ? name : "";
  if (void* h = try_open(given.empty() ? "libnccl-profiler.so" : given)) return h;
  const auto ends_with_so = given.size() >= 3 && given.compare(given.size() - 3, 3, ".so") == 0;
  if (!given.empty() && given.find('/') == std::string::npos && !(given.rfind("lib", 0) == 0 && ends_with_so))
    return try_open("libnccl-profiler-" + given + ".so");
  return nullptr;
}

// ncclProfilerPluginLoad: counts one reference when a plugin is (or gets) loaded.
bool load() {
  Plugin& p = plugin();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.status == -1) return false;
  if (p.status == 1) {
    ++p.refs;
    return true;
  }
  init_env();
  const char* name = std::getenv("NCCL_PROFILER_PLUGIN");
  if (name && strcasecmp(name, "none") == 0) {
    p.status = -1;
    return false;
  }
  p.lib = open_lib(name);
  int newest = 7;
  if (const char* v = std::getenv("SIMGPU_NCCL_PROFILER_MAX_VERSION")) newest = std::atoi(v);
  for (int v = newest; p.lib && v >= 1 && !p.table; --v) {
    const std::string symbol = "ncclProfiler_v" + std::to_string(v);
    if (void* t = dlsym(p.lib, symbol.c_str())) {
      if (v < 3) break;  // v1, v2: not declared here (nccl_profiler.h)
      p.table = t;
      p.version = v;
    }
  }
  if (!p.table) {
    if (p.lib) dlclose(p.lib);
    p.lib = nullptr;
    p.status = -1;
    return false;
  }
  p.status = 1;
  p.refs = 1;
  return true;
}

// ncclProfilerPluginUnload.
void unload() {
  Plugin& p = plugin();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.status != 1 || --p.refs > 0) return;
  dlclose(p.lib);
  p.lib = nullptr;
  p.table = nullptr;
  p.version = 0;
  p.status = 0;
}

const char* datatype_name(ncclDataType_t t) {
  static const char* names[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",     "ncclUint32",
                                "ncclInt64",   "ncclUint64",  "ncclFloat16",   "ncclFloat32",
                                "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
  return t >= 0 && t < ncclNumTypes ? names[t] : "unknown";
}

}  // namespace

struct CommState {
  void* context = nullptr;
  uint64_t hash;
  std::string name;
  int rank;
  uint64_t seq[16] = {};  // per collective type, as NCCL's comm->seqNumber[func]
  // The proxy thread: kernel-channel events of launched kernels.
  struct Job {
    void* parent;
    unsigned channels;
    uint64_t start, end;  // ~0: the kernel never ran (a peer never arrived, or a stalled transfer)
    simgpu_net::Task net;  // its network transfers (nccl_net.h)
  };
  int nranks = 1;
  uint64_t first_never_ran = 0;  // the first launch whose kernel never ran (later ones queue behind it)
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Job> jobs;
  bool stopping = false;
  std::thread proxy;
};

namespace {

ncclResult_t start_with(void* context, const char* name, uint64_t hash, void** handle, const np::EventDescrV7& d) {
  *handle = nullptr;
  Plugin& p = plugin();
  switch (p.version) {
    case 7: return static_cast<const np::PluginV7*>(p.table)->start_event(context, handle, const_cast<np::EventDescrV7*>(&d));
    case 6: {
      np::EventDescrV6 o = np::convert_v5_like<np::EventDescrV6>(d);
      return static_cast<const np::PluginV6*>(p.table)->start_event(context, handle, &o);
    }
    case 5: {
      np::EventDescrV5 o = np::convert_v5_like<np::EventDescrV5>(d);
      return static_cast<const np::PluginV5*>(p.table)->start_event(context, handle, &o);
    }
    case 4: {
      np::EventDescrV4 o;
      if (!np::to_v4(d, &o)) return ncclSuccess;
      return static_cast<const np::PluginV4*>(p.table)->start_event(context, handle, &o);
    }
    case 3: {
      // v3 has no GPU timers: NCCL sends it no kernel-channel events.
      np::EventDescrV3 o;
      if (d.type == np::kKernelCh || !np::to_v3(d, name, hash, &o)) return ncclSuccess;
      return static_cast<const np::PluginV3*>(p.table)->start_event(context, handle, &o);
    }
    default: return ncclSuccess;
  }
}

ncclResult_t start_event(CommState* c, void** handle, const np::EventDescrV7& d) {
  return start_with(c->context, c->name.c_str(), c->hash, handle, d);
}

void stop_event(void* handle) {
  if (!handle) return;
  // Every version's stopEvent has the same place and signature.
  static_cast<const np::PluginV7*>(plugin().table)->stop_event(handle);
}

// States recorded here (GroupApi's, KernelChStop) exist from v4 (KernelCh) and v5 (GroupApi) on,
// whose state arguments share one layout.
void record_state(void* handle, int state, np::StateArgsV4* args) {
  if (!handle || plugin().version < 4) return;
  static_cast<const np::PluginV4*>(plugin().table)->record_event_state(handle, state, args);
}

// NCCL's ncclProfilerApiState (thread_local in profiler.cc).
struct ApiState {
  int mask = 0;
  void* group_api = nullptr;
  void* api = nullptr;
  int profiler_depth = 0;
  int state = 0;  // 0 reset, 1 started, 2 start-api stopped
};
thread_local ApiState tls_api;

void record_group_api_state(int state) {
  bool record = false;
  if (state == np::kGroupStartApiStop && tls_api.state == 1) {
    tls_api.state = 2;
    record = true;
  } else if (state == np::kGroupEndApiStart && tls_api.state == 2) {
    tls_api.state = 0;
    record = true;
  }
  if (record && tls_api.group_api) record_state(tls_api.group_api, state, nullptr);
}

// The network transport's events (nccl_net.cpp) go through the same calls; its states exist
// from v4 on (a v3 plugin gets none: simgpu's network transport starts at v4).
void* net_start(void* context, const np::EventDescrV7& d) {
  void* h = nullptr;
  start_with(context, "", 0, &h, d);
  return h;
}
void net_state(void* handle, int state, size_t trans_size) {
  np::StateArgsV4 args{};
  args.proxy_step.trans_size = trans_size;
  record_state(handle, state, &args);
}
constexpr simgpu_net::Events kNetEvents{net_start, net_state, stop_event};

void proxy_loop(CommState* c) {
  for (;;) {
    CommState::Job job;
    {
      std::unique_lock<std::mutex> lock(c->mu);
      c->cv.wait(lock, [c] { return c->stopping || !c->jobs.empty(); });
      if (c->jobs.empty()) return;
      job = c->jobs.front();
      c->jobs.pop_front();
    }
    if (plugin().version >= 4) simgpu_net::progress(kNetEvents, c->context, job.net);
    // A kernel queued behind one that never completes has not started: no channel events.
    if (!(job.net.mask & np::kKernelCh) || job.net.behind) continue;
    const bool never_ran = job.start == ~uint64_t{0};
    // A kernel that never completes: its channels started (the time of the launch), and those a
    // stalled transfer holds never stop; every channel, when a peer never arrived.
    const uint64_t start = never_ran ? simgpu_host_now() : job.start;
    for (unsigned ch = 0; ch < job.channels; ++ch) {
      np::EventDescrV7 d{};
      d.type = np::kKernelCh;
      d.parent = job.parent;
      d.rank = c->rank;
      d.kernel_ch.channel_id = static_cast<uint8_t>(ch);
      d.kernel_ch.gpu_timer = start + kFirstChannelLagNs + ch * kChannelSkewNs;
      void* h = nullptr;
      start_event(c, &h, d);
      if (never_ran && (job.net.peer_missing || ch == simgpu_net::stalled_channel())) continue;
      np::StateArgsV4 args{};
      const uint64_t end = never_ran ? start + kStalledChannelNs : job.end;
      args.kernel_ch.gpu_timer = end - kLastChannelLeadNs - (job.channels - 1 - ch) * kChannelSkewNs;
      record_state(h, np::kKernelChStop, &args);
      stop_event(h);
    }
  }
}

int func_index(const char* func) {
  static const char* names[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce",
                                "SendRecv",  "Send",   "Recv",      "AlltoAll",      "Gather", "Scatter"};
  for (int i = 0; i < 11; ++i)
    if (std::strcmp(names[i], func) == 0) return i;
  return 15;
}

}  // namespace

CommState* comm_init(uint64_t comm_hash, const char* comm_name, int nranks, int rank) {
  if (!load()) return nullptr;
  Plugin& p = plugin();
  auto* c = new CommState();
  c->hash = comm_hash;
  c->name = comm_name ? comm_name : "";
  c->rank = rank;
  c->nranks = nranks;
  const char* name = comm_name;
  ncclResult_t r = ncclSuccess;
  auto log = reinterpret_cast<np::DebugLogger>(&nccl_log);
  switch (p.version) {
    case 7: r = static_cast<const np::PluginV7*>(p.table)->init(&c->context, comm_hash, &g_mask, name, 1, nranks, rank, log); break;
    case 6: r = static_cast<const np::PluginV6*>(p.table)->init(&c->context, comm_hash, &g_mask, name, 1, nranks, rank, log); break;
    case 5: r = static_cast<const np::PluginV5*>(p.table)->init(&c->context, comm_hash, &g_mask, name, 1, nranks, rank, log); break;
    case 4: r = static_cast<const np::PluginV4*>(p.table)->init(&c->context, &g_mask, name, comm_hash, 1, nranks, rank, log); break;
    default: r = static_cast<const np::PluginV3*>(p.table)->init(&c->context, &g_mask); break;
  }
  if (r != ncclSuccess) {
    // NCCL: "Profiler init failed ... Continue without profiler."
    unload();
    delete c;
    return nullptr;
  }
  c->proxy = std::thread(proxy_loop, c);
  return c;
}

void comm_finalize(CommState* c) {
  if (!c) return;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    c->stopping = true;
  }
  c->cv.notify_all();
  c->proxy.join();
  if (c->context) static_cast<const np::PluginV7*>(plugin().table)->finalize(c->context);
  unload();
  delete c;
}

void api_begin(CommState* c, const Call& call, void* stream, int explicit_depth, TaskTag* tag) {
  *tag = TaskTag{};
  tag->call = call;
  if (!c) return;
  const int depth = explicit_depth + 1;  // inside NCCL's own group around the call
  if (tls_api.profiler_depth > 0) {
    ++tls_api.profiler_depth;  // ncclEnqueueCheck
  } else {
    tls_api.mask = live_mask();
    if (np::nccl_starts(np::kGroupApi, tls_api.mask)) {
      np::EventDescrV7 d{};
      d.type = np::kGroupApi;
      d.group_api.group_depth = depth;
      start_event(c, &tls_api.group_api, d);
      tls_api.profiler_depth = depth;
      tls_api.state = 1;
    }
  }
  record_group_api_state(np::kGroupStartApiStop);
  np::EventDescrV7 d{};
  d.parent = tls_api.group_api;
  if (call.p2p) {
    d.type = np::kP2pApi;
    d.p2p_api.func = call.func, d.p2p_api.count = call.count, d.p2p_api.datatype = datatype_name(call.datatype);
    d.p2p_api.stream = stream;
    if (np::nccl_starts(np::kP2pApi, tls_api.mask)) start_event(c, &tls_api.api, d);
  } else {
    d.type = np::kCollApi;
    d.coll_api.func = call.func, d.coll_api.count = call.count, d.coll_api.datatype = datatype_name(call.datatype);
    d.coll_api.root = call.root_or_peer, d.coll_api.stream = stream;
    if (np::nccl_starts(np::kCollApi, tls_api.mask)) start_event(c, &tls_api.api, d);
  }
  tag->mask = tls_api.mask;
  tag->group_api = tls_api.group_api;
  tag->api = tls_api.api;
}

void api_end(CommState* c) {
  if (!c) return;
  stop_event(tls_api.api);
  tls_api.api = nullptr;
}

void group_end_begin() {
  if (tls_api.profiler_depth > 0) --tls_api.profiler_depth;
  if (tls_api.profiler_depth == 0) record_group_api_state(np::kGroupEndApiStart);
}

void group_end_exit() {
  if (tls_api.profiler_depth != 0 || !tls_api.group_api) return;
  stop_event(tls_api.group_api);
  tls_api.group_api = nullptr;
}

void launch_begin(CommState* c, TaskTag* tags, size_t n, void* stream, void** launch_event) {
  *launch_event = nullptr;
  if (!c) return;
  for (size_t i = 0; i < n; ++i) {
    if (!tags[i].mask) continue;
    if (tags[i].mask & np::kKernelLaunch) {
      np::EventDescrV7 d{};
      d.type = np::kKernelLaunch;
      d.parent = tags[i].group_api;
      d.kernel_launch.stream = stream;
      start_event(c, launch_event, d);
    }
    return;
  }
}

void launch_end(CommState* c, TaskTag* tags, size_t n, void* launch_event, bool ran, uint64_t gpu_start,
                uint64_t gpu_end, unsigned channels, uint64_t launch_seq) {
  if (!c) return;
  stop_event(launch_event);
  // hostStreamPlanTask: the Group event, the task events started, the proxy ops handed to the
  // proxy thread, the task events stopped (enqueued), the Group event stopped.
  int group_mask = 0;
  for (size_t i = 0; i < n && !group_mask; ++i) group_mask = tags[i].mask;
  void* group = nullptr;
  if (np::nccl_starts(np::kGroup, group_mask)) {
    np::EventDescrV7 d{};
    d.type = np::kGroup;
    start_event(c, &group, d);
  }
  for (size_t i = 0; i < n; ++i) {
    TaskTag& t = tags[i];
    const Call& call = t.call;
    np::EventDescrV7 d{};
    d.parent = t.api;
    d.rank = c->rank;
    if (!call.p2p) {
      uint64_t& seq = c->seq[func_index(call.func)];
      if (np::nccl_starts(np::kColl, t.mask)) {
        d.type = np::kColl;
        d.coll.parent_group = group;
        d.coll.seq_number = seq;
        d.coll.func = call.func, d.coll.send_buff = call.sendbuff, d.coll.recv_buff = call.recvbuff;
        d.coll.count = call.count, d.coll.root = call.root_or_peer, d.coll.datatype = datatype_name(call.datatype);
        d.coll.n_channels = static_cast<uint8_t>(channels), d.coll.n_warps = 20;
        d.coll.algo = "RING", d.coll.proto = "LL";
        start_event(c, &t.task, d);
      }
      ++seq;
    } else if (np::nccl_starts(np::kP2p, t.mask)) {
      d.type = np::kP2p;
      d.p2p.parent_group = group;
      d.p2p.func = call.func, d.p2p.buff = call.sendbuff ? const_cast<void*>(call.sendbuff) : call.recvbuff;
      d.p2p.count = call.count, d.p2p.datatype = datatype_name(call.datatype), d.p2p.peer = call.root_or_peer;
      d.p2p.n_channels = static_cast<uint8_t>(channels);
      start_event(c, &t.task, d);
    }
    // Proxy work: kernel-channel events, and the network transport's proxy events.
    if (ran && t.task && (t.mask & (np::kKernelCh | np::kProxyOp | np::kProxyStep))) {
      const bool never_ran = gpu_start == ~uint64_t{0};
      simgpu_net::Task net{};
      net.parent = t.task;
      net.mask = t.mask;
      net.rank = c->rank;
      net.nranks = c->nranks;
      net.p2p = call.p2p;
      net.is_send = call.p2p && call.sendbuff != nullptr;
      net.peer = call.root_or_peer;
      net.bus_bytes = call.bus_bytes;
      net.channels = channels;
      net.launch_seq = launch_seq;
      std::lock_guard<std::mutex> lock(c->mu);
      if (never_ran && c->first_never_ran == 0) c->first_never_ran = launch_seq;
      net.behind = never_ran && launch_seq > c->first_never_ran;
      net.peer_missing = never_ran && !net.behind && !simgpu_net::stalls(launch_seq, c->nranks);
      c->jobs.push_back({t.task, channels, gpu_start, gpu_end, net});
      c->cv.notify_one();
    }
  }
  for (size_t i = 0; i < n; ++i) stop_event(tags[i].task);
  stop_event(group);
}

}  // namespace simgpu_prof
