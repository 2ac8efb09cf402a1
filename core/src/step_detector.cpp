// The step detector (step_detector.h): period search, lock, and the steps a locked pattern ends.
#include "traintime/core/step_detector.h"

#include <algorithm>
#include <array>
#include <unordered_map>
#include <utility>

namespace traintime::core {
namespace {

constexpr std::size_t kCandidates = 24;     // most frequent distances tried per search
constexpr std::size_t kMaxSignature = 64;   // longest signature looked for
constexpr std::size_t kMinSignature = 4;    // a signature is at least this long (or the pattern)
constexpr uint32_t kMaxGridMultiple = 8;    // periods a step of micro-batches may hold, by grids

// KMP failure function: fail[i] = length of the longest proper border of pattern[0, i].
std::vector<uint32_t> failure(const std::vector<uint32_t>& pattern) {
  std::vector<uint32_t> fail(pattern.size(), 0);
  uint32_t k = 0;
  for (std::size_t i = 1; i < pattern.size(); ++i) {
    while (k > 0 && pattern[i] != pattern[k]) k = fail[k - 1];
    if (pattern[i] == pattern[k]) ++k;
    fail[i] = k;
  }
  return fail;
}

// The shortest suffix of the cyclic pattern that occurs in it exactly once (at least
// kMinSignature long, at most kMaxSignature, never longer than the pattern).
std::size_t signature_length(const std::vector<uint32_t>& pattern) {
  const std::size_t p = pattern.size();
  const std::size_t most = std::min(p, kMaxSignature);
  for (std::size_t w = 1; w <= most; ++w) {
    // Occurrences of pattern[p - w, p) in the cyclic pattern: starting positions 0 .. p-1.
    std::size_t found = 0;
    for (std::size_t s = 0; s < p && found < 2; ++s) {
      bool equal = true;
      for (std::size_t k = 0; k < w && equal; ++k) equal = pattern[(s + k) % p] == pattern[p - w + k];
      found += equal ? 1 : 0;
    }
    if (found == 1) return std::min(p, std::max(w, kMinSignature));
  }
  return most;
}

}  // namespace

void StepDetector::decide(bool final, std::vector<DetectedBoundary>* out) {
  if (opt_.anchor) return scan_anchor(out);
  if (!pattern_.empty()) {
    scan(final, out);
    // A forced decision while the pattern stays away: the job may have moved on to another loop.
    if (final && stats_.state == DetectionState::kInterrupted) {
      Candidate c;
      if (search(true, &c)) {
        ++stats_.new_periods;
        lock(c, final, out);
      }
    }
    return;
  }
  if (!final && held_.size() < search_at_) return;
  Candidate c;
  if (search(final, &c)) {
    lock(c, final, out);
    return;
  }
  // Searched again once the held launches grew by a quarter: amortised O(1) per launch.
  search_at_ = held_.size() + std::max<std::size_t>(held_.size() / 4, 8);
}

void StepDetector::forget_before(uint64_t ordinal) {
  if (ordinal <= base_) return;
  const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(ordinal - base_, held_.size()));
  drop_front(n);
  scanned_ = 0;
  matched_ = 0;
  search_at_ = held_.size() + std::max<std::size_t>(held_.size() / 4, 8);
}

