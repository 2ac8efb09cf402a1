// nccl_sweep: real NCCL collectives across message sizes, each call timed with CUDA events,
// annotated for traintime, so gpu-validate.sh can print traintime's comm rows beside the
// CUDA-event times of the same calls.
//
//   LD_PRELOAD=build/lib/libtraintime.so build/bin/nccl_sweep --events-out sweep-%r.json
//
// Sizes follow nccl-tests: the "size" of AllGather is its output, of ReduceScatter its input.
// Buffers are out of place. At world size 1 NCCL launches no collective kernel: out of place it
// only copies the buffer (in place it would do nothing), so times at world size 1 are copy times
// and no bandwidth is claimed from them.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include <traintime/traintime.h>

#include "args.h"
#include "check.h"
#include "events_json.h"
#include "rank_setup.h"

namespace {

const char kUsage[] =
    "usage: nccl_sweep [options]\n"
    "  --min-bytes N      smallest message (default 1024)\n"
    "  --max-bytes N      largest message (default 268435456 = 256 MiB); sizes double\n"
    "  --iters N          timed calls per op and size (default 10)\n"
    "  --warmup N         untimed-for-min calls per op and size before them (default 2);\n"
    "                     they are still counted in calls and total_ms, as traintime counts them\n"
    "  --ops LIST         comma-separated subset of AllReduce,AllGather,Broadcast,ReduceScatter\n"
    "  --events-out FILE  write the CUDA-event timings as JSON; %r becomes the rank\n"
    "  --nccl-id-file F   id exchange file for launches without MPI\n";

struct Options {
  uint64_t min_bytes = 1024;
  uint64_t max_bytes = 256ull << 20;
  int iters = 10;
  int warmup = 2;
  std::vector<std::string> ops = {"AllReduce", "AllGather", "Broadcast", "ReduceScatter"};
  std::string events_out;
  std::string nccl_id_file;
};

Options parse_options(int argc, char** argv) {
  Options o;
  example::Args args(argc, argv, kUsage);
  args.parse([&](const std::string& name, const char* v) -> int {
    if (name == "--min-bytes") return o.min_bytes = args.number(name, v, 4, 1ll << 34), 1;
    if (name == "--max-bytes") return o.max_bytes = args.number(name, v, 4, 1ll << 34), 1;
    if (name == "--iters") return o.iters = int(args.number(name, v, 1, 100000)), 1;
    if (name == "--warmup") return o.warmup = int(args.number(name, v, 0, 100000)), 1;
    if (name == "--events-out") return o.events_out = v ? v : "", 1;
    if (name == "--nccl-id-file") return o.nccl_id_file = v ? v : "", 1;
    if (name == "--ops") {
      o.ops.clear();
      std::stringstream ss(v ? v : "");
      for (std::string op; std::getline(ss, op, ',');) {
        if (op != "AllReduce" && op != "AllGather" && op != "Broadcast" && op != "ReduceScatter")
          args.die("unknown op '" + op + "' in --ops");
        o.ops.push_back(op);
      }
      return 1;
    }
    return -1;
  });
  if (o.min_bytes > o.max_bytes) args.die("--min-bytes is larger than --max-bytes");
  return o;
}

// Issues one call of `op` whose nccl-tests size is `bytes`; returns the bytes actually moved by
// that definition (rounded down to whole floats per rank), 0 when the size is too small.
uint64_t issue(const std::string& op, uint64_t bytes, int world, const float* send, float* recv,
               ncclComm_t comm, cudaStream_t stream) {
  const size_t per_rank = bytes / sizeof(float) / world;
  if (op == "AllReduce") {
    size_t n = bytes / sizeof(float);
    NCCL_CHECK(ncclAllReduce(send, recv, n, ncclFloat, ncclSum, comm, stream));
    return n * sizeof(float);
  }
  if (op == "Broadcast") {
    size_t n = bytes / sizeof(float);
    NCCL_CHECK(ncclBroadcast(send, recv, n, ncclFloat, 0, comm, stream));
    return n * sizeof(float);
  }
  if (per_rank == 0) return 0;
  if (op == "AllGather")
    NCCL_CHECK(ncclAllGather(send, recv, per_rank, ncclFloat, comm, stream));
  else
    NCCL_CHECK(ncclReduceScatter(send, recv, per_rank, ncclFloat, ncclSum, comm, stream));
  return per_rank * sizeof(float) * world;
}

}  // namespace

