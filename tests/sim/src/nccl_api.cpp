// SIMULATION: the fake libnccl.so.2 — the public NCCL 2.28 API with the real signatures, plus
// NCCL 2.32's *Config collectives and one-sided calls (ncclPutSignal, ncclSignal,
// ncclWaitSignal). Each collective or p2p call enqueues one kernel, named as NCCL 2.28 names
// them, through the fake runtime's cudaLaunchKernel (so CUPTI callbacks fire inside the NCCL
// call); its duration comes from a bandwidth model and the straggler model of the engine. No data
// moves, no rank talks to another: every rank computes the same schedule.
//
// Like NCCL built with PROFAPI, every ncclX is a weak alias of a strong pncclX, and ncclBcast
// calls ncclBroadcast through the dynamic symbol (so an interposer sees the nested call). As in
// NCCL 2.32, pncclXConfig enqueues by itself, never through ncclX.
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "nccl_net.h"
#include "nccl_profiler.h"
#include "simgpu/engine.h"
#include "simgpu/nvcc_runtime_decls.h"
#include "traintime/nccl/nccl_2_32.h"

// A nonblocking communicator's launches in flight: NCCL runs them on a thread it creates inside
// the call (ncclGroupEnd), which returns ncclInProgress; ncclCommGetAsyncError says
// ncclInProgress until that thread is done.
struct AsyncJob {
  std::thread thread;
  std::atomic<bool> done{false};
};

// A registered window (ncclCommWindowRegister): the target of ncclPutSignal.
struct ncclWindow_vidmem {
  ncclComm* comm;
  size_t size;
};

struct ncclComm {
  int nranks;
  int rank;
  uint64_t key;
  uint64_t epoch_ns;  // creation time: every rank is taken to start from here
  bool blocking = true;  // ncclConfig_t.blocking
  std::shared_ptr<AsyncJob> job;
  simgpu_prof::CommState* prof = nullptr;  // the profiler plugin's state, NULL without one
  std::atomic<uint64_t> launches{0};        // kernels launched (SIMGPU_NET_STALL counts them)
};

