// Communicator registry: CommCallTable's lock-free handle lookup on the hot path; first sight,
// creation notes and destruction under one mutex. configure() and summary() (the module's
// interface, nccl_interposer.h) are here too: they own the registry's lifetime.
#include "traintime/core/module.h"
#include "traintime/nccl/nccl_format.h"
#include "traintime/nccl/proxy_progress_section.h"
#include "nccl_registry.h"

#include <nccl.h>

#include <array>
#include <memory>
#include <atomic>
#include <cerrno>
#include <mutex>
#include <string>

#include "nccl_resolve.h"
#include "pending_calls.h"
#include "profiler_plugin.h"
#include "proxy_progress.h"
#include "traintime/support/log.h"

namespace traintime::nccl {
namespace {

struct PendingChild {
  const void* handle = nullptr;
  uint64_t stable_id = 0;
  CommOrigin origin = CommOrigin::kSplit;
};

// One per configure(): a fork child gets a fresh one (the parent's is leaked there, since its
// mutex may have been held by a thread that does not exist in the child). Never destroyed, so
// exit-time writers can always read it.
struct Registry {
  // The registry this one replaced (a fork child's reconfiguration): never freed, since a
  // wrapper may still be reading it, but reachable, so leak checkers see no leak.
  Registry* replaced = nullptr;
  std::array<CommEntry, kMaxCommunicators> entries{};
  std::array<std::atomic<bool>, kMaxCommunicators> published{};
  std::array<uint32_t, kMaxCommunicators> children_made{};  // splits/shrinks per parent
  std::array<PendingChild, kMaxPending> pending{};
  std::mutex mutex;  // every writer
  uint32_t first_seen = 0;
  uint32_t init_alls = 0;
  uint32_t largest_size = 0;
  std::atomic<uint64_t> unregistered{0};
  // Splits beyond kMaxPending waiting to be used: counted under mutex, read by summary() without
  // it (a terminating signal's write takes no lock here: core/lock_order.h).
  std::atomic<uint64_t> children_unnamed{0};
  core::CommCallTable* table = nullptr;
  Hooks hooks;
};
// Until configure() runs: an empty registry that records nothing (g_recording is false).
Registry g_initial;
std::atomic<Registry*> g_current{&g_initial};

Registry& reg() noexcept { return *g_current.load(std::memory_order_acquire); }

// Calls that found no real function: process-wide (they can happen before configure()).
std::atomic<uint64_t> g_missing_real{0};

RealSymbol g_comm_count{"ncclCommCount", "pncclCommCount", "libnccl"};
RealSymbol g_comm_user_rank{"ncclCommUserRank", "pncclCommUserRank", "libnccl"};

uint64_t key_of(const void* comm) { return reinterpret_cast<uint64_t>(comm); }

uint64_t mix(uint64_t a, uint64_t b) {
  const uint64_t words[2] = {a, b};
  return hash_bytes(words, sizeof(words));
}

// What a registration tells the process, reported by the caller after the mutex is released.
struct Published {
  uint32_t comm_id = 0;     // 0 when the table is full
  bool fresh = false;       // first registration of this communicator
  int64_t world_rank = -1;  // set when it is the largest communicator so far
  int64_t world_size = 0;
};

// Under r.mutex.
Published publish(Registry& r, const void* comm, uint32_t size, uint32_t rank,
                  uint64_t stable_id, CommOrigin origin) {
  Published out;
  const uint32_t index = r.table->register_communicator(key_of(comm), size, rank, stable_id);
  core::CommCallTable::Counters* counters = r.table->counters(index);
  if (index >= kMaxCommunicators || counters == nullptr) return out;
  out.comm_id = index + 1;
  if (!r.published[index].load(std::memory_order_relaxed)) {
    r.entries[index] = CommEntry{size, rank, origin, counters};
    r.published[index].store(true, std::memory_order_release);
    out.fresh = true;
    if (size > r.largest_size) {
      // The rank in the largest communicator is the rank in the world when no launcher
      // variable said (the process prefers a launcher's rank over this one).
      r.largest_size = size;
      out.world_rank = rank;
      out.world_size = size;
    }
  }
  return out;
}

// Outside the mutex: the hooks may take the process's own locks (a lazy CUPTI start does).
void announce(const Registry& r, const Published& p) {
  if (!p.fresh) return;
  const int saved_errno = errno;
  if (p.world_rank >= 0 && r.hooks.on_world_rank) r.hooks.on_world_rank(p.world_rank, p.world_size);
  if (r.hooks.on_communicator) r.hooks.on_communicator();
  errno = saved_errno;
}

}  // namespace

std::atomic<bool> g_recording{false};
std::atomic<bool> g_first_call_pending{false};
std::atomic<uint32_t> g_comm_epoch{1};

void configure(core::CommCallTable* table, bool enabled, const Hooks& hooks) noexcept {
  g_recording.store(false, std::memory_order_relaxed);
  g_comm_epoch.fetch_add(1, std::memory_order_acq_rel);
  set_capture_watch(false);  // until GPU capture says it watches (never, in a fork child)
  reset_pending();
  forget_cost_after_fork();  // a fork child counts none of the parent's calls
  if (table == nullptr) return;
  auto* r = new (std::nothrow) Registry();
  if (r == nullptr) return;
  r->table = table;
  r->hooks = hooks;
  r->replaced = g_current.load(std::memory_order_acquire);
  g_current.store(r, std::memory_order_release);
  // Per configuration, so a fork child's reconfiguration activates the child on its own first
  // call.
  g_first_call_pending.store(true, std::memory_order_relaxed);
  g_recording.store(enabled, std::memory_order_release);
  plugin::setup(enabled);
}


void note_first_counted_call() noexcept {
  // The exchange makes the hook run once even when two threads make their first calls together.
  if (!g_first_call_pending.exchange(false, std::memory_order_relaxed)) return;
  const Registry& r = reg();
  const int saved = errno;
  if (r.hooks.on_first_call) r.hooks.on_first_call();
  errno = saved;
}
core::CommCallTable& call_table() noexcept { return *reg().table; }

namespace {

// The module's data section (proxy_progress_section.h): the plugin's rows, each named by its
// communicator's id as communicators[].id names it (a PXN op, of another process, by none).
std::shared_ptr<const ProxyProgressSection> proxy_progress_section(proxy::Summary progress,
                                                                   const core::CommCallTable::Snapshot& calls) {
  auto out = std::make_shared<ProxyProgressSection>();
  out->proxy_steps = std::string(progress.mode);
  out->rows.reserve(progress.rows.size());
  for (auto& [index, row] : progress.rows) {
    if (index != core::CommCallTable::kNoComm) {
      const core::CommCallTable::CommSnapshot* cs = calls.find(index);
      row.communicator = core::communicator_id(cs != nullptr ? cs->stable_id : 0);
    }
    out->rows.push_back(std::move(row));
  }
  return out;
}

}  // namespace

core::CommSummary summary() {
  core::CommSummary out;
  Registry& r = reg();
  if (r.table == nullptr) return out;
  core::Section& sec = out.section;
  sec.count(kCounters, Counter::missing_real, g_missing_real.load(std::memory_order_relaxed));
  plugin::add_to_summary(sec);
  proxy::Summary progress;
  const bool plugin_registered = plugin::inits() > 0;
  if (plugin_registered) progress = proxy::summary(sec);  // the channels in flight (proxy_progress.h)
  cost_into(sec);
  sec.own_memory("call table", r.table->bytes());
  out.calls = r.table->snapshot();
  if (plugin_registered) sec.data = proxy_progress_section(std::move(progress), out.calls);
  plugin::add_kernel_ch_times(out.kernel_ch);
  if (out.calls.comms.empty()) return out;
  sec.count(kCounters, Counter::unregistered, r.unregistered.load(std::memory_order_relaxed));
  sec.count(kCounters, Counter::pending_dropped, pending_dropped());
  sec.count(kCounters, Counter::children_unnamed, r.children_unnamed.load(std::memory_order_relaxed));
  sec.count(kCounters, Counter::calls_without_communicator, out.calls.calls_without_communicator);
  sec.count(kCounters, Counter::groups_lost, r.table->groups_lost());
  return out;
}

uint64_t hash_bytes(const void* data, size_t n, uint64_t seed) noexcept {
  uint64_t h = seed;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint32_t comm_id_for(const void* comm, const void* caller) noexcept {
  if (comm == nullptr) return 0;
  Registry& r = reg();
  const uint32_t index = r.table->find_communicator(key_of(comm));
  if (index < kMaxCommunicators && r.published[index].load(std::memory_order_acquire)) {
    return index + 1;
  }

  const int saved_errno = errno;
  uint32_t comm_id = 0;
  using QueryFn = ncclResult_t (*)(const ncclComm_t, int*);
  auto count_fn = reinterpret_cast<QueryFn>(g_comm_count.get(nullptr, caller));
  auto rank_fn = reinterpret_cast<QueryFn>(g_comm_user_rank.get(nullptr, caller));
  int size = 0;
  int rank = 0;
  auto handle = static_cast<ncclComm_t>(const_cast<void*>(comm));
  // Outside the mutex: the real queries may block briefly (ncclCommEnsureReady).
  if (count_fn != nullptr && rank_fn != nullptr && count_fn(handle, &size) == ncclSuccess &&
      rank_fn(handle, &rank) == ncclSuccess && size > 0 && rank >= 0 && rank < size) {
    Published p;
    {
    std::lock_guard<std::mutex> lock(r.mutex);
    uint64_t stable_id = 0;
    CommOrigin origin = CommOrigin::kFirstSeen;
    for (PendingChild& p : r.pending) {
      if (p.handle == comm) {
        stable_id = p.stable_id;
        origin = p.origin;
        p = PendingChild{};
        break;
      }
    }
    if (origin == CommOrigin::kFirstSeen) {
      stable_id = mix(uint64_t{0x5EE4} << 32 | ++r.first_seen, static_cast<uint64_t>(size));
    }
    p = publish(r, comm, static_cast<uint32_t>(size), static_cast<uint32_t>(rank), stable_id,
                origin);
    }
    comm_id = p.comm_id;
    announce(r, p);
  }
  errno = saved_errno;
  return comm_id;
}

const CommEntry* entry(uint32_t comm_id) noexcept {
  if (comm_id == 0 || comm_id > kMaxCommunicators) return nullptr;
  Registry& r = reg();
  if (!r.published[comm_id - 1].load(std::memory_order_acquire)) return nullptr;
  return &r.entries[comm_id - 1];
}

void note_created(const void* comm, uint32_t size, uint32_t rank, uint64_t stable_id,
                  CommOrigin origin) noexcept {
  if (comm == nullptr || size == 0 || rank >= size) return;
  const int saved_errno = errno;
  Registry& r = reg();
  Published p;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    p = publish(r, comm, size, rank, stable_id, origin);
  }
  announce(r, p);
  errno = saved_errno;
}

void note_child(const void* comm, uint64_t stable_id, CommOrigin origin) noexcept {
  if (comm == nullptr) return;
  Registry& r = reg();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (PendingChild& p : r.pending) {
    if (p.handle == nullptr || p.handle == comm) {
      p = PendingChild{comm, stable_id, origin};
      return;
    }
  }
  // More than kMaxPending children not used yet: this one gets a first-seen id (counted).
  r.children_unnamed.fetch_add(1, std::memory_order_relaxed);
}

uint64_t next_child_id(const void* parent, CommOrigin origin, int color,
                       const void* caller) noexcept {
  const uint32_t parent_id = comm_id_for(parent, caller);
  Registry& r = reg();
  std::lock_guard<std::mutex> lock(r.mutex);
  uint64_t parent_stable = 0;
  uint64_t nth = 0;
  if (parent_id != 0) {
    parent_stable = r.table->stable_id(parent_id - 1);
    nth = ++r.children_made[parent_id - 1];
  }
  const uint64_t kind = origin == CommOrigin::kShrink ? 2 : 1;
  return mix(mix(parent_stable, kind << 32 | nth), static_cast<uint32_t>(color));
}

uint64_t next_init_all_id(int ndev) noexcept {
  Registry& r = reg();
  std::lock_guard<std::mutex> lock(r.mutex);
  return mix(uint64_t{0xA11} << 32 | ++r.init_alls, static_cast<uint32_t>(ndev));
}

void retire(const void* comm) noexcept {
  if (comm == nullptr) return;
  Registry& r = reg();
  const uint32_t index = r.table->find_communicator(key_of(comm));
  if (index < kMaxCommunicators) r.table->retire_communicator(index);
  g_comm_epoch.fetch_add(1, std::memory_order_acq_rel);
  std::lock_guard<std::mutex> lock(r.mutex);
  for (PendingChild& p : r.pending) {
    if (p.handle == comm) p = PendingChild{};
  }
}

void note_missing_real(const char* function) noexcept {
  g_missing_real.fetch_add(1, std::memory_order_relaxed);
  const int saved_errno = errno;
  support::warn_once(function,
                     "{} was called but no loaded library defines it; returning ncclSystemError "
                     "(load the NCCL the program was built with before calling it)",
                     function);
  errno = saved_errno;
}

void count_unregistered_call() noexcept {
  reg().unregistered.fetch_add(1, std::memory_order_relaxed);
}

uint64_t unregistered_calls() noexcept {
  return reg().unregistered.load(std::memory_order_relaxed);
}

// The runtime half the module table registers (core/module.h): records into the session's call
// table (a fresh one in a fork child); its summary is joined with the GPU side by the root.
extern const core::Module kModule;  // listed in the module table (module_table.h)
const core::Module kModule{&kFormat,
                           [](const core::ModuleHost& host) {
                             Hooks hooks;
                             hooks.on_first_call = host.on_first_record;
                             hooks.on_communicator = host.on_communicator;
                             hooks.on_world_rank = host.on_world_rank;
                             plugin::set_kernel_ch_request(host.config->nccl_kernel_ch, host.fork_child);
                             proxy::configure(host.config->nccl_proxy_steps);
                             configure(host.comm_table, host.config->nccl, hooks);
                           },
                           nullptr, nullptr, nullptr, &cost_so_far};

}  // namespace traintime::nccl