bool StepDetector::search(bool final, Candidate* out) {
  const std::size_t n = held_.size();
  if (n < 2) return false;
  ++stats_.searches;
  // Distances between a launch and the last three launches of the same token: a token that runs
  // c times a step gives the period as the distance to its c-th predecessor.
  struct Recent {
    std::array<uint32_t, 3> at{};
    uint32_t count = 0;
  };
  std::unordered_map<uint32_t, Recent> recent;
  std::unordered_map<uint32_t, uint32_t> distances;
  recent.reserve(1024);
  for (std::size_t i = 0; i < n; ++i) {
    Recent& r = recent[held_[i].token];
    const uint32_t have = std::min<uint32_t>(r.count, 3);
    for (uint32_t k = 1; k <= have; ++k) {
      const uint32_t d = static_cast<uint32_t>(i) - r.at[(r.count - k) % 3];
      if (d <= n / 2) ++distances[d];
    }
    r.at[r.count % 3] = static_cast<uint32_t>(i);
    ++r.count;
  }
  std::vector<std::pair<uint32_t, uint32_t>> cand;  // (support, distance)
  for (const auto& [d, support] : distances)
    if (support >= 2) cand.emplace_back(support, d);
  const std::size_t keep = std::min(kCandidates, cand.size());
  std::partial_sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(keep), cand.end(),
                    [](const auto& a, const auto& b) {
                      return a.first != b.first ? a.first > b.first : a.second < b.second;
                    });
  cand.resize(keep);
  std::sort(cand.begin(), cand.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  bool has_collectives = false;
  for (const DetectorLaunch& l : held_) has_collectives |= l.collective;
  const bool was_fine = fine_;  // a locked pattern's keys, kept if nothing new is found
  fine_ = false;
  // The period that explains the most launches wins, the smallest of equals: one layer of a long
  // backward pass repeats exactly too, but explains only that pass, while the step explains
  // every step (and a multiple of the step, or a cycle of steps and evaluation, no more).
  Candidate best;
  for (const auto& [support, p] : cand) {
    Candidate c;
    if (evaluate(p, final, has_collectives, &c) && c.covered > best.covered) best = c;
  }
  if (best.period == 0) {
    fine_ = was_fine;
    return false;
  }
  *out = best;
  // The grids decide between the period and a multiple of it: where the launches repeat with
  // their grids too at k periods (k = 1 first), the step is k periods (a micro-batch of another
  // shape is not the same work) and the grids count from then on. Where they repeat at no small
  // multiple, the grids follow the data (a batch's sizes) and are left out.
  fine_ = true;
  Candidate refined;
  for (uint32_t k = 1; k <= kMaxGridMultiple && std::size_t{k} * best.period <= n / 2; ++k)
    if (evaluate(k * best.period, final, has_collectives, &refined)) {
      *out = refined;
      return true;
    }
  fine_ = false;
  return true;
}

bool StepDetector::evaluate(uint32_t p, bool final, bool has_collectives, Candidate* out) {
  const std::size_t n = held_.size();
  // Stretches: where held_[i] == held_[i - p] for at least p launches in a row, i.e. two or
  // more whole repeats back to back ([first, end) in held_).
  std::vector<std::pair<std::size_t, std::size_t>> stretches;
  std::size_t run = 0, longest = 0;
  for (std::size_t i = p; i <= n; ++i) {
    if (i < n && key(i) == key(i - p)) {
      ++run;
      continue;
    }
    if (run >= p) {
      stretches.emplace_back(i - run - p, i);
      longest = std::max(longest, run + p);
    }
    run = 0;
  }
  if (stretches.empty()) return false;
  if (final) {
    if (longest < 2 * std::size_t{p}) return false;
  } else {
    // Mid-run the repetition must still hold at the newest launch, in a run of its own of
    // min_repeats periods, min_evidence launches and twice everything before it: a repetition
    // that broke and has not come back, or that is young beside what preceded it, may be one
    // phase of a longer step (the identical layers of a backward pass after its forward pass).
    // A forced decision (exit, a full window) takes two repeats anywhere, as before.
    const auto [from, to] = stretches.back();
    const std::size_t need = std::max({std::size_t{opt_.min_repeats} * p, opt_.min_evidence, 2 * from});
    if (to != n || to - from < need) return false;
  }
  const std::size_t s0 = stretches.front().first;
  // (a) A step of a job with collectives has one: DDP's no_sync micro-batches have none.
  if (has_collectives) {
    std::size_t after = 0;
    bool in_pattern = false;
    for (std::size_t i = s0; i < n; ++i) {
      if (!held_[i].collective) continue;
      ++after;
      in_pattern |= i < s0 + p;
    }
    if (after >= 2 && !in_pattern) return false;
  }
  // (b) Closed: no launch outside the pattern recurs in two of the stretches between repeats.
  scratch_.clear();
  for (std::size_t i = s0; i < s0 + p; ++i) scratch_.push_back(key(i));
  std::sort(scratch_.begin(), scratch_.end());
  scratch_.erase(std::unique(scratch_.begin(), scratch_.end()), scratch_.end());
  struct Seen {
    uint32_t last_gap = 0;
    uint32_t gaps = 0;
  };
  std::unordered_map<uint32_t, Seen> foreign;
  for (std::size_t k = 0; k + 1 < stretches.size(); ++k) {
    const std::size_t from = stretches[k].second, to = stretches[k + 1].first;
    for (std::size_t i = from; i < to; ++i) {
      const uint32_t t = key(i);
      if (std::binary_search(scratch_.begin(), scratch_.end(), t)) continue;
      Seen& s = foreign[t];
      if (s.gaps != 0 && s.last_gap == k + 1) continue;
      s.last_gap = static_cast<uint32_t>(k + 1);
      if (++s.gaps >= 2) return false;
    }
  }
  // What it explains: its repeats, and the launches between and after them that are its own
  // (an evaluation loop runs the step's kernels; one layer's pattern explains no forward pass).
  std::size_t covered = 0, at = s0;
  for (const auto& [from, to] : stretches) {
    for (; at < from; ++at) covered += std::binary_search(scratch_.begin(), scratch_.end(), key(at)) ? 1 : 0;
    covered += to - from;
    at = to;
  }
  for (; at < n; ++at) covered += std::binary_search(scratch_.begin(), scratch_.end(), key(at)) ? 1 : 0;
  out->period = p;
  out->start = s0;
  out->covered = covered;
  return true;
}

