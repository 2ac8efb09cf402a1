// SIMULATION: the virtual GPU of the fake libcuda.so.1 — host clock, streams, events, graphs,
// the executed timeline, and the hooks through which the fake CUPTI observes it.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <chrono>
#include <mutex>
#include <thread>
#include <string>
#include <unordered_map>
#include <vector>

#include <cuda.h>
#include <driver_types.h>

#include "simgpu/engine.h"
#include "sim_costs.h"

namespace {

// The end of work that never completes (simgpuHangNextCollective).
constexpr uint64_t kNever = ~uint64_t{0};

// A synchronisation that waits for work that never completes: blocks, as CUDA would, until the
// process is ended from outside.
[[noreturn]] void block_forever() {
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

struct Stream {
  uint32_t id = 0;
  uint64_t free_at = 0;  // virtual GPU time the last enqueued work ends
  struct Graph* capture = nullptr;
};

struct Event {
  uint64_t time = 0;
  bool recorded = false;
};

struct Node {
  uint64_t id = 0;
  simgpu_work work{};  // what was captured: kind, name, sizes, label, correlation ids
  uint64_t duration_ns = 0;
  bool has_collective = false;
  simgpu_collective collective{};  // an NCCL call captured into the graph runs on every replay
};

struct Graph {
  uint32_t id = 0;
  std::vector<std::unique_ptr<Node>> nodes;
};

// What CUDA makes of a graph at instantiation: clones of its nodes with ids of their own, which
// the records of every replay carry (the source graph may be destroyed right away, as PyTorch's
// CUDAGraph::capture_end does).
struct Exec {
  uint32_t id = 0;
  Graph* graph = nullptr;
  std::vector<std::unique_ptr<Node>> clones;
};

struct KernelInfo {
  std::string name;
};

struct CommState {
  uint64_t last_end = 0;
};

struct Engine {
  std::mutex mu;
  std::atomic<uint64_t> host_ns{simgpu::kTimeBase};
  std::atomic<uint32_t> next_correlation{1};
  std::atomic<const simgpu_tool_hooks*> hooks{nullptr};
  Stream default_stream;
  std::vector<std::unique_ptr<Stream>> streams;
  // Graphs outlive cudaGraphDestroy here: graph execs share their nodes.
  std::vector<std::unique_ptr<Graph>> graphs;
  uint32_t next_stream_id = simgpu::kFirstStreamId;
  uint32_t next_graph_id = 1;
  uint32_t next_exec_id = 1;
  uint64_t next_node_id = 1;
  std::vector<simgpu_work> timeline;  // only while keep_timeline
  bool keep_timeline = false;
  uint64_t executed = 0;
  uint64_t gpu_end = 0;
  std::unordered_map<const void*, std::unique_ptr<KernelInfo>> kernels_by_host;
  std::unordered_map<const void*, KernelInfo*> kernels_by_handle;
  std::map<uint64_t, CommState> comms;
  std::vector<double> slowdown;  // index = rank
  // SIMGPU_SLOWDOWN_FROM=N: the slowdown applies once this process scheduled N collectives (to
  // the compute launched after the N-th and the collectives after it; 0: from the start).
  uint64_t slowdown_from = 0;
  std::atomic<uint64_t> collectives{0};
  std::vector<double> throttle;  // index = rank (SIMGPU_THROTTLE)
  std::vector<double> memory_used_gib;  // index = rank (SIMGPU_MEMORY_USED); 0: the nominal
  int rank = 0;
  bool hang_next_collective = false;  // simgpuHangNextCollective
  std::atomic<bool> replay_clock{false};  // simgpuReplayClock: API calls cost no host time
  uint64_t replay_clamped = 0;            // scheduled work moved to its launch
  // The ends of the work launched and not yet finished at the host's time (a min-heap): a launch
  // blocks while queue_depth() of them are pending, as a real GPU's launch queue makes it do.
  std::vector<uint64_t> pending_ends;

  Engine() {
    default_stream.id = simgpu::kDefaultStreamId;
    rank = simgpu::rank_from_env();
    slowdown = simgpu::parse_slowdown(std::getenv("SIMGPU_SLOWDOWN"));
    if (const char* from = std::getenv("SIMGPU_SLOWDOWN_FROM")) slowdown_from = std::strtoull(from, nullptr, 10);
    throttle = simgpu::parse_slowdown(std::getenv("SIMGPU_THROTTLE"));  // the same RANK:FACTOR list
    memory_used_gib = simgpu::parse_slowdown(std::getenv("SIMGPU_MEMORY_USED"), 0.0);
  }
};

Engine& engine() {
  static Engine* e = new Engine();  // never destroyed: atexit handlers of tools still use it
  return *e;
}

thread_local uint64_t tls_label = 0;
thread_local simgpu_api_frame* tls_frame = nullptr;
thread_local bool tls_has_collective = false;
thread_local simgpu_collective tls_collective{};
thread_local bool tls_has_collective_span = false;  // simgpu_last_collective_span
thread_local uint64_t tls_collective_start = 0, tls_collective_end = 0;
// simgpuReplayNext: this thread's schedule, taken one entry per enqueued piece of work.
thread_local std::vector<simgpu_replay_work> tls_replay;
thread_local size_t tls_replay_next = 0;
thread_local uint32_t tls_next_stream_id = 0;  // simgpuSetNextStreamId

Stream* resolve(Engine& e, void* stream) {
  return stream ? static_cast<Stream*>(stream) : &e.default_stream;
}

void advance_host_to(Engine& e, uint64_t t) {
  uint64_t cur = e.host_ns.load(std::memory_order_relaxed);
  while (cur < t && !e.host_ns.compare_exchange_weak(cur, t, std::memory_order_relaxed)) {
  }
}

// A real GPU runs a bounded number of launches ahead of the host: once its launch queue is full
// (about a thousand pending launches on current drivers), cudaLaunchKernel and the copies block
// until the oldest finishes. So the host is never more than queue_depth() pieces of work ahead of
// the GPU, and the records of a long launch-bound loop complete (and can be delivered) while the
// loop runs, not all at its first synchronisation. Replays keep their recorded clock.
// SIMGPU_QUEUE_DEPTH=N sets it (0: unbounded, the host as far ahead as it likes).
size_t queue_depth() {
  static const size_t depth = [] {
    const char* v = std::getenv("SIMGPU_QUEUE_DEPTH");
    return v && *v ? static_cast<size_t>(std::strtoull(v, nullptr, 10)) : size_t{1024};
  }();
  return depth;
}

// Before a launch (engine lock held): waits, in host time, until the GPU has room for it; false
// when it never will (the queue is full behind work that never ends: the caller blocks for ever,
// once it has let the engine lock go).
bool replaying(const Engine& e) {
  return e.replay_clock.load(std::memory_order_relaxed) || tls_replay_next < tls_replay.size();
}

bool wait_for_queue_room(Engine& e) {
  if (replaying(e) || queue_depth() == 0) return true;
  auto& h = e.pending_ends;
  const auto later = std::greater<uint64_t>();
  while (!h.empty() && (h.front() <= e.host_ns.load(std::memory_order_relaxed) || h.size() >= queue_depth())) {
    if (h.front() == kNever) return false;
    advance_host_to(e, h.front());
    std::pop_heap(h.begin(), h.end(), later);
    h.pop_back();
  }
  return true;
}

void queued(Engine& e, const simgpu_work& done, bool bounded) {
  if (!bounded || queue_depth() == 0) return;
  e.pending_ends.push_back(done.end_ns);
  std::push_heap(e.pending_ends.begin(), e.pending_ends.end(), std::greater<uint64_t>());
}

void correlation_ids(simgpu_work& w) {
  uint32_t runtime_id = 0, driver_id = 0;
  for (simgpu_api_frame* f = tls_frame; f; f = f->outer) {
    if (f->domain == 2 && !runtime_id) runtime_id = f->correlation_id;
    if (f->domain == 1 && !driver_id) driver_id = f->correlation_id;
  }
  w.runtime_correlation_id = runtime_id;
  // Real CUPTI correlates a kernel with the API that launched it (the runtime call when there
  // is one); memcpy/memset records carry the driver call's id and the runtime id separately.
  if (w.kind == SIMGPU_KERNEL)
    w.correlation_id = runtime_id ? runtime_id : driver_id;
  else
    w.correlation_id = driver_id ? driver_id : runtime_id;
}

// Runs `w` on stream `s` (engine lock held); returns the executed copy.
simgpu_work execute(Engine& e, Stream* s, simgpu_work w, uint64_t duration_ns,
                    const simgpu_collective* coll) {
  w.stream_id = s->id;
  w.launch_ns = e.host_ns.load(std::memory_order_relaxed);
  if (tls_replay_next < tls_replay.size()) {
    // sim_replay: the recorded times, never before the launch (Kineto's clock conversion can put
    // a start a little early); the stream's own order is the recording's, not enforced again.
    const simgpu_replay_work& r = tls_replay[tls_replay_next++];
    w.start_ns = std::max(r.start_ns, w.launch_ns);
    if (w.start_ns > r.start_ns) ++e.replay_clamped;
    w.end_ns = w.start_ns + r.duration_ns;
    if (r.stream_id != 0) w.stream_id = r.stream_id;
    s->free_at = std::max(s->free_at, w.end_ns);
    if (coll) e.comms[coll->comm_key].last_end = w.end_ns;
    e.gpu_end = std::max(e.gpu_end, w.end_ns);
    w.seq = e.executed++;
    if (e.keep_timeline) e.timeline.push_back(w);
    return w;
  }
  const uint64_t ready = std::max(w.launch_ns + simgpu::kLaunchLatencyNs, s->free_at);
  w.start_ns = ready;
  if (ready == kNever || (coll && e.hang_next_collective)) {
    // A collective a peer never enters, or work queued behind it: it never runs.
    if (coll) e.hang_next_collective = false;
    w.start_ns = w.end_ns = kNever;
    s->free_at = kNever;
    w.seq = e.executed++;
    return w;
  }
  if (coll) {
    // Straggler model: every rank left the previous collective of this communicator together;
    // rank k reaches this one after the same work scaled by its own slowdown factor, so all
    // ranks finish at the slowest arrival plus the transfer. Pure arithmetic on the shared
    // schedule: deterministic and without real communication.
    CommState& cs = e.comms[coll->comm_key];
    const uint64_t last = cs.last_end ? cs.last_end : coll->epoch_ns;
    const uint64_t segment = ready > last ? ready - last : 0;
    const double self = simgpu_slowdown(coll->rank);
    uint64_t all_arrived = ready;
    for (int k = 0; k < coll->nranks; ++k) {
      const double f = simgpu_slowdown(k);
      const uint64_t arrival = last + static_cast<uint64_t>(std::llround(segment * (f / self)));
      all_arrived = std::max(all_arrived, arrival);
    }
    w.end_ns = all_arrived + coll->transfer_ns;
    cs.last_end = w.end_ns;
    e.collectives.fetch_add(1, std::memory_order_relaxed);
  } else {
    w.end_ns = ready + duration_ns;
  }
  s->free_at = w.end_ns;
  e.gpu_end = std::max(e.gpu_end, w.end_ns);
  w.seq = e.executed++;
  if (e.keep_timeline) e.timeline.push_back(w);
  return w;
}

void notify_work(Engine& e, const simgpu_work& w) {
  if (w.end_ns == kNever) return;  // never completes: no record of it ever
  const simgpu_tool_hooks* h = e.hooks.load(std::memory_order_acquire);
  if (h && h->work) h->work(&w);
}

}  // namespace

namespace simgpu {

int rank_from_env() {
  for (const char* var : {"RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    const char* v = std::getenv(var);
    if (v && *v) return std::atoi(v);
  }
  return 0;
}

std::vector<double> parse_slowdown(const char* spec, double unlisted) {
  std::vector<double> out;
  if (!spec) return out;
  std::string s(spec);
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    const std::string item = s.substr(pos, comma - pos);
    const size_t colon = item.find(':');
    if (colon != std::string::npos) {
      const int r = std::atoi(item.substr(0, colon).c_str());
      const double f = std::atof(item.substr(colon + 1).c_str());
      if (r >= 0 && r < 1 << 20 && f > 0) {
        if (out.size() <= static_cast<size_t>(r)) out.resize(r + 1, unlisted);
        out[r] = f;
      }
    }
    pos = comma + 1;
  }
  return out;
}

void raise_resource(int event, void* context, void* handle, void* graph) {
  const simgpu_tool_hooks* h = engine().hooks.load(std::memory_order_acquire);
  if (h && h->resource) h->resource(event, context, handle, graph);
}

}  // namespace simgpu

extern "C" {

void simgpu_set_tool_hooks(const simgpu_tool_hooks* hooks) {
  engine().hooks.store(hooks, std::memory_order_release);
}

void simgpu_report_memory(const simgpu_memory_op* op) {
  const simgpu_tool_hooks* h = engine().hooks.load(std::memory_order_acquire);
  if (h && h->memory) h->memory(op);
}

void simgpu_api_enter(simgpu_api_frame* f, int domain, uint32_t cbid, const char* function_name,
                      const char* symbol_name, const void* params, void* return_value) {
  Engine& e = engine();
  f->domain = domain;
  f->cbid = cbid;
  f->function_name = function_name;
  f->symbol_name = symbol_name;
  f->params = params;
  f->return_value = return_value;
  // SIMGPU_UNTRACED_IDS=N: as real CUPTI numbers every traced API call, N ids go to calls no
  // subscriber sees between any two that it does, so ids run ahead of records.
  static const uint32_t untraced = [] {
    const char* v = std::getenv("SIMGPU_UNTRACED_IDS");
    return v && *v ? static_cast<uint32_t>(std::strtoul(v, nullptr, 10)) : 0u;
  }();
  f->correlation_id = e.next_correlation.fetch_add(1 + untraced, std::memory_order_relaxed) + untraced;
  f->correlation_data = 0;
  const uint64_t cost = e.replay_clock.load(std::memory_order_relaxed)
                            ? 0
                            : domain == 2 ? simgpu::kRuntimeApiCostNs : simgpu::kDriverApiCostNs;
  f->start_ns = e.host_ns.fetch_add(cost, std::memory_order_relaxed);
  f->end_ns = 0;
  f->outer = tls_frame;
  tls_frame = f;
  const simgpu_tool_hooks* h = e.hooks.load(std::memory_order_acquire);
  if (h && h->api_enter) h->api_enter(f);
}

void simgpu_api_exit(simgpu_api_frame* f) {
  Engine& e = engine();
  f->end_ns = e.host_ns.load(std::memory_order_relaxed);
  const simgpu_tool_hooks* h = e.hooks.load(std::memory_order_acquire);
  if (h && h->api_exit) h->api_exit(f);
  tls_frame = f->outer;
}

simgpu_api_frame* simgpu_current_frame(void) { return tls_frame; }

uint64_t simgpu_host_now(void) { return engine().host_ns.load(std::memory_order_relaxed); }

int simgpu_enqueue(void* stream, const simgpu_launch* l) {
  Engine& e = engine();
  simgpu_work w{};
  w.kind = l->kind;
  w.name = l->name;
  w.bytes = l->bytes;
  w.copy_kind = l->copy_kind;
  w.src_kind = l->src_kind;
  w.dst_kind = l->dst_kind;
  w.memset_value = l->memset_value;
  std::memcpy(w.grid, l->grid, sizeof w.grid);
  std::memcpy(w.block, l->block, sizeof w.block);
  w.shared_mem = l->shared_mem;
  w.label = w.launch_label = tls_label;
  correlation_ids(w);
  simgpu_collective coll{};
  const simgpu_collective* collective = l->collective;
  if (!collective && tls_has_collective && l->kind == SIMGPU_KERNEL) {
    coll = tls_collective;
    collective = &coll;
  }
  tls_has_collective = false;
  if (collective) tls_has_collective_span = false;
  Graph* capturing = nullptr;
  Node* node = nullptr;
  simgpu_work done{};
  bool stuck = false;
  {
    std::lock_guard<std::mutex> lock(e.mu);
    Stream* s = resolve(e, stream);
    if (s->capture) {
      capturing = s->capture;
      auto n = std::make_unique<Node>();
      n->id = e.next_node_id++;
      n->work = w;
      n->duration_ns = l->duration_ns;
      if (collective) {
        n->has_collective = true;
        n->collective = *collective;
      }
      node = n.get();
      capturing->nodes.push_back(std::move(n));
    } else if (!(stuck = !wait_for_queue_room(e))) {
      const bool bounded = !replaying(e);  // before execute() takes this thread's replay entry
      done = execute(e, s, w, l->duration_ns, collective);
      queued(e, done, bounded);
      if (collective) {
        tls_has_collective_span = true;
        tls_collective_start = done.start_ns;
        tls_collective_end = done.end_ns;
      }
    }
  }
  if (stuck) block_forever();
  if (capturing) {
    simgpu::raise_resource(SIMGPU_RES_GRAPHNODE_CREATED, simgpu_context(), node, capturing);
    return cudaSuccess;
  }
  notify_work(e, done);
  return cudaSuccess;
}

void simgpu_set_next_collective(const simgpu_collective* c) {
  tls_has_collective = c != nullptr;
  if (c) tls_collective = *c;
}

int simgpu_last_collective_span(uint64_t* start_ns, uint64_t* end_ns) {
  if (!tls_has_collective_span) return 0;
  *start_ns = tls_collective_start;
  *end_ns = tls_collective_end;
  return 1;
}

int simgpu_stream_create(void** stream) {
  if (!stream) return cudaErrorInvalidValue;
  Engine& e = engine();
  Stream* s;
  {
    std::lock_guard<std::mutex> lock(e.mu);
    auto owned = std::make_unique<Stream>();
    if (tls_next_stream_id != 0) {
      owned->id = tls_next_stream_id;
      e.next_stream_id = std::max(e.next_stream_id, tls_next_stream_id + 1);
      tls_next_stream_id = 0;
    } else {
      owned->id = e.next_stream_id++;
    }
    owned->free_at = 0;
    s = owned.get();
    e.streams.push_back(std::move(owned));
  }
  *stream = s;
  simgpu::raise_resource(SIMGPU_RES_STREAM_CREATED, simgpu_context(), s, nullptr);
  return cudaSuccess;
}

int simgpu_stream_destroy(void* stream) {
  // Streams stay allocated: records and late calls may still name them.
  return stream ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

uint32_t simgpu_stream_id(void* stream) {
  Engine& e = engine();
  return resolve(e, stream)->id;
}

int simgpu_stream_synchronize(void* stream) {
  Engine& e = engine();
  uint64_t t;
  {
    std::lock_guard<std::mutex> lock(e.mu);
    t = resolve(e, stream)->free_at;
  }
  if (t == kNever) block_forever();
  advance_host_to(e, t);
  return cudaSuccess;
}

int simgpu_device_synchronize(void) {
  Engine& e = engine();
  uint64_t t;
  {
    std::lock_guard<std::mutex> lock(e.mu);
    t = e.default_stream.free_at;
    for (auto& s : e.streams) t = std::max(t, s->free_at);
  }
  if (t == kNever) block_forever();
  advance_host_to(e, t);
  return cudaSuccess;
}

int simgpu_event_create(void** event) {
  if (!event) return cudaErrorInvalidValue;
  *event = new Event();
  return cudaSuccess;
}

int simgpu_event_destroy(void* event) {
  delete static_cast<Event*>(event);
  return cudaSuccess;
}

int simgpu_event_record(void* event, void* stream) {
  if (!event) return cudaErrorInvalidResourceHandle;
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mu);
  Stream* s = resolve(e, stream);
  if (s->capture) return cudaErrorStreamCaptureUnsupported;
  auto* ev = static_cast<Event*>(event);
  ev->time = s->free_at;
  ev->recorded = true;
  return cudaSuccess;
}

int simgpu_stream_wait_event(void* stream, void* event) {
  if (!event) return cudaErrorInvalidResourceHandle;
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mu);
  Stream* s = resolve(e, stream);
  if (s->capture) return cudaErrorStreamCaptureUnsupported;
  auto* ev = static_cast<Event*>(event);
  if (ev->recorded) s->free_at = std::max(s->free_at, ev->time);
  return cudaSuccess;
}

int simgpu_event_synchronize(void* event) {
  if (!event) return cudaErrorInvalidResourceHandle;
  const uint64_t t = static_cast<Event*>(event)->time;
  if (t == kNever) block_forever();
  advance_host_to(engine(), t);
  return cudaSuccess;
}

int simgpu_begin_capture(void* stream) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mu);
  Stream* s = resolve(e, stream);
  if (!stream) return cudaErrorStreamCaptureUnsupported;  // the legacy stream cannot capture
  if (s->capture) return cudaErrorIllegalState;
  e.graphs.push_back(std::make_unique<Graph>());
  s->capture = e.graphs.back().get();
  s->capture->id = e.next_graph_id++;
  return cudaSuccess;
}

