// traintime's NCCL profiler plugin tables (ncclProfiler_v3 ... ncclProfiler_v7) and the calls
// passed on to the user's plugin (profiler_plugin.h). Every version NCCL calls is read as v7
// (profiler_plugin_convert.h); a chained plugin gets the version it offers, with its own
// activation mask, its own context per communicator and its own event handles, its parents
// translated to its own handles.
//
// Contract with NCCL: only init may fail; every other callback returns ncclSuccess, accepts a
// NULL handle (an event neither traintime nor the chained plugin wanted has none) and never
// blocks. Event handles come from fixed rings (no allocation on NCCL's threads): NCCL names a
// task event as the parent of its kernel-channel events after stopping it, so a handle must
// outlive its stop; a ring recycles a slot only its size of events later. A proxy event's
// handle sits beside its progress row; an event whose handle would carry nothing but its kind
// shares its kind's.
#include "profiler_plugin.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <new>
#include <string>
#include <type_traits>

#include "kernel_ch_times.h"
#include "nccl_registry.h"
#include "proxy_progress.h"
#include "traintime/nccl/nccl_format.h"
#include "traintime/core/rank_file.h"
#include "traintime/nccl/profiler_plugin_convert.h"

namespace traintime::nccl::plugin {

namespace detail {
__thread LaunchThread t_launch __attribute__((tls_model("initial-exec"))) = {};
}  // namespace detail

namespace {

namespace np = traintime::nccl_profiler;

constexpr uint32_t kGroupMembers = core::CommGroupRecord::kMaxMembers;

// What a thread calling NCCL keeps between its events, in one initial-exec __thread (see
// detail::LaunchThread): every access is a load from the thread pointer, where a thread_local
// of this shared library would cost a __tls_get_addr call each (about 30 per collective).
struct PluginThread {
  // The calls counted from this thread's API events since its GroupApi event started: the first
  // one, with the bytes of all (what the wrappers record for a group's kernel), and the members
  // (CommCallTable::record_group) the GPU aggregator splits the group's kernel across.
  bool group_has_call;
  uint32_t group_count;
  Call group_call;
  core::CommGroupMember group_members[kGroupMembers];
  // The blocks of the handle rings this thread takes its handles from (Ring::take()).
  uint32_t handle_next, handle_end;
  uint32_t proxy_handle_next, proxy_handle_end;
  // NCCL's names (ncclFuncToString, ncclDatatypeToString) are its static strings: the last one
  // this thread read is remembered by address, so a collective's events compare no string twice.
  const char* func;
  core::CommOp func_op;
  const char* datatype;
  uint64_t datatype_size;
};
__thread PluginThread t_plugin __attribute__((tls_model("initial-exec"))) = {};

// What traintime itself asks NCCL for: the API-level and task events, and the kernel-channel
// events when NCCL's own GPU timers are wanted (kernel_ch_times.h). Set at NCCL's first init.
constexpr int kBaseMask = np::kCollApi | np::kP2pApi | np::kColl | np::kP2p | np::kKernelLaunch;
std::atomic<int> g_own_mask{kBaseMask};
int own_mask() { return g_own_mask.load(std::memory_order_relaxed); }

// NCCL numbers its collectives per (communicator, collective type) (coll.seqNumber, from 0), and
// traintime per communicator: each API event of a type enters the call traintime counted for it
// (the wrapper's, or the plugin's own) under the type's running number, and the task event finds
// its call there. P2p task events carry no number: the n-th Send task is the n-th Send call.
constexpr uint32_t kJoinSlots = 64;
struct Joined {
  std::atomic<uint64_t> number{~uint64_t{0}};  // the type's running number; stored last (release)
  Call call{};
};

struct Context {
  int* nccl_mask = nullptr;  // NCCL's one live activation mask
  std::atomic<int> their_mask{0};  // the chained plugin's own (it may change it any time)
  void* their_context = nullptr;
  uint64_t comm_hash = 0;
  int nranks = 0;
  int rank = 0;
  char name[64] = "";
  int nccl_version = 0;  // the version NCCL calls
  uint32_t progress_owner = 0;  // its proxy_progress rows' owner (freed at finalize)
  // The communicator's index + 1 in the call table when the plugin counts its calls (0: not yet).
  std::atomic<uint32_t> comm_id{0};
  // Its index + 1 however its calls are counted (interposed or here), for proxy_progress.
  std::atomic<uint32_t> progress_comm{0};
  // The seqNumber join (above), per core::CommOp: API calls made, p2p tasks planned.
  uint64_t api_calls[core::kCommOpCount] = {};
  uint64_t p2p_tasks[core::kCommOpCount] = {};
  Joined joined[core::kCommOpCount][kJoinSlots];
};

// An event's handle: what its stop, its states and the events naming it as parent read. The
// calling thread's events (API, launch, group, task) have only this, and write it only where it
// carries something (open_handle()): a collective costs the calling thread its Group's and its
// task's handle, about a cache line, however many proxy fields the proxy thread's events keep.
struct Handle {
  uint64_t type;
  void* their;  // the chained plugin's handle of this event, or NULL
  // Group: its kernel's serial. Coll/P2p and KernelCh: the task's place in its kernel.
  kernel_ch::Place place;
  // Coll/P2p: the task's NCCL seq and op, for its proxy and kernel-channel rows
  // (proxy_progress.h); ProxyProgress::kUnknown and CommOp::kUnknown on other events.
  uint64_t seq;
  uint8_t op;
};

// The handle of an event of NCCL's proxy thread (ProxyOp, ProxyStep, KernelCh; is_proxy()).
struct ProxyHandle : Handle {
  Context* context;  // NULL for a PXN op's events (another process's context)
  // proxy_progress's row (a ProxyOp's or KernelCh's own, a ProxyStep's op's), kNone: none.
  uint32_t row;
  uint64_t channel_start;  // KernelCh: the channel's start (GPU ns)
  uint64_t channel_stop;   // KernelCh: its stop (KernelChStop state)
  uint64_t bytes;          // ProxyStep: the bytes its states reported
};

constexpr bool is_proxy(uint64_t type) { return type == np::kProxyOp || type == np::kProxyStep || type == np::kKernelCh; }

// Handles taken in turn (no allocation on NCCL's threads), each thread taking slots in blocks
// (one locked add per block, not per event).
template <typename H, uint32_t Slots, uint32_t PluginThread::*Next, uint32_t PluginThread::*End>
struct Ring {
  static constexpr uint32_t kBlock = 64;
  H slots[Slots];
  std::atomic<uint32_t> next{0};
  H* take() {
    PluginThread& t = t_plugin;
    if (t.*Next == t.*End) {
      t.*Next = next.fetch_add(kBlock, std::memory_order_relaxed);
      t.*End = t.*Next + kBlock;
    }
    return &slots[(t.*Next)++ % Slots];
  }
};
// The calling thread's events (and any other event traintime or the chained plugin asked for).
Ring<Handle, 1u << 15, &PluginThread::handle_next, &PluginThread::handle_end> g_handles;
// Proxy events the progress table had no row for (a full table, a step of an op without one).
Ring<ProxyHandle, 1u << 13, &PluginThread::proxy_handle_next, &PluginThread::proxy_handle_end> g_proxy_handles;

// The handle shared by every event of a kind whose handle carries only its kind (no chained
// plugin's handle, no kernel): one written at load, none per event.
Handle g_shared_handles[] = {
    {np::kGroupApi, nullptr, {0, 0}, ProxyProgress::kUnknown, static_cast<uint8_t>(core::CommOp::kUnknown)},
    {np::kCollApi, nullptr, {0, 0}, ProxyProgress::kUnknown, static_cast<uint8_t>(core::CommOp::kUnknown)},
    {np::kP2pApi, nullptr, {0, 0}, ProxyProgress::kUnknown, static_cast<uint8_t>(core::CommOp::kUnknown)},
    {np::kKernelLaunch, nullptr, {0, 0}, ProxyProgress::kUnknown, static_cast<uint8_t>(core::CommOp::kUnknown)},
    {np::kGroup, nullptr, {0, 0}, ProxyProgress::kUnknown, static_cast<uint8_t>(core::CommOp::kUnknown)},
};
Handle* shared_handle(uint64_t type) {
  for (Handle& h : g_shared_handles)
    if (h.type == type) return &h;
  return nullptr;
}

core::CommOp op_of(const char* func) {
  PluginThread& t = t_plugin;
  if (func == t.func && func) return t.func_op;
  t.func_op = core::comm_op_from_name(func ? func : "");
  t.func = func;
  return t.func_op;
}

// Counters for the rank file (relaxed: figures, read at the end).
std::atomic<uint64_t> g_inits{0};
std::atomic<int> g_nccl_version{0};
std::atomic<uint64_t> g_their_init_failures{0};
std::atomic<uint64_t> g_events[16] = {};
std::atomic<uint64_t> g_counted{0};  // calls counted from plugin events alone

void nccl_log_noop(int, unsigned long, const char*, int, const char*, ...) {}

// NCCL's pid check for PXN (src/plugin/profiler.cc): the process NCCL loaded the plugin in.
std::atomic<int32_t> g_pid{0};

void refresh_mask(Context* c) {
  const int want = own_mask() | proxy::mask_bits() | c->their_mask.load(std::memory_order_relaxed);
  if (__atomic_load_n(c->nccl_mask, __ATOMIC_RELAXED) != want) __atomic_store_n(c->nccl_mask, want, __ATOMIC_RELAXED);
}

// ---- counting the calls interposition cannot see ----
// Element size of NCCL's datatype names (ncclDatatypeToString); 0: unknown.
uint64_t element_size_of(const char* datatype) {
  if (!datatype || std::strncmp(datatype, "nccl", 4) != 0) return 0;
  const std::string_view t(datatype + 4);
  if (t == "Int8" || t == "Uint8" || t == "Float8e4m3" || t == "Float8e5m2") return 1;
  if (t == "Float16" || t == "Bfloat16") return 2;
  if (t == "Int32" || t == "Uint32" || t == "Float32") return 4;
  if (t == "Int64" || t == "Uint64" || t == "Float64") return 8;
  return 0;
}

uint64_t element_size(const char* datatype) {
  PluginThread& t = t_plugin;
  if (datatype != t.datatype || !datatype) {
    t.datatype_size = element_size_of(datatype);
    t.datatype = datatype;
  }
  return t.datatype_size;
}

// Whether an op's bytes are its count times the communicator's size (nccl-tests conventions, as
// the wrappers size them: AllGather's sendcount, ReduceScatter's recvcount, the per-peer counts).
bool times_ranks(core::CommOp op) {
  return op == core::CommOp::kAllGather || op == core::CommOp::kReduceScatter || op == core::CommOp::kAlltoAll ||
         op == core::CommOp::kGather || op == core::CommOp::kScatter;
}

// The group's members for the GPU aggregator (members beyond its record fold into the first).
void note_member(PluginThread& t, const Call& call) {
  if (t.group_count < kGroupMembers) {
    t.group_members[t.group_count++] = core::CommGroupMember{call.op, call.comm_id, call.seq, call.bytes};
  } else {
    t.group_members[0].bytes += call.bytes;
  }
}

// One NCCL call seen through the plugin (its API event, or its task event before v5, which has
// no API events): the call traintime counts for it (op kNone: none). A call made through an
// interposed wrapper is counted there, once, and is the wrapper's.
Call count_call(Context* c, const char* func, size_t count, const char* datatype) {
  if (!recording()) return Call{};
  if (const Call* w = interposed_call()) {
    // Counted by the wrapper; the communicator was seen both ways.
    if (w->comm_id != 0) {
      if (core::CommCallTable::Counters* k = call_table().counters(w->comm_id - 1)) k->note_seen(core::kSeenByPlugin);
    }
    return *w;
  }
  const core::CommOp op = op_of(func);
  if (op == core::CommOp::kNone || op == core::CommOp::kUnknown) return Call{};
  uint32_t id = c->comm_id.load(std::memory_order_acquire);
  if (id == 0) {
    // The context names the communicator for its life; NCCL's commHash names it on every rank.
    const uint32_t index = call_table().register_communicator(reinterpret_cast<uintptr_t>(c), c->nranks, c->rank,
                                                              c->comm_hash);
    if (index == core::CommCallTable::kNoComm) return Call{};
    id = index + 1;
    c->comm_id.store(id, std::memory_order_release);
  }
  core::CommCallTable::Counters* k = call_table().counters(id - 1);
  if (!k) return Call{};
  uint64_t bytes = static_cast<uint64_t>(count) * element_size(datatype);
  if (times_ranks(op)) bytes *= static_cast<uint64_t>(c->nranks);
  const uint64_t seq = k->next_seq();
  k->count(op, bytes, seq);
  k->note_seen(core::kSeenByPlugin);
  const Call call{op, false, id, seq, bytes, 0};
  PluginThread& t = t_plugin;
  if (!t.group_has_call) {
    t.group_call = call;
    t.group_has_call = true;
    t.group_count = 0;
  } else {
    t.group_call.bytes += bytes;
  }
  note_member(t, call);
  g_counted.fetch_add(1, std::memory_order_relaxed);
  note_counted_call();
  return call;
}

// An API event's call, entered for its task event (the seqNumber join above).
void enter_for_task(Context* c, const Call& call, const char* func) {
  const core::CommOp op = call.op != core::CommOp::kNone ? call.op : op_of(func);
  const auto oi = static_cast<std::size_t>(op);
  if (oi >= core::kCommOpCount) return;
  const uint64_t n = c->api_calls[oi]++;
  Joined& j = c->joined[oi][n % kJoinSlots];
  j.number.store(~uint64_t{0}, std::memory_order_relaxed);
  j.call = call;
  j.number.store(n, std::memory_order_release);
}

// An API event's call (the wrapper's or the plugin's own): entered for its task event, and the
// communicator its proxy and kernel-channel rows name (proxy_progress).
void api_call(Context* c, const Call& call, const char* func) {
  enter_for_task(c, call, func);
  c->progress_comm.store(call.comm_id, std::memory_order_relaxed);
}

// The call of a task event: NCCL's number of it within its type (coll.seqNumber; p2p: counted).
Call call_of_task(Context* c, const char* func, bool p2p, uint64_t seq_number) {
  const core::CommOp op = op_of(func);
  const auto oi = static_cast<std::size_t>(op);
  if (oi >= core::kCommOpCount) return Call{};
  const uint64_t n = p2p ? c->p2p_tasks[oi]++ : seq_number;
  const Joined& j = c->joined[oi][n % kJoinSlots];
  if (j.number.load(std::memory_order_acquire) != n) return Call{};
  return j.call;
}

void* their(void* handle) { return handle ? static_cast<Handle*>(handle)->their : nullptr; }

// ---- the chained plugin, in its own version ----
bool their_init(Context* c, np::DebugLogger log) {
  const Chained& ch = chained();
  int* mask = reinterpret_cast<int*>(&c->their_mask);  // std::atomic<int> is an int (static_assert below)
  ncclResult_t r = ncclInternalError;
  switch (ch.version) {
    case 7: r = static_cast<const np::PluginV7*>(ch.table)->init(&c->their_context, c->comm_hash, mask, c->name, 1, c->nranks, c->rank, log); break;
    case 6: r = static_cast<const np::PluginV6*>(ch.table)->init(&c->their_context, c->comm_hash, mask, c->name, 1, c->nranks, c->rank, log); break;
    case 5: r = static_cast<const np::PluginV5*>(ch.table)->init(&c->their_context, c->comm_hash, mask, c->name, 1, c->nranks, c->rank, log); break;
    case 4: r = static_cast<const np::PluginV4*>(ch.table)->init(&c->their_context, mask, c->name, c->comm_hash, 1, c->nranks, c->rank, log); break;
    case 3: r = static_cast<const np::PluginV3*>(ch.table)->init(&c->their_context, mask); break;
    default: return false;
  }
  if (r != ncclSuccess) {
    c->their_context = nullptr;
    c->their_mask.store(0, std::memory_order_relaxed);
  }
  return r == ncclSuccess;
}
static_assert(sizeof(std::atomic<int>) == sizeof(int) && std::atomic<int>::is_always_lock_free);

void* their_start(Context* c, np::EventDescrV7 d) {
  d.parent = their(d.parent);
  if (d.type == np::kColl) d.coll.parent_group = their(d.coll.parent_group);
  if (d.type == np::kP2p) d.p2p.parent_group = their(d.p2p.parent_group);
  const Chained& ch = chained();
  void* h = nullptr;
  switch (ch.version) {
    case 7: static_cast<const np::PluginV7*>(ch.table)->start_event(c->their_context, &h, &d); break;
    case 6: {
      np::EventDescrV6 o = np::convert_v5_like<np::EventDescrV6>(d);
      static_cast<const np::PluginV6*>(ch.table)->start_event(c->their_context, &h, &o);
      break;
    }
    case 5: {
      np::EventDescrV5 o = np::convert_v5_like<np::EventDescrV5>(d);
      static_cast<const np::PluginV5*>(ch.table)->start_event(c->their_context, &h, &o);
      break;
    }
    case 4: {
      np::EventDescrV4 o;
      if (np::to_v4(d, &o)) static_cast<const np::PluginV4*>(ch.table)->start_event(c->their_context, &h, &o);
      break;
    }
    case 3: {
      np::EventDescrV3 o;
      if (d.type != np::kKernelCh && np::to_v3(d, c->name, c->comm_hash, &o))
        static_cast<const np::PluginV3*>(ch.table)->start_event(c->their_context, &h, &o);
      break;
    }
    default: break;
  }
  return h;
}

// ---- the tables' callbacks ----
Context* new_context(int* mask, uint64_t comm_hash, const char* name, int nranks, int rank) {
  auto* c = new (std::nothrow) Context();
  if (!c) return nullptr;
  c->nccl_mask = mask;
  c->comm_hash = comm_hash;
  c->nranks = nranks;
  c->rank = rank;
  if (name) std::strncpy(c->name, name, sizeof c->name - 1);
  c->progress_owner = proxy::new_owner();
  return c;
}

ncclResult_t init_common(int version, void** context, int* mask, uint64_t comm_hash, const char* name, int nranks,
                         int rank, np::DebugLogger log) {
  resolve_chained();
  if (kernel_ch::wanted()) g_own_mask.store(kBaseMask | np::kKernelCh, std::memory_order_relaxed);
  g_pid.store(static_cast<int32_t>(getpid()), std::memory_order_relaxed);
  Context* c = new_context(mask, comm_hash, name, nranks, rank);
  if (!c) return ncclSystemError;  // NCCL continues without the profiler
  c->nccl_version = version;
  if (chained().version && !their_init(c, log ? log : reinterpret_cast<np::DebugLogger>(&nccl_log_noop)))
    g_their_init_failures.fetch_add(1, std::memory_order_relaxed);
  g_inits.fetch_add(1, std::memory_order_relaxed);
  g_nccl_version.store(version, std::memory_order_relaxed);
  refresh_mask(c);
  *context = c;
  return ncclSuccess;
}

// A ProxyOp or KernelCh event with a proxy_progress row has its handle beside the row, and a
// ProxyStep one of NCCL_STEPS (8) slots of its op's row, by step, as NCCL keeps them
// (pHandles[step % NCCL_STEPS]): a long op's steps would otherwise cycle the ring under its
// own handle while NCCL still holds it.
constexpr uint32_t kStepSlots = 8;
ProxyHandle g_row_handles[proxy::kRows];
ProxyHandle g_step_handles[proxy::kRows * kStepSlots];

// The ProxyOp a ProxyStep names as parent (NULL when NCCL names none we started).
const ProxyHandle* op_of_step(const void* parent) {
  const auto* h = static_cast<const Handle*>(parent);
  return h && h->type == np::kProxyOp ? static_cast<const ProxyHandle*>(h) : nullptr;
}

// A PXN op (another process's, NCCL's proxy here progresses it) and its steps: neither its
// context nor its parent is ours, so neither is read; the chained plugin, whose context for it
// lives in that other process, is not called.
bool pxn_event(const np::EventDescrV7& d) {
  if (d.type == np::kProxyOp) return d.proxy_op.pid != g_pid.load(std::memory_order_relaxed);
  if (d.type == np::kProxyStep) {
    const ProxyHandle* op = op_of_step(d.parent);
    return op && op->context == nullptr;
  }
  return false;
}

// A proxy event's handle, with proxy_progress's row (read from our own handles only: a parent
// is always one of ours): beside the row, else from the proxy ring.
ProxyHandle* open_proxy_handle(Context* c, const np::EventDescrV7& d, void* theirs) {
  const auto* parent = static_cast<const Handle*>(d.parent);
  uint32_t row = proxy::kNone;
  ProxyHandle* slot = nullptr;
  kernel_ch::Place place{};
  uint64_t channel_start = 0;
  switch (d.type) {
    case np::kProxyOp: {
      const bool pxn = c == nullptr;
      const uint32_t comm = pxn ? 0 : c->progress_comm.load(std::memory_order_relaxed);
      const uint8_t op = pxn || !parent ? static_cast<uint8_t>(core::CommOp::kUnknown) : parent->op;
      const uint64_t seq = pxn || !parent ? ProxyProgress::kUnknown : parent->seq;
      row = proxy::start_op(pxn ? 0 : c->progress_owner, comm, d.rank, op, seq, d.proxy_op.channel_id, d.proxy_op.peer, d.proxy_op.n_steps,
                            d.proxy_op.is_send != 0, pxn);
      if (row != proxy::kNone) slot = &g_row_handles[row - 1];
      break;
    }
    case np::kProxyStep:
      if (const ProxyHandle* op = op_of_step(parent)) {
        row = op->row;
        proxy::start_step(row, d.proxy_step.step);
        if (row != proxy::kNone)
          slot = &g_step_handles[(row - 1) * kStepSlots + static_cast<uint32_t>(d.proxy_step.step) % kStepSlots];
      }
      break;
    case np::kKernelCh:
      row = proxy::start_kernel_channel(c->progress_owner, c->progress_comm.load(std::memory_order_relaxed), d.rank,
                                        parent ? parent->op : static_cast<uint8_t>(core::CommOp::kUnknown),
                                        parent ? parent->seq : ProxyProgress::kUnknown, d.kernel_ch.channel_id);
      if (row != proxy::kNone) slot = &g_row_handles[row - 1];
      if (parent) place = parent->place;
      channel_start = d.kernel_ch.gpu_timer;
      break;
    default: break;
  }
  ProxyHandle* h = slot ? slot : g_proxy_handles.take();
  h->type = d.type;
  h->their = theirs;
  h->place = place;
  h->seq = ProxyProgress::kUnknown;
  h->op = static_cast<uint8_t>(core::CommOp::kUnknown);
  h->context = c;
  h->row = row;
  h->channel_start = channel_start;
  h->channel_stop = 0;
  h->bytes = 0;
  return h;
}

// A calling-thread event's handle: its own from the ring where it carries something (a task's
// op and seq, a kernel's place, the chained plugin's handle), else its kind's shared one.
Handle* open_handle(const np::EventDescrV7& d, void* theirs, const kernel_ch::Place& place) {
  uint8_t op = static_cast<uint8_t>(core::CommOp::kUnknown);
  uint64_t seq = ProxyProgress::kUnknown;
  switch (d.type) {
    case np::kColl:
      op = static_cast<uint8_t>(op_of(d.coll.func));
      seq = d.coll.seq_number;
      proxy::note_task();
      break;
    case np::kP2p:
      op = static_cast<uint8_t>(op_of(d.p2p.func));
      proxy::note_task();
      break;
    default:
      if (!theirs && place.serial == 0)
        if (Handle* shared = shared_handle(d.type)) return shared;
      break;
  }
  Handle* h = g_handles.take();
  h->type = d.type;
  h->their = theirs;
  h->place = place;
  h->seq = seq;
  h->op = op;
  return h;
}

template <typename D>
ncclResult_t start_event(void* context, void** handle, D* descr) {
  *handle = nullptr;
  auto* c = static_cast<Context*>(context);
  if (!c || !descr) return ncclSuccess;
  // v7 is read in place; older versions are converted to it once.
  np::EventDescrV7 converted;
  if constexpr (!std::is_same_v<D, np::EventDescrV7>) converted = np::to_v7(*descr);
  const np::EventDescrV7& d = [&]() -> const np::EventDescrV7& {
    if constexpr (std::is_same_v<D, np::EventDescrV7>) return *descr;
    else return converted;
  }();
  if (pxn_event(d)) {
    *handle = open_proxy_handle(nullptr, d, nullptr);
    return ncclSuccess;
  }
  const int their_mask = c->their_mask.load(std::memory_order_relaxed);
  void* theirs = c->their_context && np::nccl_starts(d.type, static_cast<uint64_t>(their_mask)) ? their_start(c, d) : nullptr;
  const int mask = own_mask();
  const bool ours = np::nccl_starts(d.type, static_cast<uint64_t>(mask));
  // The kinds the rank file reports (one locked add per collective each, not per event).
  if (ours && (d.type == np::kColl || d.type == np::kCollApi))
    g_events[__builtin_ctzll(d.type) & 15].fetch_add(1, std::memory_order_relaxed);
  kernel_ch::Place place{};
  switch (d.type) {
    case np::kKernelLaunch:
      if (PluginThread& t = t_plugin; t.group_has_call) {
        detail::LaunchThread& launch = detail::t_launch;
        launch.call = t.group_call;
        if (t.group_count > 1) {
          // A group counted here: its members, for the aggregator to split the kernel across.
          launch.call.group_id = next_group_id();
          call_table().record_group(launch.call.group_id, t.group_members, t.group_count);
        }
        launch.active = true;
      }
      break;
    case np::kCollApi:
      if (c->nccl_version >= 5) api_call(c, count_call(c, d.coll_api.func, d.coll_api.count, d.coll_api.datatype), d.coll_api.func);
      refresh_mask(c);  // the chained plugin may have changed its mask; ProxyStep may have been switched
      break;
    case np::kP2pApi:
      if (c->nccl_version >= 5) api_call(c, count_call(c, d.p2p_api.func, d.p2p_api.count, d.p2p_api.datatype), d.p2p_api.func);
      refresh_mask(c);
      break;
    case np::kGroupApi: refresh_mask(c); break;
    case np::kGroup:
      if (mask & np::kKernelCh) place.serial = kernel_ch::open_group();
      break;
    case np::kColl:
    case np::kP2p: {
      const bool p2p = d.type == np::kP2p;
      const char* func = p2p ? d.p2p.func : d.coll.func;
      const Call call = c->nccl_version >= 5 ? call_of_task(c, func, p2p, d.coll.seq_number)
                        : p2p ? count_call(c, func, d.p2p.count, d.p2p.datatype)
                              : count_call(c, func, d.coll.count, d.coll.datatype);
      if (c->nccl_version < 5) c->progress_comm.store(call.comm_id, std::memory_order_relaxed);
      if (mask & np::kKernelCh) {
        void* group = p2p ? d.p2p.parent_group : d.coll.parent_group;
        // v4 has no parent group: its task events' parent is the Group event.
        if (!group && d.parent && static_cast<Handle*>(d.parent)->type == np::kGroup) group = d.parent;
        const uint64_t serial = group ? static_cast<Handle*>(group)->place.serial : 0;
        place = kernel_ch::add_member(serial, call, p2p ? d.p2p.n_channels : d.coll.n_channels);
      }
      break;
    }
    default: break;
  }
  // The progress table's kinds are asked only for events neither mask wanted (proxy events).
  if (!ours && !theirs && !np::nccl_starts(d.type, static_cast<uint64_t>(proxy::mask_bits()))) return ncclSuccess;
  *handle = is_proxy(d.type) ? static_cast<Handle*>(open_proxy_handle(c, d, theirs)) : open_handle(d, theirs, place);
  return ncclSuccess;
}

// proxy_progress at an event's stop: last, since freeing an op's row frees the handle beside it.
void progress_stop(Handle* handle) {
  if (!is_proxy(handle->type)) return;
  auto* h = static_cast<ProxyHandle*>(handle);
  if (h->type == np::kProxyOp) proxy::stop_op(h->row);
  if (h->type == np::kProxyStep) proxy::stop_step(h->row, h->bytes);
  if (h->type == np::kKernelCh) proxy::stop_kernel_channel(h->row);
}

ncclResult_t stop_event(void* handle) {
  if (handle) {
    Handle* h = static_cast<Handle*>(handle);
    switch (h->type) {
      case np::kKernelLaunch: detail::t_launch.active = false; break;
      case np::kGroupApi: t_plugin.group_has_call = false; break;
      case np::kGroup: kernel_ch::close_group(h->place.serial); break;
      case np::kKernelCh:
        if (h->place.serial) {
          const auto* ch = static_cast<const ProxyHandle*>(h);
          kernel_ch::channel_done(ch->place, ch->channel_start, ch->channel_stop);
        }
        break;
      default: break;
    }
  }
  // Every version's stopEvent has the same place and signature.
  if (void* theirs = their(handle)) static_cast<const np::PluginV7*>(chained().table)->stop_event(theirs);
  if (handle) progress_stop(static_cast<Handle*>(handle));
  return ncclSuccess;
}

// NCCL v4 ... v7 pass np::StateArgsV4 (one layout); v3 its own.
template <typename Args>
ncclResult_t record_event_state(void* handle, int state, Args* args) {
  if (handle && is_proxy(static_cast<Handle*>(handle)->type)) {
    auto* h = static_cast<ProxyHandle*>(handle);
    if constexpr (!std::is_same_v<Args, np::StateArgsV3>) {
      if (args && state == np::kKernelChStop && h->type == np::kKernelCh) h->channel_stop = args->kernel_ch.gpu_timer;
    }
    if (h->type == np::kProxyOp) proxy::op_state(h->row, state);
    if (h->type == np::kProxyStep) {
      proxy::step_state(h->row, state);
      // transSize: the bytes the step sent or received (SendWait, RecvFlushWait carry them).
      if (args && (state == np::kProxyStepSendWait || state == np::kProxyStepRecvFlushWait)) {
        if constexpr (std::is_same_v<Args, np::StateArgsV3>) {
          h->bytes = args->proxy_op.trans_size;
        } else {
          h->bytes = args->proxy_step.trans_size;
        }
      }
    }
  }
  void* theirs = their(handle);
  if (!theirs) return ncclSuccess;
  const Chained& ch = chained();
  if (ch.version >= 4) {
    np::StateArgsV4 a{};
    if (args) {
      if constexpr (std::is_same_v<Args, np::StateArgsV3>) {
        a.proxy_step.trans_size = args->proxy_op.trans_size;
      } else {
        a = *args;
      }
    }
    static_cast<const np::PluginV4*>(ch.table)->record_event_state(theirs, state, args ? &a : nullptr);
  } else {
    np::StateArgsV3 a{};
    if (args) {
      if constexpr (std::is_same_v<Args, np::StateArgsV3>) {
        a = *args;
      } else {
        a.proxy_op.trans_size = args->proxy_step.trans_size;
      }
    }
    static_cast<const np::PluginV3*>(ch.table)->record_event_state(theirs, state, args ? &a : nullptr);
  }
  return ncclSuccess;
}

ncclResult_t finalize(void* context) {
  auto* c = static_cast<Context*>(context);
  if (!c) return ncclSuccess;
  if (c->their_context) static_cast<const np::PluginV7*>(chained().table)->finalize(c->their_context);
  // Ops NCCL never stopped (the communicator aborted or destroyed mid-collective): their rows.
  proxy::free_owner(c->progress_owner);
  // The context's address may name the next communicator: its counters stay, its key is retired.
  if (const uint32_t id = c->comm_id.load(std::memory_order_acquire); id != 0 && recording())
    call_table().retire_communicator(id - 1);
  delete c;
  return ncclSuccess;
}

ncclResult_t init_v5_like_7(void** ctx, uint64_t hash, int* mask, const char* name, int, int nranks, int rank,
                            np::DebugLogger log) {
  return init_common(7, ctx, mask, hash, name, nranks, rank, log);
}
ncclResult_t init_v5_like_6(void** ctx, uint64_t hash, int* mask, const char* name, int, int nranks, int rank,
                            np::DebugLogger log) {
  return init_common(6, ctx, mask, hash, name, nranks, rank, log);
}
ncclResult_t init_v5_like_5(void** ctx, uint64_t hash, int* mask, const char* name, int, int nranks, int rank,
                            np::DebugLogger log) {
  return init_common(5, ctx, mask, hash, name, nranks, rank, log);
}
ncclResult_t init_v4(void** ctx, int* mask, const char* name, uint64_t hash, int, int nranks, int rank,
                     np::DebugLogger log) {
  return init_common(4, ctx, mask, hash, name, nranks, rank, log);
}
ncclResult_t init_v3(void** ctx, int* mask) { return init_common(3, ctx, mask, 0, nullptr, 0, 0, nullptr); }

}  // namespace

uint64_t inits() noexcept { return g_inits.load(std::memory_order_relaxed); }

void add_to_summary(core::Section& section) {
  const uint64_t inits = g_inits.load(std::memory_order_relaxed);
  if (inits == 0) return;
  section.count(kCounters, Counter::profiler_plugin_inits, inits);
  section.count(kCounters, Counter::profiler_plugin_version,
                static_cast<uint64_t>(g_nccl_version.load(std::memory_order_relaxed)));
  section.count(kCounters, Counter::profiler_plugin_chained_version, static_cast<uint64_t>(chained().version));
  section.count(kCounters, Counter::profiler_plugin_chained_init_failures,
                g_their_init_failures.load(std::memory_order_relaxed));
  section.count(kCounters, Counter::profiler_plugin_counted_calls, g_counted.load(std::memory_order_relaxed));
  section.count(kCounters, Counter::profiler_plugin_coll_events,
                g_events[__builtin_ctz(np::kColl)].load(std::memory_order_relaxed));
  section.count(kCounters, Counter::profiler_plugin_coll_api_events,
                g_events[__builtin_ctz(np::kCollApi)].load(std::memory_order_relaxed));
  kernel_ch::add_counters(section);
}

void set_kernel_ch_request(const std::string& setting, bool fork_child) noexcept {
  if (fork_child) kernel_ch::forget_after_fork();
  kernel_ch::set_request(setting);
}
void add_kernel_ch_times(core::CommSummary::KernelCh& out) { kernel_ch::add_to(out); }

}  // namespace traintime::nccl::plugin

