// sim_nccl_ops — a SIMULATED NCCL workload (simgpu's fake CUDA runtime and libnccl.so.2) that
// calls every interposed op with known counts and types, on two communicators of the same size,
// with groups, nested groups and the deprecated ncclBcast, and writes its own ground truth.
//
// The truth is what the program itself passed to NCCL, sized by the nccl-tests conventions
// spelled out here independently of the profiler: the buffer for AllReduce, Broadcast, Reduce,
// Send and Recv; the total over the n ranks for AllGather (sendcount), ReduceScatter
// (recvcount), AlltoAll, Gather and Scatter (per-peer count).
//
//   sim_nccl_ops --truth FILE [--expect-fail FUNCTION:CODE | --graph-replays K | --nonblocking |
//                              --v2-32 | --hang SECONDS]
//
// Rank/world from OMPI_COMM_WORLD_RANK/SIZE (else 0 of 1). With --expect-fail (run it with the
// same SIMGPU_NCCL_FAIL), every call of FUNCTION must return CODE with errno EREMOTEIO (the
// fake's documented errno) and is left out of the truth; any other mismatch exits 3.
// With --graph-replays K, an AllReduce and a Broadcast are captured into a CUDA graph once and
// the graph is launched K times: the truth is K calls of each (counted per replay, not at
// capture). Exits 77 when the simulated driver cannot say whether a stream is capturing (the
// harness, test_sim_nccl.py, counts that as a failure: simgpu is always built with the tests).
// With --nonblocking the communicators are created with config.blocking = 0: calls return
// ncclInProgress, simgpu's NCCL launches from a thread of its own, and the program polls
// ncclCommGetAsyncError until each call is ready, as frameworks do.
// With --v2-32 the collectives are NCCL 2.32's *Config forms (counted as the classic ops), and
// the one-sided calls run on a registered window: ncclPutSignal (its bytes: count x element
// size), ncclSignal and ncclWaitSignal (no bytes). These launch no kernel and take no sequence
// number, so they add to the comm rows but not to ops_enqueued.
// With --hang SECONDS, after the usual calls an AllGather and an AllReduce on `world` complete,
// then the next AllReduce never does (simgpuHangNextCollective, as when a peer never enters it):
// the program writes its truth (hung_seq: that AllReduce's sequence number on `world`), waits
// SECONDS for the hang watchdog, and exits without synchronising.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <dlfcn.h>

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <nlohmann/json.hpp>

#include "traintime/nccl/nccl_2_32.h"

namespace {

int g_rank = 0;
int g_world = 1;
std::string g_fail_function;
int g_fail_code = 0;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "sim_nccl_ops [SIMULATED GPU] rank %d: %s\n", g_rank, what.c_str());
  std::exit(3);
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::atoi(v) : fallback;
}

struct Row {
  uint64_t calls = 0;
  uint64_t bytes = 0;
};

struct Comm {
  std::string name;
  ncclComm_t handle = nullptr;
  int size = 0;
  uint64_t enqueued = 0;  // successful outermost calls (the profiler's sequence numbers)
};

std::map<std::pair<std::string, int>, Row> g_rows;  // (op, comm_size)
// Kernels NCCL launches, by the op their name says (the fallback's view): AlltoAll, Gather,
// Scatter, Send and Recv run as SendRecv kernels, whose name says nothing ("unknown").
std::map<std::string, uint64_t> g_kernels;
int g_group_depth = 0;
bool g_nonblocking = false;     // --nonblocking: communicators created with config.blocking = 0
Comm* g_group_comm = nullptr;  // the communicator the open group's ops use (one per group here)
std::vector<std::string> g_group_kernels;  // kernel op of each op queued in the open group

// A nonblocking communicator's call returned ncclInProgress: poll until NCCL's own thread has
// launched it, as frameworks do (PyTorch's ProcessGroupNCCL polls ncclCommGetAsyncError).
void wait_ready(Comm& comm) {
  for (;;) {
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm.handle, &state) != ncclSuccess) die("ncclCommGetAsyncError");
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) die(std::string("async error: ") + ncclGetErrorString(state));
    std::this_thread::yield();
  }
}

