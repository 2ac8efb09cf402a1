// SIMULATION: simgpu's NCCL network transport's proxy events (nccl_net.h).
#include "nccl_net.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace np = traintime::nccl_profiler;

namespace simgpu_net {
namespace {

struct StallSpec {
  bool on = false;
  uint64_t seq = 0;
  int rank = 0;
  unsigned channel = 0;
  int steps = 0;
  int into_steps = 0;  // transfers into RANK (optional fifth field; STEPS when absent)
};

const StallSpec& stall_spec() {
  static const StallSpec spec = [] {
    StallSpec s;
    const char* v = std::getenv("SIMGPU_NET_STALL");
    unsigned long long seq = 0;
    s.into_steps = -1;
    const int n = v ? std::sscanf(v, "%llu:%d:%u:%d:%d", &seq, &s.rank, &s.channel, &s.steps, &s.into_steps) : 0;
    if ((n == 4 || (n == 5 && s.into_steps >= 0)) && seq > 0 && s.steps >= 0) {
      s.on = true;
      s.seq = seq;
      if (n == 4) s.into_steps = s.steps;
    } else if (v && *v) {
      std::fprintf(stderr, "simgpu: SIMGPU_NET_STALL wants SEQ:RANK:CHANNEL:STEPS[:INTO], got %s (ignored)\n", v);
    }
    return s;
  }();
  return spec;
}

// How far one transfer gets: every step, or `done` of them with `posted` posted.
struct Reach {
  int done, posted;
  int state;  // the state it stays in when it stops short
};

// One ProxyOp, as net.cc progresses it (sendProxyProgress / recvProxyProgress).
void transfer(const Events& e, void* context, const Task& t, unsigned channel, int peer, bool send, int n_steps,
              const Reach& reach, bool pxn) {
  np::EventDescrV7 d{};
  d.type = np::kProxyOp;
  d.parent = pxn ? reinterpret_cast<void*>(uintptr_t{0x10}) : t.parent;  // PXN: another process's
  d.rank = pxn ? (t.rank + 1) % t.nranks : t.rank;
  d.proxy_op.pid = pxn ? static_cast<int32_t>(getpid()) + 1 : static_cast<int32_t>(getpid());
  d.proxy_op.channel_id = static_cast<uint8_t>(channel);
  d.proxy_op.peer = peer;
  d.proxy_op.n_steps = n_steps;
  d.proxy_op.chunk_size = static_cast<int>(kStepBytes);
  d.proxy_op.is_send = send ? 1 : 0;
  void* op = e.start(pxn ? reinterpret_cast<void*>(uintptr_t{0x20}) : context, d);
  e.state(op, np::kProxyOpInProgress, 0);
  const bool steps = (t.mask & np::kProxyStep) != 0;
  const uint64_t total = t.bus_bytes / std::max(1u, t.channels);
  void* handles[kNcclSteps] = {};
  // Post (up to kNcclSteps ahead of done), then complete in order.
  int posted = 0;
  for (int done = 0; done < reach.done || posted < reach.posted;) {
    while (posted < reach.posted && posted < done + kNcclSteps) {
      void*& h = handles[posted % kNcclSteps];
      h = nullptr;
      if (steps) {
        np::EventDescrV7 s{};
        s.type = np::kProxyStep;
        s.parent = op;
        s.rank = d.rank;
        s.proxy_step.step = posted;
        h = e.start(pxn ? reinterpret_cast<void*>(uintptr_t{0x20}) : context, s);
        e.state(h, send ? np::kProxyStepSendGpuWait : np::kProxyStepRecvWait, 0);
      }
      ++posted;
    }
    if (done >= reach.done) break;
    const uint64_t offset = static_cast<uint64_t>(done) * kStepBytes;
    const size_t size = static_cast<size_t>(std::min<uint64_t>(kStepBytes, total > offset ? total - offset : 0));
    void* h = handles[done % kNcclSteps];
    if (send) {
      e.state(h, np::kProxyStepSendWait, size);
    } else {
      e.state(h, np::kProxyStepRecvFlushWait, size);
      e.state(h, np::kProxyStepRecvGpuWait, size);
    }
    e.stop(h);
    ++done;
  }
  if (reach.done == n_steps) {
    e.stop(op);
    return;
  }
  // Stopped short: the waiting state of the step after the last done one (never stopped).
  if (steps && reach.posted > reach.done) e.state(handles[reach.done % kNcclSteps], reach.state, 0);
}

}  // namespace

bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("SIMGPU_NCCL_TRANSPORT");
    return v && std::strcmp(v, "net") == 0;
  }();
  return on;
}

bool stalls(uint64_t launch_seq, int nranks) {
  const StallSpec& s = stall_spec();
  return s.on && nranks > 1 && launch_seq == s.seq;
}

unsigned stalled_channel() {
  const StallSpec& s = stall_spec();
  return s.on ? s.channel : ~0u;
}

void progress(const Events& e, void* context, const Task& t) {
  if (!enabled() || t.nranks < 2 || !(t.mask & (np::kProxyOp | np::kProxyStep | np::kNetPlugin))) return;
  const uint64_t per_channel = t.bus_bytes / std::max(1u, t.channels);
  const int n_steps = static_cast<int>(std::max<uint64_t>(1, (per_channel + kStepBytes - 1) / kStepBytes));
  const StallSpec& s = stall_spec();
  const bool stalled = s.on && t.launch_seq == s.seq;
  const int next = (t.rank + 1) % t.nranks, prev = (t.rank + t.nranks - 1) % t.nranks;
  for (unsigned ch = 0; ch < t.channels; ++ch) {
    struct Dir {
      bool send;
      int peer;
    } dirs[2] = {{true, next}, {false, prev}};
    const int ndirs = t.p2p ? 1 : 2;
    if (t.p2p) dirs[0] = {t.is_send, t.peer};
    for (int i = 0; i < ndirs; ++i) {
      const Dir dir = dirs[i];
      Reach reach{n_steps, n_steps, 0};
      if (t.behind) {
        // Its kernel has not started: sends wait for the GPU's data, receives for the peer's.
        reach = {0, std::min(n_steps, kNcclSteps), dir.send ? np::kProxyStepSendGpuWait : np::kProxyStepRecvWait};
      } else if (t.peer_missing) {
        // The peer never entered: a send posts what NCCL's buffers hold, then waits for the
        // peer's receive; a receive posts and waits.
        reach = {0, std::min(n_steps, kNcclSteps), dir.send ? np::kProxyStepSendPeerWait : np::kProxyStepRecvWait};
      } else if (stalled && ch == s.channel && (t.rank == s.rank || dir.peer == s.rank)) {
        // Into RANK (its receive, its neighbour's send to it): INTO steps; out of it: STEPS.
        const bool into = t.rank == s.rank ? !dir.send : dir.send;
        const int done = std::min(n_steps, into ? s.into_steps : s.steps);
        reach = {done, std::min(n_steps, done + kNcclSteps),
                 dir.send ? np::kProxyStepSendWait : np::kProxyStepRecvWait};
      }
      transfer(e, context, t, ch, dir.peer, dir.send, n_steps, reach, false);
    }
  }
  if (std::getenv("SIMGPU_NCCL_PXN")) {
    // A peer process's send through this process's NIC (PXN): complete, never ours.
    transfer(e, context, t, 0, (t.rank + 2) % t.nranks, true, n_steps, {n_steps, n_steps, 0}, true);
  }
}

}  // namespace simgpu_net