namespace tp = traintime::nccl::plugin;
namespace tnp = traintime::nccl_profiler;

extern "C" {
__attribute__((visibility("default"))) tnp::PluginV7 ncclProfiler_v7 = {
    "traintime", tp::init_v5_like_7, tp::start_event<tnp::EventDescrV7>, tp::stop_event,
    tp::record_event_state<tnp::StateArgsV7>, tp::finalize};
__attribute__((visibility("default"))) tnp::PluginV6 ncclProfiler_v6 = {
    "traintime", tp::init_v5_like_6, tp::start_event<tnp::EventDescrV6>, tp::stop_event,
    tp::record_event_state<tnp::StateArgsV5>, tp::finalize};
__attribute__((visibility("default"))) tnp::PluginV5 ncclProfiler_v5 = {
    "traintime", tp::init_v5_like_5, tp::start_event<tnp::EventDescrV5>, tp::stop_event,
    tp::record_event_state<tnp::StateArgsV5>, tp::finalize};
__attribute__((visibility("default"))) tnp::PluginV4 ncclProfiler_v4 = {
    "traintime", tp::init_v4, tp::start_event<tnp::EventDescrV4>, tp::stop_event,
    tp::record_event_state<tnp::StateArgsV4>, tp::finalize};
__attribute__((visibility("default"))) tnp::PluginV3 ncclProfiler_v3 = {
    "traintime", tp::init_v3, tp::start_event<tnp::EventDescrV3>, tp::stop_event,
    tp::record_event_state<tnp::StateArgsV3>, tp::finalize};
}