// One NCCL call. `function` is the entry point called (for --expect-fail), `op` its DESIGN §6
// name, `bytes` its nccl-tests size, `kernel_op` the op its kernel's name gives (nullptr: a
// one-sided call, which launches no kernel and takes no sequence number).
template <typename Call>
void nccl(const char* function, const char* op, uint64_t bytes, Comm& comm, const char* kernel_op,
          Call&& call) {
  errno = 0;
  const ncclResult_t r = call();
  const int err = errno;
  // ncclBcast runs ncclBroadcast, so it fails with it.
  const bool expect_fail = g_fail_function == function ||
                           (g_fail_function == "ncclBroadcast" && std::strcmp(function, "ncclBcast") == 0);
  if (expect_fail) {
    if (r != static_cast<ncclResult_t>(g_fail_code) || err != EREMOTEIO) {
      die(std::string(function) + " returned " + std::to_string(r) + " errno " + std::to_string(err) +
          ", expected " + std::to_string(g_fail_code) + " errno " + std::to_string(EREMOTEIO));
    }
    // Not counted, but its sequence number was taken before the call (nccl/src/nccl_wrappers.cpp:
    // the kernel launched inside a call must carry it), so ops_enqueued includes it.
    if (kernel_op != nullptr) ++comm.enqueued;
    return;
  }
  if (r == ncclInProgress && g_nonblocking) {
    wait_ready(comm);
  } else if (r != ncclSuccess) {
    die(std::string(function) + " failed: " + ncclGetErrorString(r));
  }
  Row& row = g_rows[{op, comm.size}];
  ++row.calls;
  row.bytes += bytes;
  if (kernel_op == nullptr) return;
  ++comm.enqueued;
  // At one rank NCCL launches no collective kernel (a copy at most); p2p still runs a kernel.
  const bool p2p = std::strcmp(op, "Send") == 0 || std::strcmp(op, "Recv") == 0;
  if (comm.size == 1 && !p2p) return;
  if (g_group_depth > 0) {
    g_group_comm = &comm;
    g_group_kernels.push_back(kernel_op);
  } else {
    ++g_kernels[kernel_op];
  }
}

void group_start() {
  if (ncclGroupStart() != ncclSuccess) die("ncclGroupStart");
  ++g_group_depth;
}

// The outermost end launches one kernel for the group's stream: named after the op when every
// queued op agrees, else a SendRecv/Generic kernel ("unknown").
void group_end() {
  errno = 0;
  const ncclResult_t r = ncclGroupEnd();
  if (r == ncclInProgress && g_nonblocking && g_group_depth == 1) {
    wait_ready(*g_group_comm);
  } else if (r != ncclSuccess) {
    die(std::string("ncclGroupEnd failed: ") + ncclGetErrorString(r));
  }
  if (--g_group_depth > 0 || g_group_kernels.empty()) return;
  std::string kernel = g_group_kernels.front();
  for (const std::string& k : g_group_kernels) {
    if (k != kernel) kernel = "unknown";
  }
  ++g_kernels[kernel];
  g_group_kernels.clear();
}

