// A profiler plugin for the tests, standing for a user's own (NCCL Inspector, a site's plugin):
// it exports ncclProfiler_v3 ... ncclProfiler_v7 and writes every call NCCL (or a plugin chaining
// to it) makes into the file RECORDING_PLUGIN_LOG, one line per call:
//   init v<N> ctx=<c> comm=<hash> name=<name> nranks=<n> rank=<r> mask=<address> tid=<thread>
//   start v<N> ctx=<c> id=<i> type=<kind bits> parent=<id|0> tid=<t> [func= seq= count= group=]
//   [channel= timer=]
//   state id=<i> state=<s> timer=<t> tid=<t>
//   stop id=<i> tid=<t>
//   finalize ctx=<c>
// Parents are written as the id of the event whose handle they are (0: none or unknown), so a
// test can check NCCL's hierarchy. RECORDING_PLUGIN_MASK (default 0xffff: every kind) is what
// init sets the activation mask to; RECORDING_PLUGIN_FAIL_INIT=1 makes init fail;
// RECORDING_PLUGIN_NAME is the name the table reports.
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "traintime/nccl/profiler_plugin_api.h"

namespace np = traintime::nccl_profiler;

namespace {

constexpr uint64_t kMagic = 0x7265636f72646572ull;  // marks our own event handles

struct Event {
  uint64_t magic = kMagic;
  uint64_t id;
};
struct Context {
  int version;
};

std::mutex g_mu;
std::atomic<uint64_t> g_next_id{1};

long tid() { return static_cast<long>(syscall(SYS_gettid)); }

void line(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void line(const char* fmt, ...) {
  const char* path = std::getenv("RECORDING_PLUGIN_LOG");
  if (!path) return;
  std::lock_guard<std::mutex> lock(g_mu);
  FILE* f = std::fopen(path, "a");
  if (!f) return;
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(f, fmt, ap);
  va_end(ap);
  std::fputc('\n', f);
  std::fclose(f);
}

uint64_t id_of(void* handle) {
  auto* e = static_cast<Event*>(handle);
  return e && e->magic == kMagic ? e->id : 0;
}

ncclResult_t init_common(int version, void** context, int* mask, uint64_t comm, const char* name, int nranks,
                         int rank) {
  const char* fail = std::getenv("RECORDING_PLUGIN_FAIL_INIT");
  line("init v%d ctx=%p comm=%llu name=%s nranks=%d rank=%d mask=%p tid=%ld", version, static_cast<void*>(context),
       static_cast<unsigned long long>(comm), name ? name : "-", nranks, rank, static_cast<void*>(mask), tid());
  if (fail && *fail == '1') return ncclInternalError;
  const char* m = std::getenv("RECORDING_PLUGIN_MASK");
  *mask = m ? static_cast<int>(std::strtol(m, nullptr, 0)) : 0xffff;
  *context = new Context{version};
  return ncclSuccess;
}

template <int version, typename D>
ncclResult_t start_common(void* context, void** handle, const D* d) {
  auto* e = new Event{kMagic, g_next_id.fetch_add(1)};
  *handle = e;
  const uint64_t type = d->type;
  char extra[256] = "";
  if constexpr (version >= 5) {
    if (type == np::kColl)
      std::snprintf(extra, sizeof extra, " func=%s seq=%llu count=%zu group=%llu", d->coll.func,
                    static_cast<unsigned long long>(d->coll.seq_number), d->coll.count,
                    static_cast<unsigned long long>(id_of(d->coll.parent_group)));
    if (type == np::kCollApi) std::snprintf(extra, sizeof extra, " func=%s count=%zu", d->coll_api.func, d->coll_api.count);
    if (type == np::kP2pApi) std::snprintf(extra, sizeof extra, " func=%s count=%zu", d->p2p_api.func, d->p2p_api.count);
    if (type == np::kP2p)
      std::snprintf(extra, sizeof extra, " func=%s peer=%d group=%llu", d->p2p.func, d->p2p.peer,
                    static_cast<unsigned long long>(id_of(d->p2p.parent_group)));
  } else if constexpr (version == 4) {
    if (type == np::kColl)
      std::snprintf(extra, sizeof extra, " func=%s seq=%llu count=%zu", d->coll.func,
                    static_cast<unsigned long long>(d->coll.seq_number), d->coll.count);
  } else {
    if (type == np::kColl)
      std::snprintf(extra, sizeof extra, " func=%s seq=%llu count=%zu comm=%llu", d->coll.func,
                    static_cast<unsigned long long>(d->coll.seq_number), d->coll.count,
                    static_cast<unsigned long long>(d->coll.comm_hash));
  }
  // A ProxyOp of another process (PXN): its parent is that process's pointer, never read
  // (NCCL's plugins/profiler/README.md: check the pid first).
  bool foreign = false;
  if (type == np::kProxyOp) {
    foreign = d->proxy_op.pid != static_cast<int32_t>(getpid());
    std::snprintf(extra, sizeof extra, " pid=%d channel=%u peer=%d steps=%d chunk=%d send=%d pxn=%d", d->proxy_op.pid,
                  d->proxy_op.channel_id, d->proxy_op.peer, d->proxy_op.n_steps, d->proxy_op.chunk_size,
                  d->proxy_op.is_send, foreign ? 1 : 0);
  }
  if (type == np::kProxyStep) std::snprintf(extra, sizeof extra, " step=%d", d->proxy_step.step);
  if constexpr (version >= 4) {
    if (type == np::kKernelCh)
      std::snprintf(extra, sizeof extra, " channel=%u timer=%llu", d->kernel_ch.channel_id,
                    static_cast<unsigned long long>(d->kernel_ch.gpu_timer));
  }
  line("start v%d ctx=%p id=%llu type=%llu parent=%llu tid=%ld%s", version, context,
       static_cast<unsigned long long>(e->id), static_cast<unsigned long long>(type),
       static_cast<unsigned long long>(foreign ? 0 : id_of(d->parent)), tid(), extra);
  return ncclSuccess;
}

ncclResult_t stop(void* handle) {
  line("stop id=%llu tid=%ld", static_cast<unsigned long long>(id_of(handle)), tid());
  return ncclSuccess;  // handles are kept: a child may still name this one as its parent
}

ncclResult_t record(void* handle, int state, np::StateArgsV4* args) {
  // timer: KernelChStop's GPU time; bytes: a ProxyStep state's transSize.
  line("state id=%llu state=%d timer=%llu bytes=%zu tid=%ld", static_cast<unsigned long long>(id_of(handle)), state,
       static_cast<unsigned long long>(args && state == np::kKernelChStop ? args->kernel_ch.gpu_timer : 0),
       args && state != np::kKernelChStop ? args->proxy_step.trans_size : size_t{0}, tid());
  return ncclSuccess;
}

ncclResult_t finalize(void* context) {
  line("finalize ctx=%p", context);
  delete static_cast<Context*>(context);
  return ncclSuccess;
}

const char* name() {
  const char* n = std::getenv("RECORDING_PLUGIN_NAME");
  return n ? n : "recorder";
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) np::PluginV7 ncclProfiler_v7 = {
    name(),
    [](void** ctx, uint64_t comm, int* mask, const char* n, int, int nranks, int rank, np::DebugLogger) {
      return init_common(7, ctx, mask, comm, n, nranks, rank);
    },
    [](void* ctx, void** h, np::EventDescrV7* d) { return start_common<7>(ctx, h, d); },
    stop,
    record,
    finalize};
__attribute__((visibility("default"))) np::PluginV6 ncclProfiler_v6 = {
    name(),
    [](void** ctx, uint64_t comm, int* mask, const char* n, int, int nranks, int rank, np::DebugLogger) {
      return init_common(6, ctx, mask, comm, n, nranks, rank);
    },
    [](void* ctx, void** h, np::EventDescrV6* d) { return start_common<6>(ctx, h, d); },
    stop,
    record,
    finalize};
__attribute__((visibility("default"))) np::PluginV5 ncclProfiler_v5 = {
    name(),
    [](void** ctx, uint64_t comm, int* mask, const char* n, int, int nranks, int rank, np::DebugLogger) {
      return init_common(5, ctx, mask, comm, n, nranks, rank);
    },
    [](void* ctx, void** h, np::EventDescrV5* d) { return start_common<5>(ctx, h, d); },
    stop,
    record,
    finalize};
__attribute__((visibility("default"))) np::PluginV4 ncclProfiler_v4 = {
    name(),
    [](void** ctx, int* mask, const char* n, uint64_t comm, int, int nranks, int rank, np::DebugLogger) {
      return init_common(4, ctx, mask, comm, n, nranks, rank);
    },
    [](void* ctx, void** h, np::EventDescrV4* d) { return start_common<4>(ctx, h, d); },
    stop,
    record,
    finalize};
__attribute__((visibility("default"))) np::PluginV3 ncclProfiler_v3 = {
    name(),
    [](void** ctx, int* mask) { return init_common(3, ctx, mask, 0, nullptr, 0, 0); },
    [](void* ctx, void** h, np::EventDescrV3* d) { return start_common<3>(ctx, h, d); },
    stop,
    [](void* h, int state, np::StateArgsV3*) {
      line("state id=%llu state=%d timer=0 tid=%ld", static_cast<unsigned long long>(id_of(h)), state, tid());
      return ncclSuccess;
    },
    finalize};

}  // extern "C"
