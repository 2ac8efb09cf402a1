// SIMULATION: simgpu's NCCL network transport, as seen by a profiler plugin: the ProxyOp and
// ProxyStep events NCCL's proxy thread emits for a network transfer, following NCCL 2.32's
// src/transport/net.cc (sendProxyProgress, recvProxyProgress), src/proxy.cc
// (ncclProxyOpToArgs starts the ProxyOp) and src/plugin/profiler.cc (what each event carries):
//  - one ProxyOp per channel and peer and direction (a ring: send to rank+1, receive from
//    rank-1; a Send or Recv: toward its peer), started when the proxy takes the op, with the
//    descriptor's pid (the process that enqueued it), channel, peer, nSteps, chunkSize and
//    isSend, its parent the task event; ProxyOpInProgress when the proxy begins to progress it;
//    stopped when every step is done;
//  - with ProxyStep in the task's activation mask (read when the collective was enqueued), per
//    step: started when posted, then the states NCCL records (send: SendGPUWait, SendWait with
//    the bytes in transSize; receive: RecvWait, RecvFlushWait with transSize, RecvGPUWait), and
//    stopped when done;
//  - intra-node transports (the default, SIMGPU_NCCL_TRANSPORT unset or p2p) have no proxy: no
//    proxy events at all.
// Set SIMGPU_NCCL_TRANSPORT=net for this transport. SIMGPU_NET_STALL=SEQ:RANK:CHANNEL:STEPS[:INTO]
// stalls the SEQ-th kernel launched on every communicator of more than one rank (1-based): RANK's
// transfers on CHANNEL stop after STEPS steps (as when its NIC stops completing), so do its
// neighbours' transfers with it on that channel, the ones into RANK (its receive, its
// neighbour's send to it) after INTO steps (default STEPS: every transfer stops at the same step,
// nobody is behind; INTO > STEPS: RANK's sends are behind); every other channel finishes; the collective
// never completes (simgpuHangNextCollective) and, with KernelCh on, channel CHANNEL's kernel
// channel never stops. A collective a peer never entered (SIMGPU_HANG) moves nothing: sends post
// what fits in NCCL's buffers (NCCL_STEPS = 8) and wait for the peer, receives wait. A collective
// queued behind one of those posts its steps and waits for its kernel (sends) or for data.
// SIMGPU_NCCL_PXN=1: each collective's proxy work also progresses one op of another process
// (PXN), whose descriptor pid is not ours and whose parent and context are that process's
// pointers (deliberately unreadable here: a plugin must not read them).
#pragma once

#include <cstdint>

#include "traintime/nccl/profiler_plugin_api.h"

namespace simgpu_net {

inline constexpr int kNcclSteps = 8;            // NCCL_STEPS: steps a transfer may post ahead
inline constexpr uint64_t kStepBytes = 64 << 10;  // chunkSize of a step

// SIMGPU_NCCL_TRANSPORT=net.
bool enabled();
// Whether the `launch_seq`-th launch (1-based) of a communicator of `nranks` stalls
// (SIMGPU_NET_STALL): the fake NCCL then makes it hang before launching it.
bool stalls(uint64_t launch_seq, int nranks);
// The channel SIMGPU_NET_STALL stops (~0u when none).
unsigned stalled_channel();

// How the plugin is called (simgpu's NCCL: the version it loaded).
struct Events {
  void* (*start)(void* context, const traintime::nccl_profiler::EventDescrV7& d);  // the plugin's context
  void (*state)(void* handle, int state, size_t trans_size);
  void (*stop)(void* handle);
};

// One task of a launched kernel, as its proxy work needs it.
struct Task {
  void* parent;       // its Coll / P2p event
  int mask;           // the activation mask when it was enqueued
  int rank, nranks;
  bool p2p, is_send;  // p2p: one transfer toward `peer`
  int peer;
  uint64_t bus_bytes;  // what crosses the network from this rank (nccl-tests' S x factor)
  unsigned channels;
  uint64_t launch_seq;  // its kernel's launch number on the communicator (SIMGPU_NET_STALL)
  bool peer_missing;   // a peer never entered it (SIMGPU_HANG): nothing moves
  bool behind;         // queued behind a collective that never completes: its GPU side never runs
};

// The proxy events of one task, on the communicator's proxy thread; `context`: the plugin's
// context of the communicator.
void progress(const Events& e, void* context, const Task& t);

}  // namespace simgpu_net
