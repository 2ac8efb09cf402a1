// sim_train — a SIMULATED data-parallel training program for the simulated GPU (simgpu).
//
// Per step: io (host-to-device copies), forward (L layers, each in its own region), backward
// launched from a second thread (as PyTorch's autograd engine does) while the main thread sits
// in "backward", bucketed AllReduce on a comm stream overlapping backward, optimizer, tt_step.
// With --rare-thread a third thread (a prefetcher) launches one kernel a step, in its own "io".
// With --truth it writes the exact expected result from its own executed schedule.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <nvtx3/nvToolsExt.h>

#include "traintime/nccl/nccl_2_32.h"

#include "labels.h"
#include "simgpu/engine.h"
#include "simgpu/nvcc_runtime_decls.h"
#include "traintime/traintime.h"
#include "truth.h"

namespace sim_train {
namespace {

struct Options {
  uint64_t steps = 20;
  int layers = 4;
  int bucket_layers = 2;
  bool graphs = false;
  bool nvtx = false;
  bool recompute = false;  // --recompute: activation checkpointing re-runs the first layers in backward
  bool world_check = false;
  bool stray_work = false;
  bool record_before_cuda = false;
  uint64_t sigterm_after_step = 0;  // 0: never
  std::string truth;
  int fork_workers = 0;        // --fork-workers: DataLoader-like children forked after CUDA init
  bool workers_record = false;  // --workers-record: each child opens a region of its own
  std::string profiler_client;                // --profiler-client: the library to load
  std::vector<std::string> profiler_windows;  // --profiler-window START:STOP
  std::string metrics_log;   // --metrics-log: tt_metrics() after every step, as JSON lines
  double flops_per_step = 0;  // --flops-per-step: tt_set_flops
  uint32_t step_sleep_us = 0;  // --step-sleep-us: real time per step (the CPU loop's pace)
  bool nccl_2_32 = false;  // --nccl-2-32: ncclAllReduceConfig and the one-sided calls
  std::string steps_file;     // --steps-file: steps done, rewritten after every tt_step
  bool alloc_per_step = false;  // --alloc-per-step: activations, a pool workspace and a growing cache
  bool vmm = false;  // --vmm: with --alloc-per-step, VMM memory as expandable segments and NCCL make it
  bool no_step_marker = false;  // --no-step-marker: neither tt_step nor an NVTX "step" range
  int accumulate = 1;           // --accumulate: micro-batches per optimizer step (DDP's no_sync)
  uint64_t eval_every = 0;      // --eval-every: a forward-only evaluation loop after every K steps
  std::string pause_at;         // --pause-at STEP:MS: the host pauses before STEP (a checkpoint save)
  bool rare_thread = false;     // --rare-thread: a prefetch thread launches one kernel a step in "io"
  bool anchor_kernel = false;   // --anchor-kernel: AMP's loss-scale update, once per optimizer step, last
};

// A window of the in-process profiler client (tests/sim/tests/profiler_client.cpp): started
// before step `start`, stopped after step `stop` - 1, and what it reported.
struct ProfilerWindow {
  uint64_t start = 0, stop = 0;
  uint64_t kernels_seen = 0, foreign_buffers = 0, t_start = 0, t_stop = 0;
  // Its callbacks inside the window: launch ENTER/EXIT, calls it did not enable, wrong userdata.
  uint64_t launch_enter = 0, launch_exit = 0, unwanted_callbacks = 0, wrong_userdata = 0;
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "sim_train [SIMULATED GPU]: %s\n", what.c_str());
  std::exit(2);
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(e));
}
void check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) die(std::string(what) + ": CUresult " + std::to_string(static_cast<int>(r)));
}
void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) die(std::string(what) + ": " + ncclGetErrorString(r));
}

int env_int(std::initializer_list<const char*> vars, int fallback) {
  for (const char* v : vars) {
    const char* s = std::getenv(v);
    if (s && *s) return std::atoi(s);
  }
  return fallback;
}

// The simulated kernels, registered the way nvcc's generated code registers them; their names
// are mangled like real kernels so the profiler has to demangle them.
struct Kernels {
  char embed, gemm, gelu, loss, gemm_bwd, gelu_bwd, adam, scale;  // host stubs: only the addresses matter
  cudaKernel_t h_embed, h_gemm, h_gelu, h_loss, h_gemm_bwd, h_gelu_bwd, h_scale;
  void register_all() {
    static const char fatbin[] = "simgpu fat binary (simulated)";
    void** handle = __cudaRegisterFatBinary(const_cast<char*>(fatbin));
    const std::pair<const char*, const char*> table[] = {
        {&embed, "_Z16embedding_kernelPKiPKfPfi"}, {&gemm, "_Z11gemm_kernelPKfS0_Pfiii"},
        {&gelu, "_Z15gelu_fwd_kernelPKfPfi"},      {&loss, "_Z11loss_kernelPKfPfi"},
        {&gemm_bwd, "_Z15gemm_bwd_kernelPKfS0_Pfiii"}, {&gelu_bwd, "_Z15gelu_bwd_kernelPKfS0_Pfi"},
        {&adam, "_Z11adam_kernelPfPKfS_S_fi"},     {&scale, "_Z23amp_update_scale_kernelPfPiPKf"}};
    for (const auto& [fun, name] : table)
      __cudaRegisterFunction(handle, fun, const_cast<char*>(name), name, -1, nullptr, nullptr, nullptr, nullptr, nullptr);
    __cudaRegisterFatBinaryEnd(handle);
    check(__cudaGetKernel(&h_embed, &embed), "__cudaGetKernel");
    check(__cudaGetKernel(&h_gemm, &gemm), "__cudaGetKernel");
    check(__cudaGetKernel(&h_gelu, &gelu), "__cudaGetKernel");
    check(__cudaGetKernel(&h_loss, &loss), "__cudaGetKernel");
    check(__cudaGetKernel(&h_gemm_bwd, &gemm_bwd), "__cudaGetKernel");
    check(__cudaGetKernel(&h_gelu_bwd, &gelu_bwd), "__cudaGetKernel");
    check(__cudaGetKernel(&h_scale, &scale), "__cudaGetKernel");
  }
};

