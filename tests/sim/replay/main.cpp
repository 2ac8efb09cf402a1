// sim_replay — plays a real torch.profiler (Kineto) trace on simgpu, the SIMULATED GPU, through the
// public CUDA, NVTX and NCCL calls a real program makes, so a profiler preloaded into it (traintime)
// runs unmodified. See tests/sim/README.md, "Replaying real traces".
//
//   build/bin/sim_replay TRACE [--mode bare|annotated] [--speed X|max]
//
// One thread per recorded thread, in the recorded global order (a sequencer by timestamp: every
// launch falls in the step it fell in, whatever this machine's speed), paced on the CPU at X
// times the recorded speed. The GPU timeline is the recording's: every activity runs at its
// recorded time on its recorded stream for its recorded duration (simgpu's replay schedule).
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <nvtx3/nvToolsExt.h>

#include "kineto_trace.h"
#include "replay_plan.h"
#include "simgpu/engine.h"
#include "simgpu/nvcc_runtime_decls.h"
#include "traintime/traintime.h"

namespace sim_replay {
namespace {

// Gives each thread its turn in the plan's global order.
class Sequencer {
 public:
  Sequencer(const Plan& plan) : cvs_(plan.threads.size()), owner_(plan.items.size()) {
    for (size_t i = 0; i < plan.items.size(); ++i) owner_[i] = plan.items[i].thread;
  }
  void wait_turn(size_t item, size_t thread) {
    std::unique_lock<std::mutex> lock(mu_);
    cvs_[thread].wait(lock, [&] { return turn_ == item; });
  }
  void done(size_t item) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      turn_ = item + 1;
    }
    if (item + 1 < owner_.size()) cvs_[owner_[item + 1]].notify_one();
  }

 private:
  std::mutex mu_;
  std::vector<std::condition_variable> cvs_;
  std::vector<size_t> owner_;
  size_t turn_ = 0;
};