void run(Comm& world, Comm& twin, cudaStream_t s, void* buf) {
  const int n = world.size;
  const int peer = (g_rank + 1) % n;
  const int from = (g_rank + n - 1) % n;
  for (int iter = 0; iter < 3; ++iter) {
    const size_t big = size_t{1} << (18 + iter);  // message sizes change per iteration
    nccl("ncclAllReduce", "AllReduce", big * 4, world, "AllReduce",
         [&] { return ncclAllReduce(buf, buf, big, ncclFloat32, ncclSum, world.handle, s); });
    nccl("ncclBroadcast", "Broadcast", 1000 * 8, world, "Broadcast",
         [&] { return ncclBroadcast(buf, buf, 1000, ncclFloat64, 0, world.handle, s); });
    nccl("ncclBcast", "Broadcast", 300 * 2, world, "Broadcast",
         [&] { return ncclBcast(buf, 300, ncclBfloat16, 0, world.handle, s); });
    nccl("ncclReduce", "Reduce", 4096, world, "Reduce",
         [&] { return ncclReduce(buf, buf, 4096, ncclInt8, ncclMax, 0, world.handle, s); });
    nccl("ncclAllGather", "AllGather", 256 * 2 * uint64_t(n), world, "AllGather",
         [&] { return ncclAllGather(buf, buf, 256, ncclFloat16, world.handle, s); });
    nccl("ncclReduceScatter", "ReduceScatter", 128 * 4 * uint64_t(n), world, "ReduceScatter",
         [&] { return ncclReduceScatter(buf, buf, 128, ncclInt32, ncclSum, world.handle, s); });
    nccl("ncclAlltoAll", "AlltoAll", 64 * 8 * uint64_t(n), world, "unknown",
         [&] { return ncclAlltoAll(buf, buf, 64, ncclInt64, world.handle, s); });
    nccl("ncclGather", "Gather", 32 * 4 * uint64_t(n), world, "unknown",
         [&] { return ncclGather(buf, buf, 32, ncclFloat32, 0, world.handle, s); });
    nccl("ncclScatter", "Scatter", 16 * uint64_t(n), world, "unknown",
         [&] { return ncclScatter(buf, buf, 16, ncclUint8, 0, world.handle, s); });

    // A ring exchange, grouped as point-to-point must be.
    group_start();
    nccl("ncclSend", "Send", 512 * 4, world, "unknown",
         [&] { return ncclSend(buf, 512, ncclFloat32, peer, world.handle, s); });
    nccl("ncclRecv", "Recv", 512 * 4, world, "unknown",
         [&] { return ncclRecv(buf, 512, ncclFloat32, from, world.handle, s); });
    group_end();

    // Bucketed gradients: three AllReduces fused in one (nested) group.
    group_start();
    nccl("ncclAllReduce", "AllReduce", 1000 * 4, world, "AllReduce",
         [&] { return ncclAllReduce(buf, buf, 1000, ncclFloat32, ncclSum, world.handle, s); });
    group_start();
    nccl("ncclAllReduce", "AllReduce", 2000 * 4, world, "AllReduce",
         [&] { return ncclAllReduce(buf, buf, 2000, ncclFloat32, ncclSum, world.handle, s); });
    group_end();
    nccl("ncclAllReduce", "AllReduce", 3000 * 4, world, "AllReduce",
         [&] { return ncclAllReduce(buf, buf, 3000, ncclFloat32, ncclSum, world.handle, s); });
    group_end();

    // The same-size twin communicator: its own rows in `communicators`, the same `comm` rows.
    nccl("ncclAllReduce", "AllReduce", 777 * 8, twin, "AllReduce",
         [&] { return ncclAllReduce(buf, buf, 777, ncclFloat64, ncclSum, twin.handle, s); });
  }
}

// --v2-32: NCCL 2.32's *Config collectives (a NULL config is the plain call) on `world`, then a
// one-sided ring exchange into the next rank's window.
void run_v2_32(Comm& world, cudaStream_t s, void* buf) {
  const int n = world.size;
  const int peer = (g_rank + 1) % n;
  const int from = (g_rank + n - 1) % n;
  ncclWindow_t window = nullptr;
  if (ncclCommWindowRegister(world.handle, buf, size_t{1} << 20, &window, 0) != ncclSuccess) die("window");
  for (int iter = 0; iter < 2; ++iter) {
    const size_t big = size_t{1} << (16 + iter);
    nccl("ncclAllReduceConfig", "AllReduce", big * 4, world, "AllReduce",
         [&] { return ncclAllReduceConfig(buf, buf, big, ncclFloat32, ncclSum, world.handle, s, nullptr); });
    nccl("ncclBroadcastConfig", "Broadcast", 1000 * 8, world, "Broadcast",
         [&] { return ncclBroadcastConfig(buf, buf, 1000, ncclFloat64, 0, world.handle, s, nullptr); });
    nccl("ncclReduceConfig", "Reduce", 4096, world, "Reduce",
         [&] { return ncclReduceConfig(buf, buf, 4096, ncclInt8, ncclMax, 0, world.handle, s, nullptr); });
    nccl("ncclAllGatherConfig", "AllGather", 256 * 2 * uint64_t(n), world, "AllGather",
         [&] { return ncclAllGatherConfig(buf, buf, 256, ncclFloat16, world.handle, s, nullptr); });
    nccl("ncclReduceScatterConfig", "ReduceScatter", 128 * 4 * uint64_t(n), world, "ReduceScatter",
         [&] { return ncclReduceScatterConfig(buf, buf, 128, ncclInt32, ncclSum, world.handle, s, nullptr); });
    nccl("ncclAlltoAllConfig", "AlltoAll", 64 * 8 * uint64_t(n), world, "unknown",
         [&] { return ncclAlltoAllConfig(buf, buf, 64, ncclInt64, world.handle, s, nullptr); });
    nccl("ncclGatherConfig", "Gather", 32 * 4 * uint64_t(n), world, "unknown",
         [&] { return ncclGatherConfig(buf, buf, 32, ncclFloat32, 0, world.handle, s, nullptr); });
    nccl("ncclScatterConfig", "Scatter", 16 * uint64_t(n), world, "unknown",
         [&] { return ncclScatterConfig(buf, buf, 16, ncclUint8, 0, world.handle, s, nullptr); });
    nccl("ncclPutSignal", "PutSignal", 300 * 2, world, nullptr, [&] {
      return ncclPutSignal(buf, 300, ncclBfloat16, peer, window, 4096, 0, 0, 0, world.handle, s);
    });
    nccl("ncclSignal", "Signal", 0, world, nullptr,
         [&] { return ncclSignal(peer, 1, 0, 0, world.handle, s); });
    ncclWaitSignalDesc_t desc[2] = {{1, from, 0, 0}, {1, from, 1, 0}};
    nccl("ncclWaitSignal", "WaitSignal", 0, world, nullptr,
         [&] { return ncclWaitSignal(2, desc, world.handle, s); });
  }
  if (ncclCommWindowDeregister(world.handle, window) != ncclSuccess) die("window deregister");
}

