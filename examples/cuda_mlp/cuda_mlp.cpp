// cuda_mlp: a small data-parallel MLP trainer on CUDA, annotated for traintime, that also times
// its own regions with CUDA events so scripts/compare_events.py can check traintime against them.
//
//   LD_PRELOAD=build/lib/libtraintime.so mpirun -x LD_PRELOAD -np 2 build/bin/cuda_mlp
//   LD_PRELOAD=build/lib/libtraintime.so torchrun --nproc-per-node 2 --no-python build/bin/cuda_mlp
//
// Model: `layers` hidden x hidden layers with ReLU, then hidden x classes logits, softmax
// cross-entropy; no biases. fp32 cuBLAS GEMMs (no TF32): a GEMM of the default size is 2 x 4096^3,
// about 137 GFLOP, so by an estimate from the H100's fp32 peak (never measured: this has not run on
// a GPU yet) it takes milliseconds, and every region should be above the 1 ms the comparison needs.
// Data are synthetic: two pinned host batches, copied host-to-device each step.
//
// One step, all on one stream (the regions are single-stream, which is what makes a CUDA-event
// pair around a region measure the same work as traintime's gpu_span_ns):
//   io         H2D copy of the batch and labels
//   forward    GEMM + ReLU per layer, logits GEMM, softmax-cross-entropy kernel
//   backward   two GEMMs + ReLU backward per layer
//     comm     ncclAllReduce (sum) of the flat gradient buffer, in place
//   optimizer  Adam (or SGD) kernel over the flat parameters
// Warm-up steps run inside a "warmup" region, so their one-time costs (lazy module loading,
// cuBLAS heuristics) land in warmup/... rows, never in the rows being compared.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <traintime/traintime.h>

#include "args.h"
#include "check.h"
#include "events_json.h"
#include "mlp_kernels.h"
#include "rank_setup.h"
#include "region_events.h"

namespace {

using example::Args;

const char kUsage[] =
    "usage: cuda_mlp [options]\n"
    "  --steps N          timed steps (default 20)\n"
    "  --warmup N         warm-up steps before them, in a \"warmup\" region (default 3)\n"
    "  --batch N          samples per rank per step (default 4096)\n"
    "  --hidden N         width of the input and hidden layers (default 4096)\n"
    "  --layers N         hidden layers (default 8)\n"
    "  --classes N        output classes (default 1024)\n"
    "  --optimizer NAME   adam (default) or sgd\n"
    "  --lr X             learning rate (default 1e-4)\n"
    "  --no-nccl          skip the gradient AllReduce (no communicator is created)\n"
    "  --events-out FILE  write the CUDA-event timings as JSON; %r becomes the rank\n"
    "  --sync-every-step  read the events after every step (synchronises each step) instead\n"
    "                     of once after the loop\n"
    "  --nccl-id-file F   id exchange file for launches without MPI (default $TT_NCCL_ID_FILE\n"
    "                     or /tmp/traintime-example-nccl-id.<job>)\n"
    "  --abort-after N    call abort() right after the N-th timed step's tt_step, with that\n"
    "                     step's work still in flight (the abort path of the validation)\n";

struct Options {
  int steps = 20;
  int warmup = 3;
  int batch = 4096;
  int hidden = 4096;
  int layers = 8;
  int classes = 1024;
  std::string optimizer = "adam";
  double lr = 1e-4;
  bool nccl = true;
  bool sync_every_step = false;
  int abort_after = 0;  // 0: never
  std::string events_out;
  std::string nccl_id_file;
};

Options parse_options(int argc, char** argv) {
  Options o;
  Args args(argc, argv, kUsage);
  args.parse([&](const std::string& name, const char* v) -> int {
    if (name == "--steps") return o.steps = int(args.number(name, v, 1, 1000000)), 1;
    if (name == "--warmup") return o.warmup = int(args.number(name, v, 0, 1000000)), 1;
    if (name == "--batch") return o.batch = int(args.number(name, v, 1, 1 << 20)), 1;
    if (name == "--hidden") return o.hidden = int(args.number(name, v, 1, 1 << 16)), 1;
    if (name == "--layers") return o.layers = int(args.number(name, v, 1, 1024)), 1;
    if (name == "--classes") return o.classes = int(args.number(name, v, 2, 1 << 20)), 1;
    if (name == "--lr") return o.lr = args.real(name, v), 1;
    if (name == "--events-out") return o.events_out = v ? v : "", 1;
    if (name == "--nccl-id-file") return o.nccl_id_file = v ? v : "", 1;
    if (name == "--abort-after") return o.abort_after = int(args.number(name, v, 1, 1000000)), 1;
    if (name == "--no-nccl") return o.nccl = false, 0;
    if (name == "--sync-every-step") return o.sync_every_step = true, 0;
    if (name == "--optimizer") {
      o.optimizer = v ? v : "";
      if (o.optimizer != "adam" && o.optimizer != "sgd") args.die("--optimizer wants adam or sgd");
      return 1;
    }
    return -1;
  });
  return o;
}

// Row-major C[m x n] = op(A)[m x k] * op(B)[k x n]. cuBLAS is column-major, and a row-major
// matrix is its column-major transpose, so this computes C^T = op(B)^T * op(A)^T.
void gemm_rm(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, const float* A,
             const float* B, float* C) {
  const float alpha = 1.f, beta = 0.f;
  CUBLAS_CHECK(cublasSgemm(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n,
                           m, k, &alpha, B, tb ? k : n, A, ta ? m : k, &beta, C, n));
}

template <class T>
T* device_alloc(size_t count, const char* what) {
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, count * sizeof(T));
  if (err != cudaSuccess) {
    std::fprintf(stderr, "[rank %d] error: cudaMalloc of %.1f MiB for %s failed: %s\n",
                 example::error_rank(), count * sizeof(T) / 1048576.0, what,
                 cudaGetErrorString(err));
    std::exit(1);
  }
  return static_cast<T*>(p);
}

