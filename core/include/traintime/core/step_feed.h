// Steps for a job with no step marker (docs/attribution.md "Steps without a marker"): sits
// between the activity join and GpuAggregator::ingest on the processing thread. While no marker
// has been seen, it holds each activity, turns each launch (one correlation id) into a token for
// the StepDetector, and hands the activity on with the step index the detector gives its launch,
// exactly as if tt_step had been called at each detected boundary. Once a record carries a
// marker step (tt_step, an NVTX `step` range, a framework callback), markers win from there on:
// the detected steps so far keep their numbers and marker step m becomes detected + m. Device
// memory records (set_memory) take the same steps as the GPU work around them.
//
// Numbering: every rank of a job issues the same NCCL calls on a communicator in the same order,
// so a step's first collective has the same sequence number on every rank. A step with one is
// numbered from it: n = n' + (seq - seq') / c, where (n', seq') is the last step so numbered (at
// first (0, 1)) and c the sequence numbers one period spans on that communicator (measured
// between two exact steps in a row: a grouped launch spans one per member). Step k is then the same
// step on every rank, whatever each rank's warm-up or lock did. A step with no recorded collective
// (a job without NCCL, collectives captured in CUDA graphs) takes the number after the last one:
// steps.detection.numbering says which ("nccl" or "local").
//
// Tokens: a kernel by its name (and by its name and grid: step_detector.h "Grids"), a CUDA graph launch by its graph id, a copy by direction, a
// memset as such (their sizes follow the batch's data, which real jobs vary every step); NCCL
// work by (op, communicator, bytes) for the collectives whose size the model fixes (AllReduce,
// AllGather, ReduceScatter, Broadcast, Reduce) and by (op, communicator) for the others, and
// marked a collective (a kernel named nccl* is a collective too when the wrappers did not see
// the call).
//
// Launch order is correlation-id order. CUPTI delivers per-thread buffers in any order, so a
// launch is fed to the detector only once `settle_lag` newer correlation ids have been seen (or
// at finish()); a record that arrives after its launch's place was fed takes the step its
// correlation id falls in, and is not a token (counted: late_launches).
//
// Memory: at most `max_held` activities are held. Past it the detector is forced to decide, and
// whatever is still undecided is handed on as part of the step in progress and forgotten by the
// detector (counted: folded_blocks, folded_launches). Kernel names kept for held activities and
// launch tokens are capped (max_names, max_tokens): past them names are kept only while their
// activity is held, and new launch kinds share one token (counted, and the reason says so).
//
// Snapshots: snapshot_into() puts the activities still held into a copy of the aggregator, in the
// step they are known to be in or else the step in progress, so a file written mid-run (and the
// last one before a SIGKILL) counts everything recorded.
//
// Single-threaded (the processing thread). No globals, no CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "traintime/core/activity.h"
#include "traintime/core/category.h"
#include "traintime/core/gpu_aggregator.h"
#include "traintime/core/memory_tracker.h"
#include "traintime/core/rank_file.h"
#include "traintime/core/step_detector.h"

namespace traintime::core {

struct GpuSummary;

// TRAINTIME_STEPS: auto (detect until a marker appears), marker (markers only), off (no steps:
// every activity is in step 0, markers ignored).
enum class StepsMode : uint8_t { kAuto, kMarker, kOff };
// TRAINTIME_STEPS's spelling (config.cpp validated it): anything but marker and off is auto.
inline StepsMode steps_mode_named(std::string_view name) {
  return name == "marker" ? StepsMode::kMarker : name == "off" ? StepsMode::kOff : StepsMode::kAuto;
}

struct StepFeedOptions {
  StepsMode mode = StepsMode::kAuto;
  std::string anchor;             // TRAINTIME_STEP_ANCHOR: a kernel name or a NCCL op name
  // Activities held at most: the aggregator's own open-step window's bound (262 144 records,
  // docs/attribution.md "Memory bound"), kHeldBytes each.
  std::size_t max_held = std::size_t{1} << 18;
  std::size_t max_names = std::size_t{1} << 16;   // kernel names interned
  std::size_t max_tokens = std::size_t{1} << 18;  // distinct launch kinds told apart
  uint32_t settle_lag = 1u << 16;  // correlation ids a launch waits before it is fed
  DetectorOptions detector;       // anchor is set from `anchor`
};

// What the rank file says about where steps came from (steps.source, steps.detection).
struct StepsOrigin {
  std::string source = "marker";  // "marker", "detected" or "none"
  StepDetection detection;
};

class StepFeed {
 public:
  StepFeed(GpuAggregator& aggregator, StepFeedOptions options);
  ~StepFeed();
  StepFeed(const StepFeed&) = delete;
  StepFeed& operator=(const StepFeed&) = delete;