int simgpu_end_capture(void* stream, void** graph) {
  if (!graph) return cudaErrorInvalidValue;
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mu);
  Stream* s = resolve(e, stream);
  if (!s->capture) return cudaErrorIllegalState;
  *graph = s->capture;
  s->capture = nullptr;
  return cudaSuccess;
}

int simgpu_is_capturing(void* stream) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mu);
  return resolve(e, stream)->capture != nullptr;
}

int simgpu_graph_instantiate(void** exec, void* graph) {
  if (!exec || !graph) return cudaErrorInvalidValue;
  Engine& e = engine();
  auto* x = new Exec();
  std::vector<std::pair<Node*, Node*>> cloned;  // (clone, original), announced outside the lock
  {
    std::lock_guard<std::mutex> lock(e.mu);
    x->id = e.next_exec_id++;
    x->graph = static_cast<Graph*>(graph);
    for (const auto& n : x->graph->nodes) {
      auto c = std::make_unique<Node>(*n);
      c->id = e.next_node_id++;
      cloned.emplace_back(c.get(), n.get());
      x->clones.push_back(std::move(c));
    }
  }
  for (const auto& [clone, original] : cloned)
    simgpu::raise_resource(SIMGPU_RES_GRAPHNODE_CLONED, x, clone, original);
  *exec = x;
  return cudaSuccess;
}