size_t nccl_type_size(int t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

// Everything set up before the first recorded call: streams with their recorded ids, kernels
// registered under their recorded names, buffers, events, communicators, graphs.
class Replayer {
 public:
  Replayer(const Trace& trace, const Plan& plan, double speed)
      : trace_(trace), plan_(plan), speed_(speed), sequencer_(plan) {}

  bool set_up();
  void play();
  void tear_down();
  std::string summary() const;
  int exit_status() const { return failures_.empty() && not_reproduced_ == 0 ? 0 : 1; }

 private:
  uint64_t virtual_ns(int64_t trace_ns) const {
    return origin_ + static_cast<uint64_t>(trace_ns - plan_.first_ns);
  }
  cudaStream_t stream(uint32_t id) const {
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : it->second;
  }
  const char* host_fun(const std::string& name);
  void schedule(const Item& item);
  void run_thread(size_t thread);
  void run_item(const Item& item);
  void launch_kernel(const GpuActivity& a, LaunchApi api, cudaStream_t s, const std::string& api_name);
  void copy(const GpuActivity& a, cudaStream_t s, const std::string& api_name);
  void nccl(const NcclCall& call, cudaStream_t s);
  void check(bool ok, const std::string& what) {
    if (ok) return;
    std::lock_guard<std::mutex> lock(failures_mu_);
    ++failures_[what];
  }

  const Trace& trace_;
  const Plan& plan_;
  double speed_;  // 0: as fast as the sequencer goes
  Sequencer sequencer_;
  uint64_t origin_ = 0;
  std::chrono::steady_clock::time_point wall0_;
  std::map<uint32_t, cudaStream_t> streams_;
  cudaStream_t capture_stream_ = nullptr;
  void** fatbin_ = nullptr;
  std::map<std::string, std::unique_ptr<char>> kernels_;  // name -> host stub (its address)
  void* device_ = nullptr;
  void* device2_ = nullptr;
  void* pinned_ = nullptr;
  std::vector<char> pageable_;
  std::vector<cudaEvent_t> events_;
  size_t next_event_ = 0;
  cudaEvent_t last_event_ = nullptr;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaGraphExec_t> graphs_;
  uint64_t not_reproduced_ = 0;
  std::mutex failures_mu_;
  std::map<std::string, uint64_t> failures_;
};

const char* Replayer::host_fun(const std::string& name) {
  auto& slot = kernels_[name];
  if (!slot) {
    slot = std::make_unique<char>(0);
    __cudaRegisterFunction(fatbin_, slot.get(), nullptr, name.c_str(), -1, nullptr, nullptr, nullptr, nullptr,
                           nullptr);
  }
  return slot.get();
}

void Replayer::launch_kernel(const GpuActivity& a, LaunchApi api, cudaStream_t s, const std::string& api_name) {
  const dim3 grid(a.grid[0], a.grid[1], a.grid[2]), block(a.block[0], a.block[1], a.block[2]);
  const char* f = host_fun(a.name);
  void* args[1] = {nullptr};
  bool ok = false;
  switch (api) {
    case LaunchApi::kCudaLaunchKernel:
      ok = cudaLaunchKernel(f, grid, block, args, a.shared_mem, s) == cudaSuccess;
      break;
    case LaunchApi::kNvccLaunch: {
      cudaKernel_t kernel = nullptr;
      ok = __cudaGetKernel(&kernel, f) == cudaSuccess &&
           __cudaLaunchKernel(kernel, grid, block, args, a.shared_mem, s) == cudaSuccess;
      break;
    }
    case LaunchApi::kCudaLaunchKernelExC: {
      cudaLaunchConfig_t config{};
      config.gridDim = grid;
      config.blockDim = block;
      config.dynamicSmemBytes = a.shared_mem;
      config.stream = s;
      ok = cudaLaunchKernelExC(&config, f, args) == cudaSuccess;
      break;
    }
    case LaunchApi::kCuLaunchKernel:
      ok = cuLaunchKernel(reinterpret_cast<CUfunction>(const_cast<char*>(f)), grid.x, grid.y, grid.z, block.x,
                          block.y, block.z, a.shared_mem, reinterpret_cast<CUstream>(s), args, nullptr) == CUDA_SUCCESS;
      break;
    case LaunchApi::kCuLaunchKernelEx: {
      CUlaunchConfig config{};
      config.gridDimX = grid.x, config.gridDimY = grid.y, config.gridDimZ = grid.z;
      config.blockDimX = block.x, config.blockDimY = block.y, config.blockDimZ = block.z;
      config.sharedMemBytes = a.shared_mem;
      config.hStream = reinterpret_cast<CUstream>(s);
      ok = cuLaunchKernelEx(&config, reinterpret_cast<CUfunction>(const_cast<char*>(f)), args, nullptr) ==
           CUDA_SUCCESS;
      break;
    }
  }
  check(ok, api_name);
}

void Replayer::copy(const GpuActivity& a, cudaStream_t s, const std::string& api_name) {
  if (a.kind == GpuKind::kMemset) {
    check(cudaMemsetAsync(device_, 0, a.bytes, s) == cudaSuccess, api_name);
    return;
  }
  auto host = [&](MemoryKind k) -> void* { return k == MemoryKind::kPinned ? pinned_ : pageable_.data(); };
  cudaError_t r;
  switch (a.copy_kind) {
    case CopyKind::kHtoD: r = cudaMemcpyAsync(device_, host(a.src), a.bytes, cudaMemcpyHostToDevice, s); break;
    case CopyKind::kDtoH: r = cudaMemcpyAsync(host(a.dst), device_, a.bytes, cudaMemcpyDeviceToHost, s); break;
    case CopyKind::kHtoH: r = cudaMemcpyAsync(pageable_.data(), pinned_, a.bytes, cudaMemcpyHostToHost, s); break;
    case CopyKind::kPtoP: r = cudaMemcpyPeerAsync(device2_, 0, device_, 0, a.bytes, s); break;
    default: r = cudaMemcpyAsync(device2_, device_, a.bytes, cudaMemcpyDeviceToDevice, s); break;
  }
  check(r == cudaSuccess, api_name);
}

void Replayer::nccl(const NcclCall& call, cudaStream_t s) {
  ncclComm_t comm = comms_[call.comm];
  const auto type = static_cast<ncclDataType_t>(call.datatype);
  const auto op = static_cast<ncclRedOp_t>(call.redop);
  const Communicator& c = plan_.comms[call.comm];
  const int next = (c.rank + 1) % c.size, prev = (c.rank + c.size - 1) % c.size;
  void* buf = device_;
  ncclResult_t r = ncclSuccess;
  switch (call.op) {
    case NcclOp::kAllReduce: r = ncclAllReduce(buf, buf, call.count, type, op, comm, s); break;
    case NcclOp::kBroadcast: r = ncclBroadcast(buf, buf, call.count, type, 0, comm, s); break;
    case NcclOp::kReduce: r = ncclReduce(buf, buf, call.count, type, op, 0, comm, s); break;
    case NcclOp::kAllGather: r = ncclAllGather(buf, device2_, call.count, type, comm, s); break;
    case NcclOp::kReduceScatter: r = ncclReduceScatter(device2_, buf, call.count, type, op, comm, s); break;
    case NcclOp::kAlltoAll: r = ncclAlltoAll(buf, device2_, call.count, type, comm, s); break;
    case NcclOp::kSend: r = ncclSend(buf, call.count, type, next, comm, s); break;
    case NcclOp::kRecv: r = ncclRecv(buf, call.count, type, prev, comm, s); break;
    case NcclOp::kGather: r = ncclGather(buf, device2_, call.count, type, 0, comm, s); break;
    case NcclOp::kScatter: r = ncclScatter(buf, device2_, call.count, type, 0, comm, s); break;
    case NcclOp::kSendRecv: {
      ncclResult_t a = ncclGroupStart();
      ncclResult_t b = ncclSend(buf, call.count, type, next, comm, s);
      ncclResult_t d = ncclRecv(device2_, call.count, type, prev, comm, s);
      ncclResult_t e = ncclGroupEnd();
      r = a != ncclSuccess ? a : b != ncclSuccess ? b : d != ncclSuccess ? d : e;
      break;
    }
  }
  check(r == ncclSuccess, "NCCL call");
}

bool Replayer::set_up() {
  simgpuReplayClock(1);
  if (cudaSetDevice(0) != cudaSuccess) return false;
  fatbin_ = __cudaRegisterFatBinary(nullptr);
  uint32_t top = 7;
  for (uint32_t id : plan_.streams) {
    top = std::max(top, id);
    if (id == 7) {
      streams_[id] = nullptr;  // the legacy default stream (CUPTI's stream 7)
      continue;
    }
    cudaStream_t s = nullptr;
    simgpuSetNextStreamId(id);
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return false;
    streams_[id] = s;
  }
  simgpuSetNextStreamId(top + 1);
  if (cudaStreamCreateWithFlags(&capture_stream_, cudaStreamNonBlocking) != cudaSuccess) return false;
  // Buffers as large as the largest copy (simgpu moves no data: device memory is addresses only).
  uint64_t dev = 1, pinned = 1, pageable = 1;
  for (const GpuActivity& a : trace_.activities) {
    if (a.kind == GpuKind::kKernel) continue;
    dev = std::max(dev, a.bytes);
    if (a.src == MemoryKind::kPinned || a.dst == MemoryKind::kPinned) pinned = std::max(pinned, a.bytes);
  }
  for (const Item& it : plan_.items)
    if (it.action == Action::kNccl) dev = std::max<uint64_t>(dev, it.nccl.count * nccl_type_size(it.nccl.datatype) * 2);
  pageable_.resize(pageable);
  if (cudaMalloc(&device_, dev) != cudaSuccess || cudaMalloc(&device2_, dev) != cudaSuccess ||
      cudaMallocHost(&pinned_, pinned) != cudaSuccess)
    return false;
  events_.resize(64);
  for (cudaEvent_t& e : events_)
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) return false;
  for (const Communicator& c : plan_.comms) {
    ncclUniqueId id;
    ncclComm_t comm = nullptr;
    if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, c.size, id, c.rank) != ncclSuccess)
      return false;
    comms_.push_back(comm);
  }
  // Graphs: captured once from the activities of their first launch, replayed at every launch.
  for (const GraphShape& g : plan_.graphs) {
    if (cudaStreamBeginCapture(capture_stream_, cudaStreamCaptureModeGlobal) != cudaSuccess) return false;
    for (size_t w : g.nodes) {
      const GpuActivity& a = trace_.activities[w];
      if (a.kind != GpuKind::kKernel) {
        copy(a, capture_stream_, "graph capture");
      } else if (is_nccl_kernel_name(a.name)) {
        // NCCL captured into a graph: the call, under the recorded kernel's name.
        const simgpu_replay_work named{0, 0, 0, a.name.c_str()};
        simgpuReplayNext(&named, 1);
        NcclCall call = nccl_call_from_kernel_name(a.name);
        call.comm = plan_.graph_comm;
        nccl(call, capture_stream_);
        simgpuReplayNext(nullptr, 0);
      } else {
        launch_kernel(a, LaunchApi::kCudaLaunchKernel, capture_stream_, "graph capture");
      }
    }
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    if (cudaStreamEndCapture(capture_stream_, &graph) != cudaSuccess ||
        cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
      return false;
    cudaGraphDestroy(graph);
    graphs_.push_back(exec);
  }
  // The replay's virtual time: the trace's, shifted to start just after the set-up.
  origin_ = simgpu_host_now() + 1'000'000;
  return true;
}

