// The per-rank output file, as a value (DESIGN §6, docs/schema.md). The preload fills the
// identity and CPU parts, the attribution engine the GPU parts; rank_file_json.h turns it into
// the "traintime/1" JSON and back. Every *_ns is nanoseconds; every *_gbps is 1e9 bytes/s.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "traintime/core/activity.h"
#include "traintime/core/category.h"

namespace traintime::core {

inline constexpr const char* kSchema = "traintime/1";

struct CategoryTotals {
  uint64_t gpu_busy_ns = 0;  // measure of the union of the category's intervals, per device
  uint64_t gpu_sum_ns = 0;   // raw sum of durations
  uint64_t count = 0;        // activities
  bool operator==(const CategoryTotals& o) const {
    return gpu_busy_ns == o.gpu_busy_ns && gpu_sum_ns == o.gpu_sum_ns && count == o.count;
  }
};

struct KernelStat {
  std::string name;  // demangled
  uint64_t count = 0;
  uint64_t gpu_sum_ns = 0;
};

struct DurationStats {  // over a set of samples, in ns
  uint64_t count = 0;
  uint64_t total_ns = 0;
  uint64_t min_ns = 0;
  uint64_t max_ns = 0;
  uint64_t mean_ns = 0;
  uint64_t p50_ns = 0;
  uint64_t p90_ns = 0;
};

// The GPU figures of one region (the attribution engine's part of a region row).
struct RegionGpu {
  uint64_t gpu_busy_ns = 0;  // union of the GPU work launched directly from this region
  uint64_t gpu_sum_ns = 0;
  uint64_t gpu_span_ns = 0;  // sum over entries of [first start, last end] of its GPU work
  uint64_t kernels = 0;      // kernel count
  ByCategory<CategoryTotals> by_category;  // only the categories of this region's work
  std::vector<KernelStat> top_kernels;
};

// One exclusive (self) row per region path.
struct RegionRow : RegionGpu {
  std::string path;  // "step/forward/layer3"
  Category category = Category::kOther;
  uint64_t count = 0;       // times the region was entered
  uint64_t cpu_ns = 0;      // total CPU wall time inside (inclusive of children)
  uint64_t cpu_min_ns = 0;
  uint64_t cpu_max_ns = 0;
};

struct StepTotals {
  uint64_t gpu_busy_ns = 0;
  uint64_t compute_ns = 0;
  uint64_t comm_ns = 0;
  uint64_t comm_overlapped_ns = 0;
  uint64_t exposed_comm_ns = 0;
  uint64_t io_ns = 0;
  uint64_t idle_ns = 0;
  // Raw duration sums (no union), for comparison with the union-based figures above.
  uint64_t gpu_sum_ns = 0;
  uint64_t compute_sum_ns = 0;
  uint64_t comm_sum_ns = 0;
  uint64_t io_sum_ns = 0;
};

// NVML's clock-event (throttle) reasons (nvml.h nvmlClocksEventReason*): the value is the index of
// NVML's bit (reason r is bit 1 << r). Names only where JSON is written or read.
enum class ClockEventReason : uint8_t {
  kGpuIdle,                   // 0x1: the one reason that is no throttle
  kApplicationsClocksSetting,  // 0x2
  kSwPowerCap,                // 0x4
  kHwSlowdown,                // 0x8
  kSyncBoost,                 // 0x10
  kSwThermalSlowdown,         // 0x20
  kHwThermalSlowdown,         // 0x40
  kHwPowerBrakeSlowdown,      // 0x80
  kDisplayClockSetting,       // 0x100
};
// The names the rank file writes, by ClockEventReason; a bit past the table is "bit_<n>".
inline constexpr std::string_view kClockEventReasonNames[] = {
    "gpu_idle",          "applications_clocks_setting", "sw_power_cap",
    "hw_slowdown",       "sync_boost",                  "sw_thermal_slowdown",
    "hw_thermal_slowdown", "hw_power_brake_slowdown",   "display_clock_setting",
};
constexpr uint64_t clock_event_bit(ClockEventReason r) { return uint64_t{1} << static_cast<unsigned>(r); }

// The clock-event reasons seen (in a step, over a run): NVML's mask, and the names a file held
// that this reader does not know (a newer writer's), kept as written, as ExitReason keeps its text.
struct ClockEventReasons {
  uint64_t bits = 0;  // bit r: ClockEventReason r; a bit past the table: NVML's, without a name here
  std::vector<std::string> unknown;  // read from a file: names not known here, as written, once each

