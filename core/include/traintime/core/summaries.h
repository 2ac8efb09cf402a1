// The typed results each part of libtraintime.so hands to the one rank-file assembler
// (DESIGN §1, docs/architecture.md). Every module fills only its own summary; build_rank_file()
// (rank_file_builder.h) maps them onto the schema. Nothing here depends on the order in which
// the modules started, and no module ever reads or rewrites another module's summary.
//
//   Identity     preload/   who wrote the file, when, why (exit, signal, snapshot)
//   CpuSummary   core::RegionRegistry::summary()   regions, steps, annotation counters
//   GpuSummary   core::GpuAggregator::summary(), wrapped by cupti/ with the capture status
//   CommSummary  nccl/      CommCallTable::snapshot() (stable ids included)
//   HealthSummary nvml/     the GPUs' clocks, power, temperature per step (its section's data:
//                           gpu_health; the per-step rows the builder joins with the steps)
//   Section      any module with nothing to join (nvtx/, null/, the next API family): its
//                counters and warnings only (core/section.h)
//
// Each summary carries its module's Section (name, counters, warnings) too.
// Joins: region rows by PathId (never by path string); communicators by CommCallTable index.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "traintime/core/activity.h"
#include "traintime/core/category.h"
#include "traintime/core/comm_stats.h"
#include "traintime/core/cpu_collectives.h"
#include "traintime/core/memory_tracker.h"
#include "traintime/core/rank_file.h"
#include "traintime/core/section.h"