void Replayer::schedule(const Item& item) {
  std::vector<simgpu_replay_work> works;
  works.reserve(item.works.size());
  for (size_t w : item.works) {
    const GpuActivity& a = trace_.activities[w];
    works.push_back({virtual_ns(a.start_ns), static_cast<uint64_t>(a.dur_ns), a.stream,
                     item.action == Action::kNccl ? a.name.c_str() : nullptr});
  }
  simgpuReplayNext(works.data(), works.size());
}

void Replayer::run_item(const Item& item) {
  switch (item.action) {
    case Action::kRangeStart: nvtxRangePushA(item.name.c_str()); return;
    case Action::kRangeEnd: nvtxRangePop(); return;
    case Action::kStep: tt_step(0, 0); return;
    default: break;
  }
  simgpuAdvanceHostNs(virtual_ns(item.ts_ns));
  const cudaStream_t s = stream(item.stream);
  if (!item.works.empty()) schedule(item);
  switch (item.action) {
    case Action::kLaunch: launch_kernel(trace_.activities[item.works[0]], item.api, s, item.name); break;
    case Action::kMemcpy:
    case Action::kMemset: copy(trace_.activities[item.works[0]], s, item.name); break;
    case Action::kGraph: check(cudaGraphLaunch(graphs_[item.graph], s) == cudaSuccess, item.name); break;
    case Action::kNccl: nccl(item.nccl, s); break;
    case Action::kDeviceSync: check(cudaDeviceSynchronize() == cudaSuccess, item.name); break;
    case Action::kStreamSync: check(cudaStreamSynchronize(s) == cudaSuccess, item.name); break;
    case Action::kEventRecord:
      last_event_ = events_[next_event_++ % events_.size()];
      check(cudaEventRecord(last_event_, s) == cudaSuccess, item.name);
      break;
    case Action::kEventSync:
      check(cudaEventSynchronize(last_event_ ? last_event_ : events_[0]) == cudaSuccess, item.name);
      break;
    case Action::kStreamWaitEvent:
      check(cudaStreamWaitEvent(s, last_event_ ? last_event_ : events_[0], 0) == cudaSuccess, item.name);
      break;
    default: break;
  }
  if (!item.works.empty()) {
    // Work the call did not enqueue (an NCCL call that launches nothing, a failed call): named
    // in the summary; never left for the next call to take.
    not_reproduced_ += simgpuReplayPending();
    simgpuReplayNext(nullptr, 0);
  }
}