int simgpu_graph_launch(void* exec, void* stream) {
  if (!exec) return cudaErrorInvalidValue;
  Engine& e = engine();
  auto* x = static_cast<Exec*>(exec);
  const uint64_t launch_label = tls_label;
  std::vector<simgpu_work> done;
  {
    std::lock_guard<std::mutex> lock(e.mu);
    Stream* s = resolve(e, stream);
    if (s->capture) return cudaErrorStreamCaptureUnsupported;
    done.reserve(x->clones.size());
    // A captured stream is a chain, so nodes run one after the other in capture order; records
    // carry the exec's clone ids.
    for (auto& n : x->clones) {
      simgpu_work w = n->work;
      correlation_ids(w);  // every node of one launch: the launch's correlation ids
      w.graph_id = x->graph->id;
      w.graph_node_id = n->id;
      w.launch_label = launch_label;
      done.push_back(execute(e, s, w, n->duration_ns, n->has_collective ? &n->collective : nullptr));
    }
  }
  for (const auto& w : done) notify_work(e, w);
  return cudaSuccess;
}

int simgpu_graph_destroy(void* graph) {
  if (!graph) return cudaErrorInvalidValue;
  simgpu::raise_resource(SIMGPU_RES_GRAPH_DESTROY_STARTING, simgpu_context(), nullptr, graph);
  // Kept: its nodes are the originals the execs were cloned from.
  return cudaSuccess;
}