  bool has(ClockEventReason r) const { return (bits & clock_event_bit(r)) != 0; }
  bool empty() const { return bits == 0 && unknown.empty(); }
  // A reason other than gpu_idle (an unknown one included): the clocks were held down (power,
  // thermal, a hardware slowdown, a clock setting).
  bool throttled() const { return (bits & ~clock_event_bit(ClockEventReason::kGpuIdle)) != 0 || !unknown.empty(); }
  // The same reasons less `r`.
  ClockEventReasons without(ClockEventReason r) const;
  ClockEventReasons& operator|=(const ClockEventReasons& o);
  bool operator==(const ClockEventReasons& o) const { return bits == o.bits && unknown == o.unknown; }
};
// The JSON edge: the names of `r` as the rank file writes them, in NVML's bit order ("bit_<n>" for
// a bit past the table), then the unknown ones as written.
std::vector<std::string> clock_event_reason_names(const ClockEventReasons& r);
// One name as a file wrote it, added to *into: its bit when known (a "bit_<n>" past the table
// too), else kept as written.
void add_clock_event_reason(std::string_view name, ClockEventReasons* into);

// One device's NVML health in one step, compact: steps.detail[].gpu_health[] and the live
// metrics' health_* figures (docs/schema.md, docs/metrics.md). The step's full figures (memory
// clock, PCIe link, NVML's memory) are in the nvml module's data section, gpu_health.devices[]
// (cuda_device) .steps[] (index): nvml/include/traintime/nvml/gpu_health.h.
struct StepHealth {
  int32_t cuda_device = -1;  // the CUDA ordinal: which gpu_health.devices[] entry
  uint64_t samples = 0;      // NVML readings taken in the step
  double sm_clock_mhz_median = 0;
  uint32_t sm_clock_mhz_min = 0;
  double power_w_median = 0;
  uint32_t temperature_c_max = 0;
  ClockEventReasons clock_event_reasons;  // seen in any of the step's samples
};

// Device memory in use from CUPTI's memory records (allocations less releases, by address):
// steps.detail[].memory and the top-level memory (docs/schema.md "memory"). peak_bytes and
// in_use_bytes are the rank's, over all its devices (the peak of their sum, not a sum of peaks);
// devices[] has each device's own, by CUDA ordinal.
struct DeviceMemory {
  int32_t cuda_device = 0;
  uint64_t peak_bytes = 0;
  uint64_t in_use_bytes = 0;  // at the end of the step (of the records, for the run)
};
struct MemoryFigures {
  bool present = false;  // false: omitted (no memory record seen, or an older writer)
  uint64_t peak_bytes = 0;
  uint64_t in_use_bytes = 0;
  std::vector<DeviceMemory> devices;  // ascending cuda_device
};

// PyTorch's caching allocator's view of one step (traintime.torch.instrument):
// steps.detail[].memory.torch.
struct TorchMemory {
  bool present = false;
  uint64_t allocated_peak_bytes = 0;  // torch.cuda.max_memory_allocated() at the step's end
  uint64_t reserved_peak_bytes = 0;   // torch.cuda.max_memory_reserved() at the step's end
  // true ("peaks": "step"): the peaks were reset after every step, so they are the step's own;
  // false ("run"): they run from the process start or the user's own last reset.
  bool peaks_per_step = true;
  bool has_current = false;  // the two below were given (omitted from the file otherwise)
  uint64_t allocated_bytes = 0;  // torch.cuda.memory_allocated() at the step's end
  uint64_t reserved_bytes = 0;   // torch.cuda.memory_reserved() at the step's end
};

// steps.detection (docs/attribution.md "Steps without a marker"): how steps were found in a
// job without a marker; present when detection ran (TRAINTIME_STEPS=auto and GPU work seen), and
// with TRAINTIME_STEPS=off (its reason says so).
struct StepDetection {
  bool present = false;
  uint64_t steps = 0;             // steps the detector ended
  uint64_t period_calls = 0;      // launches in one step (0: no period found)
  uint64_t period_ns = 0;         // median GPU time from one step's first work to the next's (0: n/a)
  double coverage = 0;            // share of the launches that are in steps exactly one period long
  uint64_t relocks = 0;           // interruptions after which the period came back
  uint64_t warmup_launches = 0;   // launches before the first repetition (in the first step)
  uint64_t late_launches = 0;     // records that came after their place in the sequence was read
  uint64_t folded_blocks = 0;     // stretches the window could not hold, each left in its step
  uint64_t folded_launches = 0;
  uint64_t marker_from_step = 0;  // source "marker" after detection: the marker's first step
  // "nccl": steps numbered by their first collective's sequence number (the same on every
  // rank); "local": by this rank alone (no collective with a sequence number). "" in older files.
  std::string numbering;
  uint64_t undecided_launches = 0;  // mid-run: activities not yet placed, in the step in progress
  uint64_t tokens_over_cap = 0;     // launches whose kind was past the feed's token cap
  std::string reason;             // why no steps were detected, or what overrode them
  // TRAINTIME_STEP_ANCHOR in force: steps end at each launch it names, no period is searched
  // ("" when searching). Absent from the file when empty, and in older files.
  std::string anchor;
};

struct Steps {
  // Where the steps came from: "marker" (tt_step, an NVTX `step` range, a framework callback),
  // "detected" (the launch sequence's period) or "none". Older files read as "marker".
  std::string source = "marker";
  StepDetection detection;
  uint64_t count = 0;   // steps, warm-up included (tt_step calls, or detected steps)
  uint64_t warmup = 0;  // TRAINTIME_WARMUP_STEPS in force
  DurationStats wall_ns;  // CPU wall time between consecutive tt_step calls, warm-up skipped
  uint64_t samples = 0;   // summed over all steps
  uint64_t tokens = 0;
  double samples_per_s = 0;  // over the steps after warm-up
  double tokens_per_s = 0;
  // Model FLOPs (when the user gave them: tt_set_flops, TRAINTIME_FLOPS_PER_TOKEN), over the
  // steps after warm-up: FLOPs per step, achieved TFLOP/s, and MFU against device.peak_tflops.
  // 0 = unknown (omitted from the file).
  double flops_per_step = 0;
  double tflops = 0;
  double mfu = 0;
  // Hardware FLOPs utilisation: MFU with the forward work activation checkpointing re-runs
  // counted (hfu_from_mfu, from the file's recompute and forward GPU busy time). 0 = unknown:
  // no MFU, or no recompute or no forward GPU time in the file.
  double hfu = 0;
  StepTotals totals;      // summed over every step, warm-up included
  bool partial_final_step = false;  // GPU work launched after the last tt_step
  // Wall-clock time the newest step ended, on the writing host's clock (0: no step, or an older
  // writer): with end_unix_ns, how long a running rank has been in its current step.
  uint64_t last_end_unix_ns = 0;
  // Per-step detail for a bounded number of steps (index = step number).
  struct Detail {
    uint64_t index = 0;
    uint64_t wall_ns = 0;
    uint64_t span_ns = 0;   // sum over devices of [first start, last end] of the step's work
    bool partial = false;   // the final step, launched after the last tt_step
    StepTotals totals;
    ByCategory<uint64_t> busy_ns_by_category;
    // NVML's figures of the step, per device that had samples in it (none: no sample, NVML
    // off or unavailable, or a file from an older writer).
    std::vector<StepHealth> gpu_health;
    MemoryFigures memory;  // CUPTI's memory records of the step
    TorchMemory torch_memory;  // written as memory.torch
  };
  std::vector<Detail> detail;
};

struct SizeBucket {  // message-size histogram bucket: bytes in [lo, 2*lo)
  uint64_t lo_bytes = 0;
  uint64_t calls = 0;
  uint64_t bytes = 0;
  uint64_t gpu_ns = 0;
};

struct CommRow {
  CommOp op = CommOp::kUnknown;  // written as comm_op_name(): AllReduce, ..., unknown
  uint32_t comm_size = 0;
  uint64_t calls = 0;
  uint64_t bytes = 0;
  bool bytes_known = true;  // false in the by-kernel-name fallback
  uint64_t gpu_ns = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  std::vector<SizeBucket> sizes;
  // "" for NCCL (GPU time); the process group's backend ("gloo", "mpi") for collectives run on
  // the CPU, as traintime.torch recorded them: then cpu_ns is their CPU time, waiting included,
  // and gpu_ns and the bandwidths are 0.
  std::string backend;
  uint64_t cpu_ns = 0;
  // NCCL rows: the paths that saw the calls (kSeenByInterposer | kSeenByPlugin), written as
  // seen_by_name(); 0 when not recorded (a row from GPU records alone, an older rank file).
  uint8_t seen_by = 0;
};

inline constexpr uint8_t kSeenByInterposer = 1;  // the NCCL wrappers
inline constexpr uint8_t kSeenByPlugin = 2;      // NCCL's profiler plugin events
// "interposer", "plugin", "both"; "" for 0.
constexpr std::string_view seen_by_name(uint8_t seen_by) {
  switch (seen_by) {
    case kSeenByInterposer: return "interposer";
    case kSeenByPlugin: return "plugin";
    case kSeenByInterposer | kSeenByPlugin: return "both";
    default: return "";
  }
}
constexpr uint8_t seen_by_from_name(std::string_view name) {
  for (uint8_t s = 1; s <= 3; ++s)
    if (seen_by_name(s) == name) return s;
  return 0;
}

struct RecentCollective {
  uint64_t seq = 0;
  CommOp op = CommOp::kUnknown;
  uint64_t bytes = 0;
  uint64_t gpu_start_ns = 0;
  uint64_t gpu_end_ns = 0;
  // The same collective's GPU time from NCCL's own timers (its profiler plugin's kernel-channel
  // events, first channel's start to last channel's stop of its kernel); 0: not measured. Without
  // CUPTI, gpu_start_ns/gpu_end_ns above are those timers too.
  uint64_t kernel_ch_ns = 0;
};

// An operation enqueued (CPU side) whose GPU work had not completed when the file was written.
struct InFlightOp {
  uint64_t seq = 0;  // sequence number on its communicator (1-based, consecutive)
  CommOp op = CommOp::kUnknown;  // as in CommRow::op
  uint64_t bytes = 0;
};

struct Communicator {
  std::string id;  // stable id (hash of the NCCL unique id / communicator handle order)
  uint32_t size = 0;
  uint32_t rank = 0;
  uint64_t ops_enqueued = 0;   // last sequence number enqueued
  uint64_t ops_completed = 0;  // last sequence number whose GPU work completed
  std::vector<RecentCollective> recent;
  // At most 16, oldest first; empty (and omitted from the file) when nothing is in flight.
  std::vector<InFlightOp> in_flight;
  // A process group whose collectives ran on the CPU (CommRow::backend): its recent[] times are
  // the CPU's (CLOCK_MONOTONIC of the rank), not CUPTI's.
  std::string backend;
  bool cpu_clock = false;
};

// What one application thread was inside when the file was written (hang forensics).
struct ThreadSnapshot {
  uint64_t tid = 0;
  uint64_t step = 0;                      // tt_step calls so far
  std::vector<std::string> open_regions;  // open region paths, outermost first
};

struct MemcpyStat {
  uint64_t count = 0;
  uint64_t bytes = 0;
  uint64_t gpu_ns = 0;
};

// How the CUPTI capture joined records to launches (rank file capture_stats): the evidence that
// no launch context was lost, and how fast the process consumes correlation ids.
struct CaptureStats {
  bool present = false;                   // written only when CUPTI capture ran
  uint64_t buffers = 0;                   // activity buffers CUPTI delivered
  uint64_t records = 0;                   // kernel, copy and memset records decoded
  uint64_t launch_callbacks = 0;          // launch contexts stored (a runtime launch and the
                                          // driver launch nested in it are two)
  double correlation_ids_per_callback = 0;  // ids consumed per launch callback: every traced API
                                            // call takes one
  uint64_t joined = 0;                    // records that found their launch context
  uint64_t graph_node_context = 0;        // records that took their CUDA graph node's region
  uint64_t missing_context = 0;           // records with no launch context: counted unattributed
  uint64_t overwritten = 0;               // of those, lost to newer launches reusing the slot
};

// Which process of a rank wrote the file (rank file `role`): the rank's owner of
// rank-%05d.json, or an auxiliary process (a DataLoader worker, a fork child) that inherited its
// RANK and writes rank-%05d.pid%d.json.
enum class Role : uint8_t { kRank, kAux };
constexpr std::string_view role_name(Role r) { return r == Role::kAux ? "aux" : "rank"; }
inline std::optional<Role> role_from_name(std::string_view name) {
  if (name == "rank") return Role::kRank;
  if (name == "aux") return Role::kAux;
  return std::nullopt;
}

// Whether GPU work was captured (rank file `gpu_capture`): CUPTI ran, it could not be used
// (gpu_capture_reason says why), or capture never started (no CUDA in the process, or off).
enum class GpuCapture : uint8_t { kNone, kUnavailable, kCupti };
inline constexpr std::string_view kGpuCaptureNames[] = {"none", "unavailable", "cupti"};
constexpr std::string_view gpu_capture_name(GpuCapture c) {
  return kGpuCaptureNames[static_cast<std::size_t>(c)];
}
inline std::optional<GpuCapture> gpu_capture_from_name(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kGpuCaptureNames); ++i)
    if (kGpuCaptureNames[i] == name) return static_cast<GpuCapture>(i);
  return std::nullopt;
}

