// The GPU side of the model: what the CUPTI adapter hands to core (DESIGN §1, §4).
// Nothing here knows CUDA; cupti/ converts CUPTI records into these types at the boundary.
#pragma once

#include <cstdint>
#include <string_view>

#include "traintime/core/category.h"

namespace traintime::core {

// Interned region path; 0 means "no region open".
using PathId = uint32_t;
inline constexpr PathId kNoPath = 0;

enum class ActivityKind : uint8_t { kKernel, kMemcpy, kMemset };

enum class CopyKind : uint8_t { kNone, kHtoD, kDtoH, kDtoD, kPtoP, kOther };

// The four kinds a rank file always writes (DESIGN §6), in the order it writes them.
inline constexpr CopyKind kStandardCopyKinds[] = {CopyKind::kHtoD, CopyKind::kDtoH,
                                                  CopyKind::kDtoD, CopyKind::kPtoP};

// A copy kind as the rank file and the trace spell it; "" for kNone.
constexpr std::string_view copy_kind_name(CopyKind k) {
  switch (k) {
    case CopyKind::kHtoD: return "HtoD";
    case CopyKind::kDtoH: return "DtoH";
    case CopyKind::kDtoD: return "DtoD";
    case CopyKind::kPtoP: return "PtoP";
    case CopyKind::kOther: return "Other";
    case CopyKind::kNone: break;
  }
  return "";
}

// NCCL operations, spelled in the rank file as DESIGN §6 says (comm_op_name).
enum class CommOp : uint8_t {
  kNone,
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAlltoAll,
  kGather,
  kScatter,
  kSend,
  kRecv,
  // NCCL 2.32's one-sided RMA calls (ncclPutSignal, ncclSignal, ncclWaitSignal), named as NCCL
  // names them (ncclFuncToString).
  kPutSignal,
  kSignal,
  kWaitSignal,
  kUnknown,
};

constexpr std::string_view comm_op_name(CommOp op) {
  switch (op) {
    case CommOp::kAllReduce: return "AllReduce";
    case CommOp::kBroadcast: return "Broadcast";
    case CommOp::kReduce: return "Reduce";
    case CommOp::kAllGather: return "AllGather";
    case CommOp::kReduceScatter: return "ReduceScatter";
    case CommOp::kAlltoAll: return "AlltoAll";
    case CommOp::kGather: return "Gather";
    case CommOp::kScatter: return "Scatter";
    case CommOp::kSend: return "Send";
    case CommOp::kRecv: return "Recv";
    case CommOp::kPutSignal: return "PutSignal";
    case CommOp::kSignal: return "Signal";
    case CommOp::kWaitSignal: return "WaitSignal";
    case CommOp::kUnknown: return "unknown";
    case CommOp::kNone: break;
  }
  return "";
}

// The inverse of comm_op_name, where a rank file's op strings are read: "" gives kNone, a
// spelling comm_op_name never writes gives kUnknown.
constexpr CommOp comm_op_from_name(std::string_view name) {
  if (name.empty()) return CommOp::kNone;
  for (uint8_t i = static_cast<uint8_t>(CommOp::kAllReduce); i < static_cast<uint8_t>(CommOp::kUnknown); ++i)
    if (comm_op_name(static_cast<CommOp>(i)) == name) return static_cast<CommOp>(i);
  return CommOp::kUnknown;
}

// The NCCL call a launch was made inside, one value: what the NCCL interposer publishes for the
// launching thread (nccl::Call) and what a launch context carries, copied whole.
// 32 bytes: `captured` sits in op's padding, so a LaunchContext keeps room for its category
// within the 7 words of a correlation-table slot (cupti/src/correlation_table.h).
struct CommContext {
  // A single op: the op itself. Inside the outermost ncclGroupEnd (where NCCL launches the
  // group's kernels): the group's first member (op, comm_id, seq) and bytes = the sum over all
  // members; the members themselves are in CommCallTable::find_group(group_id).
  CommOp op = CommOp::kNone;  // kNone: not launched inside an interposed NCCL call
  // The NCCL call was enqueued into a CUDA graph being captured: the CPU side did not count it
  // (seq == 0), so each kernel of a replay counts as one call on the GPU side.
  bool captured = false;
  uint32_t comm_id = 0;       // communicator table index + 1 (0: communicator unknown)
  uint64_t seq = 0;           // sequence number on the communicator, 1-based (0: captured)
  uint64_t bytes = 0;         // nccl-tests convention (DESIGN §5)
  // Non-zero only inside the outermost ncclGroupEnd: the process-unique group id under which
  // the NCCL wrappers recorded the group's members (CommCallTable::record_group); the
  // aggregator splits the kernel's time across them.
  uint64_t group_id = 0;
};

// Captured on the launching thread inside the launch callback, stored under the callback's
// correlation id, and joined with the activity record later.
struct LaunchContext {
  PathId path = kNoPath;      // innermost region of the launching thread, else the step thread's
  uint32_t step = 0;          // number of tt_step calls the process made before the launch
  uint64_t entry = 0;         // unique serial of the region entry (for per-entry gpu_span_ns)
  CommContext comm;           // set when launched inside an interposed NCCL call
  // The category of `path`, resolved at launch (RegionRegistry::launch_context; a path's
  // category never changes once interned), so the record's ingest asks nobody for it. kOther
  // for kNoPath, as RegionRegistry::category_of answers.
  Category category = Category::kOther;
};

// GpuActivity::grid of a kernel launched with grid (x, y, z): equal grids give equal words, and
// grids that differ in any dimension almost never do.
constexpr uint32_t kernel_grid(uint32_t x, uint32_t y, uint32_t z) {
  uint64_t h = (uint64_t{x} * 0x9E3779B97F4A7C15ull) ^ (uint64_t{y} * 0xC2B2AE3D27D4EB4Full) ^
               (uint64_t{z} * 0x165667B19E3779F9ull);
  h ^= h >> 29;
  return static_cast<uint32_t>(h ^ (h >> 32)) | 1u;  // never 0: 0 means "not a kernel"
}

// One GPU activity, converted from a CUPTI kernel/memcpy/memset record.
struct GpuActivity {
  ActivityKind kind = ActivityKind::kKernel;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t device = 0;
  uint32_t stream = 0;
  uint32_t correlation_id = 0;
  uint32_t graph_id = 0;       // 0 when not part of a CUDA graph
  uint64_t graph_node_id = 0;  // 0 when not part of a CUDA graph
  CopyKind copy_kind = CopyKind::kNone;
  uint64_t bytes = 0;          // memcpy/memset size (a batched memcpy: all of its copies)
  uint32_t copies = 1;         // memcpy: copies the record stands for (CUPTI's copyCount)
  // Kernel: its launch grid (gridX, gridY, gridZ) mixed into one word (kernel_grid()); 0 for
  // the other kinds. Steps without a marker tell a kernel's launches with different grids apart.
  uint32_t grid = 0;
  std::string_view name;       // kernel name (mangled as CUPTI gives it); valid during ingest only
};

// The step at a time on the GPU activity clock (StepFeed::step_at): kMarker when steps are not
// detected (the marker's count at that moment is the step), kKnown when detection placed it,
// kNotYet when it has not yet (the step it would be now is given).
enum class StepAt : uint8_t { kMarker, kKnown, kNotYet };

}  // namespace traintime::core