  // In place of GpuAggregator::ingest. Passes straight through once markers decide (or with
  // TRAINTIME_STEPS=marker); otherwise holds the activity until its step is known.
  void ingest(const GpuActivity& a, const LaunchContext& ctx, Category region_category);
  // After a buffer: feeds the settled launches, ends the steps they allow, hands those steps'
  // activities on.
  void settle();
  // No more activities will come (exit): every held activity is handed on.
  void finish();
  // Device memory records go to `tracker` through the feed, with the step of their call.
  void set_memory(MemoryTracker* tracker) { memory_ = tracker; }
  bool takes_memory() const { return memory_ != nullptr && !direct_; }
  // A memory record (its step: the marker steps before its call) and its call's correlation id.
  void memory(MemoryEvent e, uint32_t correlation);
  // What MemoryTracker::set_complete_below gets with detected steps: `whole` steps had ended as
  // of the newest moment whose buffers have all been ingested (GpuCapture::detected_whole), so
  // the records of the calls of steps through position whole - 2 have all arrived (the next
  // step's end saw work the GPU ran after them); a step counts complete once none of its records
  // is still held here either. 0: none complete.
  uint64_t memory_complete_below(uint64_t whole) const;
  // The held activities into `copy` (a clone of the aggregator): a snapshot's figures count them.
  void snapshot_into(GpuAggregator& copy) const;
  // Marker step m is aggregator step marker_offset() + m (0 unless detected steps came first).
  uint64_t marker_offset() const { return marker_seen_ ? marker_offset_ : 0; }

  // The steps completed, for GpuAggregator::summary: `marker_steps` (tt_step calls so far) when
  // steps are the marker's, the detected steps (+ marker_steps once a marker took over).
  uint64_t steps_completed(uint64_t marker_steps) const;
  StepsOrigin origin() const;
  // TRAINTIME_STEP_ANCHOR is set, launches were read, and none of them was the anchor (no step
  // ended): the launches read; else 0. At the end, the anchor names nothing this job launches.
  uint64_t unanchored_launches() const;
  // The summary's steps_source, steps_detection and steps_count (build_rank_file reads them).
  void describe(uint64_t marker_steps, GpuSummary* out) const;
  std::size_t held() const { return held_.size(); }
  // Steps ended by detection so far; 0 when steps are not detected (TRAINTIME_STEPS other than
  // auto, or a marker decides).
  uint64_t detected_ended() const { return marker_seen_ || opt_.mode != StepsMode::kAuto ? 0 : ends_.size(); }
  // The step number of ended step `position` (0 .. detected_ended() - 1; Numbering above).
  uint64_t ended_number(uint64_t position) const { return numbers_[position]; }
  // Live figures of detected step `step` (the preload's tt_metrics, Prometheus file): false
  // unless steps are detected, `step` and the next one have ended and none of its records is
  // still held. A detected step's wall time is the time from its first GPU start to the next
  // step's (the GPU's step period: there is no CPU call to time it). `*steps` counts the steps
  // through `step`, `*wall_ns` their wall time (from step 0's first GPU start), `*last_wall_ns`
  // its own. `step` is a position (0 .. detected_ended() - 1); *steps - 1 is its step number.
  bool live_steps(uint64_t step, uint64_t* steps, uint64_t* wall_ns, uint64_t* last_wall_ns) const;
  // The detected step that time `ns` (GPU activity clock) falls in: a step runs from its first
  // GPU start to the next step's. Known once a later step's first start is known and the step
  // ended; before that kNotYet with the step it would be now.
  StepAt step_at(uint64_t ns, uint64_t* step) const;
  // The device of the first activity ingested (held or not); -1 before one.
  int first_device() const { return first_device_; }

 private:
  struct Held {
    GpuActivity activity;  // name points into names_
    LaunchContext ctx;
    Category category;
  };

 public:
  static constexpr std::size_t kHeldBytes = sizeof(Held);  // one held activity (bench/ingest_bench.cpp)

 private:
  struct Pending {  // a launch seen, not yet fed
    uint32_t correlation = 0;
    DetectorLaunch launch;
    uint64_t seq_key = 0;  // a collective's comm_id << 48 | sequence number, else 0
  };
  struct HeldMemory {
    MemoryEvent event;
    uint32_t correlation;
  };
  void forward(const GpuActivity& a, const LaunchContext& ctx, Category region_category);
  void hold(const GpuActivity& a, const LaunchContext& ctx, Category region_category);
  void take_marker(const GpuActivity& a, const LaunchContext& ctx, Category region_category);
  uint32_t name_id(std::string_view name);
  DetectorLaunch launch_of(const GpuActivity& a, const LaunchContext& ctx, uint32_t name);
  // Feeds the pending launches below `bound` (all: every one) in correlation order.
  void feed(uint32_t bound, bool all);
  // The detector's new boundaries (in scratch_) become step ends; fed_ keeps the step in progress.
  void apply();
  // Hands on every held activity whose step is known.
  void release();
  uint64_t step_of(uint32_t correlation) const;
  // The number of a step that ended whose first collective is `seq_key` (0: none).
  uint64_t number_for(uint64_t seq_key, uint32_t own_count);
  uint64_t next_number() const { return numbers_.empty() ? 0 : numbers_.back() + 1; }
  // The step in progress takes its number now (its records are being handed on).
  void number_progress();
  uint32_t token_for(uint64_t key, uint32_t comm);
  void force_bound();
  void note_first(uint64_t step, uint64_t start_ns);