namespace traintime::core {

// GPU time of the NCCL work of one (communicator, op), with its message-size histogram.
struct CommGpuTime {
  uint64_t gpu_ns = 0;
  uint64_t kernels = 0;
  uint64_t captured_calls = 0;  // calls counted on the GPU side (CUDA graph replays)
  uint64_t captured_bytes = 0;
  std::array<uint64_t, kSizeBuckets> bucket_gpu_ns{};
  std::array<uint64_t, kSizeBuckets> bucket_captured_calls{};
  std::array<uint64_t, kSizeBuckets> bucket_captured_bytes{};
};

// What the user told about the model, for TFLOP/s and MFU.
struct ModelFlops {
  double flops_per_step = 0;
  double flops_per_token = 0;
  double peak_tflops = 0;     // TRAINTIME_PEAK_TFLOPS (0: from the table)
  std::string dtype = "bf16";  // TRAINTIME_DTYPE
};

// What the composition root measured of traintime's own cost (rank file self_cost, beside the
// modules' own rows in their sections): its threads' CPU time, the bytes it wrote, and the
// callbacks' estimated time inside the steps after warm-up (from the marks taken as steps end).
struct ProcessCost {
  bool present = false;  // false: no self_cost in the file (a tool's or a test's file)
  std::vector<ThreadCost> threads;
  uint64_t written_bytes = 0;
  uint64_t steps_callbacks_ns = 0;
};

struct Identity : RankIdentity {
  std::vector<std::string> warnings;  // configuration warnings, first in the file
  ModelFlops model;
  ProcessCost cost;
};

struct CpuSummary {
  // One row per entered path with its CPU figures (GPU fields zero), and the row's PathId.
  std::vector<RegionRow> regions;
  std::vector<PathId> region_ids;  // same order as regions
  // Name of every interned path, indexed by PathId (index 0 = kNoPath = ""), so GPU rows of a
  // path with no CPU row still get their name.
  std::vector<std::string> path_names;
  Steps steps;  // CPU part: count, warmup, wall_ns, samples, tokens, rates, detail {index, wall_ns}
  // When the newest step ended, on the registry's clock (Timebase::now_ns); 0 before the first.
  // The writer turns it into steps.last_end_unix_ns with the file's own end time.
  uint64_t last_step_clock_ns = 0;
  uint64_t unbalanced_pops = 0;
  // One row per thread that recorded (rank file threads[]): its tid, the process's step count
  // and its open region paths, outermost first. Threads that ended keep their row (nothing open).
  std::vector<ThreadSnapshot> threads;
  Section section{"annotations"};  // annotation counters (unbalanced pops, ...) and warnings
};

struct GpuSummary {
  GpuCapture capture = GpuCapture::kNone;  // rank file gpu_capture
  std::string capture_reason;
  std::string device_name;       // CUDA name of the device of the first record ("" unknown)
  bool records_complete = true;  // rank file gpu_records_complete
  std::array<CategoryTotals, kCategoryCount> categories{};  // by Category
  struct Region : RegionGpu {
    PathId path = kNoPath;
    Category category = Category::kOther;
  };
  std::vector<Region> regions;
  // The rank's kernels with the most GPU time, every region and no region together (comm too).
  std::vector<KernelStat> top_kernels;
  StepTotals totals;
  std::vector<Steps::Detail> detail;  // wall_ns 0: build_rank_file takes it from CpuSummary
  bool partial_final_step = false;
  // Where the steps came from (core/step_feed.h): steps.source and steps.detection, and the
  // step count when the steps are not the marker's alone.
  std::string steps_source = "marker";
  StepDetection steps_detection;
  uint64_t steps_count = 0;
  // TRAINTIME_STEPS=off: no steps at all, the markers the program called included
  // (build_rank_file drops their count and wall times).
  bool steps_off = false;
  std::map<CopyKind, MemcpyStat> memcpy;  // the standard kinds and any other with activity
  // GPU time of NCCL work per (communicator, op). comm_index is the CommCallTable index,
  // kUnregistered for an interposed call on a communicator the table does not know (size 0), or
  // kByName for kernels found by name only (no interposition: bytes unknown).
  static constexpr uint32_t kByName = 0xffffffffu;
  static constexpr uint32_t kUnregistered = 0xfffffffeu;
  struct Comm {
    uint32_t comm_index = kByName;
    CommOp op = CommOp::kUnknown;
    CommGpuTime time;
  };
  std::vector<Comm> comm;
  // Completed collectives per communicator (the ring of recent ones, oldest first).
  struct Ring {
    uint32_t comm_index = 0;
    uint64_t ops_completed = 0;
    std::vector<RecentCollective> recent;
  };
  std::vector<Ring> rings;
  uint64_t dropped_records = 0;
  CaptureStats capture_stats;  // filled by the CUPTI capture
  MemorySummary memory;        // CUPTI's memory records (core/memory_tracker.h)
  // The GPU side's counters and warnings: the aggregator's (folding, caps) and, under capture,
  // the CUPTI adapter's (drops, joins, buffers).
  Section section{"cupti"};
};

struct CommSummary {
  CommCallTable::Snapshot calls;  // per communicator: size, rank, stable id, counters
  Section section{"nccl"};        // the interposer's counters and warnings
  // The GPU time NCCL's own timers gave (its profiler plugin's kernel-channel events), per
  // (communicator, op) and per communicator as GpuSummary has them from CUPTI: the rank file's
  // GPU time of collectives when CUPTI did not capture, and kernel_ch_ns beside CUPTI's when it did.
  struct KernelCh {
    std::vector<GpuSummary::Comm> comm;
    std::vector<GpuSummary::Ring> rings;
  };
  KernelCh kernel_ch;
  // The collectives traintime.torch recorded on the CPU (gloo, MPI process groups), with their
  // own section: communicators[] with "clock": "cpu" and comm[] rows with a backend.
  CpuCollectives::Summary cpu;
};

struct HealthSummary {
  // The sampler's counters (samples, failed samples) and its data section (section.data: the
  // module's gpu_health, nvml/include/traintime/nvml/gpu_health.h).
  Section section{"nvml"};
  // Each device's compact figures of each step it has samples of (device by device, each
  // oldest first), for the builder's join with the steps: steps.detail[].gpu_health.
  struct StepRow {
    uint64_t index = 0;  // the step, as steps.detail[].index
    StepHealth health;
  };
  std::vector<StepRow> steps;
};

}  // namespace traintime::core