// One AllReduce and one Broadcast captured once, replayed `replays` times. A captured call
// enqueues nothing when it is made, so it is in the truth once per replay and takes no sequence
// number; at one rank NCCL captures no kernel, so nothing can be counted there.
void run_graph(Comm& world, cudaStream_t s, void* buf, int replays) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (driver == nullptr || dlsym(driver, "cuStreamIsCapturing") == nullptr) {
    std::printf("SKIP [SIMULATED GPU]: the simulated libcuda.so.1 has no cuStreamIsCapturing\n");
    std::exit(77);
  }
  if (cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) != cudaSuccess) die("begin capture");
  if (ncclAllReduce(buf, buf, 4096, ncclFloat32, ncclSum, world.handle, s) != ncclSuccess) die("AllReduce");
  if (ncclBroadcast(buf, buf, 100, ncclFloat64, 0, world.handle, s) != ncclSuccess) die("Broadcast");
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (cudaStreamEndCapture(s, &graph) != cudaSuccess) die("end capture");
  if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) die("instantiate");
  for (int i = 0; i < replays; ++i) {
    if (cudaGraphLaunch(exec, s) != cudaSuccess) die("graph launch");
  }
  if (world.size == 1) return;
  g_rows[{"AllReduce", world.size}] = Row{uint64_t(replays), uint64_t(replays) * 4096 * 4};
  g_rows[{"Broadcast", world.size}] = Row{uint64_t(replays), uint64_t(replays) * 100 * 8};
  g_kernels["AllReduce"] += replays;
  g_kernels["Broadcast"] += replays;
}

}  // namespace