enum Region { kIo, kForward, kBackward, kComm, kOptimizer, kRegionCount };
const char* const kRegionPaths[kRegionCount] = {"io", "forward", "backward", "backward/comm",
                                                "optimizer"};

struct Trainer {
  Options opt;
  int world_size = 1;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  ncclComm_t comm = nullptr;

  size_t act_elems = 0, logit_elems = 0, params = 0;
  float* weights = nullptr;  // flat: layers x [hidden x hidden], then [hidden x classes]
  float* grads = nullptr;    // same layout, one AllReduce for all
  float* adam_m = nullptr;
  float* adam_v = nullptr;
  std::vector<float*> acts;  // acts[0] is the input batch, acts[i+1] = relu(acts[i] W_i)
  float* logits = nullptr;
  float* dlogits = nullptr;
  float* loss = nullptr;
  float* dact[2] = {nullptr, nullptr};
  int32_t* labels = nullptr;
  float* host_x[2] = {nullptr, nullptr};  // pinned, so the copies are truly asynchronous
  int32_t* host_y[2] = {nullptr, nullptr};
  int adam_t = 0;

  float* w(int layer) const { return weights + size_t(layer) * opt.hidden * opt.hidden; }
  float* g(int layer) const { return grads + size_t(layer) * opt.hidden * opt.hidden; }

  void allocate() {
    const size_t H = opt.hidden, B = opt.batch, C = opt.classes, L = opt.layers;
    act_elems = B * H;
    logit_elems = B * C;
    params = L * H * H + H * C;
    weights = device_alloc<float>(params, "weights");
    grads = device_alloc<float>(params, "gradients");
    if (opt.optimizer == "adam") {
      adam_m = device_alloc<float>(params, "Adam first moments");
      adam_v = device_alloc<float>(params, "Adam second moments");
    }
    for (size_t i = 0; i <= L; ++i) acts.push_back(device_alloc<float>(act_elems, "activations"));
    logits = device_alloc<float>(logit_elems, "logits");
    dlogits = device_alloc<float>(logit_elems, "logit gradients");
    loss = device_alloc<float>(B, "per-sample loss");
    for (float*& d : dact) d = device_alloc<float>(act_elems, "activation gradients");
    labels = device_alloc<int32_t>(B, "labels");
    for (int b = 0; b < 2; ++b) {
      CUDA_CHECK(cudaMallocHost(&host_x[b], act_elems * sizeof(float)));
      CUDA_CHECK(cudaMallocHost(&host_y[b], B * sizeof(int32_t)));
    }
  }