// Regions through the traintime API or NVTX, with sim_train's own copy of the path.
class Regions {
 public:
  explicit Regions(bool nvtx) : nvtx_(nvtx) {}
  void push(const std::string& name) {
    names_.push_back(name);
    if (nvtx_) nvtxRangePushA(names_.back().c_str());
    else tt_push(names_.back().c_str());
  }
  // A region registered in a category of its own (the traintime API only).
  void push(const std::string& name, tt_category category) {
    names_.push_back(name);
    tt_push_category(category, names_.back().c_str());
  }
  void pop() {
    if (nvtx_) nvtxRangePop();
    else tt_pop();
    names_.pop_back();
  }
  std::string path() const {
    std::string p;
    for (const auto& n : names_) p += (p.empty() ? "" : "/") + n;
    return p;
  }

 private:
  bool nvtx_;
  std::vector<std::string> names_;
};

class Trainer {
 public:
  Trainer(const Options& o, int rank, int world) : opt_(o), rank_(rank), world_(world), regions_(o.nvtx) {
    if (!o.pause_at.empty()) {
      unsigned long long step = 0, ms = 0;
      char tail = 0;
      if (std::sscanf(o.pause_at.c_str(), "%llu:%llu%c", &step, &ms, &tail) != 2)
        die("--pause-at wants STEP:MS, got " + o.pause_at);
      pause_step_ = step;
      pause_ms_ = ms;
    }
  }

  void setup() {
    load_profiler();
    kernels_.register_all();
    check(cudaSetDevice(0), "cudaSetDevice");
    check(cudaStreamCreate(&compute_), "cudaStreamCreate");
    check(cudaStreamCreate(&comm_stream_), "cudaStreamCreate");
    check(cudaEventCreateWithFlags(&comm_done_, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaMallocHost(&host_batch_, kBatchBytes), "cudaMallocHost");
    check(cudaMallocHost(&host_labels_, kLabelBytes), "cudaMallocHost");
    check(cudaMallocHost(&host_loss_, sizeof(float)), "cudaMallocHost");
    dev_malloc(&dev_batch_, kBatchBytes);
    dev_malloc(&dev_labels_, kLabelBytes);
    dev_malloc(&dev_loss_, sizeof(float));
    dev_malloc(&dev_grads_, kGradBytesPerLayer * opt_.layers);
    if (opt_.vmm) {
      check(cuMemAddressReserve(&segment_base_, size_t{1} << 30, 0, 0, 0), "cuMemAddressReserve");
      segment_end_ = segment_base_;
      check(cuMemAddressReserve(&comm_buffer_, kCommBufferBytes, 0, 0, 0), "cuMemAddressReserve");
    }
    if (opt_.graphs) capture_forward();
    // Last in setup: the communicator's creation is where the straggler model starts counting.
    ncclUniqueId id;
    check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    check(ncclCommInitRank(&comm_, world_, id, rank_), "ncclCommInitRank");
    if (opt_.nccl_2_32) {
      check(ncclCommWindowRegister(comm_, dev_grads_, kGradBytesPerLayer * opt_.layers, &grads_window_, 0),
            "ncclCommWindowRegister");
    }
    if (opt_.world_check) world_check();
    worker_ = std::thread([this] { backward_worker(); });
    if (opt_.rare_thread) prefetcher_ = std::thread([this] { prefetch_worker(); });
  }

  void run() {
    for (uint64_t s = 0; s < opt_.steps; ++s) {
      step_ = s;
      for (ProfilerWindow& w : windows_)
        if (w.start == s) profiler_start();
      if (s == 1 && opt_.fork_workers > 0) fork_workers();
      if (opt_.stray_work) unattributed_work();
      const bool marked = !opt_.no_step_marker;
      if (s == pause_step_) std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms_));
      if (opt_.nvtx && marked) regions_.push("step");
      for (int micro = 0; micro < opt_.accumulate; ++micro) {
        // DDP's no_sync: the gradient AllReduce buckets run in the last micro-batch only.
        sync_grads_ = micro + 1 == opt_.accumulate;
        io_in();
        if (opt_.rare_thread) hand_off(&prefetch_job_);
        forward();
        backward();
      }
      optimizer();
      io_out();
      if (opt_.anchor_kernel) update_scale();
      if (opt_.step_sleep_us) std::this_thread::sleep_for(std::chrono::microseconds(opt_.step_sleep_us));
      if (opt_.nvtx && marked) regions_.pop();
      else if (marked) mark_step();
      if (!opt_.metrics_log.empty()) log_metrics(s);
      if (opt_.eval_every && (s + 1) % opt_.eval_every == 0 && s + 1 < opt_.steps) evaluate(s + 1);
      if (steps_fd_ >= 0) {  // in the page cache once written: it survives a SIGKILL
        const std::string done = std::to_string(s + 1) + "\n";
        if (pwrite(steps_fd_, done.data(), done.size(), 0) != static_cast<ssize_t>(done.size()))
          die("cannot write --steps-file");
      }
      for (ProfilerWindow& w : windows_)
        if (w.stop == s + 1) profiler_stop(&w);
      if (opt_.sigterm_after_step && s + 1 == opt_.sigterm_after_step) std::raise(SIGTERM);
    }
    if (opt_.stray_work) {
      // After the last step marker: a final, partial step (an evaluation pass, say).
      step_ = opt_.steps;
      unattributed_work();
      regions_.push("forward");
      launch(kernels_.h_loss, 100, Cat::kForward);
      regions_.pop();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    worker_.join();
    if (prefetcher_.joinable()) prefetcher_.join();
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }

  // --eval-every: two forward-only batches with no gradient collective, after a step's marker:
  // the work belongs to the step that follows, as work between two tt_step calls does.
  void evaluate(uint64_t next_step) {
    step_ = next_step;
    regions_.push("evaluate");
    for (int batch = 0; batch < 2; ++batch) {
      io_in();
      regions_.push("forward");
      forward_body();
      regions_.pop();
      io_out();
    }
    regions_.pop();
  }

