// NCCL's profiler plugin interface, versions 3 to 7: traintime's own declarations of the binary
// interface NCCL uses to call a profiler plugin (NCCL >= 2.23). NCCL finds a plugin by looking up
// the data symbol `ncclProfiler_vN` (newest version first) and calls the five functions of the
// table it names. Only the layout is shared with NCCL; every name here is traintime's.
//
// Where the layouts were read (tests/nccl/test_profiler_plugin_layout.cpp pins every size and
// offset to these numbers):
//  - v3 ... v6: NVIDIA/nccl v2.30.7-1, src/include/plugin/profiler/profiler_v3.h ... profiler_v6.h
//    and src/include/plugin/nccl_profiler.h (event kinds, states);
//  - v3 ... v7 as shipped: the DWARF of PyPI's nvidia-nccl-cu12 2.28.9 (v3 ... v5) and 2.32.3
//    (v3 ... v7) libnccl.so.2 (`gdb -batch -ex 'ptype /o ncclProfilerEventDescr_v7_t'`); 2.32.3's
//    v7 is the first public release of v7 and is the layout declared here.
//
// Versions: NCCL 2.23 ... 2.26 probe v3 ... v1, 2.27 ... 2.28 v5 ... v1, 2.30 v6 ... v1,
// 2.31 ... 2.32 v7 ... v1. v3 and v4 carry the event kind in one byte; v5 on in eight. v4 adds the
// communicator to init and GPU timestamps to kernel-channel events; v5 adds the API-level events
// (GroupApi, CollApi, P2pApi, KernelLaunch) and parents a collective to its group; v6 adds the
// copy-engine collectives; v7 a user tag on every API and task event, symmetric-kernel details
// and kernel phases.
//
// Shared by libtraintime.so's plugin (nccl/src/profiler_plugin*.cpp) and simgpu's NCCL, which
// calls a plugin as NCCL does (tests/sim/src/nccl_profiler.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include <nccl.h>

