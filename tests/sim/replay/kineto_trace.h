// SIMULATION tooling: reads a torch.profiler (Kineto) JSON trace, `.json` or `.json.gz`, into what
// sim_replay plays on simgpu. Tolerant of Kineto's formats from 2021 to torch 2.11: the event
// categories `kernel`/`Kernel`, `gpu_memcpy`/`Memcpy`, `gpu_memset`/`Memset`,
// `cuda_runtime`/`Runtime`, `cuda_driver`/`Driver`, `user_annotation`, `cuda_sync`; GPU
// activities joined to their launch by `args.correlation`; NCCL's arguments (`Collective name`,
// `In msg nelems`, `dtype`, process group) on the kernel or on the CPU op with its `External id`.
// Timestamps are read from the text (microseconds with up to three decimals) into exact
// nanoseconds: a double cannot hold today's Unix time in ns.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace sim_replay {

// A trace sim_replay cannot play: `what` is one line naming the file and what is missing.
struct TraceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class GpuKind { kKernel, kMemcpy, kMemset };

// CUPTI's memcpy kinds, as Kineto names them ("Memcpy HtoD (Pinned -> Device)").
enum class CopyKind { kUnknown, kHtoD, kDtoH, kDtoD, kHtoH, kPtoP };
enum class MemoryKind { kUnknown, kPageable, kPinned, kDevice, kManaged };

// NCCL's arguments as PyTorch records them (record_param_comms).
struct CollectiveArgs {
  std::string collective;  // "allreduce", "all_to_all", "_allgather_base", ...
  std::optional<uint64_t> in_nelems, out_nelems;
  std::optional<int> group_size;
  std::string dtype;       // "Float", "BFloat16", ...
  std::string pg_name;     // "Process Group Name"
  std::vector<int> pg_ranks;  // "Process Group Ranks" (global ranks)
};

struct GpuActivity {
  GpuKind kind = GpuKind::kKernel;
  std::string name;
  int64_t start_ns = 0, dur_ns = 0;  // trace time
  uint32_t stream = 0;
  int device = 0;
  uint64_t correlation = 0;
  std::optional<int64_t> external_id;
  uint64_t bytes = 0;  // memcpy/memset
  CopyKind copy_kind = CopyKind::kUnknown;
  MemoryKind src = MemoryKind::kUnknown, dst = MemoryKind::kUnknown;
  uint32_t grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  uint32_t shared_mem = 0;
  std::optional<CollectiveArgs> collective;  // on the kernel itself (newer Kineto)
};

// A CUDA runtime or driver call on a CPU thread.
struct ApiCall {
  std::string name;
  bool driver = false;
  int64_t ts_ns = 0, dur_ns = 0;
  int64_t pid = 0, tid = 0;
  uint64_t correlation = 0;
  std::optional<int64_t> external_id;
  std::optional<uint32_t> sync_stream;  // a cuda_sync event of this call names the stream
  // CUPTI's callback id. Kineto names a call INVALID when its id is past the end of its name
  // table (CUDA 12's callbacks): torch 2.11 on CUDA 13 so names every <<<>>> launch
  // (__cudaLaunchKernel, 505); the id still says what the call was.
  std::optional<uint32_t> cbid;
};

// A user_annotation range (record_function), ProfilerStep#N included.
struct Annotation {
  std::string name;
  int64_t ts_ns = 0, dur_ns = 0;
  int64_t pid = 0, tid = 0;
};

struct ProcessGroup {
  std::string name;
  int size = 0;
  std::vector<int> ranks;
};

// What was in the file and is not played (counted for the summary line).
struct Unplayed {
  uint64_t cpu_ops = 0;         // cpu_op, Operator, python_function, other CPU spans
  uint64_t flows = 0;           // ph s/f/t (ac2g, fwdbwd, async_cpu_to_gpu)
  uint64_t instants = 0;        // ph i/I
  uint64_t metadata = 0;        // ph M
  uint64_t gpu_annotations = 0; // gpu_user_annotation
  uint64_t invalid_calls = 0;   // runtime calls Kineto names INVALID (with GPU work or not)
  uint64_t other = 0;           // other categories and phases
};

struct Trace {
  std::string path;
  std::optional<int> rank, world_size;  // distributedInfo
  std::vector<ProcessGroup> process_groups;
  std::map<int, std::string> device_names;  // deviceProperties: id -> name
  std::vector<GpuActivity> activities;
  std::vector<ApiCall> calls;
  std::vector<Annotation> annotations;
  std::map<int64_t, CollectiveArgs> collective_by_external_id;  // CPU ops that carry them
  std::map<int64_t, std::string> thread_names;                  // tid -> "pt_autograd_0"
  Unplayed unplayed;
};

// Reads `path` (gzip detected by its magic bytes). Throws TraceError, naming the file and what
// is missing, for a file that cannot be read, is truncated, or is not a Kineto trace.
Trace read_kineto_trace(const std::string& path);
// The same from text already in memory (tests); `path` only names it in errors.
Trace parse_kineto_trace(std::string text, const std::string& path);

// "1712195495519689.047" (microseconds) -> 1712195495519689047 ns, exactly; more than three
// decimals round to the nearest ns (half away from zero). nullopt when it is not a number.
std::optional<int64_t> microseconds_to_ns(std::string_view token);

// Kineto's memcpy name -> its kinds: "Memcpy HtoD (Pinned -> Device)".
void parse_memcpy_name(std::string_view name, CopyKind* kind, MemoryKind* src, MemoryKind* dst);

const char* copy_kind_name(CopyKind k);  // "HtoD", ... as traintime's rank file keys them

}  // namespace sim_replay