int simgpu_graph_exec_destroy(void* exec) {
  if (!exec) return cudaErrorInvalidValue;
  simgpu::raise_resource(SIMGPU_RES_GRAPHEXEC_DESTROY_STARTING, simgpu_context(), exec, nullptr);
  delete static_cast<Exec*>(exec);
  return cudaSuccess;
}

uint32_t simgpu_graph_id(void* graph) { return graph ? static_cast<Graph*>(graph)->id : 0; }
uint32_t simgpu_graph_exec_id(void* exec) { return exec ? static_cast<Exec*>(exec)->id : 0; }
uint64_t simgpu_graph_node_id(void* node) { return node ? static_cast<Node*>(node)->id : 0; }

int simgpu_graph_node_type(void* node) {
  if (!node) return CU_GRAPH_NODE_TYPE_EMPTY;
  switch (static_cast<Node*>(node)->work.kind) {
    case SIMGPU_MEMCPY: return CU_GRAPH_NODE_TYPE_MEMCPY;
    case SIMGPU_MEMSET: return CU_GRAPH_NODE_TYPE_MEMSET;
    default: return CU_GRAPH_NODE_TYPE_KERNEL;
  }
}

void* simgpu_register_kernel(const void* host_fun, const char* device_name) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mu);
  auto& slot = e.kernels_by_host[host_fun];
  if (!slot) {
    slot = std::make_unique<KernelInfo>();
    slot->name = device_name ? device_name : "";
    e.kernels_by_handle[slot.get()] = slot.get();
  }
  return slot.get();
}