namespace {

// Bandwidth model (nccl-tests conventions): t = latency + S * factor / busbw.
constexpr uint64_t kLatencyNs = 8000;
constexpr double kBusBytesPerNs = 100.0;  // 100 GB/s bus bandwidth
constexpr unsigned kChannels = 16;        // grid of the simulated kernel (NCCL: one block per channel)
constexpr unsigned kThreads = 640;

// Value of errno when SIMGPU_NCCL_FAIL makes a call fail (documented in tests/sim/README.md).
constexpr int kInjectedErrno = EREMOTEIO;

struct FailSpec {
  std::string function;
  ncclResult_t code = ncclSuccess;
};

const FailSpec& fail_spec() {
  static const FailSpec* spec = [] {
    auto* s = new FailSpec();
    const char* v = std::getenv("SIMGPU_NCCL_FAIL");
    if (v && *v) {
      const std::string text(v);
      const size_t colon = text.rfind(':');
      if (colon != std::string::npos) {
        s->function = text.substr(0, colon);
        s->code = static_cast<ncclResult_t>(std::atoi(text.c_str() + colon + 1));
      }
    }
    return s;
  }();
  return *spec;
}

// Returns the injected failure for `function`, or ncclSuccess.
ncclResult_t injected(const char* function) {
  const FailSpec& f = fail_spec();
  if (f.code == ncclSuccess || f.function != function) return ncclSuccess;
  errno = kInjectedErrno;
  return f.code;
}

size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

const char* type_name(ncclDataType_t t) {
  static const char* names[] = {"i8", "u8", "i32", "u32", "i64", "u64", "f16", "f32", "f64", "bf16", "f8e4m3", "f8e5m2"};
  return t >= 0 && t < ncclNumTypes ? names[t] : "u8";
}

bool is_float(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16 || t == ncclFloat8e4m3 ||
         t == ncclFloat8e5m2;
}

// NCCL's generate.py: Max and Min share MinMax; Avg is PreMulSum for floats, SumPostDiv for ints.
const char* op_name(ncclRedOp_t op, ncclDataType_t t) {
  switch (op) {
    case ncclSum: return "Sum";
    case ncclProd: return "Prod";
    case ncclMax: case ncclMin: return "MinMax";
    case ncclAvg: return is_float(t) ? "PreMulSum" : "SumPostDiv";
    default: return "PreMulSum";
  }
}

struct KernelNames {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<char>> host_funs;  // stable addresses, one per name
};

// The host-side handle of the kernel called `name`, registered with the runtime on first use
// (as NCCL's fat binary registers its kernels).
const void* kernel_for(const std::string& name) {
  static KernelNames* k = new KernelNames();
  std::lock_guard<std::mutex> lock(k->mu);
  auto& slot = k->host_funs[name];
  if (!slot) {
    slot = std::make_unique<char>(0);
    static void** fatbin = __cudaRegisterFatBinary(nullptr);
    __cudaRegisterFunction(fatbin, slot.get(), nullptr, name.c_str(), -1, nullptr, nullptr, nullptr, nullptr, nullptr);
  }
  return slot.get();
}

struct Op {
  std::string kernel;
  double bus_bytes;  // S * factor
  bool p2p;
  ncclComm* comm;
  cudaStream_t stream;
  simgpu_prof::TaskTag tag;  // what the profiler plugin's task events describe
};

thread_local int tls_group_depth = 0;
thread_local std::vector<Op> tls_group;

// SIMGPU_NCCL_LAUNCH=driver: launch as real NCCL does with runtime and driver >= 11.8, through
// cuLaunchKernelEx found with cuGetProcAddress (driver callbacks only). Default: the runtime's
// cudaLaunchKernel (runtime and driver callbacks, as NCCL before 2.19 and older drivers).
using LaunchExFn = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);
LaunchExFn driver_launch() {
  static const LaunchExFn fn = []() -> LaunchExFn {
    const char* mode = std::getenv("SIMGPU_NCCL_LAUNCH");
    if (mode == nullptr || std::strcmp(mode, "driver") != 0) return nullptr;
    void* pfn = nullptr;
    if (cuGetProcAddress("cuLaunchKernelEx", &pfn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, nullptr) != CUDA_SUCCESS)
      return nullptr;
    return reinterpret_cast<LaunchExFn>(pfn);
  }();
  return fn;
}

ncclResult_t launch(const std::string& own_kernel, double bus_bytes, ncclComm* comm, cudaStream_t stream,
                    simgpu_prof::TaskTag* tags, size_t ntags) {
  void* launch_event = nullptr;
  simgpu_prof::launch_begin(comm->prof, tags, ntags, stream, &launch_event);
  // sim_replay: the kernel a recording names (NCCL's names differ between releases).
  const char* recorded = simgpu_replay_next_name();
  const std::string kernel = recorded != nullptr ? std::string(recorded) : own_kernel;
  simgpu_collective c{};
  c.comm_key = comm->key;
  c.transfer_ns = kLatencyNs + static_cast<uint64_t>(bus_bytes / kBusBytesPerNs + 0.5);
  c.epoch_ns = comm->epoch_ns;
  c.nranks = comm->nranks;
  c.rank = comm->rank;
  const uint64_t launch_seq = comm->launches.fetch_add(1) + 1;
  if (simgpu_net::stalls(launch_seq, comm->nranks)) simgpuHangNextCollective();  // nccl_net.h
  simgpu_set_next_collective(&c);
  void* args[1] = {nullptr};
  bool ok = false;
  if (LaunchExFn launch_ex = driver_launch()) {
    CUlaunchConfig config{};
    config.gridDimX = kChannels, config.gridDimY = 1, config.gridDimZ = 1;
    config.blockDimX = kThreads, config.blockDimY = 1, config.blockDimZ = 1;
    config.hStream = reinterpret_cast<CUstream>(stream);
    // simgpu's function handle is the host stub the runtime registered (cuModuleGetFunction
    // on NCCL's own module, in real NCCL).
    auto f = reinterpret_cast<CUfunction>(const_cast<void*>(kernel_for(kernel)));
    ok = launch_ex(&config, f, args, nullptr) == CUDA_SUCCESS;
  } else {
    ok = cudaLaunchKernel(kernel_for(kernel), dim3(kChannels), dim3(kThreads), args, 0, stream) == cudaSuccess;
  }
  simgpu_set_next_collective(nullptr);
  uint64_t gpu_start = 0, gpu_end = 0;
  const bool ran = ok && simgpu_last_collective_span(&gpu_start, &gpu_end) != 0;
  simgpu_prof::launch_end(comm->prof, tags, ntags, launch_event, ran, gpu_start, gpu_end, kChannels, launch_seq);
  return ok ? ncclSuccess : ncclUnhandledCudaError;
}