int main(int argc, char** argv) {
  example::RankInfo ranks = example::init_ranks(&argc, &argv);
  Options opt = parse_options(argc, argv);
  const std::string device = example::select_device(ranks);
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ncclComm_t comm = example::create_communicator(ranks, opt.nccl_id_file);

  // AllGather's output and ReduceScatter's input are the whole size; both fit in max_bytes.
  float* send = nullptr;
  float* recv = nullptr;
  CUDA_CHECK(cudaMalloc(&send, opt.max_bytes));
  CUDA_CHECK(cudaMalloc(&recv, opt.max_bytes));
  CUDA_CHECK(cudaMemsetAsync(send, 0, opt.max_bytes, stream));
  CUDA_CHECK(cudaMemsetAsync(recv, 0, opt.max_bytes, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));

  const int calls = opt.warmup + opt.iters;
  std::vector<cudaEvent_t> evs(2 * size_t(calls));
  for (cudaEvent_t& e : evs) CUDA_CHECK(cudaEventCreate(&e));

  example::EventsReport rep;
  rep.program = "nccl_sweep";
  rep.rank = ranks.rank;
  rep.world_size = ranks.world_size;
  rep.launcher = ranks.launcher;
  rep.device = device;
  rep.timing = "cudaEventElapsedTime around every call, read after each size's "
               "cudaStreamSynchronize";
  rep.warmup_steps = opt.warmup;
  rep.steps = opt.iters;
  rep.config_numbers = {{"min_bytes", int64_t(opt.min_bytes)},
                        {"max_bytes", int64_t(opt.max_bytes)},
                        {"iters", opt.iters},
                        {"warmup", opt.warmup}};
  if (ranks.world_size == 1)
    rep.notes.push_back(
        "world size 1: NCCL launches no collective kernel; out-of-place calls only copy the "
        "buffer (in-place ones do nothing), so these times are copy times, not bandwidth");

  for (const std::string& op : opt.ops) {
    example::CommOpTiming row;
    row.op = op;
    tt_push_category(TT_COMM, op.c_str());
    for (uint64_t bytes = opt.min_bytes; bytes <= opt.max_bytes; bytes *= 2) {
      example::CommSizeTiming st;
      for (int c = 0; c < calls; ++c) {
        CUDA_CHECK(cudaEventRecord(evs[2 * c], stream));
        st.bytes = issue(op, bytes, ranks.world_size, send, recv, comm, stream);
        CUDA_CHECK(cudaEventRecord(evs[2 * c + 1], stream));
      }
      CUDA_CHECK(cudaStreamSynchronize(stream));
      if (st.bytes == 0) continue;
      st.calls = uint64_t(calls);
      st.min_ms = 1e300;
      for (int c = 0; c < calls; ++c) {
        float ms = 0.f;
        CUDA_CHECK(cudaEventElapsedTime(&ms, evs[2 * c], evs[2 * c + 1]));
        st.total_ms += ms;
        if (c >= opt.warmup) st.min_ms = std::min(st.min_ms, double(ms));
      }
      row.sizes.push_back(st);
    }
    tt_pop();
    rep.comm.push_back(row);
  }

  if (!opt.events_out.empty() &&
      !example::write_events_json(example::expand_rank(opt.events_out, ranks.rank), rep))
    return 1;
  if (ranks.rank == 0) {
    std::printf("nccl_sweep: %s, world size %d (%s), %d calls per op and size\n", device.c_str(),
                ranks.world_size, ranks.launcher.c_str(), calls);
    if (ranks.world_size == 1) std::printf("  note: %s\n", rep.notes.back().c_str());
    for (const example::CommOpTiming& row : rep.comm)
      for (const example::CommSizeTiming& s : row.sizes)
        std::printf("  %-14s %12llu B  min %9.3f us  mean %9.3f us\n", row.op.c_str(),
                    (unsigned long long)s.bytes, s.min_ms * 1e3, s.total_ms * 1e3 / s.calls);
  }

  for (cudaEvent_t e : evs) cudaEventDestroy(e);
  cudaFree(send);
  cudaFree(recv);
  ncclCommDestroy(comm);
  cudaStreamDestroy(stream);
  example::finish_ranks();
  return 0;
}