void Replayer::run_thread(size_t thread) {
  const ReplayThread& t = plan_.threads[thread];
  if (!t.name.empty()) pthread_setname_np(pthread_self(), t.name.substr(0, 15).c_str());
  for (size_t i = 0; i < plan_.items.size(); ++i) {
    const Item& item = plan_.items[i];
    if (item.thread != thread) continue;
    sequencer_.wait_turn(i, thread);
    if (speed_ > 0) {
      const auto at = wall0_ + std::chrono::nanoseconds(
                                   static_cast<int64_t>(static_cast<double>(item.ts_ns - plan_.first_ns) / speed_));
      std::this_thread::sleep_until(at);
    }
    run_item(item);
    sequencer_.done(i);
  }
}

void Replayer::play() {
  wall0_ = std::chrono::steady_clock::now();
  std::vector<std::thread> others;
  size_t main = 0;
  for (size_t t = 0; t < plan_.threads.size(); ++t) {
    if (plan_.threads[t].main) main = t;
    else others.emplace_back([this, t] { run_thread(t); });
  }
  run_thread(main);
  for (std::thread& t : others) t.join();
}

void Replayer::tear_down() {
  cudaDeviceSynchronize();
  for (ncclComm_t c : comms_) ncclCommDestroy(c);
  for (cudaGraphExec_t g : graphs_) cudaGraphExecDestroy(g);
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
  cudaFree(device_);
  cudaFree(device2_);
  cudaFreeHost(pinned_);
}