namespace traintime::nccl_profiler {

// Event kinds: the bits of the activation mask NCCL hands init, and EventDescr*::type.
enum EventKind : uint64_t {
  kGroup = 1u << 0,         // a group of tasks (ncclGroupEnd's launch)
  kColl = 1u << 1,          // a collective task; its stopEvent means "enqueued"
  kP2p = 1u << 2,           // a send or receive task
  kProxyOp = 1u << 3,       // proxy progress of one channel's op
  kProxyStep = 1u << 4,     // one network step of a proxy op
  kProxyCtrl = 1u << 5,     // the proxy thread's own state
  kKernelCh = 1u << 6,      // one channel of the kernel, GPU timestamps (v4+)
  kNetPlugin = 1u << 7,     // network-plugin defined
  kGroupApi = 1u << 8,      // ncclGroupStart ... ncclGroupEnd (v5+)
  kCollApi = 1u << 9,       // one collective API call (v5+)
  kP2pApi = 1u << 10,       // one send/recv API call (v5+)
  kKernelLaunch = 1u << 11, // the launch of the group's kernel (v5+)
  kCeColl = 1u << 12,       // a copy-engine collective (v6+)
  kCeSync = 1u << 13,       // (v6+)
  kCeBatch = 1u << 14,      // (v6+)
  kKernelPhase = 1u << 15,  // (v7)
};

// recordEventState's states (one enumeration for every version; values are NCCL's).
enum EventState : int {
  kProxyStepSendGpuWait = 8,
  kProxyStepSendWait = 9,
  kProxyStepRecvWait = 10,
  kProxyStepRecvFlushWait = 11,
  kProxyStepRecvGpuWait = 12,
  kProxyCtrlIdle = 13,
  kProxyCtrlActive = 14,
  kProxyCtrlSleep = 15,
  kProxyCtrlWakeup = 16,
  kProxyCtrlAppend = 17,
  kProxyCtrlAppendEnd = 18,
  kProxyOpInProgress = 19,       // v4+
  kProxyStepSendPeerWait = 20,   // v4+
  kNetPluginUpdate = 21,
  kKernelChStop = 22,            // v4+: args.kernel_ch.gpu_timer is the channel's stop time
  kGroupStartApiStop = 23,       // v5+
  kGroupEndApiStart = 24,        // v5+
  kCeCollStart = 25,
  kCeCollComplete = 26,
  kCeSyncStart = 27,
  kCeSyncComplete = 28,
  kCeBatchStart = 29,
  kCeBatchComplete = 30,
  kKernelPhaseStop = 31,         // v7
};

// NCCL's logger (its debug.h): level, subsystem flags, file, line, printf format.
using DebugLogger = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

// ---- pieces of the event descriptors, shared where versions agree ----

struct ProxyOpDescr {
  int32_t pid;          // the process whose op it is (proxy ops may belong to a peer process)
  uint8_t channel_id;
  int peer;
  int n_steps;
  int chunk_size;
  int is_send;
};
struct ProxyStepDescr {
  int step;
};
struct NetPluginDescr {
  int64_t id;
  void* data;
};
struct KernelChDescr {  // v4+
  uint8_t channel_id;
  uint64_t gpu_timer;   // the channel's start, GPU global timer (ns)
};
struct GroupApiDescr {  // v5+
  bool graph_captured;
  int group_depth;
};
struct KernelLaunchDescr {  // v5+
  void* stream;
};
struct CeCollSyncDescr {  // v6+
  bool is_complete;
  int nranks;
};
struct CeCollBatchDescr {  // v6+
  int num_ops;
  size_t total_bytes;
  bool use_intra_sync;
};

// ---- v3 (NCCL 2.23 ... 2.24) ----
struct EventDescrV3 {
  uint8_t type;
  void* parent;
  int rank;
  union {
    struct {
      const char* comm_name;
      uint64_t comm_hash;
      uint64_t seq_number;
      const char* func;
      const void* send_buff;
      void* recv_buff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t n_max_channels;
      uint8_t n_warps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* comm_name;
      uint64_t comm_hash;
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
    } p2p;
    ProxyOpDescr proxy_op;
    ProxyStepDescr proxy_step;
    struct {
      uint8_t channel_id;
    } kernel_ch;
    NetPluginDescr net_plugin;
  };
};
union StateArgsV3 {
  struct {
    size_t trans_size;
    int steps;
  } proxy_op;
  struct {
    int appended_proxy_ops;
  } proxy_ctrl;
};
struct PluginV3 {
  const char* name;
  ncclResult_t (*init)(void** context, int* activation_mask);
  ncclResult_t (*start_event)(void* context, void** handle, EventDescrV3* descr);
  ncclResult_t (*stop_event)(void* handle);
  ncclResult_t (*record_event_state)(void* handle, int state, StateArgsV3* args);
  ncclResult_t (*finalize)(void* context);
};

// ---- v4 (NCCL 2.25 ... 2.26) ----
struct CollDescrV4 {
  uint64_t seq_number;  // per (communicator, collective type)
  const char* func;
  const void* send_buff;
  void* recv_buff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t n_channels;
  uint8_t n_warps;
  const char* algo;
  const char* proto;
};
struct P2pDescrV4 {
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t n_channels;
};
struct EventDescrV4 {
  uint8_t type;
  void* parent;
  int rank;
  union {
    CollDescrV4 coll;
    P2pDescrV4 p2p;
    ProxyOpDescr proxy_op;
    ProxyStepDescr proxy_step;
    KernelChDescr kernel_ch;
    NetPluginDescr net_plugin;
  };
};
union StateArgsV4 {
  struct {
    size_t trans_size;
  } proxy_step;
  struct {
    int appended_proxy_ops;
  } proxy_ctrl;
  struct {
    void* data;
  } net_plugin;
  struct {
    uint64_t gpu_timer;  // kKernelChStop: the channel's stop, GPU global timer (ns)
  } kernel_ch;
};
struct PluginV4 {
  const char* name;
  ncclResult_t (*init)(void** context, int* activation_mask, const char* comm_name, uint64_t comm_hash, int n_nodes,
                       int nranks, int rank, DebugLogger log);
  ncclResult_t (*start_event)(void* context, void** handle, EventDescrV4* descr);
  ncclResult_t (*stop_event)(void* handle);
  ncclResult_t (*record_event_state)(void* handle, int state, StateArgsV4* args);
  ncclResult_t (*finalize)(void* context);
};

// ---- v5 (NCCL 2.27 ... 2.29) and v6 (2.30), whose state arguments are v5's ----
struct CollApiDescrV5 {
  const char* func;
  size_t count;
  const char* datatype;
  int root;
  void* stream;
  bool graph_captured;
};
struct P2pApiDescrV5 {
  const char* func;
  size_t count;
  const char* datatype;
  void* stream;
  bool graph_captured;
};
struct CollDescrV5 {
  uint64_t seq_number;  // per (communicator, collective type)
  const char* func;
  const void* send_buff;
  void* recv_buff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t n_channels;
  uint8_t n_warps;
  const char* algo;
  const char* proto;
  void* parent_group;  // the Group event
};
struct P2pDescrV5 {
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t n_channels;
  void* parent_group;
};
struct EventDescrV5 {
  uint64_t type;
  void* parent;
  int rank;
  union {
    GroupApiDescr group_api;
    CollApiDescrV5 coll_api;
    P2pApiDescrV5 p2p_api;
    KernelLaunchDescr kernel_launch;
    CollDescrV5 coll;
    P2pDescrV5 p2p;
    ProxyOpDescr proxy_op;
    ProxyStepDescr proxy_step;
    KernelChDescr kernel_ch;
    NetPluginDescr net_plugin;
  };
};
using StateArgsV5 = StateArgsV4;  // same members, same layout (NCCL declares them twice)
struct CeCollDescrV6 {
  uint64_t seq_number;
  const char* func;
  const void* send_buff;
  void* recv_buff;
  size_t count;
  int root;
  const char* datatype;
  const char* sync_strategy;
  bool intra_batch_sync;
  uint32_t batch_size;
  uint32_t num_batches;
  uint32_t ce_seq_num;
  void* stream;
};
struct EventDescrV6 {
  uint64_t type;
  void* parent;
  int rank;
  union {
    GroupApiDescr group_api;
    CollApiDescrV5 coll_api;
    P2pApiDescrV5 p2p_api;
    KernelLaunchDescr kernel_launch;
    CollDescrV5 coll;
    P2pDescrV5 p2p;
    ProxyOpDescr proxy_op;
    ProxyStepDescr proxy_step;
    KernelChDescr kernel_ch;
    NetPluginDescr net_plugin;
    CeCollDescrV6 ce_coll;
    CeCollSyncDescr ce_coll_sync;
    CeCollBatchDescr ce_coll_batch;
  };
};
// v5 and v6 share init's signature: the communicator id comes first.
template <typename Descr>
struct PluginV5Like {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t comm_id, int* activation_mask, const char* comm_name, int n_nodes,
                       int nranks, int rank, DebugLogger log);
  ncclResult_t (*start_event)(void* context, void** handle, Descr* descr);
  ncclResult_t (*stop_event)(void* handle);
  ncclResult_t (*record_event_state)(void* handle, int state, StateArgsV5* args);
  ncclResult_t (*finalize)(void* context);
};
using PluginV5 = PluginV5Like<EventDescrV5>;
using PluginV6 = PluginV5Like<EventDescrV6>;

