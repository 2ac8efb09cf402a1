// SIMULATION: the fake libcupti.so.13's activity API — records in the real CUPTI 13.0 layouts
// (CUpti_ActivityKernel10, Memcpy6, Memset4, API, ExternalCorrelation) written into per-thread
// buffers the client provides, delivered when full and on flush, deliberately not in launch
// order; normal flushes return only complete buffers, forced ones everything.
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cupti_state.h"
#include "sim_costs.h"
// After cupti.h (through cupti_state.h): the 12.x record structs (Memory3).
#include <cupti_activity_deprecated.h>

namespace simcupti {
namespace {

struct GpuEntry {
  uint32_t offset;
  CUpti_ActivityKind kind;
  uint64_t start, end;
};

struct Buffer {
  uint8_t* data = nullptr;
  size_t size = 0;
  size_t used = 0;
  size_t max_records = 0;
  size_t records = 0;
  std::vector<GpuEntry> gpu;  // GPU records, to tell complete from incomplete at flush time
};

struct ThreadBuffers {
  std::mutex mu;
  Buffer current;
};

struct State {
  std::mutex mu;                         // guards threads, full, attributes, worker fields
  std::vector<ThreadBuffers*> threads;   // in order of first record; never freed (threads exit)
  std::deque<Buffer> full;               // full buffers waiting for delivery
  std::recursive_mutex deliver_mu;       // one delivery at a time
  std::condition_variable cv;
  bool worker_started = false;
  uint32_t flush_period_ms = 0;
  std::map<int, uint64_t> attributes;
  std::atomic<CUpti_BuffersCallbackRequestFunc> request{nullptr};
  std::atomic<CUpti_BuffersCallbackCompleteFunc> complete{nullptr};
  std::atomic<uint8_t> kinds[CUPTI_ACTIVITY_KIND_COUNT] = {};
  std::atomic<uint64_t> dropped{0};
  std::atomic<uint64_t> record_counter{0};
  std::atomic<int64_t> grid_id{1};
  uint64_t drop_every = 0;
  std::atomic<uint64_t> kernel_counter{0};
  uint64_t command_buffer_full_every = 0;
  CUpti_ActivityThreadIdType thread_id_type = CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT;