// The launches of a group (or of one op): one kernel per stream for everything grouped on it,
// named after the operation when all agree, SendRecv for p2p, ncclDevKernel_Generic otherwise.
ncclResult_t launch_group(std::vector<Op>& ops) {
  std::vector<bool> done(ops.size(), false);
  ncclResult_t result = ncclSuccess;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (done[i]) continue;
    std::string kernel = ops[i].kernel;
    double bus_bytes = 0;
    bool all_p2p = true;
    std::vector<simgpu_prof::TaskTag> tags;
    for (size_t j = i; j < ops.size(); ++j) {
      if (done[j] || ops[j].stream != ops[i].stream) continue;
      done[j] = true;
      tags.push_back(ops[j].tag);
      bus_bytes += ops[j].bus_bytes;
      all_p2p = all_p2p && ops[j].p2p;
      if (ops[j].kernel != kernel) kernel.clear();
    }
    if (kernel.empty()) kernel = all_p2p ? "ncclDevKernel_SendRecv" : "ncclDevKernel_Generic";
    const ncclResult_t r = launch(kernel, bus_bytes, ops[i].comm, ops[i].stream, tags.data(), tags.size());
    if (r != ncclSuccess) result = r;
  }
  return result;
}

// Waits for a communicator's previous asynchronous launches (the application should have polled
// ncclCommGetAsyncError until they were done, as NCCL requires).
void finish_job(ncclComm* comm) {
  if (comm->job && comm->job->thread.joinable()) comm->job->thread.join();
  comm->job.reset();
}

// Nonblocking communicators: the launches run on a new thread, as NCCL's ncclGroupEnd does for
// them (it sets the device there first); the call returns ncclInProgress.
ncclResult_t launch_async(std::vector<Op> ops) {
  auto job = std::make_shared<AsyncJob>();
  for (const Op& op : ops) {
    if (op.comm->job != job) finish_job(op.comm);
    op.comm->job = job;
  }
  AsyncJob* raw = job.get();
  job->thread = std::thread([raw, ops = std::move(ops)]() mutable {
    cudaSetDevice(0);
    launch_group(ops);
    raw->done.store(true, std::memory_order_release);
  });
  return ncclInProgress;
}

// One collective or p2p operation. `s` is the nccl-tests size S, `factor` its bus factor;
// `self_copy` is what a world of 1 copies (0: nothing) when sendbuff != recvbuff. Like NCCL, the
// call is a group of its own inside any group the application opened: the profiler plugin sees
// its API events, then (at the outermost group end) the launch.
ncclResult_t enqueue(const std::string& kernel, double s, double factor, const simgpu_prof::Call& call, ncclComm* comm,
                     cudaStream_t stream, size_t self_copy) {
  simgpu_prof::TaskTag tag;
  simgpu_prof::Call sized = call;
  sized.bus_bytes = static_cast<uint64_t>(s * factor + 0.5);
  simgpu_prof::api_begin(comm->prof, sized, stream, tls_group_depth, &tag);
  simgpu_prof::api_end(comm->prof);
  simgpu_prof::group_end_begin();
  ncclResult_t r = ncclSuccess;
  if (comm->nranks == 1 && !call.p2p) {
    // Real NCCL at one rank launches no collective kernel: a copy when out of place, else nothing.
    if (call.sendbuff != call.recvbuff && self_copy)
      r = cudaMemcpyAsync(call.recvbuff, call.sendbuff, self_copy, cudaMemcpyDeviceToDevice, stream) == cudaSuccess
              ? ncclSuccess : ncclUnhandledCudaError;
  } else if (tls_group_depth > 0) {
    tls_group.push_back({kernel, s * factor, call.p2p, comm, stream, tag});
  } else if (!comm->blocking) {
    r = launch_async({{kernel, s * factor, call.p2p, comm, stream, tag}});
  } else {
    r = launch(kernel, s * factor, comm, stream, &tag, 1);
  }
  simgpu_prof::group_end_exit();
  return r;
}