const char* simgpu_kernel_name(const void* kernel_or_host_fun) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mu);
  auto h = e.kernels_by_handle.find(kernel_or_host_fun);
  if (h != e.kernels_by_handle.end()) return h->second->name.c_str();
  auto f = e.kernels_by_host.find(kernel_or_host_fun);
  if (f != e.kernels_by_host.end()) return f->second->name.c_str();
  return nullptr;
}

void* simgpu_kernel_handle(const void* host_fun) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mu);
  auto f = e.kernels_by_host.find(host_fun);
  return f == e.kernels_by_host.end() ? nullptr : f->second.get();
}

namespace {
double factor_of(const std::vector<double>& v, int rank) {
  return rank >= 0 && static_cast<size_t>(rank) < v.size() ? v[rank] : 1.0;
}
}  // namespace

double simgpu_slowdown(int rank) {
  Engine& e = engine();
  const bool slowed = e.collectives.load(std::memory_order_relaxed) >= e.slowdown_from;
  return (slowed ? factor_of(e.slowdown, rank) : 1.0) / factor_of(e.throttle, rank);
}

double simgpu_throttle(int rank) { return factor_of(engine().throttle, rank); }

void simgpu_health_of(int rank, simgpu_health* out) {
  const double f = simgpu_throttle(rank);
  const bool throttled = f != 1.0;
  out->sm_clock_mhz = static_cast<unsigned>(SIMGPU_SM_CLOCK_MHZ * f + 0.5);
  out->mem_clock_mhz = SIMGPU_MEM_CLOCK_MHZ;
  out->power_mw = static_cast<unsigned>(SIMGPU_POWER_MW * f + 0.5);
  out->power_limit_mw = SIMGPU_POWER_LIMIT_MW;
  out->temperature_c = throttled ? SIMGPU_HOT_TEMPERATURE_C : SIMGPU_TEMPERATURE_C;
  out->clock_event_reasons = throttled ? SIMGPU_THROTTLE_REASONS : 0;
  out->pcie_gen = SIMGPU_PCIE_GEN;
  out->pcie_width = SIMGPU_PCIE_WIDTH;
  out->memory_total_bytes = 80ull << 30;  // cuDeviceTotalMem's
  const std::vector<double>& used = engine().memory_used_gib;
  const double gib = rank >= 0 && static_cast<size_t>(rank) < used.size() ? used[rank] : 0.0;
  out->memory_used_bytes = gib > 0 ? std::min<unsigned long long>(static_cast<unsigned long long>(gib * (1ull << 30)),
                                                                  out->memory_total_bytes)
                                   : SIMGPU_MEMORY_USED_BYTES;
}