  void fill_host_batches(int rank) {
    uint64_t s = 0x243f6a8885a308d3ull ^ (uint64_t(rank) << 32);
    auto next = [&s] {  // xorshift64*: fast enough to fill 2 x 64 MiB in well under a second
      s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
      return s * 0x2545f4914f6cdd1dull;
    };
    for (int b = 0; b < 2; ++b) {
      for (size_t i = 0; i < act_elems; ++i)
        host_x[b][i] = float(int64_t(next() >> 40) - (1 << 23)) / float(1 << 23);
      for (int i = 0; i < opt.batch; ++i) host_y[b][i] = int32_t(next() % opt.classes);
    }
  }

  void initialise() {
    TT_SCOPE("init");
    const size_t HH = size_t(opt.hidden) * opt.hidden;
    const float bound = std::sqrt(6.f / opt.hidden);  // He-uniform for ReLU layers, fan-in hidden
    for (int l = 0; l <= opt.layers; ++l) {
      size_t n = l < opt.layers ? HH : size_t(opt.hidden) * opt.classes;
      example::launch_init_uniform(w(l), n, bound, 1234 + l, stream);
    }
    if (adam_m) {
      example::launch_fill(adam_m, params, 0.f, stream);
      example::launch_fill(adam_v, params, 0.f, stream);
    }
  }

  // One training step. `ev` is null in warm-up steps; `step` indexes the event slots.
  void step(int step, example::RegionEvents* ev) {
    const int B = opt.batch, H = opt.hidden, C = opt.classes, L = opt.layers;
    auto begin = [&](Region r) { if (ev) ev->begin(r, step); };
    auto end = [&](Region r) { if (ev) ev->end(r, step); };
    const int slot = step < 0 ? 0 : step % 2;
    {
      TT_SCOPE("io");
      begin(kIo);
      CUDA_CHECK(cudaMemcpyAsync(acts[0], host_x[slot], act_elems * sizeof(float),
                                 cudaMemcpyHostToDevice, stream));
      CUDA_CHECK(cudaMemcpyAsync(labels, host_y[slot], B * sizeof(int32_t),
                                 cudaMemcpyHostToDevice, stream));
      end(kIo);
    }
    {
      TT_SCOPE("forward");
      begin(kForward);
      for (int l = 0; l < L; ++l) {
        gemm_rm(blas, false, false, B, H, H, acts[l], w(l), acts[l + 1]);
        example::launch_relu(acts[l + 1], act_elems, stream);
      }
      gemm_rm(blas, false, false, B, C, H, acts[L], w(L), logits);
      example::launch_softmax_cross_entropy(logits, labels, loss, dlogits, B, C, stream);
      end(kForward);
    }
    {
      TT_SCOPE("backward");
      begin(kBackward);
      gemm_rm(blas, true, false, H, C, B, acts[L], dlogits, g(L));
      gemm_rm(blas, false, true, B, H, C, dlogits, w(L), dact[0]);
      int cur = 0;
      for (int l = L - 1; l >= 0; --l) {
        example::launch_relu_backward(dact[cur], acts[l + 1], act_elems, stream);
        gemm_rm(blas, true, false, H, H, B, acts[l], dact[cur], g(l));
        if (l > 0) {
          gemm_rm(blas, false, true, B, H, H, dact[cur], w(l), dact[1 - cur]);
          cur = 1 - cur;
        }
      }
      end(kBackward);
      if (comm) {
        TT_SCOPE_CATEGORY(TT_COMM, "comm");
        begin(kComm);
        NCCL_CHECK(ncclAllReduce(grads, grads, params, ncclFloat, ncclSum, comm, stream));
        end(kComm);
      }
    }
    {
      TT_SCOPE("optimizer");
      begin(kOptimizer);
      const float scale = 1.f / world_size;
      if (adam_m) {
        ++adam_t;
        const float b1 = 0.9f, b2 = 0.999f;
        example::launch_adam(weights, grads, adam_m, adam_v, params, float(opt.lr), b1, b2, 1e-8f,
                             1.f - std::pow(b1, float(adam_t)), 1.f - std::pow(b2, float(adam_t)),
                             scale, stream);
      } else {
        example::launch_sgd(weights, grads, params, float(opt.lr), scale, stream);
      }
      end(kOptimizer);
    }
  }