ncclResult_t submit(const std::string& kernel, double s, double factor, const simgpu_prof::Call& call, ncclComm* comm,
                    cudaStream_t stream, size_t self_copy) {
  if (!comm) return ncclInvalidArgument;
  return enqueue(kernel, s, factor, call, comm, stream, self_copy);
}

double ring_factor(ncclComm* c) { return c->nranks > 1 ? double(c->nranks - 1) / c->nranks : 0.0; }

uint64_t fnv1a(const void* data, size_t n) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Gather and Scatter: S = count x type size x n over the whole communicator, factor (n-1)/n.
ncclResult_t rooted_sendrecv(const char* func, const void* sendbuff, void* recvbuff, size_t count,
                             ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  if (!comm || root < 0 || root >= comm->nranks) return ncclInvalidArgument;
  const size_t per_rank = count * type_size(datatype);
  return submit("ncclDevKernel_SendRecv", double(per_rank) * comm->nranks, ring_factor(comm),
                {func, count, datatype, root, false, sendbuff, recvbuff}, comm, stream, per_rank);
}

ncclResult_t init_rank(ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank, const char* comm_name = nullptr) {
  if (!comm || nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  *comm = new ncclComm{nranks, rank, fnv1a(id.internal, sizeof id.internal), simgpu_host_now(), true, nullptr};
  (*comm)->prof = simgpu_prof::comm_init((*comm)->key, comm_name, nranks, rank);
  return ncclSuccess;
}

}  // namespace

#define SIMGPU_NCCL_ALIAS(name) __attribute__((weak, alias("p" #name)))

extern "C" {

ncclResult_t pncclGetVersion(int* version) {
  if (ncclResult_t f = injected("ncclGetVersion")) return f;
  if (!version) return ncclInvalidArgument;
  // SIMGPU_NCCL_VERSION=CODE plays another release (23105: 2.31.5).
  const char* v = std::getenv("SIMGPU_NCCL_VERSION");
  *version = v != nullptr && *v != '\0' ? std::atoi(v) : NCCL_VERSION_CODE;
  return ncclSuccess;
}
ncclResult_t ncclGetVersion(int* version) SIMGPU_NCCL_ALIAS(ncclGetVersion);

// Deterministic ids: the k-th call in every process yields the same id, which is how ranks
// agree on a communicator without exchanging the id.
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (ncclResult_t f = injected("ncclGetUniqueId")) return f;
  if (!uniqueId) return ncclInvalidArgument;
  static std::atomic<int> calls{0};
  std::memset(uniqueId->internal, 0, sizeof uniqueId->internal);
  const int k = calls.fetch_add(1);
  std::snprintf(uniqueId->internal, sizeof uniqueId->internal, "simgpu-nccl-id-%d", k);
  return ncclSuccess;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) SIMGPU_NCCL_ALIAS(ncclGetUniqueId);

ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  if (ncclResult_t f = injected("ncclCommInitRank")) return f;
  return init_rank(comm, nranks, commId, rank);
}
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank)
    SIMGPU_NCCL_ALIAS(ncclCommInitRank);

ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t* config) {
  if (ncclResult_t f = injected("ncclCommInitRankConfig")) return f;
  const ncclResult_t r = init_rank(comm, nranks, commId, rank, config ? config->commName : nullptr);
  if (r == ncclSuccess && config != nullptr && config->blocking == 0) (*comm)->blocking = false;
  return r;
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) SIMGPU_NCCL_ALIAS(ncclCommInitRankConfig);

ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int*) {
  if (ncclResult_t f = injected("ncclCommInitAll")) return f;
  if (!comm || ndev < 1) return ncclInvalidArgument;
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  std::snprintf(id.internal, sizeof id.internal, "simgpu-nccl-initall");
  for (int i = 0; i < ndev; ++i) init_rank(&comm[i], ndev, id, i);
  return ncclSuccess;
}
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) SIMGPU_NCCL_ALIAS(ncclCommInitAll);

