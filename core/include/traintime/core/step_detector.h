// Training steps of a job with no step marker (docs/attribution.md "Steps without a marker"):
// a training loop launches the same work in the same order every step (kernels by name, copies
// by kind, NCCL calls by op, communicator and size), so its launch sequence repeats. This class
// sees that sequence as tokens, one per launch in launch (correlation id) order, finds the
// pattern that is one optimizer step and says where each step ends. It knows nothing of records,
// GPU times or steps' contents: core/step_feed.h turns activities into tokens and applies the
// boundaries. Pure and single-threaded (the CUPTI adapter's processing thread feeds it).
//
// The rule, in short:
//   - Search: candidate periods p are the distances between occurrences of equal tokens (the
//     most frequent ones); a candidate holds where the sequence equals itself p launches later
//     for at least p launches in a row (two whole repeats: Greyhound's "verified exact
//     repetition"). The smallest candidate is taken that (a) contains a collective when the job
//     has collectives after it (a step of a multi-rank job synchronises; DDP's no_sync
//     micro-batches do not), and (b) is closed: no launch outside the pattern recurs in two of
//     the stretches that interrupt its repeats (an optimizer between FSDP micro-batches recurs,
//     so the micro-batch is not the step; an evaluation loop runs the step's own kernels, so it
//     is an interruption). Of those, the one that explains the most launches wins (its repeats
//     and the launches of its own tokens between and after them; the smallest of equals): one
//     layer of a long backward pass repeats exactly too, but explains that pass only. Mid-run a
//     lock needs the repetition to still hold at the newest launch, in one unbroken run of
//     min_repeats repeats, min_evidence launches and twice what is held before it (a repetition
//     that broke, or is young beside what preceded it, may be one phase of a longer step); at
//     the end, or when the window is full, two repeats anywhere suffice.
//   - Grids: the search compares launches without their kernels' grids (a batch's data decides
//     some grids: cub's reductions over a batch's unique keys). A period found so is tried again
//     with the grids, at 1 to 8 times its length: the first that holds is the step, and the lock
//     compares grids from then on (two micro-batches of different shapes are one step, not two).
//     When none holds, the grids follow the data and are left out.
//   - Phase: the pattern starts where its first repetition starts (the training loop begins at a
//     step); a step ends where an occurrence of the pattern ends.
//   - Locked: each step that is one occurrence of the pattern is exact. Anything else (an
//     evaluation loop, a checkpoint save, a batch whose shapes changed a kernel) is an
//     interruption: the next occurrence is searched for; inside the interruption a step also ends
//     after each occurrence of the pattern's signature (its last launches, unique in it), so a
//     changed training step is a step of its own, and the rest (evaluation) belongs to the step
//     that follows, as work between two tt_step calls does.
//   - TRAINTIME_STEP_ANCHOR: no search; a step ends at each launch the anchor names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace traintime::core {

// One launch (one correlation id: a kernel, copy, memset or CUDA graph launch) in launch order.
struct DetectorLaunch {
  uint32_t token = 0;       // what it ran (step_feed.h says how tokens are made)
  bool collective = false;  // NCCL work
  bool anchor = false;      // TRAINTIME_STEP_ANCHOR names it
  uint32_t fine = 0;        // 1 + the token of what it ran with its kernel's grid; 0: `token`
};

struct DetectorOptions {
  bool anchor = false;  // TRAINTIME_STEP_ANCHOR set: a step ends at each anchor launch
  // A lock before the end: the pattern must have repeated min_repeats times and over
  // min_evidence launches without a break up to the newest launch (a young run's micro-batches,
  // a deep model's layers, are not taken for steps).
  std::size_t min_evidence = 32768;
  uint32_t min_repeats = 4;
};

// A step ended: every launch before ordinal `end` not in an earlier step belongs to it.
struct DetectedBoundary {
  uint64_t end = 0;
  bool exact = false;  // the step was one occurrence of the pattern and nothing else
};