// Why the rank file was written (rank file `exit_reason`): the process exited; it was stopped by a
// terminating signal (SIGTERM, SIGINT, SIGABRT, or another); a periodic snapshot; the hang
// watchdog's suspected-hang file; or, read from a record (rank-*.live) that no handler finished, the
// process was killed. kOther: a word this reader does not know (a newer writer's), kept as written
// in RankIdentity::exit_reason_text; kNone: the field was empty. The names appear only where the
// rank file is read or written.
enum class ExitReason : uint8_t {
  kNone, kExit, kSnapshot, kSuspectedHang, kKilled, kSigterm, kSigint, kSigabrt, kSignal, kOther
};
inline constexpr std::string_view kExitReasonNames[] = {
    "", "exit", "snapshot", "suspected hang", "killed", "signal SIGTERM", "signal SIGINT", "signal SIGABRT",
    "signal", ""};
// kOther has no name of its own: its text is the file's (RankIdentity::exit_reason_text).
constexpr std::string_view exit_reason_name(ExitReason r) { return kExitReasonNames[static_cast<std::size_t>(r)]; }
// Any name but "" (kNone); kOther for a word not known here.
inline ExitReason exit_reason_from_name(std::string_view name) {
  for (std::size_t i = 0; i + 1 < std::size(kExitReasonNames); ++i)
    if (kExitReasonNames[i] == name) return static_cast<ExitReason>(i);
  return ExitReason::kOther;
}
// Ended by a terminating signal, whether or not the signal is known.
constexpr bool signal_exit(ExitReason r) {
  return r == ExitReason::kSigterm || r == ExitReason::kSigint || r == ExitReason::kSigabrt || r == ExitReason::kSignal;
}
// The signal's name ("SIGTERM"); "" for another signal or another reason.
constexpr std::string_view exit_signal_name(ExitReason r) {
  const std::string_view name = exit_reason_name(r);
  return signal_exit(r) && name.size() > 7 ? name.substr(7) : std::string_view();
}