void StepDetector::lock(const Candidate& c, bool final, std::vector<DetectedBoundary>* out) {
  pattern_.clear();
  for (std::size_t i = c.start; i < c.start + c.period; ++i) pattern_.push_back(key(i));
  fail_ = failure(pattern_);
  signature_ = signature_length(pattern_);
  stats_.period = c.period;
  stats_.state = DetectionState::kLocked;
  const bool first = !locked_once_;
  if (first) stats_.warmup_launches = base_ + c.start;
  locked_once_ = true;
  // Back over what the window holds: the steps of the warm-up (or of the loop before the
  // pattern changed) end at their signatures; the first repeat's step takes what is left.
  signature_steps(c.start, out);
  scanned_ = 0;
  matched_ = 0;
  warmup_scan_ = first;
  scan(final, out);
}

std::size_t StepDetector::signature_steps(std::size_t limit, std::vector<DetectedBoundary>* out) {
  const std::size_t p = pattern_.size(), w = signature_;
  if (w == 0 || limit < w) return 0;
  const std::size_t min_len = std::max<std::size_t>(1, p / 2);
  const uint32_t* sig = pattern_.data() + (p - w);
  std::size_t last = 0;
  for (std::size_t e = std::max(w, min_len); e <= limit; ++e) {
    if (e - last < min_len || key(e - 1) != sig[w - 1]) continue;
    bool equal = true;
    for (std::size_t k = 0; k + 1 < w && equal; ++k) equal = key(e - w + k) == sig[k];
    if (!equal) continue;
    out->push_back({base_ + e, false});
    last = e;
  }
  if (last > 0) drop_front(last);
  return last;
}

void StepDetector::drop_front(std::size_t n) {
  held_.erase(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(n));
  base_ += n;
  scanned_ = scanned_ > n ? scanned_ - n : 0;
}

void StepDetector::end_step(std::size_t at, bool exact, std::vector<DetectedBoundary>* out) {
  out->push_back({base_ + at, exact});
  if (exact) stats_.exact_launches += at;
  drop_front(at);
}

void StepDetector::scan(bool final, std::vector<DetectedBoundary>* out) {
  const std::size_t p = pattern_.size();
  while (scanned_ < held_.size()) {
    const uint32_t t = key(scanned_);
    while (matched_ > 0 && pattern_[matched_] != t) matched_ = fail_[matched_ - 1];
    if (pattern_[matched_] == t) ++matched_;
    ++scanned_;
    if (matched_ < p) continue;
    matched_ = 0;
    std::size_t start = scanned_ - p;  // the occurrence is held_[start, scanned_)
    bool exact = start == 0;
    if (!exact) {
      // An interruption came first: steps end at its signatures; the rest joins this step.
      start -= signature_steps(start, out);
      if (!warmup_scan_) ++stats_.relocks;
      exact = start == 0;
    }
    warmup_scan_ = false;
    stats_.state = DetectionState::kLocked;
    end_step(scanned_, exact, out);
  }
  // What is held is the start of an occurrence (the step in progress), or an interruption.
  if (matched_ < scanned_) stats_.state = DetectionState::kInterrupted;
  if (final) signature_steps(held_.size(), out);
}

void StepDetector::scan_anchor(std::vector<DetectedBoundary>* out) {
  while (scanned_ < held_.size()) {
    if (!held_[scanned_++].anchor) continue;
    stats_.period = static_cast<uint32_t>(scanned_);
    end_step(scanned_, true, out);
  }
}

}  // namespace traintime::core