  // tt_metrics() as the training loop sees it right after step `s` ended: one JSON object.
  // tt_step between two readings of the host's monotonic clock (the one traintime reads): the
  // metrics log carries them, so a test can bound each step's time without traintime's figures.
  void mark_step() {
    timespec before{}, after{};
    clock_gettime(CLOCK_MONOTONIC, &before);
    tt_step(kSamplesPerStep, kTokensPerStep);
    clock_gettime(CLOCK_MONOTONIC, &after);
    auto ns = [](const timespec& t) { return uint64_t(t.tv_sec) * 1000000000u + uint64_t(t.tv_nsec); };
    step_marks_ns_ = {ns(before), ns(after)};
  }

  void log_metrics(uint64_t s) {
    tt_metric m[64];
    const uint32_t n = tt_metrics(m, 64);
    nlohmann::json line = {{"after_step", s}, {"count", n}, {"step_marks_ns", step_marks_ns_}};
    for (uint32_t i = 0; i < n && i < 64; ++i) line["metrics"][m[i].name] = m[i].value;
    metrics_lines_.push_back(line.dump());
  }
  const std::vector<std::string>& metrics_lines() const { return metrics_lines_; }

  void teardown() {
    if (grads_window_) check(ncclCommWindowDeregister(comm_, grads_window_), "ncclCommWindowDeregister");
    check(ncclCommDestroy(comm_), "ncclCommDestroy");
    if (graph_exec_) check(cudaGraphExecDestroy(graph_exec_), "cudaGraphExecDestroy");
    if (graph_) check(cudaGraphDestroy(graph_), "cudaGraphDestroy");
    check(cudaEventDestroy(comm_done_), "cudaEventDestroy");
    step_ = opt_.steps;  // after the last step marker
    for (void* p : {dev_batch_, dev_labels_, dev_loss_, dev_grads_}) dev_free(p);
    for (void* p : cache_) dev_free(p);
    if (opt_.vmm) {
      if (segment_end_ != segment_base_) check(cuMemUnmap(segment_base_, segment_end_ - segment_base_), "cuMemUnmap");
      for (CUmemGenericAllocationHandle h : segment_pages_) vmm_release(h, kPageBytes);
      segment_pages_.clear();
      check(cuMemAddressFree(segment_base_, size_t{1} << 30), "cuMemAddressFree");
      check(cuMemAddressFree(comm_buffer_, kCommBufferBytes), "cuMemAddressFree");
    }
    for (void* p : {host_batch_, host_labels_, host_loss_}) check(cudaFreeHost(p), "cudaFreeHost");
    check(cudaStreamDestroy(compute_), "cudaStreamDestroy");
    check(cudaStreamDestroy(comm_stream_), "cudaStreamDestroy");
  }

  TruthInput truth_input() const {
    TruthInput in;
    in.rank = rank_;
    in.world_size = world_;
    in.steps = opt_.steps;
    in.steps_source = opt_.no_step_marker ? "detected" : "marker";
    in.comm_calls = comm_calls_;
    in.memory_ops = memory_ops_;
    in.memory_truth = opt_.alloc_per_step;
    in.options = {{"steps", opt_.steps}, {"layers", opt_.layers}, {"graphs", opt_.graphs}, {"nvtx", opt_.nvtx}, {"recompute", opt_.recompute},
                  {"stray_work", opt_.stray_work}, {"samples_per_step", kSamplesPerStep},
                  {"tokens_per_step", kTokensPerStep}};
    in.profiler_windows = nlohmann::json::array();
    const size_t n = simgpuTimelineCount();
    for (size_t i = 0; i < n; ++i) {
      simgpu_work w{};
      if (!simgpuTimelineGet(i, &w)) break;
      Activity a;
      a.kind = w.kind;
      a.start = w.start_ns;
      a.end = w.end_ns;
      a.bytes = w.bytes;
      a.copy_kind = w.copy_kind;
      a.cat = label_cat(w.label);  // graph nodes: as captured
      a.step = label_step(w.launch_label);  // always the step the launch happened in
      if (a.cat == Cat::kComm) a.comm_op = names_.name(label_id(w.label));
      else a.path = names_.name(label_id(w.label));
      in.activities.push_back(a);
    }
    // The profiler client's windows: what it saw against the kernels the simulated GPU ran
    // inside them (the device was idle at both ends, so the window holds whole steps).
    for (const ProfilerWindow& w : windows_) {
      uint64_t expected = 0;
      for (const Activity& a : in.activities)
        if (a.kind == SIMGPU_KERNEL && a.start >= w.t_start && a.end <= w.t_stop) ++expected;
      in.profiler_windows.push_back({{"start_step", w.start}, {"stop_step", w.stop},
                                     {"kernels_expected", expected}, {"kernels_seen", w.kernels_seen},
                                     {"foreign_buffers", w.foreign_buffers},
                                     {"launch_enter", w.launch_enter}, {"launch_exit", w.launch_exit},
                                     {"unwanted_callbacks", w.unwanted_callbacks},
                                     {"wrong_userdata", w.wrong_userdata}});
    }
    return in;
  }

 private:
  static constexpr size_t kBatchBytes = 8u << 20;
  static constexpr size_t kLabelBytes = 256u << 10;
  static constexpr size_t kGradBytesPerLayer = 4u << 20;
  static constexpr uint64_t kSamplesPerStep = 32;
  static constexpr uint64_t kTokensPerStep = 32 * 512;

  void label(Cat c) { simgpuSetLabel(make_label(c, names_.id(regions_.path()), step_)); }

