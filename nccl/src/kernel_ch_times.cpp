// NCCL's own GPU timers per collective (kernel_ch_times.h).
#include "kernel_ch_times.h"

#include <dlfcn.h>
#include <strings.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "nccl_registry.h"
#include "traintime/core/comm_stats.h"
#include "traintime/nccl/nccl_format.h"
#include "traintime/support/log.h"

namespace traintime::nccl::plugin::kernel_ch {
namespace {

enum class Request : int { kAuto, kOn, kOff };
std::atomic<int> g_request{static_cast<int>(Request::kAuto)};
std::atomic<int> g_wanted{-1};  // -1 undecided, 0, 1
std::atomic<int> g_nccl_version{0};

// A kernel: its tasks (members), and what keeps it open: kOpen while the group is open (its
// close takes kOpen less its task count off, so adding a task costs no locked instruction on
// the planning thread), and one per task whose channels have not all stopped. Slots are reused
// kSlots kernels later; a channel of a reused slot's kernel is lost.
constexpr uint32_t kOpen = 1u << 30;
constexpr uint32_t kSlots = 512;
constexpr uint32_t kMembers = 64;
struct Member {
  Call call{};
  uint32_t channels = 0;
  std::atomic<uint32_t> done{0};
  std::atomic<uint64_t> start{~uint64_t{0}};
  std::atomic<uint64_t> stop{0};
};
struct Slot {
  std::atomic<uint64_t> serial{0};
  std::atomic<uint32_t> pending{0};
  uint32_t count = 0;  // written by the planning thread only
  Member members[kMembers];
};
std::atomic<Slot*> g_slots{nullptr};
std::atomic<uint64_t> g_next_serial{0};
std::atomic<uint64_t> g_lost{0};
std::atomic<uint64_t> g_timed{0};

// The finished collectives, per communicator index.
constexpr std::size_t kRing = 256;  // as the GPU aggregator's ring of recent collectives
struct CommTimes {
  std::array<core::CommGpuTime, core::kCommOpCount> ops{};
  std::array<bool, core::kCommOpCount> used{};
  std::vector<core::RecentCollective> ring = std::vector<core::RecentCollective>(kRing);
  std::size_t written = 0;
  uint64_t completed = 0;
};
std::mutex g_mu;
std::map<uint32_t, CommTimes>* g_times = nullptr;  // under g_mu; leaked (proxy threads may outlive statics)

Slot* slots() noexcept {
  Slot* s = g_slots.load(std::memory_order_acquire);
  if (s) return s;
  // Made at the first kernel of a process that asked for KernelCh, never at start-up.
  Slot* made = new (std::nothrow) Slot[kSlots];
  if (!made) return nullptr;
  if (!g_slots.compare_exchange_strong(s, made, std::memory_order_acq_rel)) {
    delete[] made;
    return s;
  }
  return made;
}

Slot* slot_of(uint64_t serial) noexcept {
  Slot* s = g_slots.load(std::memory_order_acquire);
  if (!s || serial == 0) return nullptr;
  Slot& slot = s[serial % kSlots];
  return slot.serial.load(std::memory_order_acquire) == serial ? &slot : nullptr;
}

void store_min(std::atomic<uint64_t>& a, uint64_t v) {
  uint64_t cur = a.load(std::memory_order_relaxed);
  while (v < cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}
void store_max(std::atomic<uint64_t>& a, uint64_t v) {
  uint64_t cur = a.load(std::memory_order_relaxed);
  while (v > cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

// Every task of the kernel finished: its span, split across its calls by bytes.
void finish(Slot& slot) {
  const uint32_t n = std::min(slot.count, kMembers);
  uint64_t start = ~uint64_t{0}, stop = 0, bytes = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const Member& m = slot.members[i];
    if (m.done.load(std::memory_order_acquire) == 0) continue;
    start = std::min(start, m.start.load(std::memory_order_relaxed));
    stop = std::max(stop, m.stop.load(std::memory_order_relaxed));
    bytes += m.call.bytes;
  }
  if (stop <= start) return;
  const uint64_t span = stop - start;
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_times) g_times = new (std::nothrow) std::map<uint32_t, CommTimes>();
  if (!g_times) return;
  bool first = true;
  for (uint32_t i = 0; i < n; ++i) {
    const Member& m = slot.members[i];
    const Call& c = m.call;
    if (m.done.load(std::memory_order_relaxed) == 0 || c.comm_id == 0 || c.seq == 0) continue;
    const auto oi = static_cast<std::size_t>(c.op);
    if (oi >= core::kCommOpCount) continue;
    const uint64_t share = bytes > 0 ? static_cast<uint64_t>(static_cast<double>(span) * c.bytes / bytes + 0.5)
                                     : span / n;
    CommTimes& t = (*g_times)[c.comm_id - 1];
    core::CommGpuTime& g = t.ops[oi];
    t.used[oi] = true;
    g.gpu_ns += share;
    g.bucket_gpu_ns[core::size_bucket(c.bytes)] += share;
    if (first) ++g.kernels;
    first = false;
    t.ring[t.written++ % kRing] = core::RecentCollective{c.seq, c.op, c.bytes, start, stop, span};
    t.completed = std::max(t.completed, c.seq);
    g_timed.fetch_add(1, std::memory_order_relaxed);
  }
}

void release(Slot& slot, uint64_t serial, uint32_t n) {
  if (slot.pending.fetch_sub(n, std::memory_order_acq_rel) != n) return;
  if (slot.serial.load(std::memory_order_acquire) == serial) finish(slot);
}

int nccl_version() noexcept {
  using GetVersion = int (*)(int*);  // ncclResult_t ncclGetVersion(int*)
  void* f = dlsym(RTLD_DEFAULT, "ncclGetVersion");
  if (!f) {
    if (void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD)) {
      f = dlsym(lib, "ncclGetVersion");
      dlclose(lib);
    }
  }
  int v = 0;
  if (!f || reinterpret_cast<GetVersion>(f)(&v) != 0) return 0;
  return v;
}

}  // namespace

void set_request(const std::string& setting) noexcept {
  Request r = Request::kAuto;
  if (setting == "1") {
    r = Request::kOn;
  } else if (setting == "0") {
    r = Request::kOff;
  } else if (strcasecmp(setting.c_str(), "auto") != 0) {
    support::warn_once("TRAINTIME_NCCL_KERNEL_CH", "TRAINTIME_NCCL_KERNEL_CH={} is not auto, 1 or 0; using auto",
                       setting);
  }
  g_request.store(static_cast<int>(r), std::memory_order_relaxed);
  g_wanted.store(-1, std::memory_order_relaxed);
}

bool wanted() noexcept {
  const int w = g_wanted.load(std::memory_order_acquire);
  if (w >= 0) return w == 1;
  const int version = nccl_version();  // NCCL_VERSION_CODE: 2.31.5 is 23105
  g_nccl_version.store(version, std::memory_order_relaxed);
  bool on = true;
  switch (static_cast<Request>(g_request.load(std::memory_order_relaxed))) {
    case Request::kOn: on = true; break;
    case Request::kOff: on = false; break;
    case Request::kAuto: on = !(version >= 23100 && version < 23200); break;
  }
  g_wanted.store(on ? 1 : 0, std::memory_order_release);
  return on;
}

uint64_t open_group() noexcept {
  Slot* s = slots();
  if (!s) return 0;
  const uint64_t serial = g_next_serial.fetch_add(1, std::memory_order_relaxed) + 1;
  Slot& slot = s[serial % kSlots];
  if (slot.pending.load(std::memory_order_acquire) != 0) g_lost.fetch_add(1, std::memory_order_relaxed);
  slot.serial.store(0, std::memory_order_release);  // channels of the kernel it held are dropped
  slot.count = 0;
  slot.pending.store(kOpen, std::memory_order_relaxed);
  slot.serial.store(serial, std::memory_order_release);
  return serial;
}

Place add_member(uint64_t serial, const Call& call, unsigned channels) noexcept {
  Slot* slot = slot_of(serial);
  if (!slot || channels == 0) return {};
  if (slot->count >= kMembers) {
    g_lost.fetch_add(1, std::memory_order_relaxed);
    return {};
  }
  const uint32_t i = slot->count++;
  Member& m = slot->members[i];
  m.call = call;
  m.channels = channels;
  m.done.store(0, std::memory_order_relaxed);
  m.start.store(~uint64_t{0}, std::memory_order_relaxed);
  m.stop.store(0, std::memory_order_relaxed);
  return {serial, i};
}

void close_group(uint64_t serial) noexcept {
  if (Slot* slot = slot_of(serial)) release(*slot, serial, kOpen - slot->count);
}

void channel_done(const Place& p, uint64_t start_ns, uint64_t stop_ns) noexcept {
  Slot* slot = slot_of(p.serial);
  if (!slot || p.member >= kMembers) return;
  Member& m = slot->members[p.member];
  if (stop_ns >= start_ns && stop_ns != 0) {
    store_min(m.start, start_ns);
    store_max(m.stop, stop_ns);
  }
  if (m.done.fetch_add(1, std::memory_order_acq_rel) + 1 == m.channels) release(*slot, p.serial, 1);
}

void forget_after_fork() noexcept {
  new (&g_mu) std::mutex();
  g_times = nullptr;
  g_slots.store(nullptr, std::memory_order_release);
  g_timed.store(0, std::memory_order_relaxed);
  g_lost.store(0, std::memory_order_relaxed);
}

void add_to(core::CommSummary::KernelCh& out) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_times) return;
  for (const auto& [index, t] : *g_times) {
    for (std::size_t o = 0; o < core::kCommOpCount; ++o)
      if (t.used[o]) out.comm.push_back({index, static_cast<core::CommOp>(o), t.ops[o]});
    core::GpuSummary::Ring ring;
    ring.comm_index = index;
    ring.ops_completed = t.completed;
    const std::size_t n = std::min(t.written, kRing);
    for (std::size_t i = t.written - n; i < t.written; ++i) ring.recent.push_back(t.ring[i % kRing]);
    std::sort(ring.recent.begin(), ring.recent.end(),
              [](const core::RecentCollective& a, const core::RecentCollective& b) { return a.seq < b.seq; });
    out.rings.push_back(std::move(ring));
  }
}

void add_counters(core::Section& section) {
  const int w = g_wanted.load(std::memory_order_acquire);
  if (w < 0) return;
  section.count(kCounters, Counter::profiler_plugin_nccl_version,
                static_cast<uint64_t>(g_nccl_version.load(std::memory_order_relaxed)));
  section.count(kCounters, Counter::profiler_plugin_kernel_ch, static_cast<uint64_t>(w));
  section.count(kCounters, Counter::profiler_plugin_kernel_ch_collectives, g_timed.load(std::memory_order_relaxed));
  section.count(kCounters, Counter::profiler_plugin_kernel_ch_lost, g_lost.load(std::memory_order_relaxed));
}

}  // namespace traintime::nccl::plugin::kernel_ch