int simgpu_rank(void) { return engine().rank; }

void simgpuSetLabel(uint64_t label) { tls_label = label; }

void simgpuHangNextCollective(void) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mu);
  e.hang_next_collective = true;
}
uint64_t simgpuGetLabel(void) { return tls_label; }

void simgpuReplayClock(int on) { engine().replay_clock.store(on != 0, std::memory_order_relaxed); }

void simgpuAdvanceHostNs(uint64_t t) { advance_host_to(engine(), t); }

void simgpuReplayNext(const simgpu_replay_work* works, size_t n) {
  tls_replay.assign(works, works + (works ? n : 0));
  tls_replay_next = 0;
}

size_t simgpuReplayPending(void) { return tls_replay.size() - tls_replay_next; }

uint64_t simgpuReplayClamped(void) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mu);
  return e.replay_clamped;
}

void simgpuSetNextStreamId(uint32_t id) { tls_next_stream_id = id; }

const char* simgpu_replay_next_name(void) {
  return tls_replay_next < tls_replay.size() ? tls_replay[tls_replay_next].name : nullptr;
}

void simgpuKeepTimeline(int keep) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mu);
  e.keep_timeline = keep != 0;
}

uint64_t simgpuGpuEndNs(void) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mu);
  return e.gpu_end;
}

size_t simgpuTimelineCount(void) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mu);
  return e.timeline.size();
}

int simgpuTimelineGet(size_t index, simgpu_work* out) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mu);
  if (!out || index >= e.timeline.size()) return 0;
  *out = e.timeline[index];
  return 1;
}

}  // extern "C"