  GpuAggregator& agg_;
  StepFeedOptions opt_;
  StepDetector detector_;
  bool pass_ = false;          // markers decide (or detection is off): no holding
  // Markers decide and no step was detected before them: records go to the aggregator as they
  // are (the common case of a marked job, one branch per record).
  bool direct_ = false;
  bool marker_seen_ = false;
  uint64_t marker_offset_ = 0;  // marker step m is step marker_offset_ + m
  std::deque<Held> held_;
  // Launches seen, not yet fed, from pending_head_ on; [.., pending_sorted_) in correlation
  // order, the rest in arrival order.
  std::vector<Pending> pending_;
  std::size_t pending_head_ = 0;
  std::size_t pending_sorted_ = 0;
  std::vector<uint32_t> fed_;     // correlation ids fed, from the detector's step_start() on
  std::vector<uint64_t> fed_seq_;  // their Pending::seq_key
  uint64_t fed_base_ = 0;         // detector ordinal of fed_[0]
  uint32_t max_correlation_ = 0;
  uint32_t fed_below_ = 0;        // correlation ids below this were fed, or come late
  // The last correlation id of each ended step: step k holds ids in (ends_[k-1], ends_[k]].
  std::vector<uint32_t> ends_;
  std::vector<uint64_t> numbers_;  // the step number of each ended step (Numbering above)
  uint64_t progress_number_ = 0;   // the step in progress's, once number_progress() gave it
  bool progress_numbered_ = false;
  uint64_t carried_key_ = 0;       // the step in progress's first collective, fed_ no longer has it
  uint32_t ref_comm_ = 0;          // numbering's communicator, and its last (n', seq')
  uint64_t ref_seq_ = 1;
  uint64_t ref_number_ = 0;
  uint64_t seq_numbered_ = 0;      // steps numbered by sequence numbers
  uint64_t period_seqs_ = 0;       // sequence numbers one period spans (0: not measured yet)
  uint64_t prev_key_ = 0;          // the last ended step's first collective, and whether exact
  bool prev_exact_ = false;
  struct Ended {
    uint32_t last;
    uint64_t key;
    uint32_t own;
    bool exact;
  };
  std::vector<Ended> ended_;       // apply()'s scratch
  std::vector<uint32_t> token_comm_;  // by token: a collective's comm_id with a sequence, else 0
  // Launches up to this correlation id are in a known step (ended, or the step in progress
  // once a fold gave them to it).
  uint32_t known_through_ = 0;
  bool any_known_ = false;
  std::map<uint64_t, uint64_t> first_ns_;  // earliest GPU start of the most recent steps
  std::map<uint64_t, uint64_t>::iterator last_first_ = first_ns_.end();  // note_first's last
  uint64_t first_any_ns_ = UINT64_MAX;  // the earliest GPU start handed on (step 0's first)
  std::vector<DetectedBoundary> scratch_;
  // Kernel names of held activities (a record's name is valid during ingest only) and the
  // dense token of each launch key.
  std::unordered_map<std::string_view, uint32_t> name_ids_;
  std::deque<std::string> names_;
  std::unordered_map<uint64_t, uint32_t> tokens_;
  // Names past max_names: one copy per held activity, in held_'s order, gone with it.
  std::deque<std::string> overflow_names_;
  uint64_t names_over_cap_ = 0;
  uint64_t tokens_over_cap_ = 0;
  MemoryTracker* memory_ = nullptr;
  std::deque<HeldMemory> held_memory_;
  bool held_memory_unsorted_ = false;  // a record came behind a newer one (release() sorts them)
  struct NameSlot {
    const char* ptr = nullptr;
    std::size_t len = 0;
    uint32_t id = 0;
  };
  static constexpr std::size_t kNameCache = 1024;
  std::vector<NameSlot> name_cache_ = std::vector<NameSlot>(kNameCache);
  int first_device_ = -1;
  uint64_t late_launches_ = 0;
  uint64_t folded_blocks_ = 0;
  uint64_t folded_launches_ = 0;
};

inline void StepFeed::ingest(const GpuActivity& a, const LaunchContext& ctx, Category region_category) {
  if (direct_) return agg_.ingest(a, ctx, region_category);
  if (pass_) return forward(a, ctx, region_category);
  hold(a, ctx, region_category);
}

}  // namespace traintime::core