// Without communication a rank cannot learn the others' colors: the simulation assumes every
// rank passes the same color and key order, so the new communicator mirrors the parent.
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int, ncclComm_t* newcomm, ncclConfig_t* config) {
  if (ncclResult_t f = injected("ncclCommSplit")) return f;
  if (!comm || !newcomm) return ncclInvalidArgument;
  if (color == NCCL_SPLIT_NOCOLOR) {
    *newcomm = nullptr;
    return ncclSuccess;
  }
  const uint64_t key = comm->key * 31 + static_cast<uint64_t>(color) + 1;
  *newcomm = new ncclComm{comm->nranks, comm->rank, key, simgpu_host_now(), comm->blocking, nullptr};
  (*newcomm)->prof = simgpu_prof::comm_init(key, config ? config->commName : nullptr,
                                            comm->nranks, comm->rank);
  return ncclSuccess;
}
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config)
    SIMGPU_NCCL_ALIAS(ncclCommSplit);

ncclResult_t pncclCommFinalize(ncclComm_t comm) {
  if (ncclResult_t f = injected("ncclCommFinalize")) return f;
  return comm ? ncclSuccess : ncclInvalidArgument;
}
ncclResult_t ncclCommFinalize(ncclComm_t comm) SIMGPU_NCCL_ALIAS(ncclCommFinalize);

ncclResult_t pncclCommDestroy(ncclComm_t comm) {
  if (ncclResult_t f = injected("ncclCommDestroy")) return f;
  if (comm) {
    finish_job(comm);
    simgpu_prof::comm_finalize(comm->prof);
  }
  delete comm;
  return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) SIMGPU_NCCL_ALIAS(ncclCommDestroy);

ncclResult_t pncclCommAbort(ncclComm_t comm) {
  if (ncclResult_t f = injected("ncclCommAbort")) return f;
  if (comm) {
    finish_job(comm);
    simgpu_prof::comm_finalize(comm->prof);
  }
  delete comm;
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) SIMGPU_NCCL_ALIAS(ncclCommAbort);

ncclResult_t pncclCommCount(const ncclComm_t comm, int* count) {
  if (ncclResult_t f = injected("ncclCommCount")) return f;
  if (!comm || !count) return ncclInvalidArgument;
  *count = comm->nranks;
  return ncclSuccess;
}
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) SIMGPU_NCCL_ALIAS(ncclCommCount);

ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (ncclResult_t f = injected("ncclCommUserRank")) return f;
  if (!comm || !rank) return ncclInvalidArgument;
  *rank = comm->rank;
  return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) SIMGPU_NCCL_ALIAS(ncclCommUserRank);

ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (ncclResult_t f = injected("ncclCommCuDevice")) return f;
  if (!comm || !device) return ncclInvalidArgument;
  *device = 0;
  return ncclSuccess;
}
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) SIMGPU_NCCL_ALIAS(ncclCommCuDevice);

ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (ncclResult_t f = injected("ncclCommGetAsyncError")) return f;
  if (!comm || !asyncError) return ncclInvalidArgument;
  if (comm->job && !comm->job->done.load(std::memory_order_acquire)) {
    *asyncError = ncclInProgress;
    return ncclSuccess;
  }
  finish_job(comm);
  *asyncError = ncclSuccess;
  return ncclSuccess;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) SIMGPU_NCCL_ALIAS(ncclCommGetAsyncError);

const char* pncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}
const char* ncclGetErrorString(ncclResult_t result) SIMGPU_NCCL_ALIAS(ncclGetErrorString);

const char* pncclGetLastError(ncclComm_t) { return ""; }
const char* ncclGetLastError(ncclComm_t comm) SIMGPU_NCCL_ALIAS(ncclGetLastError);