  // The profiler client is loaded as PyTorch's libtorch_cuda.so is: dlopen, RTLD_LOCAL.
  void load_profiler() {
    for (const std::string& spec : opt_.profiler_windows) {
      ProfilerWindow w;
      const size_t colon = spec.find(':');
      if (colon == std::string::npos) die("--profiler-window wants START:STOP, got " + spec);
      w.start = std::stoull(spec.substr(0, colon));
      w.stop = std::stoull(spec.substr(colon + 1));
      if (w.stop <= w.start || w.stop > opt_.steps) die("--profiler-window " + spec + ": need START < STOP <= steps");
      windows_.push_back(w);
    }
    if (windows_.empty()) return;
    if (opt_.profiler_client.empty()) die("--profiler-window needs --profiler-client");
    void* lib = dlopen(opt_.profiler_client.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) die(std::string("cannot load the profiler client: ") + dlerror());
    profiler_start_ = reinterpret_cast<int (*)()>(dlsym(lib, "simgpu_profiler_start"));
    profiler_stop_ = reinterpret_cast<int (*)(uint64_t*, uint64_t*, uint64_t*, uint64_t*)>(
        dlsym(lib, "simgpu_profiler_stop"));
    profiler_callbacks_ = reinterpret_cast<void (*)(uint64_t*, uint64_t*, uint64_t*, uint64_t*)>(
        dlsym(lib, "simgpu_profiler_callbacks"));
    if (!profiler_start_ || !profiler_stop_ || !profiler_callbacks_)
      die("the profiler client lacks its entry points");
  }

  // DataLoader workers: forked after CUDA and CUPTI are up (the parent's threads, CUPTI state and
  // recorded data do not come along), each doing CPU work and exiting normally (atexit runs).
  void fork_workers() {
    std::vector<pid_t> children;
    for (int i = 0; i < opt_.fork_workers; ++i) {
      const pid_t pid = fork();
      if (pid < 0) die("fork failed");
      if (pid == 0) {
        if (opt_.workers_record) tt_push("loader_worker");
        volatile uint64_t sum = 0;
        for (uint64_t k = 0; k < 2000000; ++k) sum += k;
        if (opt_.workers_record) tt_pop();
        std::exit(0);
      }
      children.push_back(pid);
    }
    for (pid_t pid : children) {
      int status = 0;
      if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        die("a forked worker did not exit cleanly");
    }
  }

  // torch.profiler's start and stop, with the device idle at both ends (as `with profile():`
  // around whole steps, whose exit synchronises).
  void profiler_start() {
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    uint64_t ignored[4];
    profiler_callbacks_(&ignored[0], &ignored[1], &ignored[2], &ignored[3]);  // counts from here
    if (int rc = profiler_start_()) die("profiler client start failed: CUPTI error " + std::to_string(rc));
  }
  void profiler_stop(ProfilerWindow* w) {
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    if (int rc = profiler_stop_(&w->kernels_seen, &w->foreign_buffers, &w->t_start, &w->t_stop))
      die("profiler client stop failed: CUPTI error " + std::to_string(rc));
    profiler_callbacks_(&w->launch_enter, &w->launch_exit, &w->unwanted_callbacks, &w->wrong_userdata);
  }

  void launch(cudaKernel_t k, unsigned blocks, Cat c) {
    label(c);
    void* args[1] = {nullptr};
    check(__cudaLaunchKernel(k, dim3(blocks), dim3(256), args, 0, compute_), "__cudaLaunchKernel");
  }

  void world_check() {
    int count = 0, user_rank = -1;
    check(ncclCommCount(comm_, &count), "ncclCommCount");
    check(ncclCommUserRank(comm_, &user_rank), "ncclCommUserRank");
    if (count != world_ || user_rank != rank_)
      die("world check failed: NCCL says rank " + std::to_string(user_rank) + " of " + std::to_string(count) +
          ", launcher says rank " + std::to_string(rank_) + " of " + std::to_string(world_));
    std::printf("sim_train [SIMULATED GPU]: world check ok (rank %d of %d)\n", rank_, world_);
  }

  // Launched with no region open (and outside NVTX's "step" range): nothing to attribute it to.
  void unattributed_work() { launch(kernels_.h_gelu, 300, Cat::kUnattributed); }

  void io_in() {
    regions_.push("io");
    label(Cat::kIo);
    check(cudaMemcpyAsync(dev_batch_, host_batch_, kBatchBytes, cudaMemcpyHostToDevice, compute_), "cudaMemcpyAsync");
    check(cudaMemcpyAsync(dev_labels_, host_labels_, kLabelBytes, cudaMemcpyHostToDevice, compute_), "cudaMemcpyAsync");
    regions_.pop();
  }

  unsigned gemm_blocks(int layer) const { return 1500 + 250 * static_cast<unsigned>(layer % 3); }

  void forward_body() {
    launch(kernels_.h_embed, 800, Cat::kForward);
    for (int i = 0; i < opt_.layers; ++i) {
      regions_.push("layer" + std::to_string(i));
      launch(kernels_.h_gemm, gemm_blocks(i), Cat::kForward);
      launch(kernels_.h_gelu, 300, Cat::kForward);
      regions_.pop();
    }
    launch(kernels_.h_loss, 100, Cat::kForward);
  }

  void forward() {
    if (opt_.alloc_per_step) {
      // The VMM calls first: a step whose first memory event has no CUPTI record (nothing
      // else places it in its step). Each layer's activations (layer i: i + 1 MiB), kept until
      // the optimizer; one 64 KiB buffer a step that is never freed before teardown, as a
      // caching allocator grows.
      if (opt_.vmm) vmm_grow();
      activations_.assign(opt_.layers, nullptr);
      for (int i = 0; i < opt_.layers; ++i) dev_malloc(&activations_[i], size_t(i + 1) << 20);
      cache_.push_back(nullptr);
      dev_malloc(&cache_.back(), 64u << 10);
    }
    if (opt_.graphs) {
      // Replayed from outside any region: attribution has to come from capture time.
      simgpuSetLabel(make_label(Cat::kUnattributed, 0, step_));
      check(cudaGraphLaunch(graph_exec_, compute_), "cudaGraphLaunch");
      return;
    }
    regions_.push("forward");
    forward_body();
    regions_.pop();
  }