  State() {
    const char* d = std::getenv("SIMGPU_DROP_EVERY");
    if (d && *d) drop_every = std::strtoull(d, nullptr, 10);
    const char* full = std::getenv("SIMGPU_COMMAND_BUFFER_FULL_EVERY");
    if (full && *full) command_buffer_full_every = std::strtoull(full, nullptr, 10);
  }
};

State& state() {
  static State* s = new State();  // never destroyed: atexit flushes of the client still use it
  return *s;
}

}  // namespace

uint32_t api_version() {
  static const uint32_t v = [] {
    const char* e = std::getenv("SIMGPU_CUPTI_API_VERSION");
    return e && *e ? static_cast<uint32_t>(std::strtoul(e, nullptr, 10)) : uint32_t{CUPTI_API_VERSION};
  }();
  return v;
}

namespace {

thread_local ThreadBuffers* tls_buffers = nullptr;
thread_local std::vector<uint64_t> tls_external[CUPTI_EXTERNAL_CORRELATION_KIND_SIZE];

ThreadBuffers* this_thread_buffers() {
  if (!tls_buffers) {
    auto* tb = new ThreadBuffers();
    State& st = state();
    std::lock_guard<std::mutex> lock(st.mu);
    st.threads.push_back(tb);
    tls_buffers = tb;
  }
  return tls_buffers;
}

// The 12.x structs are the 13.0 ones cut short: Kernel10 appends isDeviceLaunched to Kernel9,
// Memcpy6 appends copyCount to Memcpy5. So records are built in the 13.0 struct and written
// with the size of the reported version's struct.
static_assert(offsetof(CUpti_ActivityKernel10, isDeviceLaunched) >= sizeof(CUpti_ActivityKernel9));
static_assert(offsetof(CUpti_ActivityMemcpy6, copyCount) >= sizeof(CUpti_ActivityMemcpy5));
// Memory4 (API 24, CUPTI 12.6, on) appends `source` to Memory3.
static_assert(offsetof(CUpti_ActivityMemory4, source) >= sizeof(CUpti_ActivityMemory3));

size_t record_size(CUpti_ActivityKind kind) {
  const uint32_t v = api_version();
  const bool cupti12 = v < 130000;
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return cupti12 ? sizeof(CUpti_ActivityKernel9) : sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return cupti12 && v < 26 ? sizeof(CUpti_ActivityMemcpy5) : sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMCPY2: return sizeof(CUpti_ActivityMemcpyPtoP4);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_MEMORY2:
      return v < 24 ? sizeof(CUpti_ActivityMemory3) : sizeof(CUpti_ActivityMemory4);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
    // Overhead3 (API 22, CUPTI 12.4, on) appends overheadData to Overhead2.
    case CUPTI_ACTIVITY_KIND_OVERHEAD: return v < 22 ? sizeof(CUpti_ActivityOverhead2) : sizeof(CUpti_ActivityOverhead3);
    default: return 0;
  }
}

bool is_gpu_kind(CUpti_ActivityKind kind) {
  return kind == CUPTI_ACTIVITY_KIND_KERNEL || kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
         kind == CUPTI_ACTIVITY_KIND_MEMCPY || kind == CUPTI_ACTIVITY_KIND_MEMCPY2 ||
         kind == CUPTI_ACTIVITY_KIND_MEMSET;
}

bool buffer_complete(const Buffer& b, uint64_t now) {
  for (const auto& e : b.gpu)
    if (e.end > now) return false;
  return true;
}

// What a forced flush hands out for work the GPU has not finished: unknown timestamps.
void blank_incomplete(Buffer& b, uint64_t now) {
  for (const auto& e : b.gpu) {
    if (e.end <= now) continue;
    uint8_t* p = b.data + e.offset;
    const bool started = e.start <= now;
    switch (e.kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        auto* r = reinterpret_cast<CUpti_ActivityKernel10*>(p);
        r->end = r->completed = CUPTI_TIMESTAMP_UNKNOWN;
        if (!started) r->start = CUPTI_TIMESTAMP_UNKNOWN;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        auto* r = reinterpret_cast<CUpti_ActivityMemcpy6*>(p);
        r->end = CUPTI_TIMESTAMP_UNKNOWN;
        if (!started) r->start = CUPTI_TIMESTAMP_UNKNOWN;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        auto* r = reinterpret_cast<CUpti_ActivityMemset4*>(p);
        r->end = CUPTI_TIMESTAMP_UNKNOWN;
        if (!started) r->start = CUPTI_TIMESTAMP_UNKNOWN;
        break;
      }
      default: break;
    }
  }
}

void deliver(std::vector<Buffer>& buffers, bool forced) {
  State& st = state();
  CUpti_BuffersCallbackCompleteFunc done = st.complete.load();
  if (!done) return;
  const uint64_t now = simgpu_host_now();
  std::lock_guard<std::recursive_mutex> lock(st.deliver_mu);
  for (auto& b : buffers) {
    if (forced) blank_incomplete(b, now);
    done(nullptr, 0, b.data, b.size, b.used);
  }
}

void start_worker_locked(State& st);

// Moves a full buffer to the delivery queue (thread buffer lock held).
void retire(Buffer& b) {
  State& st = state();
  {
    std::lock_guard<std::mutex> lock(st.mu);
    st.full.push_back(std::move(b));
    start_worker_locked(st);
  }
  b = Buffer{};
  st.cv.notify_all();
}

