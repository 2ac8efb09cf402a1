// SIMULATION: the profiler plugin side of simgpu's fake NCCL, following NCCL 2.32's
// src/plugin/profiler.cc, plugin_open.cc, enqueue.cc and group.cc:
//  - the plugin is loaded at the first communicator's init: NCCL_PROFILER_PLUGIN (after NCCL's
//    configuration files, applied to variables not already set: NCCL_CONF_FILE or ~/.nccl.conf,
//    then /etc/nccl.conf), "none" disables it, STATIC_PLUGIN (any prefix of it) looks in the
//    process itself, a bare name is tried as given and as libnccl-profiler-<name>.so, no name as
//    libnccl-profiler.so; then ncclProfiler_v7 ... ncclProfiler_v1 are probed by symbol name
//    (SIMGPU_NCCL_PROFILER_MAX_VERSION=N plays an older NCCL that probes vN first);
//  - init once per communicator with the process's one live activation mask; a failed init
//    leaves that communicator without a context (NCCL continues without the profiler);
//  - GroupApi / CollApi / P2pApi events on the calling thread inside each call; at the launch,
//    KernelLaunch around the kernel, then Group, Coll/P2p task events started and stopped
//    ("enqueued"); KernelCh events (start, KernelChStop with the GPU stop time, stop) from the
//    communicator's own proxy thread, one per channel, the GPU times being the kernel's; on the
//    network transport (SIMGPU_NCCL_TRANSPORT=net) the ProxyOp/ProxyStep events before them
//    (nccl_net.h);
//  - at world size 1 no collective is enqueued: only init and the API-level events.
// simgpu has no network plugin, so NCCL's last place to look (a profiler exported by the net
// plugin) does not exist here. Versions 1 and 2 are probed but cannot be called (their layouts
// are not declared): a plugin offering only those is reported unsupported, as NCCL does for one
// it cannot use.
#pragma once

#include <cstddef>
#include <cstdint>

#include <nccl.h>

namespace simgpu_prof {

struct CommState;

// One collective or p2p call as the API events and the task events describe it.
struct Call {
  const char* func;  // NCCL's ncclFuncToString name: "AllReduce", "Send", ...
  size_t count;
  ncclDataType_t datatype;
  int root_or_peer;
  bool p2p;
  const void* sendbuff;
  void* recvbuff;
  uint64_t bus_bytes = 0;  // what crosses the network from this rank (nccl-tests' S x factor)
};

// What a task carries from its API call to its launch (NCCL's ncclTaskColl/ncclTaskP2p fields).
struct TaskTag {
  Call call{};
  int mask = 0;               // the activation mask when the call was made
  void* group_api = nullptr;  // the GroupApi event of the call
  void* api = nullptr;        // its CollApi / P2pApi event
  void* task = nullptr;       // its Coll / P2p event
};

// At communicator creation / destruction. comm_init returns NULL when no plugin is loaded.
CommState* comm_init(uint64_t comm_hash, const char* comm_name, int nranks, int rank);
void comm_finalize(CommState* c);

// Inside every collective or p2p call, on the calling thread: `explicit_depth` is the
// application's ncclGroupStart depth. api_begin fills `tag`; api_end closes the API event.
void api_begin(CommState* c, const Call& call, void* stream, int explicit_depth, TaskTag* tag);
void api_end(CommState* c);
// At every group end, the implicit one around a lone call included (ncclGroupEndInternal):
// before the launches and after them.
void group_end_begin();
void group_end_exit();

// One kernel launch of `n` tasks on `stream`: launch_begin before it, launch_end after it with
// the kernel's GPU span (simgpu_last_collective_span; ran = false when it has none).
void launch_begin(CommState* c, TaskTag* tags, size_t n, void* stream, void** launch_event);
// `launch_seq`: the kernel's launch number on the communicator (1-based; SIMGPU_NET_STALL).
void launch_end(CommState* c, TaskTag* tags, size_t n, void* launch_event, bool ran, uint64_t gpu_start,
                uint64_t gpu_end, unsigned channels, uint64_t launch_seq);

}  // namespace simgpu_prof