  void capture_forward() {
    check(cudaStreamBeginCapture(compute_, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
    regions_.push("forward");
    forward_body();
    regions_.pop();
    check(cudaStreamEndCapture(compute_, &graph_), "cudaStreamEndCapture");
    check(cudaGraphInstantiate(&graph_exec_, graph_, 0), "cudaGraphInstantiate");
    // PyTorch's order (CUDAGraph::capture_end): the source graph goes right after instantiation,
    // before the first replay; the exec's cloned nodes are what runs.
    check(cudaGraphDestroy(graph_), "cudaGraphDestroy");
    graph_ = nullptr;
  }

  // Main thread: sits in "backward" while the worker launches (strict hand-off, so the order
  // of launches, and with it the virtual timeline, never depends on thread timing).
  void backward() {
    regions_.push("backward");
    backward_path_ = regions_.path();
    if (opt_.recompute) recompute();
    hand_off(&job_);
    regions_.pop();
  }

  // A job for another thread (*job set), waited for until that thread clears it.
  void hand_off(bool* job) {
    std::unique_lock<std::mutex> lock(mu_);
    *job = true;
    cv_.notify_all();
    cv_.wait(lock, [job] { return !*job; });
  }

  // --rare-thread: a prefetch thread (as a DataLoader's pin-memory or a prefetcher's thread)
  // launches one kernel a step in a region "io" of its own, beside the launch-bound loop of the
  // main thread and the backward worker. Its records sit in its own CUPTI buffer, handed over only
  // at a flush, while the other threads' launches go by. Strict hand-off, as the backward worker.
  void prefetch_worker() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return prefetch_job_ || quit_; });
        if (!prefetch_job_) return;
      }
      if (opt_.nvtx) nvtxRangePushA("io");
      else tt_push("io");
      simgpuSetLabel(make_label(Cat::kIo, names_.id("io"), step_));
      void* args[1] = {nullptr};
      check(__cudaLaunchKernel(kernels_.h_embed, dim3(40), dim3(256), args, 0, compute_), "__cudaLaunchKernel");
      if (opt_.nvtx) nvtxRangePop();
      else tt_pop();
      {
        std::lock_guard<std::mutex> lock(mu_);
        prefetch_job_ = false;
      }
      cv_.notify_all();
    }
  }

  // Activation checkpointing: the forward of the first half of the layers (at least one) re-run
  // at the start of backward, in backward/recompute (TT_RECOMPUTE), as torch.utils.checkpoint's
  // re-run is.
  void recompute() {
    regions_.push("recompute", TT_RECOMPUTE);
    for (int i = 0; i < std::max(1, opt_.layers / 2); ++i) {
      launch(kernels_.h_gemm, gemm_blocks(i), Cat::kRecompute);
      launch(kernels_.h_gelu, 300, Cat::kRecompute);
    }
    regions_.pop();
  }

  void backward_worker() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return job_ || quit_; });
        if (!job_) return;
      }
      backward_body();
      {
        std::lock_guard<std::mutex> lock(mu_);
        job_ = false;
      }
      cv_.notify_all();
    }
  }

  void bwd_launch(cudaKernel_t k, unsigned blocks) {
    // The worker has no region open: the expected region is the main thread's innermost one.
    simgpuSetLabel(make_label(Cat::kBackward, names_.id(backward_path_), step_));
    void* args[1] = {nullptr};
    check(__cudaLaunchKernel(k, dim3(blocks), dim3(256), args, 0, compute_), "__cudaLaunchKernel");
  }

  // SIMGPU_HANG=RANK:STEP: a hung job. RANK stops before STEP's first collective and sleeps
  // (forever, until killed); every other rank enters that collective, whose GPU work then never
  // completes: later work queues behind it and the next synchronisation blocks.
  void maybe_hang() {
    static const std::pair<int, long long> spec = [] {
      const char* v = std::getenv("SIMGPU_HANG");
      int r = -1;
      long long st = -1;
      if (v && std::sscanf(v, "%d:%lld", &r, &st) != 2) die(std::string("SIMGPU_HANG wants RANK:STEP, got ") + v);
      return std::make_pair(r, st);
    }();
    if (spec.first < 0 || hang_entered_ || static_cast<long long>(step_) != spec.second) return;
    hang_entered_ = true;
    if (rank_ == spec.first) {
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    simgpuHangNextCollective();
  }

  void allreduce_bucket(int first_layer, int layers) {
    maybe_hang();
    cudaEvent_t ready;
    check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventRecord(ready, compute_), "cudaEventRecord");
    check(cudaStreamWaitEvent(comm_stream_, ready, 0), "cudaStreamWaitEvent");
    const size_t bytes = kGradBytesPerLayer * static_cast<size_t>(layers);
    simgpuSetLabel(make_label(Cat::kComm, names_.id("AllReduce"), step_));
    void* grads = static_cast<char*>(dev_grads_) + kGradBytesPerLayer * static_cast<size_t>(first_layer);
    if (opt_.nccl_2_32) {
      // NCCL 2.32's per-call-config form (NULL: the defaults), counted as AllReduce.
      check(ncclAllReduceConfig(grads, grads, bytes / sizeof(float), ncclFloat32, ncclSum, comm_, comm_stream_,
                                nullptr), "ncclAllReduceConfig");
    } else {
      check(ncclAllReduce(grads, grads, bytes / sizeof(float), ncclFloat32, ncclSum, comm_, comm_stream_),
            "ncclAllReduce");
    }
    comm_calls_.push_back({"AllReduce", world_, bytes});
    check(cudaEventDestroy(ready), "cudaEventDestroy");
  }

  // --nccl-2-32: each rank puts its first gradient layer's first 1 KiB into the next rank's
  // window and signals it, then waits for the previous rank's two signals (NCCL 2.32's one-sided
  // calls; no kernel, so no GPU time in the truth).
  void one_sided_exchange() {
    const int next = (rank_ + 1) % world_;
    const int prev = (rank_ + world_ - 1) % world_;
    constexpr size_t kFloats = 256;
    check(ncclPutSignal(dev_grads_, kFloats, ncclFloat32, next, grads_window_, 0, 0, 0, 0, comm_, comm_stream_),
          "ncclPutSignal");
    comm_calls_.push_back({"PutSignal", world_, kFloats * sizeof(float)});
    check(ncclSignal(next, 0, 0, 0, comm_, comm_stream_), "ncclSignal");
    comm_calls_.push_back({"Signal", world_, 0});
    ncclWaitSignalDesc_t desc{2, prev, 0, 0};
    check(ncclWaitSignal(1, &desc, comm_, comm_stream_), "ncclWaitSignal");
    comm_calls_.push_back({"WaitSignal", world_, 0});
  }

  void backward_body() {
    simgpuSetLabel(make_label(Cat::kBackward, names_.id(backward_path_), step_));
    int pending = 0, bucket_first = opt_.layers;
    for (int i = opt_.layers - 1; i >= 0; --i) {
      bwd_launch(kernels_.h_gelu_bwd, 350);
      bwd_launch(kernels_.h_gemm_bwd, gemm_blocks(i));      // input gradient
      bwd_launch(kernels_.h_gemm_bwd, gemm_blocks(i) / 2);  // weight gradient
      bucket_first = i;
      if (++pending == opt_.bucket_layers || i == 0) {
        if (sync_grads_) allreduce_bucket(bucket_first, pending);
        pending = 0;
      }
    }
    if (opt_.nccl_2_32) one_sided_exchange();
    simgpuSetLabel(make_label(Cat::kBackward, names_.id(backward_path_), step_));
    check(cudaEventRecord(comm_done_, comm_stream_), "cudaEventRecord");
  }

  void optimizer() {
    regions_.push("optimizer");
    label(Cat::kOptimizer);
    check(cudaStreamWaitEvent(compute_, comm_done_, 0), "cudaStreamWaitEvent");
    // Gradient-norm check read on the host (clip_grad_norm_ + .item()): the GPU idles while
    // the host catches up, which gives every step some idle time.
    check(cudaMemcpyAsync(host_loss_, dev_loss_, sizeof(float), cudaMemcpyDeviceToHost, compute_), "cudaMemcpyAsync");
    check(cudaStreamSynchronize(compute_), "cudaStreamSynchronize");
    label(Cat::kOptimizer);
    void* args[1] = {nullptr};
    // The explicit-API launch path (cudaLaunchKernel), as libraries like cuBLAS use.
    check(cudaLaunchKernel(&kernels_.adam, dim3(1200), dim3(256), args, 0, compute_), "cudaLaunchKernel");
    check(cudaLaunchKernel(&kernels_.adam, dim3(600), dim3(256), args, 0, compute_), "cudaLaunchKernel");
    if (opt_.alloc_per_step) {
      // The optimizer's 3 MiB workspace from the stream-ordered pool, then the activations go.
      void* workspace = nullptr;
      dev_malloc(&workspace, 3u << 20, true);
      for (auto it = activations_.rbegin(); it != activations_.rend(); ++it) dev_free(*it);
      activations_.clear();
      dev_free(workspace, true);
      if (opt_.vmm) vmm_shrink();
    }
    check(cudaMemsetAsync(dev_grads_, 0, kGradBytesPerLayer * opt_.layers, compute_), "cudaMemsetAsync");
    regions_.pop();
  }

  // --anchor-kernel: AMP's GradScaler.update() after the loss was read, in the optimizer's
  // region: the one kernel of its name, launched once per optimizer step as the step's last
  // launch (what TRAINTIME_STEP_ANCHOR names: a step ends at each of its launches).
  void update_scale() {
    regions_.push("optimizer");
    launch(kernels_.h_scale, 1, Cat::kOptimizer);
    regions_.pop();
  }

  // Device memory sim_train allocates, every call recorded for the truth (step_ = the step the
  // call is made in); async: the stream-ordered pool calls on the compute stream.
  void dev_malloc(void** p, size_t bytes, bool async = false) {
    if (async) check(cudaMallocAsync(p, bytes, compute_), "cudaMallocAsync");
    else check(cudaMalloc(p, bytes), "cudaMalloc");
    memory_ops_.push_back({step_, static_cast<int64_t>(bytes)});
    sizes_[*p] = bytes;
  }
  void dev_free(void* p, bool async = false) {
    if (async) check(cudaFreeAsync(p, compute_), "cudaFreeAsync");
    else check(cudaFree(p), "cudaFree");
    memory_ops_.push_back({step_, -static_cast<int64_t>(sizes_.at(p))});
    sizes_.erase(p);
  }

  // --vmm, in forward: the expandable segment grows by a 2 MiB page per layer (a handle each,
  // mapped at the segment's end), and a 4 MiB communication buffer is made the way NCCL makes its
  // buffers: created, mapped, its handle retained and released, and released at once (the mapping
  // keeps the memory until the unmap).
  void vmm_grow() {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    step_pages_ = segment_pages_.size();
    for (int i = 0; i < opt_.layers; ++i) {
      CUmemGenericAllocationHandle h = 0;
      check(cuMemCreate(&h, kPageBytes, &prop, 0), "cuMemCreate");
      memory_ops_.push_back({step_, static_cast<int64_t>(kPageBytes)});
      check(cuMemMap(segment_end_, kPageBytes, 0, h, 0), "cuMemMap");
      check(cuMemSetAccess(segment_end_, kPageBytes, &access, 1), "cuMemSetAccess");
      segment_end_ += kPageBytes;
      segment_pages_.push_back(h);
    }
    CUmemGenericAllocationHandle h = 0;
    check(cuMemCreate(&h, kCommBufferBytes, &prop, 0), "cuMemCreate");
    memory_ops_.push_back({step_, static_cast<int64_t>(kCommBufferBytes)});
    check(cuMemMap(comm_buffer_, kCommBufferBytes, 0, h, 0), "cuMemMap");
    check(cuMemSetAccess(comm_buffer_, kCommBufferBytes, &access, 1), "cuMemSetAccess");
    CUmemGenericAllocationHandle again = 0;
    check(cuMemRetainAllocationHandle(&again, reinterpret_cast<void*>(comm_buffer_)), "cuMemRetainAllocationHandle");
    check(cuMemRelease(again), "cuMemRelease");
    check(cuMemRelease(h), "cuMemRelease");
  }
  // --vmm, in the optimizer: the segment shrinks back to one page more than the step found (a
  // page a step is kept, as the cache grows): one unmap over the pages, then their handles go
  // (freed at each release); the communication buffer is freed by its unmap.
  void vmm_shrink() {
    const size_t keep = step_pages_ + 1;
    const CUdeviceptr from = segment_base_ + keep * kPageBytes;
    check(cuMemUnmap(from, segment_end_ - from), "cuMemUnmap");
    segment_end_ = from;
    for (size_t i = keep; i < segment_pages_.size(); ++i) vmm_release(segment_pages_[i], kPageBytes);
    segment_pages_.resize(keep);
    check(cuMemUnmap(comm_buffer_, kCommBufferBytes), "cuMemUnmap");
    memory_ops_.push_back({step_, -static_cast<int64_t>(kCommBufferBytes)});
  }
  void vmm_release(CUmemGenericAllocationHandle h, size_t bytes) {
    check(cuMemRelease(h), "cuMemRelease");
    memory_ops_.push_back({step_, -static_cast<int64_t>(bytes)});
  }

  void io_out() {
    regions_.push("io");
    label(Cat::kIo);
    check(cudaMemcpyAsync(host_loss_, dev_loss_, sizeof(float), cudaMemcpyDeviceToHost, compute_), "cudaMemcpyAsync");
    check(cudaStreamSynchronize(compute_), "cudaStreamSynchronize");  // loss.item()
    regions_.pop();
  }

  const Options& opt_;
  int rank_, world_;
  Regions regions_;
  Interner names_;
  Kernels kernels_{};
  cudaStream_t compute_ = nullptr, comm_stream_ = nullptr;
  cudaEvent_t comm_done_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t graph_exec_ = nullptr;
  void *host_batch_ = nullptr, *host_labels_ = nullptr, *host_loss_ = nullptr;
  void *dev_batch_ = nullptr, *dev_labels_ = nullptr, *dev_loss_ = nullptr, *dev_grads_ = nullptr;
  ncclComm_t comm_ = nullptr;
  ncclWindow_t grads_window_ = nullptr;  // --nccl-2-32
  uint64_t step_ = 0;
  std::vector<ProfilerWindow> windows_;
  bool hang_entered_ = false;  // SIMGPU_HANG done
  bool sync_grads_ = true;      // --accumulate: this micro-batch runs the gradient AllReduce
  uint64_t pause_step_ = ~uint64_t{0};  // --pause-at
  uint64_t pause_ms_ = 0;

 public:
  int steps_fd_ = -1;  // --steps-file

 private:
  int (*profiler_start_)() = nullptr;
  int (*profiler_stop_)(uint64_t*, uint64_t*, uint64_t*, uint64_t*) = nullptr;
  void (*profiler_callbacks_)(uint64_t*, uint64_t*, uint64_t*, uint64_t*) = nullptr;
  std::string backward_path_;
  std::vector<CommCall> comm_calls_;
  std::vector<MemoryOp> memory_ops_;
  std::map<void*, size_t> sizes_;
  std::vector<void*> activations_, cache_;
  static constexpr size_t kPageBytes = size_t{2} << 20, kCommBufferBytes = size_t{4} << 20;
  CUdeviceptr segment_base_ = 0, segment_end_ = 0, comm_buffer_ = 0;  // --vmm
  std::vector<CUmemGenericAllocationHandle> segment_pages_;  // mapped in order from segment_base_
  size_t step_pages_ = 0;  // pages mapped when this step's forward began
  std::vector<std::string> metrics_lines_;
  std::vector<uint64_t> step_marks_ns_{0, 0};  // monotonic ns just before and after the last tt_step
  std::thread worker_, prefetcher_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool job_ = false, prefetch_job_ = false, quit_ = false;
};