int main(int argc, char** argv) {
  std::string truth_path;
  int graph_replays = 0;
  bool v2_32 = false;
  int hang_sec = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--truth" && i + 1 < argc) {
      truth_path = argv[++i];
    } else if (a == "--expect-fail" && i + 1 < argc) {
      const std::string spec = argv[++i];
      const size_t colon = spec.rfind(':');
      if (colon == std::string::npos) die("--expect-fail wants FUNCTION:CODE");
      g_fail_function = spec.substr(0, colon);
      g_fail_code = std::atoi(spec.c_str() + colon + 1);
    } else if (a == "--nonblocking") {
      g_nonblocking = true;
    } else if (a == "--v2-32") {
      v2_32 = true;
    } else if (a == "--hang" && i + 1 < argc) {
      hang_sec = std::atoi(argv[++i]);
    } else if (a == "--graph-replays" && i + 1 < argc) {
      graph_replays = std::atoi(argv[++i]);
    } else {
      die("usage: sim_nccl_ops --truth FILE [--expect-fail FUNCTION:CODE | --graph-replays K | --nonblocking | "
          "--v2-32 | --hang SECONDS]");
    }
  }
  if (truth_path.empty()) die("--truth FILE is required");
  g_rank = env_int("OMPI_COMM_WORLD_RANK", 0);
  g_world = env_int("OMPI_COMM_WORLD_SIZE", 1);

  if (cudaSetDevice(0) != cudaSuccess) die("cudaSetDevice");
  cudaStream_t stream = nullptr;
  if (cudaStreamCreate(&stream) != cudaSuccess) die("cudaStreamCreate");
  void* buf = nullptr;
  if (cudaMalloc(&buf, size_t{1} << 24) != cudaSuccess) die("cudaMalloc");

  // simgpu's ncclGetUniqueId gives the k-th call the same id in every process.
  Comm world{"world", nullptr, g_world, 0};
  Comm twin{"twin", nullptr, g_world, 0};
  ncclUniqueId id;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = g_nonblocking ? 0 : 1;
  if (ncclGetUniqueId(&id) != ncclSuccess) die("ncclGetUniqueId");
  if (ncclCommInitRankConfig(&world.handle, g_world, id, g_rank, &config) != ncclSuccess) die("init world");
  if (ncclGetUniqueId(&id) != ncclSuccess) die("ncclGetUniqueId");
  if (ncclCommInitRankConfig(&twin.handle, g_world, id, g_rank, &config) != ncclSuccess) die("init twin");

  if (graph_replays > 0) {
    run_graph(world, stream, buf, graph_replays);
  } else if (v2_32) {
    run_v2_32(world, stream, buf);
  } else {
    run(world, twin, stream, buf);
  }
  uint64_t hung_seq = 0;
  if (hang_sec >= 0) {
    nccl("ncclAllGather", "AllGather", 64 * 4 * uint64_t(g_world), world, "AllGather",
         [&] { return ncclAllGather(buf, buf, 64, ncclFloat32, world.handle, stream); });
    nccl("ncclAllReduce", "AllReduce", 4096 * 4, world, "AllReduce",
         [&] { return ncclAllReduce(buf, buf, 4096, ncclFloat32, ncclSum, world.handle, stream); });
    if (cudaStreamSynchronize(stream) != cudaSuccess) die("cudaStreamSynchronize");
    // simgpu's engine (libcudart here, or linked in): looked up so both builds of the program link alike.
    auto hang_next = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "simgpuHangNextCollective"));
    if (!hang_next) die("simgpuHangNextCollective not found");
    hang_next();
    nccl("ncclAllReduce", "AllReduce", 8192 * 4, world, "AllReduce",
         [&] { return ncclAllReduce(buf, buf, 8192, ncclFloat32, ncclSum, world.handle, stream); });
    hung_seq = world.enqueued;
  } else if (cudaStreamSynchronize(stream) != cudaSuccess) {
    die("cudaStreamSynchronize");
  }

  nlohmann::json truth;
  truth["simulated"] = true;
  truth["rank"] = g_rank;
  truth["world_size"] = g_world;
  truth["comm"] = nlohmann::json::array();
  for (const auto& [key, row] : g_rows) {
    truth["comm"].push_back({{"op", key.first}, {"comm_size", key.second}, {"calls", row.calls},
                             {"bytes", row.bytes}});
  }
  truth["communicators"] = nlohmann::json::array();
  for (const Comm* c : {&world, &twin}) {
    truth["communicators"].push_back(
        {{"name", c->name}, {"size", c->size}, {"rank", g_rank}, {"ops_enqueued", c->enqueued}});
  }
  truth["kernels_by_name"] = g_kernels;
  if (hang_sec >= 0) truth["hung_seq"] = hung_seq;
  std::ofstream(truth_path) << truth.dump(2) << "\n";
  if (hang_sec >= 0) {
    std::this_thread::sleep_for(std::chrono::seconds(hang_sec));
    std::exit(0);  // the hung work never completes: no synchronisation, no teardown
  }

  ncclCommDestroy(twin.handle);
  ncclCommDestroy(world.handle);
  cudaFree(buf);
  cudaStreamDestroy(stream);
  return 0;
}