// ---- collectives (S and factor per nccl-tests doc/PERFORMANCE.md) ----
static ncclResult_t enqueue_AllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  if (!comm) return ncclInvalidArgument;
  const size_t bytes = count * type_size(datatype);
  const std::string k = std::string("ncclDevKernel_AllReduce_") + op_name(op, datatype) + "_" + type_name(datatype) + "_RING_LL";
  return submit(k, double(bytes), comm->nranks > 1 ? 2.0 * (comm->nranks - 1) / comm->nranks : 0.0,
                {"AllReduce", count, datatype, 0, false, sendbuff, recvbuff}, comm, stream, bytes);
}
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t f = injected("ncclAllReduce")) return f;
  return enqueue_AllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
}
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) SIMGPU_NCCL_ALIAS(ncclAllReduce);
ncclResult_t pncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
    const ncclCollConfig_t*) {
  if (ncclResult_t f = injected("ncclAllReduceConfig")) return f;
  return enqueue_AllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
}
ncclResult_t ncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
    const ncclCollConfig_t* config) SIMGPU_NCCL_ALIAS(ncclAllReduceConfig);

static ncclResult_t enqueue_Broadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream) {
  if (!comm || root < 0 || root >= comm->nranks) return ncclInvalidArgument;
  const size_t bytes = count * type_size(datatype);
  return submit("ncclDevKernel_Broadcast_RING_LL", double(bytes), 1.0, {"Broadcast", count, datatype, root, false, sendbuff, recvbuff},
                comm, stream, bytes);
}
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t f = injected("ncclBroadcast")) return f;
  return enqueue_Broadcast(sendbuff, recvbuff, count, datatype, root, comm, stream);
}
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) SIMGPU_NCCL_ALIAS(ncclBroadcast);
ncclResult_t pncclBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream,
    const ncclCollConfig_t*) {
  if (ncclResult_t f = injected("ncclBroadcastConfig")) return f;
  return enqueue_Broadcast(sendbuff, recvbuff, count, datatype, root, comm, stream);
}
ncclResult_t ncclBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream,
    const ncclCollConfig_t* config) SIMGPU_NCCL_ALIAS(ncclBroadcastConfig);

ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream) {
  if (ncclResult_t f = injected("ncclBcast")) return f;
  // Through the PLT, as NCCL does: a preloaded ncclBroadcast sees this nested call.
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) SIMGPU_NCCL_ALIAS(ncclBcast);

static ncclResult_t enqueue_Reduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  if (!comm || root < 0 || root >= comm->nranks) return ncclInvalidArgument;
  const size_t bytes = count * type_size(datatype);
  const std::string k = std::string("ncclDevKernel_Reduce_") + op_name(op, datatype) + "_" + type_name(datatype) + "_RING_LL";
  return submit(k, double(bytes), 1.0, {"Reduce", count, datatype, root, false, sendbuff, recvbuff}, comm, stream, bytes);
}
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t f = injected("ncclReduce")) return f;
  return enqueue_Reduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) SIMGPU_NCCL_ALIAS(ncclReduce);
ncclResult_t pncclReduceConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
    const ncclCollConfig_t*) {
  if (ncclResult_t f = injected("ncclReduceConfig")) return f;
  return enqueue_Reduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}
ncclResult_t ncclReduceConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
    const ncclCollConfig_t* config) SIMGPU_NCCL_ALIAS(ncclReduceConfig);

static ncclResult_t enqueue_AllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream) {
  if (!comm) return ncclInvalidArgument;
  const size_t per_rank = sendcount * type_size(datatype);
  return submit("ncclDevKernel_AllGather_RING_LL", double(per_rank) * comm->nranks, ring_factor(comm),
                {"AllGather", sendcount, datatype, 0, false, sendbuff, recvbuff}, comm, stream, per_rank);
}
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t f = injected("ncclAllGather")) return f;
  return enqueue_AllGather(sendbuff, recvbuff, sendcount, datatype, comm, stream);
}
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) SIMGPU_NCCL_ALIAS(ncclAllGather);
ncclResult_t pncclAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream,
    const ncclCollConfig_t*) {
  if (ncclResult_t f = injected("ncclAllGatherConfig")) return f;
  return enqueue_AllGather(sendbuff, recvbuff, sendcount, datatype, comm, stream);
}
ncclResult_t ncclAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream,
    const ncclCollConfig_t* config) SIMGPU_NCCL_ALIAS(ncclAllGatherConfig);