void write_record(const void* rec, size_t size, bool gpu, uint64_t start, uint64_t end) {
  State& st = state();
  // SIMGPU_DROP_EVERY counts the records tests weigh against the truth's activities: memory
  // records are never dropped (nor counted).
  const CUpti_ActivityKind written = *static_cast<const CUpti_ActivityKind*>(rec);
  const bool droppable = written != CUPTI_ACTIVITY_KIND_MEMORY2 && written != CUPTI_ACTIVITY_KIND_OVERHEAD;
  if (st.drop_every && droppable && st.record_counter.fetch_add(1, std::memory_order_relaxed) % st.drop_every ==
                           st.drop_every - 1) {
    st.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  CUpti_BuffersCallbackRequestFunc req = st.request.load();
  if (!req) {
    st.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  ThreadBuffers* tb = this_thread_buffers();
  std::lock_guard<std::mutex> lock(tb->mu);
  Buffer& b = tb->current;
  if (b.data && (b.used + size > b.size || (b.max_records && b.records >= b.max_records))) retire(b);
  if (!b.data) {
    uint8_t* data = nullptr;
    size_t bsize = 0, max_records = 0;
    req(&data, &bsize, &max_records);
    if (!data && api_version() < 27) {
      std::fprintf(stderr, "simgpu: CUPTI API %u was handed no activity buffer; CUPTI releases "
                           "before API 27 can crash here (SIMULATED crash)\n", api_version());
      std::abort();
    }
    if (!data || bsize < size) {
      st.dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    b.data = data;
    b.size = bsize;
    b.max_records = max_records;
  }
  std::memcpy(b.data + b.used, rec, size);
  if (gpu) b.gpu.push_back({static_cast<uint32_t>(b.used), *static_cast<const CUpti_ActivityKind*>(rec), start, end});
  b.used += size;
  ++b.records;
}

// Collects what a flush hands out: thread buffers last-registered first, then the queued full
// buffers (which hold the oldest records) — so delivery order is never launch order.
std::vector<Buffer> collect(bool forced, bool include_current) {
  State& st = state();
  const uint64_t now = simgpu_host_now();
  std::vector<Buffer> out;
  std::vector<ThreadBuffers*> threads;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    threads.reserve(st.threads.size());
    for (ThreadBuffers* t : st.threads) threads.push_back(t);
  }
  if (include_current) {
    for (auto it = threads.rbegin(); it != threads.rend(); ++it) {
      std::lock_guard<std::mutex> lock((*it)->mu);
      Buffer& b = (*it)->current;
      if (!b.data) continue;
      // SIMGPU_BUFFERS_WHEN_FULL=1: a GPU that is never idle when a flush comes, so a thread's
      // current buffer always holds unfinished work and arrives only when full (or forced).
      static const bool when_full = [] {
        const char* v = std::getenv("SIMGPU_BUFFERS_WHEN_FULL");
        return v && std::strcmp(v, "1") == 0;
      }();
      if (forced || (!when_full && b.records > 0 && buffer_complete(b, now))) {
        out.push_back(std::move(b));
        b = Buffer{};
      }
    }
  }
  std::lock_guard<std::mutex> lock(st.mu);
  for (auto it = st.full.begin(); it != st.full.end();) {
    if (forced || buffer_complete(*it, now)) {
      out.push_back(std::move(*it));
      it = st.full.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

// OVERHEAD: CUPTI's own cost, as real CUPTI reports it (cupti_activity.h): one record of kind
// `overhead` on the calling thread, taking kOverheadNs[kind] of simulated host time from now.
// A COMMAND_BUFFER_FULL record carries its additional data, malloc'ed, for the client to free
// (API 22 on, as Overhead3 says).
void write_overhead(CUpti_ActivityOverheadKind overhead, uint64_t duration_ns) {
  if (!activity_kind_enabled(CUPTI_ACTIVITY_KIND_OVERHEAD)) return;
  CUpti_ActivityOverhead3 r{};
  r.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  r.overheadKind = overhead;
  r.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  r.objectId.pt.processId = static_cast<uint32_t>(getpid());
  r.objectId.pt.threadId = static_cast<uint32_t>(syscall(SYS_gettid));
  r.start = simgpu_host_now();
  r.end = r.start + duration_ns;
  if (overhead == CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL && api_version() >= 22) {
    auto* data = static_cast<CUpti_ActivityOverheadCommandBufferFullData*>(
        std::calloc(1, sizeof(CUpti_ActivityOverheadCommandBufferFullData)));
    if (data) data->channelID = 1;
    r.overheadData = data;
  }
  write_record(&r, record_size(CUPTI_ACTIVITY_KIND_OVERHEAD), false, 0, 0);
}

void flush(bool forced) {
  // The flush's own cost first, so this flush delivers it.
  write_overhead(CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH, simgpu::kBufferFlushOverheadNs);
  std::vector<Buffer> out = collect(forced, true);
  deliver(out, forced);
}

// CUPTI's own thread: delivers full buffers once complete, and flushes periodically when
// cuptiActivityFlushPeriod asked for it. Delivery timing never changes any record's content.
std::atomic<bool> g_exiting{false};

void worker_main() {
  State& st = state();
  for (;;) {
    uint32_t period;
    {
      std::unique_lock<std::mutex> lock(st.mu);
      period = st.flush_period_ms;
      st.cv.wait_for(lock, std::chrono::milliseconds(period ? period : 20));
      period = st.flush_period_ms;
    }
    // Once the process is exiting, clients flush themselves (forced) from their exit hooks;
    // delivering from here too would race with their teardown.
    if (g_exiting.load()) return;
    std::vector<Buffer> out = collect(false, period != 0);
    deliver(out, false);
  }
}

void start_worker_locked(State& st) {
  if (st.worker_started) return;
  st.worker_started = true;
  std::atexit([] { g_exiting.store(true); });
  std::thread(worker_main).detach();
}

uint32_t thread_id() {
  State& st = state();
  if (st.thread_id_type == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)
    return static_cast<uint32_t>(syscall(SYS_gettid));
  return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(reinterpret_cast<void*>(pthread_self())));
}

// Fields every GPU record version has under the same names.
template <class Record>
void fill_common(Record& r, const simgpu_work* w) {
  r.start = w->start_ns;
  r.end = w->end_ns;
  r.deviceId = 0;
  r.contextId = simgpu_context_id();
  r.streamId = w->stream_id;
  r.correlationId = w->correlation_id;
  r.graphNodeId = w->graph_node_id;
  r.graphId = w->graph_id;
}

}  // namespace

bool activity_kind_enabled(CUpti_ActivityKind kind) {
  return kind >= 0 && kind < CUPTI_ACTIVITY_KIND_COUNT && state().kinds[kind].load(std::memory_order_relaxed);
}

void record_api(const simgpu_api_frame* f) {
  const CUpti_ActivityKind kind = f->domain == 2 ? CUPTI_ACTIVITY_KIND_RUNTIME : CUPTI_ACTIVITY_KIND_DRIVER;
  if (!activity_kind_enabled(kind)) return;
  CUpti_ActivityAPI r{};
  r.kind = kind;
  r.cbid = f->cbid;
  r.start = f->start_ns;
  r.end = f->end_ns;
  r.processId = static_cast<uint32_t>(getpid());
  r.threadId = thread_id();
  r.correlationId = f->correlation_id;
  r.returnValue = f->return_value ? *static_cast<const uint32_t*>(f->return_value) : 0;
  write_record(&r, sizeof r, false, 0, 0);
}

void record_external_correlation(const simgpu_api_frame* f) {
  if (!activity_kind_enabled(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)) return;
  const CUpti_ActivityKind api_kind = f->domain == 2 ? CUPTI_ACTIVITY_KIND_RUNTIME : CUPTI_ACTIVITY_KIND_DRIVER;
  if (!activity_kind_enabled(api_kind)) return;
  for (int k = 0; k < CUPTI_EXTERNAL_CORRELATION_KIND_SIZE; ++k) {
    if (tls_external[k].empty()) continue;
    CUpti_ActivityExternalCorrelation r{};
    r.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    r.externalKind = static_cast<CUpti_ExternalCorrelationKind>(k);
    r.externalId = tls_external[k].back();
    r.correlationId = f->correlation_id;
    write_record(&r, sizeof r, false, 0, 0);
  }
}

void on_work(const simgpu_work* w) {
  State& st = state();
  switch (w->kind) {
    case SIMGPU_KERNEL: {
      CUpti_ActivityKind kind;
      if (activity_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
      else if (activity_kind_enabled(CUPTI_ACTIVITY_KIND_KERNEL)) kind = CUPTI_ACTIVITY_KIND_KERNEL;
      else return;
      CUpti_ActivityKernel10 r{};
      r.kind = kind;
      fill_common(r, w);
      r.completed = w->end_ns;
      r.gridX = static_cast<int32_t>(w->grid[0]);
      r.gridY = static_cast<int32_t>(w->grid[1]);
      r.gridZ = static_cast<int32_t>(w->grid[2]);
      r.blockX = static_cast<int32_t>(w->block[0]);
      r.blockY = static_cast<int32_t>(w->block[1]);
      r.blockZ = static_cast<int32_t>(w->block[2]);
      r.dynamicSharedMemory = static_cast<int32_t>(w->shared_mem);
      r.gridId = st.grid_id.fetch_add(1, std::memory_order_relaxed);
      r.name = w->name;
      r.queued = CUPTI_TIMESTAMP_UNKNOWN;     // latency timestamps are not simulated
      r.submitted = CUPTI_TIMESTAMP_UNKNOWN;
      r.isDeviceLaunched = 0;
      write_record(&r, record_size(kind), true, w->start_ns, w->end_ns);
      // SIMGPU_COMMAND_BUFFER_FULL_EVERY=N: every Nth kernel finds the command buffer full.
      if (st.command_buffer_full_every != 0 &&
          st.kernel_counter.fetch_add(1, std::memory_order_relaxed) % st.command_buffer_full_every ==
              st.command_buffer_full_every - 1)
        write_overhead(CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL, simgpu::kCommandBufferFullOverheadNs);
      break;
    }
    case SIMGPU_MEMCPY: {
      if (!activity_kind_enabled(CUPTI_ACTIVITY_KIND_MEMCPY)) return;
      CUpti_ActivityMemcpy6 r{};
      r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
      fill_common(r, w);
      r.copyKind = w->copy_kind;
      r.srcKind = w->src_kind;
      r.dstKind = w->dst_kind;
      r.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
      r.bytes = w->bytes;
      r.runtimeCorrelationId = w->runtime_correlation_id;
      r.copyCount = 1;
      write_record(&r, record_size(CUPTI_ACTIVITY_KIND_MEMCPY), true, w->start_ns, w->end_ns);
      break;
    }
    case SIMGPU_MEMSET: {
      if (!activity_kind_enabled(CUPTI_ACTIVITY_KIND_MEMSET)) return;
      CUpti_ActivityMemset4 r{};
      r.kind = CUPTI_ACTIVITY_KIND_MEMSET;
      fill_common(r, w);
      r.value = w->memset_value;
      r.bytes = w->bytes;
      r.flags = CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC;
      r.memoryKind = w->dst_kind;
      write_record(&r, sizeof r, true, w->start_ns, w->end_ns);
      break;
    }
    default: break;
  }
}

// MEMORY2: one record per allocation and release, written at the call (no GPU work: always
// complete), with the runtime call's correlation id. Pool allocations carry the device's default
// pool (address 0x7e0000000000, the simulated pool's base) in memoryPoolConfig.
void on_memory(const simgpu_memory_op* op) {
  if (!activity_kind_enabled(CUPTI_ACTIVITY_KIND_MEMORY2)) return;
  CUpti_ActivityMemory4 r{};
  r.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  r.memoryOperationType = op->release ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE
                                      : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  r.memoryKind = static_cast<CUpti_ActivityMemoryKind>(op->memory_kind);
  r.correlationId = op->correlation_id;
  r.address = op->address;
  r.bytes = op->bytes;
  r.timestamp = op->timestamp_ns;
  r.processId = static_cast<uint32_t>(getpid());
  r.deviceId = 0;
  r.contextId = simgpu_context_id();
  r.streamId = op->stream_id;
  r.isAsync = op->pool ? 1 : 0;
  r.memoryPoolConfig.memoryPoolType =
      op->pool ? CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL : CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID;
  if (op->pool) r.memoryPoolConfig.address = 0x7e0000000000ull;
  write_record(&r, record_size(CUPTI_ACTIVITY_KIND_MEMORY2), false, 0, 0);
}

void reset_activity() {
  State& st = state();
  for (auto& k : st.kinds) k.store(0, std::memory_order_relaxed);
}

namespace {

// When the fake libcupti was loaded: at cuInit, for a profiler injected there.
const auto g_loaded_at = std::chrono::steady_clock::now();

// SIMGPU_STOP_IN_INGEST=SECONDS:abort|stall:FILE. The first cuptiActivityGetNextRecord call made
// SECONDS or more after the library was loaded, on a buffer whose first record was already
// walked (the profiler is in the middle of ingesting it), writes "TID COMM\n" of the calling
// thread to FILE (whole, by a rename) and then calls abort() ("abort") or sleeps until the
// process is killed ("stall"), holding whatever the caller holds.
void stop_in_ingest_if_due() {
  struct Plan {
    bool on = false;
    std::chrono::steady_clock::time_point at;
    bool abort = false;
    std::string file;
  };
  static const Plan plan = [] {
    Plan p;
    const char* v = std::getenv("SIMGPU_STOP_IN_INGEST");
    if (!v || !*v) return p;
    const std::string spec = v;
    const std::size_t a = spec.find(':'), b = a == std::string::npos ? a : spec.find(':', a + 1);
    char* end = nullptr;
    const double secs = a == std::string::npos ? -1 : std::strtod(spec.c_str(), &end);
    const std::string how = b == std::string::npos ? "" : spec.substr(a + 1, b - a - 1);
    if (b == std::string::npos || end != spec.c_str() + a || !(secs >= 0) ||
        (how != "abort" && how != "stall") || b + 1 >= spec.size()) {
      std::fprintf(stderr, "simgpu: SIMGPU_STOP_IN_INGEST wants SECONDS:abort|stall:FILE, got %s\n", v);
      std::exit(2);
    }
    p.on = true;
    p.at = g_loaded_at + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(secs));
    p.abort = how == "abort";
    p.file = spec.substr(b + 1);
    return p;
  }();
  static std::atomic<bool> fired{false};
  if (!plan.on || std::chrono::steady_clock::now() < plan.at || fired.exchange(true)) return;
  const long tid = syscall(SYS_gettid);
  char comm[64] = {};
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%ld/comm", tid);
  if (FILE* f = std::fopen(path, "r")) {
    if (std::fgets(comm, sizeof comm, f) == nullptr) comm[0] = '\0';
    std::fclose(f);
  }
  comm[std::strcspn(comm, "\n")] = '\0';
  const std::string tmp = plan.file + ".tmp";
  if (FILE* f = std::fopen(tmp.c_str(), "w")) {
    std::fprintf(f, "%ld %s\n", tid, comm);
    std::fclose(f);
    std::rename(tmp.c_str(), plan.file.c_str());
  }
  if (plan.abort) std::abort();
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

}  // namespace

}  // namespace simcupti

using namespace simcupti;

extern "C" {

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  ensure_hooks();
  if (kind <= CUPTI_ACTIVITY_KIND_INVALID || kind >= CUPTI_ACTIVITY_KIND_COUNT) return CUPTI_ERROR_INVALID_KIND;
  // SIMGPU_REFUSE_ACTIVITY_KIND=<kind>: that kind cannot be enabled (as on a device without it).
  const char* refuse = std::getenv("SIMGPU_REFUSE_ACTIVITY_KIND");
  if (refuse && *refuse && std::strtol(refuse, nullptr, 10) == static_cast<long>(kind))
    return CUPTI_ERROR_NOT_SUPPORTED;
  // SIMGPU_ENABLED_KINDS_AT_EXIT=<file>: the kinds still enabled when the process exits, one per
  // line, so a test can see what a client that gave up left switched on.
  static const bool report_registered = [] {
    if (const char* out = std::getenv("SIMGPU_ENABLED_KINDS_AT_EXIT"); out && *out) {
      std::atexit([] {
        if (FILE* f = std::fopen(std::getenv("SIMGPU_ENABLED_KINDS_AT_EXIT"), "w")) {
          for (int k = 1; k < CUPTI_ACTIVITY_KIND_COUNT; ++k)
            if (state().kinds[k].load(std::memory_order_relaxed)) std::fprintf(f, "%d\n", k);
          std::fclose(f);
        }
      });
    }
    return true;
  }();
  (void)report_registered;
  state().kinds[kind].store(1, std::memory_order_relaxed);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  if (kind <= CUPTI_ACTIVITY_KIND_INVALID || kind >= CUPTI_ACTIVITY_KIND_COUNT) return CUPTI_ERROR_INVALID_KIND;
  state().kinds[kind].store(0, std::memory_order_relaxed);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableContext(CUcontext, CUpti_ActivityKind kind) { return cuptiActivityEnable(kind); }
CUptiResult CUPTIAPI cuptiActivityDisableContext(CUcontext, CUpti_ActivityKind kind) { return cuptiActivityDisable(kind); }

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
                                                    CUpti_BuffersCallbackCompleteFunc funcBufferCompleted) {
  ensure_hooks();
  if (!funcBufferRequested || !funcBufferCompleted) return CUPTI_ERROR_INVALID_PARAMETER;
  State& st = state();
  st.request.store(funcBufferRequested);
  st.complete.store(funcBufferCompleted);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  if (!state().complete.load()) return CUPTI_ERROR_INVALID_OPERATION;
  if ((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)) {
    // SIMGPU_FORCED_FLUSH_HANGS=1: a forced flush never returns (a real one can take seconds, or
    // block on a driver lock the thread a signal interrupted holds).
    const char* hang = std::getenv("SIMGPU_FORCED_FLUSH_HANGS");
    while (hang && std::strcmp(hang, "1") == 0) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if ((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) && simgpu_cuda_torn_down()) {
    std::fprintf(stderr, "simgpu: forced CUPTI flush after CUDA's teardown (SIMULATED crash: the "
                         "tool's exit hook ran after CUDA's)\n");
    std::abort();
  }
  flush((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlush(CUcontext, uint32_t, uint32_t flag) { return cuptiActivityFlushAll(flag); }

CUptiResult CUPTIAPI cuptiActivityFlushPeriod(uint32_t time) {
  State& st = state();
  {
    std::lock_guard<std::mutex> lock(st.mu);
    st.flush_period_ms = time;
    if (time) start_worker_locked(st);
  }
  st.cv.notify_all();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t validBufferSizeBytes,
                                                CUpti_Activity** record) {
  if (!buffer || !record) return CUPTI_ERROR_INVALID_PARAMETER;
  if (*record) stop_in_ingest_if_due();
  size_t offset = 0;
  if (*record) {
    const auto* prev = reinterpret_cast<const uint8_t*>(*record);
    const size_t prev_size = record_size((*record)->kind);
    if (prev < buffer || !prev_size) return CUPTI_ERROR_INVALID_KIND;
    offset = static_cast<size_t>(prev - buffer) + prev_size;
  }
  if (offset + sizeof(CUpti_Activity) > validBufferSizeBytes) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  auto* rec = reinterpret_cast<CUpti_Activity*>(buffer + offset);
  const size_t size = record_size(rec->kind);
  if (!size || offset + size > validBufferSizeBytes) return CUPTI_ERROR_INVALID_KIND;
  *record = rec;
  if (is_gpu_kind(rec->kind)) {
    // Incomplete (handed out by a forced flush before the GPU finished): INVALID_KIND, with
    // *record pointing at it so a caller may step over it.
    uint64_t end = 0;
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_MEMCPY: end = reinterpret_cast<CUpti_ActivityMemcpy6*>(rec)->end; break;
      case CUPTI_ACTIVITY_KIND_MEMCPY2: end = reinterpret_cast<CUpti_ActivityMemcpyPtoP4*>(rec)->end; break;
      case CUPTI_ACTIVITY_KIND_MEMSET: end = reinterpret_cast<CUpti_ActivityMemset4*>(rec)->end; break;
      default: end = reinterpret_cast<CUpti_ActivityKernel10*>(rec)->end; break;
    }
    if (end == CUPTI_TIMESTAMP_UNKNOWN) return CUPTI_ERROR_INVALID_KIND;
  }
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  if (!dropped) return CUPTI_ERROR_INVALID_PARAMETER;
  *dropped = static_cast<size_t>(state().dropped.exchange(0));
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  if (!timestamp) return CUPTI_ERROR_INVALID_PARAMETER;
  *timestamp = simgpu_host_now();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc) {
  // The simulated GPU only has virtual time; a client clock cannot be honoured.
  return CUPTI_ERROR_NOT_SUPPORTED;
}

CUptiResult CUPTIAPI cuptiActivityEnableLatencyTimestamps(uint8_t) { return CUPTI_SUCCESS; }

CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t* valueSize, void* value) {
  if (!valueSize || !value || *valueSize == 0 || *valueSize > sizeof(uint64_t)) return CUPTI_ERROR_INVALID_PARAMETER;
  switch (attr) {
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE_CDP:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT:
    case CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_POOL_SIZE:
    case CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_POOL_LIMIT:
    case CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE:
    case CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_PRE_ALLOCATE_VALUE:
    case CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED:
    case CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE_DEVICE_GRAPHS: break;
    default: return CUPTI_ERROR_INVALID_PARAMETER;
  }
  uint64_t v = 0;
  std::memcpy(&v, value, *valueSize);
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  st.attributes[attr] = v;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetAttribute(CUpti_ActivityAttribute attr, size_t* valueSize, void* value) {
  if (!valueSize || !value || *valueSize == 0) return CUPTI_ERROR_INVALID_PARAMETER;
  uint64_t v;
  size_t natural = sizeof(size_t);
  switch (attr) {
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE_CDP:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE_DEVICE_GRAPHS: v = 3u << 20; break;  // CUPTI's 3 MB default
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT: v = 250; break;
    case CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_POOL_SIZE: v = 65536; break;
    case CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_POOL_LIMIT: v = 250; break;
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE:
    case CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_PRE_ALLOCATE_VALUE: v = 3; break;
    case CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER:
    case CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED: v = 0; natural = sizeof(uint8_t); break;
    case CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER:  // default 1 since 13.0, 0 before
      v = api_version() >= 130000 ? 1 : 0;
      natural = sizeof(uint8_t);
      break;
    default: return CUPTI_ERROR_INVALID_PARAMETER;
  }
  State& st = state();
  {
    std::lock_guard<std::mutex> lock(st.mu);
    auto it = st.attributes.find(attr);
    if (it != st.attributes.end()) v = it->second;
  }
  if (*valueSize < natural) return CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT;
  std::memcpy(value, &v, natural);
  *valueSize = natural;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id) {
  if (kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID || kind >= CUPTI_EXTERNAL_CORRELATION_KIND_SIZE)
    return CUPTI_ERROR_INVALID_PARAMETER;
  tls_external[kind].push_back(id);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t* lastId) {
  if (kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID || kind >= CUPTI_EXTERNAL_CORRELATION_KIND_SIZE)
    return CUPTI_ERROR_INVALID_PARAMETER;
  if (tls_external[kind].empty()) return CUPTI_ERROR_QUEUE_EMPTY;
  if (lastId) *lastId = tls_external[kind].back();
  tls_external[kind].pop_back();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetThreadIdType(CUpti_ActivityThreadIdType* type) {
  if (!type) return CUPTI_ERROR_INVALID_PARAMETER;
  *type = state().thread_id_type;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSetThreadIdType(CUpti_ActivityThreadIdType type) {
  if (type != CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT && type != CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)
    return CUPTI_ERROR_INVALID_PARAMETER;
  state().thread_id_type = type;
  return CUPTI_SUCCESS;
}

}  // extern "C"
