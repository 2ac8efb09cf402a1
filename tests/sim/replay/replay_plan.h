// SIMULATION tooling: what sim_replay plays, decided from the trace alone (no CUDA here, so the
// rules are unit-tested): which recorded calls are replayed, on which thread, in which global
// order, with which GPU work; NCCL kernels as the NCCL calls that launch them; CUDA graph launches
// as replays of graphs captured at set-up; ranges and steps in annotated mode.
//
// Order (the sequencer's, by recorded timestamp): at one timestamp, range ends come first
// (innermost first), then step marks, then range starts (outermost first), then calls in
// correlation-id order (CUDA numbers calls as they are made). So a launch at the very microsecond
// a range or step ends is after it, one at the microsecond a range starts is inside it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kineto_trace.h"

namespace sim_replay {

enum class Mode { kBare, kAnnotated };

enum class Action {
  kRangeEnd,   // nvtxRangePop (annotated)
  kStep,       // tt_step at the end of ProfilerStep#N (annotated)
  kRangeStart, // nvtxRangePushA (annotated)
  kLaunch,     // a kernel through the recorded launch API (or the nearest simgpu has)
  kMemcpy,
  kMemset,
  kGraph,      // cudaGraphLaunch of a graph captured at set-up
  kNccl,       // the NCCL call that launches the recorded NCCL kernel
  kDeviceSync,
  kStreamSync,
  kEventSync,
  kEventRecord,
  kStreamWaitEvent,
};

// The launch API a kernel goes through.
enum class LaunchApi {
  kCudaLaunchKernel, kCudaLaunchKernelExC, kCuLaunchKernel, kCuLaunchKernelEx,
  kNvccLaunch,  // CUDA 13's <<<>>>: __cudaGetKernel, then __cudaLaunchKernel
};

enum class NcclOp { kAllReduce, kBroadcast, kReduce, kAllGather, kReduceScatter, kAlltoAll, kSend, kRecv,
                    kGather, kScatter, kSendRecv };

// One NCCL call (kSendRecv: ncclSend to the next rank and ncclRecv from the previous one in a
// group, what a SendRecv kernel of unknown purpose is made by).
struct NcclCall {
  NcclOp op = NcclOp::kAllReduce;
  uint64_t count = 1;
  int datatype = 7;  // ncclDataType_t (ncclFloat32)
  int redop = 0;     // ncclRedOp_t (ncclSum)
  int comm = 0;      // index into Plan::comms
  bool size_known = false;  // false: op and type from the kernel's name, count 1
};

struct Communicator {
  std::string name;  // process group name, or "world"
  int size = 1, rank = 0;
};

struct Item {
  int64_t ts_ns = 0, dur_ns = 0;  // recorded (trace time)
  Action action = Action::kLaunch;
  size_t thread = 0;               // index into Plan::threads
  std::string name;                // range name, or the recorded API's name
  std::vector<size_t> works;       // indices into Trace::activities, by start
  uint32_t stream = 7;             // the stream it runs on / synchronises
  LaunchApi api = LaunchApi::kCudaLaunchKernel;
  size_t graph = 0;                // kGraph: index into Plan::graphs
  NcclCall nccl;                   // kNccl
  uint64_t correlation = 0;
};

struct ReplayThread {
  int64_t tid = 0;
  std::string name;   // as Kineto names it ("pt_autograd_0"), "" when unknown
  bool main = false;  // the process's main thread in the recording (plays on ours)
};

// A graph to capture at set-up: the activities of one launch, in start order.
struct GraphShape {
  std::vector<size_t> nodes;  // indices into Trace::activities of its first launch
};

// What the summary line counts.
struct Counts {
  uint64_t launches = 0, memcpys = 0, memsets = 0, graph_launches = 0, nccl_calls = 0, syncs = 0;
  uint64_t ranges = 0, steps = 0, activities = 0;
  uint64_t nccl_sized_by_name = 0;  // NCCL kernels without arguments: count 1, bytes unknown
  uint64_t no_launch = 0;           // GPU activities whose launch is not in the trace
  uint64_t no_launch_kernels = 0, no_launch_memcpys = 0, no_launch_memsets = 0;
  uint64_t calls_without_work = 0;  // runtime/driver calls with no GPU work and no synchronisation
  uint64_t invalid_without_work = 0;  // of the calls Kineto names INVALID, those with no GPU work
  uint64_t substituted = 0;         // launched through another API than recorded (named in notes)
  uint64_t ranges_cut = 0;          // a range that outlived its parent, cut at the parent's end
};

struct Plan {
  Mode mode = Mode::kBare;
  int rank = 0, world_size = 1;     // distributedInfo (0 of 1 when absent)
  std::string device_name;          // the recording's GPU, "" when not recorded
  std::vector<ReplayThread> threads;
  std::vector<Item> items;          // in sequencer order
  std::vector<GraphShape> graphs;
  std::vector<Communicator> comms;
  int graph_comm = -1;              // the communicator NCCL kernels captured in graphs run on
  std::vector<uint32_t> streams;    // every stream a replayed activity names, ascending
  int64_t first_ns = 0;             // earliest replayed timestamp (the replay's time origin)
  Counts counts;
  std::map<std::string, uint64_t> substitutions;  // "cudaMemcpy as cudaMemcpyAsync" -> calls
};

// Throws TraceError when the trace holds no GPU activity whose launch is in it.
Plan make_plan(const Trace& trace, Mode mode);

// An NCCL device kernel's name, in every form Kineto shows ("ncclKernel_AllReduce_RING_LL_Sum_float(...)",
// "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ncclSymkDevKernel_...", after an optional "void ").
bool is_nccl_kernel_name(const std::string& name);
// The NCCL call that launches an NCCL kernel of this name (op, datatype, reduction), count 1.
NcclCall nccl_call_from_kernel_name(const std::string& name);
// The NCCL call PyTorch's arguments describe; size_known false when they do not say enough.
bool nccl_call_from_args(const CollectiveArgs& args, NcclCall* out);

const char* action_name(Action a);

}  // namespace sim_replay