enum class DetectionState : uint8_t {
  kSearching,     // no period yet
  kLocked,        // steps are being found
  kInterrupted,   // locked, waiting for the pattern to come back
  kAnchor,        // TRAINTIME_STEP_ANCHOR
};

struct DetectorStats {
  DetectionState state = DetectionState::kSearching;
  uint32_t period = 0;           // launches in one step (0: none found)
  uint64_t launches = 0;         // launches seen
  uint64_t exact_launches = 0;   // launches in exact steps
  uint64_t relocks = 0;          // interruptions after which the pattern came back
  uint64_t new_periods = 0;      // locks on a different pattern after the first
  uint64_t warmup_launches = 0;  // launches before the first repetition (in the first step)
  uint64_t searches = 0;
};

class StepDetector {
 public:
  explicit StepDetector(DetectorOptions options = {}) : opt_(options) {
    if (opt_.anchor) stats_.state = DetectionState::kAnchor;
  }

  void add(const DetectorLaunch& l) {
    held_.push_back(l);
    ++stats_.launches;
  }

  // Ends every step the launches added so far allow, appending them to *out in order.
  // `final`: no more launches will come, or the window is full and a decision is forced: two
  // repeats suffice for a lock, and the step in progress ends after its last signature.
  void decide(bool final, std::vector<DetectedBoundary>* out);

  // The window's bound: the launches before `ordinal` stay in the step in progress, and are not
  // looked at again (a lock after this starts from there).
  void forget_before(uint64_t ordinal);

  uint64_t step_start() const { return base_; }  // ordinal of the step in progress's first launch
  uint64_t launches() const { return base_ + held_.size(); }
  std::size_t held() const { return held_.size(); }
  const DetectorStats& stats() const { return stats_; }
  // The pattern (tokens of one step, in order) while locked; empty otherwise.
  const std::vector<uint32_t>& pattern() const { return pattern_; }

 private:
  struct Candidate {
    uint32_t period = 0;
    std::size_t start = 0;  // index in held_ where the first repeat starts
    std::size_t covered = 0;  // launches in its repeats' stretches
  };
  bool search(bool final, Candidate* out);
  bool evaluate(uint32_t p, bool final, bool has_collectives, Candidate* out);
  void lock(const Candidate& c, bool final, std::vector<DetectedBoundary>* out);
  // Locked: the steps the held launches end (exact ones, and the interruptions' signatures).
  void scan(bool final, std::vector<DetectedBoundary>* out);
  void scan_anchor(std::vector<DetectedBoundary>* out);
  // Steps ending after occurrences of the signature in held_[0, limit), at least half a period
  // apart; returns the index just after the last one (0: none).
  std::size_t signature_steps(std::size_t limit, std::vector<DetectedBoundary>* out);
  void end_step(std::size_t at, bool exact, std::vector<DetectedBoundary>* out);
  void drop_front(std::size_t n);  // held_[0, n) belong to ended steps (or are given up on)

  // The token compared: with grids once a lock found that they repeat with the pattern.
  uint32_t key(std::size_t i) const {
    return fine_ && held_[i].fine != 0 ? held_[i].fine - 1 : held_[i].token;
  }

  DetectorOptions opt_;
  DetectorStats stats_;
  bool fine_ = false;  // keys are DetectorLaunch::fine (search: while refining; locked: the lock's)
  std::vector<DetectorLaunch> held_;  // launches from the step in progress's first on
  uint64_t base_ = 0;                 // ordinal of held_[0]
  std::size_t search_at_ = 2;         // held_.size() at which the next search runs
  std::vector<uint32_t> pattern_;     // locked: one step's tokens
  std::vector<uint32_t> fail_;        // KMP failure function of pattern_
  std::size_t signature_ = 0;         // tokens at the pattern's end that make its signature
  std::size_t scanned_ = 0;           // held_ indices fed to the matcher so far
  std::size_t matched_ = 0;           // matcher state: pattern tokens matched ending at scanned_
  bool locked_once_ = false;
  bool warmup_scan_ = false;  // the first lock's scan: what precedes the first repeat is warm-up
  std::vector<uint32_t> scratch_;
};

}  // namespace traintime::core
