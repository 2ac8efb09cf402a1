// The proxy-progress table (proxy_progress.h).
#include "proxy_progress.h"

#include <time.h>

#include <atomic>

#include "traintime/core/comm_stats.h"
#include "traintime/nccl/nccl_format.h"
#include "traintime/nccl/nccl_interposer.h"
#include "traintime/nccl/profiler_plugin_api.h"

namespace traintime::nccl::proxy {
namespace {

namespace np = traintime::nccl_profiler;

enum class Kind : uint8_t { kSend, kRecv, kKernel };

// One channel of one operation. `live` is the claim: 0 free, 1 in use. Everything else is written
// by the thread that progresses the op (NCCL's proxy thread) and read, relaxed, by summary().
struct Row {
  std::atomic<uint8_t> live{0};
  std::atomic<uint8_t> kind{0};
  std::atomic<uint8_t> pxn{0};
  std::atomic<uint8_t> op{0};
  std::atomic<uint8_t> steps_seen{0};  // a ProxyStep event arrived: posted/done/bytes are known
  std::atomic<uint8_t> channel{0};
  std::atomic<int32_t> state{0};       // NCCL's state, 0: started, none recorded yet
  std::atomic<uint32_t> comm{0};
  std::atomic<uint32_t> owner{0};      // the plugin context's (new_owner), 0: none
  std::atomic<int32_t> rank{-1};
  std::atomic<int32_t> peer{-1};
  std::atomic<int32_t> steps_total{-1};
  std::atomic<uint32_t> steps_posted{0};
  std::atomic<uint32_t> steps_done{0};
  std::atomic<uint64_t> bytes_done{0};
  std::atomic<uint64_t> seq{0};
  std::atomic<uint64_t> since_ns{0};
};

Row g_rows[kRows];
std::atomic<uint32_t> g_cursor{0};
// Whether a row was ever claimed: configure() clears the table only then, so a process that
// never loads NCCL never touches its pages (the inert-process budget).
std::atomic<bool> g_used{false};
std::atomic<uint8_t> g_mode{static_cast<uint8_t>(Mode::kAuto)};
std::atomic<int64_t> g_budget{0};  // auto: collectives left with ProxyStep on

std::atomic<uint64_t> g_ops{0};
std::atomic<uint64_t> g_steps{0};
std::atomic<uint64_t> g_pxn{0};
std::atomic<uint64_t> g_kernel_channels{0};
std::atomic<uint64_t> g_dropped{0};
std::atomic<uint64_t> g_suspected{0};
std::atomic<uint64_t> g_suspected_straggler{0};
std::atomic<uint32_t> g_next_owner{0};
std::atomic<uint64_t> g_freed_unstopped{0};  // rows freed at their context's finalize, never stopped

constexpr std::memory_order kRelaxed = std::memory_order_relaxed;

uint64_t now_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

Row* row_of(uint32_t row) noexcept { return row == kNone || row > kRows ? nullptr : &g_rows[row - 1]; }

// Claims a free row near the cursor: a few probes, then counted as dropped.
uint32_t claim() noexcept {
  constexpr uint32_t kProbes = 32;
  if (!g_used.load(kRelaxed)) g_used.store(true, kRelaxed);
  const uint32_t first = g_cursor.fetch_add(1, kRelaxed);
  for (uint32_t i = 0; i < kProbes; ++i) {
    const uint32_t index = (first + i) % kRows;
    uint8_t expected = 0;
    if (g_rows[index].live.load(kRelaxed) == 0 &&
        g_rows[index].live.compare_exchange_strong(expected, 1, std::memory_order_acquire, kRelaxed))
      return index + 1;
  }
  g_dropped.fetch_add(1, kRelaxed);
  return kNone;
}

void fill(Row& r, Kind kind, uint32_t owner, uint32_t comm, int rank, uint8_t op, uint64_t seq,
          uint8_t channel) noexcept {
  r.kind.store(static_cast<uint8_t>(kind), kRelaxed);
  r.owner.store(owner, kRelaxed);
  r.comm.store(comm, kRelaxed);
  r.rank.store(rank, kRelaxed);
  r.op.store(op, kRelaxed);
  r.seq.store(seq, kRelaxed);
  r.channel.store(channel, kRelaxed);
  r.pxn.store(0, kRelaxed);
  r.peer.store(-1, kRelaxed);
  r.state.store(0, kRelaxed);
  r.steps_seen.store(0, kRelaxed);
  r.steps_total.store(-1, kRelaxed);
  r.steps_posted.store(0, kRelaxed);
  r.steps_done.store(0, kRelaxed);
  r.bytes_done.store(0, kRelaxed);
  r.since_ns.store(now_ns(), kRelaxed);
}

void release(uint32_t row) noexcept {
  if (Row* r = row_of(row)) r->live.store(0, std::memory_order_release);
}

}  // namespace

void configure(std::string_view mode) noexcept {
  const Mode m = mode == "on" ? Mode::kOn : mode == "off" ? Mode::kOff : Mode::kAuto;
  g_mode.store(static_cast<uint8_t>(m), kRelaxed);
  g_budget.store(0, kRelaxed);
  // A fork child starts with none of the parent's ops (its proxy threads did not survive).
  if (g_used.load(kRelaxed))
    for (Row& r : g_rows) r.live.store(0, kRelaxed);
}

int mask_bits() noexcept {
  int bits = np::kProxyOp;
  const auto mode = static_cast<Mode>(g_mode.load(kRelaxed));
  if (mode == Mode::kOn || (mode == Mode::kAuto && g_budget.load(kRelaxed) > 0)) bits |= np::kProxyStep;
  return bits;
}

void suspect(Suspicion why) noexcept {
  if (static_cast<Mode>(g_mode.load(kRelaxed)) != Mode::kAuto) return;
  g_budget.store(kSuspectCollectives, kRelaxed);
  (why == Suspicion::kHang ? g_suspected : g_suspected_straggler).fetch_add(1, kRelaxed);
}

void note_task() noexcept {
  if (g_budget.load(kRelaxed) > 0) g_budget.fetch_sub(1, kRelaxed);
}

uint32_t new_owner() noexcept {
  uint32_t o = g_next_owner.fetch_add(1, kRelaxed) + 1;
  if (o == 0) o = g_next_owner.fetch_add(1, kRelaxed) + 1;  // wrapped: 0 is "none"
  return o;
}

void free_owner(uint32_t owner) noexcept {
  if (owner == 0 || !g_used.load(kRelaxed)) return;
  for (Row& r : g_rows) {
    if (r.live.load(std::memory_order_acquire) == 0 || r.owner.load(kRelaxed) != owner) continue;
    uint8_t expected = 1;
    if (r.live.compare_exchange_strong(expected, 0, std::memory_order_release, kRelaxed))
      g_freed_unstopped.fetch_add(1, kRelaxed);
  }
}

uint32_t start_op(uint32_t owner, uint32_t comm, int rank, uint8_t op, uint64_t seq, uint8_t channel, int peer,
                  int n_steps, bool is_send, bool pxn) noexcept {
  g_ops.fetch_add(1, kRelaxed);
  if (pxn) g_pxn.fetch_add(1, kRelaxed);
  const uint32_t row = claim();
  Row* r = row_of(row);
  if (!r) return kNone;
  fill(*r, is_send ? Kind::kSend : Kind::kRecv, owner, comm, rank, op, seq, channel);
  r->pxn.store(pxn ? 1 : 0, kRelaxed);
  r->peer.store(peer, kRelaxed);
  r->steps_total.store(n_steps, kRelaxed);
  return row;
}

void op_state(uint32_t row, int state) noexcept {
  Row* r = row_of(row);
  if (!r) return;
  r->state.store(state, kRelaxed);
  r->since_ns.store(now_ns(), kRelaxed);
}

void stop_op(uint32_t row) noexcept { release(row); }

void start_step(uint32_t row, int step) noexcept {
  g_steps.fetch_add(1, kRelaxed);
  Row* r = row_of(row);
  if (!r) return;
  r->steps_seen.store(1, kRelaxed);
  const auto posted = static_cast<uint32_t>(step < 0 ? 0 : step) + 1;
  if (posted > r->steps_posted.load(kRelaxed)) r->steps_posted.store(posted, kRelaxed);
  r->since_ns.store(now_ns(), kRelaxed);
}

void step_state(uint32_t row, int state) noexcept {
  Row* r = row_of(row);
  if (!r) return;
  r->state.store(state, kRelaxed);
  r->since_ns.store(now_ns(), kRelaxed);
}

void stop_step(uint32_t row, uint64_t bytes) noexcept {
  Row* r = row_of(row);
  if (!r) return;
  r->steps_done.store(r->steps_done.load(kRelaxed) + 1, kRelaxed);  // one writer: the proxy thread
  r->bytes_done.store(r->bytes_done.load(kRelaxed) + bytes, kRelaxed);
  r->since_ns.store(now_ns(), kRelaxed);
}

uint32_t start_kernel_channel(uint32_t owner, uint32_t comm, int rank, uint8_t op, uint64_t seq,
                              uint8_t channel) noexcept {
  g_kernel_channels.fetch_add(1, kRelaxed);
  const uint32_t row = claim();
  if (Row* r = row_of(row)) fill(*r, Kind::kKernel, owner, comm, rank, op, seq, channel);
  return row;
}

void stop_kernel_channel(uint32_t row) noexcept { release(row); }

std::string_view state_name(int state) noexcept {
  switch (state) {
    case 0: return "started";
    case np::kProxyOpInProgress: return "in_progress";
    case np::kProxyStepSendGpuWait: return "send_gpu_wait";
    case np::kProxyStepSendPeerWait: return "send_peer_wait";
    case np::kProxyStepSendWait: return "send_wait";
    case np::kProxyStepRecvWait: return "recv_wait";
    case np::kProxyStepRecvFlushWait: return "recv_flush_wait";
    case np::kProxyStepRecvGpuWait: return "recv_gpu_wait";
    default: return "other";
  }
}

Summary summary(core::Section& section) {
  Summary out;
  const auto mode = static_cast<Mode>(g_mode.load(kRelaxed));
  out.mode = mode == Mode::kOn ? "on" : mode == Mode::kOff ? "off" : "auto";
  section.count(kCounters, Counter::profiler_plugin_proxy_ops, g_ops.load(kRelaxed));
  section.count(kCounters, Counter::profiler_plugin_proxy_steps, g_steps.load(kRelaxed));
  section.count(kCounters, Counter::profiler_plugin_pxn_proxy_ops, g_pxn.load(kRelaxed));
  section.count(kCounters, Counter::profiler_plugin_kernel_channels, g_kernel_channels.load(kRelaxed));
  section.count(kCounters, Counter::profiler_plugin_suspected, g_suspected.load(kRelaxed));
  section.count(kCounters, Counter::profiler_plugin_suspected_straggler, g_suspected_straggler.load(kRelaxed));
  section.count(kCounters, Counter::profiler_plugin_progress_dropped, g_dropped.load(kRelaxed));
  section.count(kCounters, Counter::profiler_plugin_progress_unstopped, g_freed_unstopped.load(kRelaxed));
  const uint64_t now = now_ns();
  for (const Row& r : g_rows) {
    if (r.live.load(std::memory_order_acquire) == 0) continue;
    ProxyProgress p;
    const auto kind = static_cast<Kind>(r.kind.load(kRelaxed));
    p.direction = kind == Kind::kSend ? "send" : kind == Kind::kRecv ? "recv" : "kernel";
    p.rank = r.rank.load(kRelaxed);
    p.channel = r.channel.load(kRelaxed);
    p.peer = r.peer.load(kRelaxed);
    p.pxn = r.pxn.load(kRelaxed) != 0;
    const uint8_t op = r.op.load(kRelaxed);
    p.op = op < core::kCommOpCount ? static_cast<core::CommOp>(op) : core::CommOp::kUnknown;
    p.nccl_seq = r.seq.load(kRelaxed);
    p.since_ns = r.since_ns.load(kRelaxed);
    p.idle_ns = now > p.since_ns ? now - p.since_ns : 0;
    if (kind == Kind::kKernel) {
      p.state = "running";
      p.source = "kernel_channel";
    } else {
      p.state = std::string(state_name(r.state.load(kRelaxed)));
      if (const int32_t total = r.steps_total.load(kRelaxed); total >= 0) p.steps_total = static_cast<uint64_t>(total);
      if (r.steps_seen.load(kRelaxed) != 0) {
        p.source = "proxy_step";
        p.steps_posted = r.steps_posted.load(kRelaxed);
        p.steps_done = r.steps_done.load(kRelaxed);
        p.bytes_done = r.bytes_done.load(kRelaxed);
      } else {
        p.source = "proxy_op";
      }
    }
    const uint32_t comm = r.comm.load(kRelaxed);
    out.rows.emplace_back(comm == 0 || p.pxn ? core::CommCallTable::kNoComm : comm - 1, std::move(p));
  }
  return out;
}

}  // namespace traintime::nccl::proxy

namespace traintime::nccl {
void suspect_hang() noexcept { proxy::suspect(proxy::Suspicion::kHang); }
void suspect_straggler() noexcept { proxy::suspect(proxy::Suspicion::kStraggler); }
}  // namespace traintime::nccl