std::string plural(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string Replayer::summary() const {
  const Counts& n = plan_.counts;
  const Unplayed& u = trace_.unplayed;
  std::ostringstream s;
  s << "sim_replay: replayed " << trace_.path << " (" << (plan_.mode == Mode::kBare ? "bare" : "annotated")
    << ", rank " << plan_.rank << " of " << plan_.world_size << ", SIMULATED GPU): "
    << plural(plan_.threads.size(), "thread", "threads") << ", " << plural(n.launches, "kernel launch", "kernel launches")
    << ", " << plural(n.memcpys, "memcpy", "memcpys") << ", " << plural(n.memsets, "memset", "memsets") << ", "
    << plural(n.graph_launches, "graph launch", "graph launches") << " (" << plural(plan_.graphs.size(), "graph", "graphs")
    << "), " << plural(n.nccl_calls, "NCCL call", "NCCL calls") << " ("
    << n.nccl_sized_by_name << " sized by kernel name: count 1, bytes unknown), "
    << plural(n.syncs, "synchronisation", "synchronisations");
  if (plan_.mode == Mode::kAnnotated)
    s << ", " << plural(n.ranges, "range", "ranges") << " (" << n.ranges_cut << " cut at their parent's end), "
      << plural(n.steps, "step", "steps");
  s << "; " << plural(n.activities, "GPU activity", "GPU activities") << " (" << simgpuReplayClamped()
    << " started at their launch, recorded earlier";
  if (not_reproduced_) s << "; " << not_reproduced_ << " NOT reproduced";
  s << "); skipped: " << plural(u.cpu_ops, "CPU op", "CPU ops") << ", " << plural(u.flows, "flow event", "flow events")
    << ", " << plural(u.instants, "instant event", "instant events") << ", "
    << plural(n.invalid_without_work, "INVALID runtime call", "INVALID runtime calls") << " with no GPU work, "
    << plural(n.calls_without_work, "runtime/driver call", "runtime/driver calls") << " with no GPU work or synchronisation, "
    << plural(n.no_launch, "GPU activity", "GPU activities") << " without its launch (" << n.no_launch_kernels
    << " kernels, " << n.no_launch_memcpys << " memcpys, " << n.no_launch_memsets << " memsets), "
    << plural(u.gpu_annotations, "GPU annotation", "GPU annotations") << ", "
    << plural(u.metadata + u.other, "other event", "other events");
  if (plan_.mode == Mode::kBare) s << ", " << trace_.annotations.size() << " annotations (bare)";
  if (!plan_.substitutions.empty()) {
    s << "; substituted:";
    for (const auto& [what, count] : plan_.substitutions) s << " " << what << " (" << count << ")";
  }
  if (!failures_.empty()) {
    s << "; FAILED:";
    for (const auto& [what, count] : failures_) s << " " << what << " (" << count << ")";
  }
  return s.str();
}

// The device name the rank file will carry: simgpu's, saying what it replays and where the
// recording ran.
std::string device_name(const Trace& trace, const Plan& plan) {
  std::string file = trace.path.substr(trace.path.find_last_of('/') + 1);
  if (file.size() > 120) file = file.substr(0, 117) + "...";
  std::string name = "simgpu (SIMULATED GPU) replaying " + file;
  if (!plan.device_name.empty()) name += " recorded on " + plan.device_name;
  return name.substr(0, 250);
}

uint64_t process_cpu_ns() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto ns = [](const timeval& t) { return static_cast<uint64_t>(t.tv_sec) * 1'000'000'000u + t.tv_usec * 1000u; };
  return ns(u.ru_utime) + ns(u.ru_stime);
}

// --stats: what scripts/bench.sh's replay row divides by.
void write_stats(const std::string& path, const Trace& trace, const Plan& plan, uint64_t cpu_before,
                 uint64_t cpu_after, uint64_t wall_ns) {
  const Counts& n = plan.counts;
  const uint64_t launches = n.launches + n.memcpys + n.memsets + n.graph_launches + n.nccl_calls;
  int64_t first = 0, last = 0;
  bool any = false;
  for (const Item& it : plan.items) {
    if (it.works.empty()) continue;
    if (!any) first = it.ts_ns;
    last = it.ts_ns;
    any = true;
  }
  const double span_s = static_cast<double>(last - first) / 1e9;
  std::string name = trace.path.substr(trace.path.find_last_of('/') + 1);
  std::replace_if(name.begin(), name.end(), [](char c) { return c == '"' || c == '\\' || c < ' '; }, '_');
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "sim_replay: --stats %s: cannot write (%s)\n", path.c_str(), std::strerror(errno));
    return;
  }
  std::fprintf(f,
               "{\"trace\": \"%s\", \"launch_calls\": %llu, \"activities\": %llu, \"recorded_span_ns\": %lld, "
               "\"launches_per_s\": %.1f, \"cpu_ns_before_play\": %llu, \"cpu_ns_after_play\": %llu, "
               "\"wall_ns_play\": %llu}\n",
               name.c_str(), static_cast<unsigned long long>(launches),
               static_cast<unsigned long long>(n.activities), static_cast<long long>(last - first),
               span_s > 0 ? static_cast<double>(launches) / span_s : 0.0, static_cast<unsigned long long>(cpu_before),
               static_cast<unsigned long long>(cpu_after), static_cast<unsigned long long>(wall_ns));
  std::fclose(f);
}