static ncclResult_t enqueue_ReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  if (!comm) return ncclInvalidArgument;
  const size_t per_rank = recvcount * type_size(datatype);
  const std::string k = std::string("ncclDevKernel_ReduceScatter_") + op_name(op, datatype) + "_" + type_name(datatype) + "_RING_LL";
  return submit(k, double(per_rank) * comm->nranks, ring_factor(comm),
                {"ReduceScatter", recvcount, datatype, 0, false, sendbuff, recvbuff}, comm, stream, per_rank);
}
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t f = injected("ncclReduceScatter")) return f;
  return enqueue_ReduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
}
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) SIMGPU_NCCL_ALIAS(ncclReduceScatter);
ncclResult_t pncclReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
    const ncclCollConfig_t*) {
  if (ncclResult_t f = injected("ncclReduceScatterConfig")) return f;
  return enqueue_ReduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
}
ncclResult_t ncclReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
    const ncclCollConfig_t* config) SIMGPU_NCCL_ALIAS(ncclReduceScatterConfig);

// NCCL 2.28 runs AlltoAll, Gather and Scatter as grouped send/recv: one SendRecv kernel.
static ncclResult_t enqueue_AlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  if (!comm) return ncclInvalidArgument;
  const size_t per_peer = count * type_size(datatype);
  return submit("ncclDevKernel_SendRecv", double(per_peer) * comm->nranks, ring_factor(comm),
                {"AlltoAll", count, datatype, 0, false, sendbuff, recvbuff}, comm, stream, per_peer);
}
ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t f = injected("ncclAlltoAll")) return f;
  return enqueue_AlltoAll(sendbuff, recvbuff, count, datatype, comm, stream);
}
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, cudaStream_t stream) SIMGPU_NCCL_ALIAS(ncclAlltoAll);
ncclResult_t pncclAlltoAllConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream,
    const ncclCollConfig_t*) {
  if (ncclResult_t f = injected("ncclAlltoAllConfig")) return f;
  return enqueue_AlltoAll(sendbuff, recvbuff, count, datatype, comm, stream);
}
ncclResult_t ncclAlltoAllConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream,
    const ncclCollConfig_t* config) SIMGPU_NCCL_ALIAS(ncclAlltoAllConfig);

static ncclResult_t enqueue_Gather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  return rooted_sendrecv("Gather", sendbuff, recvbuff, count, datatype, root, comm, stream);
}
ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t f = injected("ncclGather")) return f;
  return enqueue_Gather(sendbuff, recvbuff, count, datatype, root, comm, stream);
}
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream) SIMGPU_NCCL_ALIAS(ncclGather);
ncclResult_t pncclGatherConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream,
    const ncclCollConfig_t*) {
  if (ncclResult_t f = injected("ncclGatherConfig")) return f;
  return enqueue_Gather(sendbuff, recvbuff, count, datatype, root, comm, stream);
}
ncclResult_t ncclGatherConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream,
    const ncclCollConfig_t* config) SIMGPU_NCCL_ALIAS(ncclGatherConfig);

static ncclResult_t enqueue_Scatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream) {
  return rooted_sendrecv("Scatter", sendbuff, recvbuff, count, datatype, root, comm, stream);
}
ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t f = injected("ncclScatter")) return f;
  return enqueue_Scatter(sendbuff, recvbuff, count, datatype, root, comm, stream);
}
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) SIMGPU_NCCL_ALIAS(ncclScatter);
ncclResult_t pncclScatterConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream,
    const ncclCollConfig_t*) {
  if (ncclResult_t f = injected("ncclScatterConfig")) return f;
  return enqueue_Scatter(sendbuff, recvbuff, count, datatype, root, comm, stream);
}
ncclResult_t ncclScatterConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream,
    const ncclCollConfig_t* config) SIMGPU_NCCL_ALIAS(ncclScatterConfig);

ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream) {
  if (ncclResult_t f = injected("ncclSend")) return f;
  if (!comm || peer < 0 || peer >= comm->nranks) return ncclInvalidArgument;
  return submit("ncclDevKernel_SendRecv", double(count * type_size(datatype)), 1.0,
                {"Send", count, datatype, peer, true, sendbuff, nullptr}, comm, stream, 0);
}
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) SIMGPU_NCCL_ALIAS(ncclSend);

ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream) {
  if (ncclResult_t f = injected("ncclRecv")) return f;
  if (!comm || peer < 0 || peer >= comm->nranks) return ncclInvalidArgument;
  return submit("ncclDevKernel_SendRecv", double(count * type_size(datatype)), 1.0,
                {"Recv", count, datatype, peer, true, nullptr, recvbuff}, comm, stream, 0);
}
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) SIMGPU_NCCL_ALIAS(ncclRecv);