  double mean_loss() {
    std::vector<float> h(opt.batch);
    CUDA_CHECK(cudaMemcpyAsync(h.data(), loss, h.size() * sizeof(float), cudaMemcpyDeviceToHost,
                               stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    double s = 0;
    for (float v : h) s += v;
    return s / h.size();
  }

  void release() {
    for (float* p : {weights, grads, adam_m, adam_v, logits, dlogits, loss, dact[0], dact[1]})
      if (p) cudaFree(p);
    for (float* p : acts) cudaFree(p);
    cudaFree(labels);
    for (int b = 0; b < 2; ++b) {
      cudaFreeHost(host_x[b]);
      cudaFreeHost(host_y[b]);
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  example::RankInfo ranks = example::init_ranks(&argc, &argv);
  Options opt = parse_options(argc, argv);
  const std::string device = example::select_device(ranks);

  Trainer t;
  t.opt = opt;
  t.world_size = ranks.world_size;
  CUDA_CHECK(cudaStreamCreateWithFlags(&t.stream, cudaStreamNonBlocking));
  CUBLAS_CHECK(cublasCreate(&t.blas));
  CUBLAS_CHECK(cublasSetStream(t.blas, t.stream));
  // Plain fp32 GEMMs (the default math mode uses no TF32), which should keep the default sizes
  // above 1 ms per region (an estimate, see the top of this file; not measured on a GPU).
  CUBLAS_CHECK(cublasSetMathMode(t.blas, CUBLAS_DEFAULT_MATH));
  if (opt.nccl) t.comm = example::create_communicator(ranks, opt.nccl_id_file);
  t.allocate();
  t.fill_host_batches(ranks.rank);
  t.initialise();

  for (int s = 0; s < opt.warmup; ++s) {
    // Warmed up but for the last warm-up step, which is left running: an event pair measures
    // from the moment the stream reaches its begin event, which on an idle GPU is when the CPU
    // recorded it, before the region's first work was even enqueued (CPU time in the first timed
    // step's io, seen on an H200). Behind queued work, the first timed step starts as every other
    // does. Inside the loop nothing synchronises (unless --sync-every-step): the CPU runs ahead
    // as in real training.
    if (s == opt.warmup - 1) CUDA_CHECK(cudaStreamSynchronize(t.stream));
    {
      TT_SCOPE("warmup");
      t.step(-1, nullptr);
    }
    tt_step(uint64_t(opt.batch), 0);
  }
  if (opt.warmup == 0) CUDA_CHECK(cudaStreamSynchronize(t.stream));

  std::vector<std::string> paths(kRegionPaths, kRegionPaths + kRegionCount);
  std::vector<bool> unused(kRegionCount, false);
  unused[kComm] = t.comm == nullptr;  // never entered: its events are never recorded
  example::RegionEvents ev(paths, opt.steps, t.stream, unused);
  std::vector<std::vector<double>> ms(kRegionCount);
  cudaEvent_t loop_begin, loop_end;
  CUDA_CHECK(cudaEventCreate(&loop_begin));
  CUDA_CHECK(cudaEventCreate(&loop_end));
  CUDA_CHECK(cudaEventRecord(loop_begin, t.stream));
  for (int s = 0; s < opt.steps; ++s) {
    t.step(s, &ev);
    tt_step(uint64_t(opt.batch), 0);
    if (s + 1 == opt.abort_after) {
      // As PyTorch's NCCL watchdog or a failed assertion would: no synchronisation, work queued.
      std::printf("cuda_mlp: abort() after %d timed steps (%d tt_step calls in all)\n",
                  opt.abort_after, opt.warmup + opt.abort_after);
      std::fflush(stdout);
      std::abort();
    }
    if (opt.sync_every_step) {
      std::vector<double> step_ms = ev.read_step(s);
      for (int r = 0; r < kRegionCount; ++r) ms[r].push_back(step_ms[r]);
    }
  }
  CUDA_CHECK(cudaEventRecord(loop_end, t.stream));
  CUDA_CHECK(cudaStreamSynchronize(t.stream));
  for (int s = 0; !opt.sync_every_step && s < opt.steps; ++s) {
    std::vector<double> step_ms = ev.read_step(s);
    for (int r = 0; r < kRegionCount; ++r) ms[r].push_back(step_ms[r]);
  }
  float loop_ms = 0.f;
  CUDA_CHECK(cudaEventElapsedTime(&loop_ms, loop_begin, loop_end));
  const double final_loss = t.mean_loss();

  example::EventsReport rep;
  rep.program = "cuda_mlp";
  rep.rank = ranks.rank;
  rep.world_size = ranks.world_size;
  rep.launcher = ranks.launcher;
  rep.device = device;
  rep.timing = opt.sync_every_step
                   ? "cudaEventElapsedTime read after each step's cudaStreamSynchronize"
                   : "cudaEventElapsedTime read once after the loop's cudaStreamSynchronize";
  rep.steps = opt.steps;
  rep.warmup_steps = opt.warmup;
  rep.config_numbers = {{"batch", opt.batch},   {"hidden", opt.hidden},
                        {"layers", opt.layers}, {"classes", opt.classes},
                        {"params", int64_t(t.params)}, {"nccl", opt.nccl ? 1 : 0}};
  rep.config_strings = {{"optimizer", opt.optimizer}};
  for (int r = 0; r < kRegionCount; ++r) {
    if (r == kComm && !opt.nccl) continue;
    rep.regions.push_back({paths[r], ms[r]});
  }
  if (opt.nccl && ranks.world_size == 1)
    rep.notes.push_back(
        "world size 1: NCCL's in-place AllReduce on one rank launches no collective kernel, so "
        "backward/comm holds no GPU work and says nothing about bandwidth");
  rep.notes.push_back("events bracket stream work only; reading them synchronised the stream, "
                      "which traintime never does");
  if (!opt.events_out.empty() &&
      !example::write_events_json(example::expand_rank(opt.events_out, ranks.rank), rep))
    return 1;

  if (ranks.rank == 0) {
    std::printf("cuda_mlp: %s, world size %d (%s), %d timed steps after %d warm-up, "
                "%.2f ms/step (CUDA events), final loss %.4f\n",
                device.c_str(), ranks.world_size, ranks.launcher.c_str(), opt.steps, opt.warmup,
                loop_ms / opt.steps, final_loss);
    for (const example::RegionTiming& r : rep.regions) {
      double total = 0;
      for (double v : r.per_step_ms) total += v;
      std::printf("  %-14s %10.3f ms total %9.3f ms/step\n", r.path.c_str(), total,
                  total / opt.steps);
    }
  }

  t.release();
  cudaEventDestroy(loop_begin);
  cudaEventDestroy(loop_end);
  cublasDestroy(t.blas);
  if (t.comm) ncclCommDestroy(t.comm);
  cudaStreamDestroy(t.stream);
  example::finish_ranks();
  return 0;
}