// Where the simulated clocks start (tests/sim/README.md), to print times from the start.
constexpr uint64_t kVirtualTimeBase = 1'700'000'000'000'000'000ull;

std::string expand_rank(std::string pattern, int rank) {
  for (size_t pos; (pos = pattern.find("%r")) != std::string::npos;) pattern.replace(pos, 2, std::to_string(rank));
  return pattern;
}

}  // namespace
}  // namespace sim_train

int main(int argc, char** argv) {
  using namespace sim_train;
  Options opt;
  CLI::App app{"sim_train — SIMULATED data-parallel training on a simulated GPU (simgpu; no real GPU is used).\n"
               "Rank and world size come from RANK/WORLD_SIZE or OMPI_COMM_WORLD_RANK/SIZE (else 0 of 1)."};
  app.add_option("--steps", opt.steps, "training steps (SIMULATED)")->check(CLI::PositiveNumber);
  // Up to 10000 layers: about 50 000 launches a step, three times the launch-context window.
  app.add_option("--layers", opt.layers, "layers of the simulated model")->check(CLI::Range(1, 10000));
  app.add_option("--bucket-layers", opt.bucket_layers, "layers per gradient AllReduce bucket")->check(CLI::Range(1, 10000));
  app.add_flag("--rare-thread", opt.rare_thread,
               "a prefetch thread launches one kernel a step inside a region \"io\" of its own");
  app.add_flag("--graphs", opt.graphs, "capture the forward pass into a CUDA graph once and replay it every step");
  auto* nvtx = app.add_flag("--nvtx", opt.nvtx, "annotate with NVTX ranges (one \"step\" range per step) instead of the traintime API");
  app.add_flag("--recompute", opt.recompute,
               "activation checkpointing: re-run the first half of the layers' forward in backward/recompute")
      ->excludes(nvtx);
  app.add_flag("--stray-work", opt.stray_work,
               "also launch work with no region open each step, and work after the last step marker");
  app.add_flag("--no-step-marker", opt.no_step_marker,
               "no step marker at all (no tt_step, no NVTX \"step\" range): traintime finds the steps; the "
               "truth's steps are still the loop's iterations");
  app.add_option("--accumulate", opt.accumulate,
                 "micro-batches per optimizer step; the gradient AllReduce buckets run in the last one only "
                 "(DDP's no_sync)")->check(CLI::Range(1, 64));
  app.add_option("--eval-every", opt.eval_every,
                 "after every K optimizer steps, an evaluation loop: two forward-only batches, no collective")
      ->check(CLI::PositiveNumber);
  app.add_option("--pause-at", opt.pause_at, "STEP:MS: the host pauses MS milliseconds before step STEP "
                 "(a checkpoint save)");
  app.add_flag("--anchor-kernel", opt.anchor_kernel,
               "launch amp_update_scale_kernel (AMP's loss-scale update) once per optimizer step, as the "
               "step's last launch: a kernel for TRAINTIME_STEP_ANCHOR");
  app.add_flag("--world-check", opt.world_check, "check that NCCL's rank/size agree with the launcher's");
  app.add_flag("--nccl-2-32", opt.nccl_2_32,
               "NCCL 2.32's calls: ncclAllReduceConfig for the gradients and a one-sided exchange "
               "(ncclPutSignal, ncclSignal, ncclWaitSignal) per step");
  app.add_option("--sigterm-after-step", opt.sigterm_after_step,
                 "raise SIGTERM after that many steps (as a launcher's cancel would)");
  app.add_flag("--record-before-cuda", opt.record_before_cuda,
               "open and close a region before CUDA initialises (the profiler's exit hook then "
               "predates CUDA's own teardown)");
  app.add_option("--fork-workers", opt.fork_workers,
                 "fork that many DataLoader-like workers at step 1, after CUDA initialised")
      ->check(CLI::Range(0, 64));
  app.add_flag("--workers-record", opt.workers_record, "the forked workers open a region of their own");
  app.add_option("--profiler-client", opt.profiler_client,
                 "library of the in-process profiler client (SIMULATED torch.profiler, simgpu)");
  app.add_option("--profiler-window", opt.profiler_windows,
                 "START:STOP: the profiler client runs from before step START to after step STOP-1 (repeatable)");
  app.add_option("--metrics-log", opt.metrics_log,
                 "after every step write tt_metrics() to FILE as a JSON line (%r becomes the rank)");
  app.add_option("--flops-per-step", opt.flops_per_step, "the model's FLOPs per step, given with tt_set_flops")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--step-sleep-us", opt.step_sleep_us, "sleep this long (real time) in every step")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--steps-file", opt.steps_file,
                 "after every tt_step write the number of steps done over FILE (%r becomes the rank): "
                 "what survives a SIGKILL says which steps the CPU side finished");
  app.add_flag("--alloc-per-step", opt.alloc_per_step,
               "allocate each layer's activations in forward and free them in the optimizer, with a "
               "3 MiB cudaMallocAsync workspace, and keep one 64 KiB buffer a step (truth: memory)");
  app.add_flag("--vmm", opt.vmm,
               "with --alloc-per-step: also grow an expandable segment by a cuMemCreate'd 2 MiB page per "
               "layer each step (keeping one) and make a 4 MiB NCCL-style buffer (truth: memory)")
      ->needs(app.get_option("--alloc-per-step"));
  app.add_option("--truth", opt.truth, "write the exact expected per-rank result to FILE (%r becomes the rank)");
  CLI11_PARSE(app, argc, argv);

  const int rank = env_int({"RANK", "OMPI_COMM_WORLD_RANK"}, 0);
  const int world = env_int({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"}, 1);
  if (world < 1 || rank < 0 || rank >= world) die("bad rank/world from the launcher environment");

  if (!opt.truth.empty()) simgpuKeepTimeline(1);
  if (opt.record_before_cuda) {
    tt_push("startup");  // no GPU work inside: the truth has no row for it
    tt_pop();
  }
  if (opt.flops_per_step > 0) tt_set_flops(opt.flops_per_step, 0);
  Trainer trainer(opt, rank, world);
  if (!opt.steps_file.empty()) {
    const std::string path = expand_rank(opt.steps_file, rank);
    trainer.steps_fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (trainer.steps_fd_ < 0) die("cannot create " + path);
  }
  trainer.setup();
  trainer.run();
  trainer.teardown();

  if (!opt.metrics_log.empty()) {
    const std::string path = expand_rank(opt.metrics_log, rank);
    std::ofstream f(path);
    for (const std::string& line : trainer.metrics_lines()) f << line << '\n';
    if (!f) die("cannot write " + path);
  }
  if (!opt.truth.empty()) {
    const std::string path = expand_rank(opt.truth, rank);
    std::ofstream f(path);
    nlohmann::json truth = compute_truth(trainer.truth_input());
    // What the simulated libnvidia-ml.so.1 reports for this rank's GPU (SIMGPU_THROTTLE).
    simgpu_health h{};
    simgpu_health_of(rank, &h);
    truth["gpu_health"] = {{"sm_clock_mhz", h.sm_clock_mhz},
                           {"mem_clock_mhz", h.mem_clock_mhz},
                           {"power_w", h.power_mw / 1000.0},
                           {"power_limit_w", h.power_limit_mw / 1000.0},
                           {"temperature_c", h.temperature_c},
                           {"clock_event_reasons", h.clock_event_reasons},
                           {"pcie_gen", h.pcie_gen},
                           {"pcie_width", h.pcie_width},
                           {"memory_used_bytes", h.memory_used_bytes},
                           {"memory_total_bytes", h.memory_total_bytes}};
    f << truth.dump(2) << '\n';
    if (!f) die("cannot write " + path);
  }
  if (rank == 0)
    std::printf("sim_train [SIMULATED GPU]: %llu steps, %d rank(s), virtual GPU time ends at +%.3f ms\n",
                static_cast<unsigned long long>(opt.steps), world,
                (simgpuGpuEndNs() - kVirtualTimeBase) / 1e6);
  return 0;
}