// ---- windows and NCCL 2.32's one-sided calls ----
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int) {
  if (ncclResult_t f = injected("ncclCommWindowRegister")) return f;
  if (!comm || !buff || !win) return ncclInvalidArgument;
  *win = new ncclWindow_vidmem{comm, size};
  return ncclSuccess;
}
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags)
    SIMGPU_NCCL_ALIAS(ncclCommWindowRegister);

ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  if (ncclResult_t f = injected("ncclCommWindowDeregister")) return f;
  if (!comm || !win || win->comm != comm) return ncclInvalidArgument;
  delete win;
  return ncclSuccess;
}
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) SIMGPU_NCCL_ALIAS(ncclCommWindowDeregister);

// Real NCCL runs these on its proxy thread and the copy engines: no NCCL kernel is launched. The
// simulation checks the arguments as NCCL does and moves nothing (no copy-engine work either).
ncclResult_t pncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                            ncclWindow_t peerWin, size_t peerWinOffset, int, int, unsigned int, ncclComm_t comm,
                            cudaStream_t) {
  if (ncclResult_t f = injected("ncclPutSignal")) return f;
  if (!comm || peer < 0 || peer >= comm->nranks || !peerWin || (count > 0 && !localbuff)) return ncclInvalidArgument;
  if (peerWinOffset + count * type_size(datatype) > peerWin->size) return ncclInvalidArgument;
  return ncclSuccess;
}
ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                           ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
                           ncclComm_t comm, cudaStream_t stream) SIMGPU_NCCL_ALIAS(ncclPutSignal);

ncclResult_t pncclSignal(int peer, int, int, unsigned int, ncclComm_t comm, cudaStream_t) {
  if (ncclResult_t f = injected("ncclSignal")) return f;
  if (!comm || peer < 0 || peer >= comm->nranks) return ncclInvalidArgument;
  return ncclSuccess;
}
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream)
    SIMGPU_NCCL_ALIAS(ncclSignal);

ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t) {
  if (ncclResult_t f = injected("ncclWaitSignal")) return f;
  if (!comm || nDesc < 0 || (nDesc > 0 && !signalDescs)) return ncclInvalidArgument;
  for (int i = 0; i < nDesc; ++i) {
    if (signalDescs[i].peer < 0 || signalDescs[i].peer >= comm->nranks) return ncclInvalidArgument;
  }
  return ncclSuccess;
}
ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream)
    SIMGPU_NCCL_ALIAS(ncclWaitSignal);

ncclResult_t pncclGroupStart() {
  if (ncclResult_t f = injected("ncclGroupStart")) return f;
  ++tls_group_depth;
  return ncclSuccess;
}
ncclResult_t ncclGroupStart() SIMGPU_NCCL_ALIAS(ncclGroupStart);

// The outermost ncclGroupEnd launches the group (launch_group), on a new thread for nonblocking
// communicators.
ncclResult_t pncclGroupEnd() {
  if (ncclResult_t f = injected("ncclGroupEnd")) return f;
  if (tls_group_depth == 0) return ncclInvalidUsage;
  simgpu_prof::group_end_begin();
  ncclResult_t r = ncclSuccess;
  if (--tls_group_depth == 0) {
    std::vector<Op> ops;
    ops.swap(tls_group);
    // NCCL requires every communicator of a group to share one blocking mode.
    r = !ops.empty() && !ops.front().comm->blocking ? launch_async(std::move(ops)) : launch_group(ops);
  }
  simgpu_prof::group_end_exit();
  return r;
}
ncclResult_t ncclGroupEnd() SIMGPU_NCCL_ALIAS(ncclGroupEnd);

}  // extern "C"