int run(int argc, char** argv) {
  CLI::App app{"sim_replay: plays a torch.profiler (Kineto) trace on simgpu, the SIMULATED GPU, through the "
               "CUDA, NVTX and NCCL calls a real program makes (tests/sim/README.md)"};
  std::string path, mode_text = "bare", speed_text = "1", stats_path;
  app.add_option("TRACE", path, "the trace (.json or .json.gz)")->required();
  app.add_option("--mode", mode_text,
                 "bare: no annotation at all; annotated: the trace's user_annotation ranges as NVTX ranges and "
                 "each ProfilerStep#N as a step (tt_step)")
      ->check(CLI::IsMember({"bare", "annotated"}))
      ->capture_default_str();
  app.add_option("--speed", speed_text,
                 "CPU pacing: X times the recorded speed, or max (no pacing; the order stays the recorded one)")
      ->capture_default_str();
  app.add_option("--stats", stats_path,
                 "write the replay's figures as JSON (scripts/bench.sh): launch calls, the recorded launch rate, "
                 "this process's CPU time before and after playing");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  double speed = 0;
  if (speed_text != "max") {
    char* end = nullptr;
    speed = std::strtod(speed_text.c_str(), &end);
    if (end == speed_text.c_str() || *end != '\0' || !(speed > 0)) {
      std::fprintf(stderr, "sim_replay: --speed %s: give a positive number (times the recorded speed) or max\n",
                   speed_text.c_str());
      return 2;
    }
  }
  const Mode mode = mode_text == "annotated" ? Mode::kAnnotated : Mode::kBare;
  Trace trace;
  Plan plan;
  try {
    trace = read_kineto_trace(path);
    plan = make_plan(trace, mode);
  } catch (const TraceError& e) {
    std::fprintf(stderr, "sim_replay: %s\n", e.what());
    return 2;
  }
  // The rank and world size the profiler reads at load: the trace's own unless the launcher's
  // RANK and WORLD_SIZE are set. A process that has made no CUDA call yet starts over with them.
  const char* rank = std::getenv("RANK");
  const char* world = std::getenv("WORLD_SIZE");
  if (!(rank && *rank && world && *world)) {
    setenv("RANK", std::to_string(plan.rank).c_str(), 1);
    setenv("WORLD_SIZE", std::to_string(plan.world_size).c_str(), 1);
    setenv("SIMGPU_DEVICE_NAME", device_name(trace, plan).c_str(), 1);
    execv("/proc/self/exe", argv);
    std::fprintf(stderr, "sim_replay: cannot start over with RANK and WORLD_SIZE set (%s)\n", std::strerror(errno));
    return 1;
  }
  setenv("SIMGPU_DEVICE_NAME", device_name(trace, plan).c_str(), 1);
  Replayer replayer(trace, plan, speed);
  if (!replayer.set_up()) {
    std::fprintf(stderr, "sim_replay: %s: the simulated CUDA/NCCL set-up failed (is build/sim first on the "
                         "library path?)\n", path.c_str());
    return 1;
  }
  const uint64_t cpu_before = process_cpu_ns();
  const auto wall_before = std::chrono::steady_clock::now();
  replayer.play();
  replayer.tear_down();
  const uint64_t cpu_after = process_cpu_ns();
  const auto wall_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                            wall_before).count();
  std::fprintf(stderr, "%s\n", replayer.summary().c_str());
  if (!stats_path.empty()) write_stats(stats_path, trace, plan, cpu_before, cpu_after, static_cast<uint64_t>(wall_ns));
  return replayer.exit_status();
}

}  // namespace
}  // namespace sim_replay

int main(int argc, char** argv) { return sim_replay::run(argc, argv); }