// One module's typed counters (rank file modules.<name>.counters): {key, count}, every key the
// module counts, zero or not, so a reader can sum a key across ranks and tell "none" from "not
// measured". Each warning of the module is formatted from one of these (core/section.h).
struct ModuleCounters {
  std::map<std::string, uint64_t> counters;
  // modules.<name>.version: the version of the module's part of the file (ModuleFormat::version)
  // as read; 0 when the file has none (written before versions were, or a hand-made file). The
  // writer writes its own format's version.
  uint32_t version = 0;
  bool operator==(const ModuleCounters& o) const { return counters == o.counters; }
};

// A module's own data (its data section: the top-level key(s) of the rank file its format owns,
// e.g. nvml's gpu_health), as its module's type, which derives from this one. Core holds it
// without knowing its type; the module's format (core/module_format.h ModuleFormat::data: DataSectionFormat)
// writes and reads it, and the module's own accessor hands it to readers (nvml::gpu_health()).
struct ModuleData {
  virtual ~ModuleData() = default;
};

// What traintime itself cost the process (rank file self_cost, docs/schema.md "self_cost").
// The CPU time of a thread traintime started, from the thread's own CPU clock, by its name
// (support/threads.h: all threads of one name over the process's life).
struct ThreadCost {
  std::string name;  // "tt-cupti", "tt-writer", "tt-snapshot", "tt-hang", "tt-nvml"
  uint64_t cpu_ns = 0;
};
// traintime's code on threads it did not start, one row per hot path of a module
// (core/self_cost.h): calls counted, one in sampled_every timed.
struct CallbackCost {
  std::string module;  // the module whose row it is (its section's name)
  std::string what;    // "launch callbacks", "annotations", ...
  uint64_t calls = 0;
  uint64_t sampled_every = 1;  // 1: every call timed
  uint64_t samples = 0;        // timed calls in the estimate
  uint64_t interrupted = 0;    // timed calls left out (longer than kInterruptedNs: preempted)
  bool estimated = true;       // false: each call timed in full (or CUPTI's own records)
  bool measured = true;        // false: calls but none timed yet: estimated_ns is n/a
  uint64_t estimated_ns = 0;
  uint64_t spread_ns = 0;      // the estimate's standard error
};
// traintime's own buffers and tables, by its own accounting, one row per module's kind.
struct MemoryCost {
  std::string module;
  std::string what;  // "CUPTI activity buffers", "correlation table", ...
  uint64_t peak_bytes = 0;
};
struct SelfCost {
  bool present = false;  // omitted from the file when false (files from older writers)
  std::vector<ThreadCost> threads;
  std::vector<CallbackCost> callbacks;
  std::vector<MemoryCost> memory;
  uint64_t peak_bytes = 0;     // the memory rows' peaks, summed (an upper bound of their joint peak)
  uint64_t written_bytes = 0;  // files traintime wrote before this one
  uint64_t callbacks_ns = 0;   // the measured callbacks rows' estimates, summed
  // The steps after warm-up: their CPU wall time and the callbacks' estimated time inside them
  // (all threads' together); pct = 100 x steps_callbacks_ns / steps_wall_ns. has_pct false: no
  // step after warm-up (pct omitted: n/a).
  bool has_pct = false;
  double pct = 0;
  uint64_t steps_wall_ns = 0;
  uint64_t steps_callbacks_ns = 0;
};