// ---- v7 (NCCL 2.31 ... 2.32): a user tag on every API and task event ----
struct EventDescrV7 {
  uint64_t type;
  void* parent;
  int rank;
  union {
    GroupApiDescr group_api;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graph_captured;
      uint64_t user_tag;
    } coll_api;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graph_captured;
      uint64_t user_tag;
    } p2p_api;
    KernelLaunchDescr kernel_launch;
    struct {
      uint64_t seq_number;  // per (communicator, collective type)
      const char* func;
      const void* send_buff;
      void* recv_buff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t n_channels;
      uint8_t n_warps;
      const char* algo;
      const char* proto;
      void* parent_group;
      const char* kernel_variant;
      bool is_sym_coll;
      uint64_t user_tag;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t n_channels;
      void* parent_group;
      uint64_t user_tag;
    } p2p;
    ProxyOpDescr proxy_op;
    ProxyStepDescr proxy_step;
    KernelChDescr kernel_ch;
    NetPluginDescr net_plugin;
    struct {
      uint64_t seq_number;
      const char* func;
      const void* send_buff;
      void* recv_buff;
      size_t count;
      int root;
      const char* datatype;
      const char* sync_strategy;
      bool intra_batch_sync;
      uint32_t batch_size;
      uint32_t num_batches;
      uint32_t ce_seq_num;
      void* stream;
      uint64_t user_tag;
    } ce_coll;
    CeCollSyncDescr ce_coll_sync;
    CeCollBatchDescr ce_coll_batch;
    struct {
      uint8_t channel_id;
      uint8_t phase_id;
      const char* phase_name;
      uint64_t gpu_timer;
    } kernel_phase;
  };
};
using StateArgsV7 = StateArgsV4;  // NCCL 2.32.3 redeclares the same four members
using PluginV7 = PluginV5Like<EventDescrV7>;

// Whether NCCL starts an event of kind `type` for a plugin whose activation mask is `mask`: an
// event is started when its own kind is asked for or a kind below it in the hierarchy is (a Coll
// event is the parent of the kernel-channel events), as NCCL's src/plugin/profiler.cc does.
inline bool nccl_starts(uint64_t type, uint64_t mask) {
  constexpr uint64_t kTask = kProxyOp | kProxyStep | kKernelCh | kNetPlugin;
  switch (type) {
    case kGroupApi:
      return mask & (kGroupApi | kP2pApi | kCollApi | kKernelLaunch | kGroup | kColl | kP2p | kTask | kCeColl | kCeSync |
                     kCeBatch);
    case kCollApi: return mask & (kCollApi | kColl | kTask | kCeColl | kCeSync | kCeBatch);
    case kP2pApi: return mask & (kP2pApi | kP2p | kTask);
    case kGroup: return mask & (kGroup | kColl | kP2p | kTask);
    case kColl: return mask & (kColl | kTask);
    case kP2p: return mask & (kP2p | kTask);
    default: return mask & type;
  }
}

// The exported symbol NCCL looks up for each version, newest first.
inline constexpr const char* kSymbolV7 = "ncclProfiler_v7";
inline constexpr const char* kSymbolV6 = "ncclProfiler_v6";
inline constexpr const char* kSymbolV5 = "ncclProfiler_v5";
inline constexpr const char* kSymbolV4 = "ncclProfiler_v4";
inline constexpr const char* kSymbolV3 = "ncclProfiler_v3";

}  // namespace traintime::nccl_profiler