// Who wrote a rank file, when and why (the preload's part of it).
struct RankIdentity {
  std::string job_id;
  int64_t rank = 0;
  int64_t world_size = 1;
  Role role = Role::kRank;
  std::string host;
  int64_t pid = 0;
  bool snapshot = false;
  ExitReason exit_reason = ExitReason::kNone;
  std::string exit_reason_text;  // kOther: the reason as the file wrote it; else empty
  // The rank file's exit_reason: its name, or the text of a reason not known here.
  std::string exit_reason_written() const {
    return exit_reason == ExitReason::kOther ? exit_reason_text : std::string(exit_reason_name(exit_reason));
  }
  uint64_t start_unix_ns = 0;
  uint64_t end_unix_ns = 0;
};

struct RankFile : RankIdentity {
  std::string schema = kSchema;
  GpuCapture gpu_capture = GpuCapture::kNone;
  std::string gpu_capture_reason;
  // The rank's GPU (the device of its first record) and its peak TFLOP/s for MFU, with where the
  // peak came from ("table: H100 SXM, bf16", "TRAINTIME_PEAK_TFLOPS"). Omitted when all empty.
  std::string device_name;
  double peak_tflops = 0;
  std::string peak_source;
  // False when the file was written while CUPTI still held records it had not delivered (a
  // snapshot, or a terminating signal, which never waits for CUPTI): the GPU figures of the
  // most recent steps may then be missing some work.
  bool gpu_records_complete = true;
  ByCategory<CategoryTotals> categories;  // every category listed
  std::vector<RegionRow> regions;
  // The rank's kernels with the most GPU time, whatever region (or none) launched them: what an
  // unannotated job shows of its kernels. Absent in files from older writers.
  std::vector<KernelStat> top_kernels;
  uint64_t unbalanced_pops = 0;
  Steps steps;
  std::vector<CommRow> comm;
  std::vector<Communicator> communicators;
  std::map<CopyKind, MemcpyStat> memcpy;  // kStandardCopyKinds, named by copy_kind_name
  uint64_t dropped_records = 0;
  CaptureStats capture_stats;  // omitted from the file when !present
  // What each module counted (rank file `modules`), by module name: written by the module's
  // section (core/section.h), absent in files from older writers.
  std::map<std::string, ModuleCounters> modules;
  std::vector<std::string> warnings;
  std::vector<ThreadSnapshot> threads;  // empty (and omitted from the file) when not recorded
  // Each module's data section, by module name (ModuleData): written by the module's format,
  // read back by it; absent when the module had nothing (nvml: no CUDA in the process).
  std::map<std::string, std::shared_ptr<const ModuleData>> module_data;
  // What the reader kept reading past, one line each without the file's name, for the reader's
  // caller to show with it (a module section newer than this reader knows). Never written.
  std::vector<std::string> read_notes;
  MemoryFigures memory;                 // the run's; omitted when !present
  SelfCost self_cost;                   // omitted when !present
};

}  // namespace traintime::core
