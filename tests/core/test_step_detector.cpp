// The step detector on launch sequences whose steps are known by construction
// (core/step_detector.h; docs/attribution.md "Steps without a marker").
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "traintime/core/step_detector.h"

using namespace traintime::core;

namespace {

// A launch sequence written as letters, one token a letter; upper-case 'C' is a collective.
struct Seq {
  std::vector<DetectorLaunch> launches;
  std::vector<uint64_t> truth;  // where each step really ends (ordinal one past its last launch)
  Seq& add(const std::string& letters, bool ends_step = false) {
    for (char ch : letters) {
      DetectorLaunch l;
      l.token = static_cast<uint32_t>(ch);
      l.collective = ch == 'C' || ch == 'R';
      launches.push_back(l);
    }
    if (ends_step) truth.push_back(launches.size());
    return *this;
  }
  Seq& repeat(const std::string& letters, int times, bool ends_step = true) {
    for (int i = 0; i < times; ++i) add(letters, ends_step);
    return *this;
  }
};

std::vector<uint64_t> ends(const std::vector<DetectedBoundary>& b) {
  std::vector<uint64_t> out;
  for (const DetectedBoundary& x : b) out.push_back(x.end);
  return out;
}

// Feeds every launch, deciding after each (mid-run), then once more at the end.
std::vector<DetectedBoundary> run(StepDetector& d, const Seq& s) {
  std::vector<DetectedBoundary> out;
  for (const DetectorLaunch& l : s.launches) {
    d.add(l);
    d.decide(false, &out);
  }
  d.decide(true, &out);
  return out;
}

// Runs a detector with the default options over s: its steps end where s's truth says, with
// one step `period` launches long.
void expect_steps(const Seq& s, uint32_t period) {
  StepDetector d;
  const auto out = run(d, s);
  CHECK(ends(out) == s.truth);
  CHECK(d.stats().period == period);
}

DetectorOptions small() {  // mid-run locks after a few repeats (the defaults want thousands of launches)
  DetectorOptions o;
  o.min_evidence = 16;
  o.min_repeats = 3;
  return o;
}

}  // namespace

TEST_CASE("a repeating launch sequence ends a step after each repeat", "[step_detector]") {
  Seq s;
  s.repeat("abcdefgh", 12);
  StepDetector d;
  const auto out = run(d, s);
  CHECK(ends(out) == s.truth);
  CHECK(d.stats().period == 8);
  CHECK(d.stats().exact_launches == 96);
  CHECK(d.stats().warmup_launches == 0);
  CHECK(d.stats().relocks == 0);
  CHECK(d.stats().state == DetectionState::kLocked);
}

TEST_CASE("what precedes the first repeat is warm-up, in the first step", "[step_detector]") {
  Seq s;
  s.add("xyz").repeat("abcdef", 6);  // set-up work before the loop: x y z
  StepDetector d;
  const auto out = run(d, s);
  CHECK(ends(out) == s.truth);
  CHECK(d.stats().warmup_launches == 3);
  REQUIRE(!out.empty());
  CHECK_FALSE(out.front().exact);
  CHECK(out.back().exact);
}

TEST_CASE("a mid-run lock waits for its evidence, then the held launches get their steps", "[step_detector]") {
  Seq s;
  s.repeat("abcdefgh", 10);
  StepDetector d(small());
  std::vector<DetectedBoundary> out;
  std::size_t first_at = 0;
  for (std::size_t i = 0; i < s.launches.size(); ++i) {
    d.add(s.launches[i]);
    d.decide(false, &out);
    if (first_at == 0 && !out.empty()) first_at = i + 1;
  }
  // Three repeats (24 launches) at least before the first lock (searches are spaced a few
  // launches apart); then every step, back from the start.
  CHECK(first_at >= 24);
  CHECK(first_at <= 32);
  CHECK(ends(out) == s.truth);
}

TEST_CASE("a long first step of identical layers is not taken for a step per layer", "[step_detector]") {
  // A deep model's step: embedding e, 20 forward layers (f g), 20 backward layers (a b c), a
  // collective C and the optimizer o. One backward layer repeats exactly 20 times in a row, past
  // the mid-run evidence (3 repeats, 48 launches: more than the forward pass, less than the
  // backward pass) and without a break until the optimizer: a period that then breaks for good,
  // one phase of the step, never the step.
  std::string step = "e";
  for (int i = 0; i < 20; ++i) step += "fg";
  for (int i = 0; i < 20; ++i) step += "abc";
  step += "Co";
  Seq s;
  s.repeat(step, 6);
  DetectorOptions o = small();
  o.min_evidence = 48;
  StepDetector d(o);
  std::vector<DetectedBoundary> out;
  for (std::size_t i = 0; i < s.launches.size(); ++i) {
    d.add(s.launches[i]);
    d.decide(false, &out);
    // Mid-run, only whole steps end (none inside the first step's backward pass).
    for (const DetectedBoundary& b : out) REQUIRE(b.end % step.size() == 0);
  }
  d.decide(true, &out);
  CHECK(ends(out) == s.truth);
  CHECK(d.stats().period == step.size());
}

TEST_CASE("at the end, two steps of identical layers: the step explains more than one layer", "[step_detector]") {
  // Two repeats of the step are all there is: the layer's repeats close (one gap between them
  // cannot show that the forward pass recurs), so the period that explains the most launches
  // decides: the step explains all of them, one layer its backward passes only.
  std::string step = "e";
  for (int i = 0; i < 20; ++i) step += "fg";
  for (int i = 0; i < 20; ++i) step += "abc";
  step += "o";
  Seq s;
  s.repeat(step, 2);
  expect_steps(s, static_cast<uint32_t>(step.size()));
}

TEST_CASE("gradient accumulation: the optimizer's launches make the micro-batches one step", "[step_detector]") {
  // Four micro-batches (forward f g, backward b d) and an optimizer (o p) per step; no NCCL.
  Seq s;
  for (int k = 0; k < 8; ++k) s.add("fgbd").add("fgbd").add("fgbd").add("fgbd").add("op", true);
  expect_steps(s, 18);
}

TEST_CASE("DDP's no_sync micro-batches have no collective: they are not steps", "[step_detector]") {
  // Three micro-batches; the gradient AllReduce buckets (C) only in the last; optimizer o.
  Seq s;
  for (int k = 0; k < 6; ++k) s.add("fgbd").add("fgbd").add("fgCbCd").add("o", true);
  expect_steps(s, 15);
}

TEST_CASE("an evaluation loop between steps belongs to the next step, and the lock holds", "[step_detector]") {
  // Training step: io i, forward f g l, backward b C, optimizer o, loss read r. Evaluation
  // batches run the forward's own launches (i f g l r): an interruption, not a step.
  Seq s;
  const std::string train = "ifglbCor";
  for (int cycle = 0; cycle < 4; ++cycle) {
    s.repeat(train, 3);
    if (cycle < 3) s.add("ifglr").add("ifglr");  // two evaluation batches, then training again
  }
  // The truth: a step ends where each training step ends (the evaluation before it joins it).
  StepDetector d;
  const auto out = run(d, s);
  CHECK(ends(out) == s.truth);
  CHECK(d.stats().period == 8);
  CHECK(d.stats().relocks == 3);
}

TEST_CASE("a step whose launches changed (a new shape's kernel) is a step of its own", "[step_detector]") {
  Seq s;
  s.repeat("abcdefgh", 5).add("abcXefgh", true).repeat("abcdefgh", 5);
  StepDetector d;
  const auto out = run(d, s);
  CHECK(ends(out) == s.truth);
  CHECK(d.stats().relocks == 1);
  // The changed step is not exact; the others are.
  CHECK(d.stats().exact_launches == 80);
}

TEST_CASE("FSDP: a collective in every micro-batch still leaves the optimizer to decide", "[step_detector]") {
  // Micro-batch: all-gather R, forward f, backward b, reduce-scatter C; optimizer o p q.
  Seq s;
  for (int k = 0; k < 6; ++k) s.add("RfbC").add("RfbC").add("RfbC").add("opq", true);
  expect_steps(s, 15);
}

TEST_CASE("a sequence that does not repeat has no steps and says it searched", "[step_detector]") {
  Seq s;
  uint32_t x = 12345;
  for (int i = 0; i < 3000; ++i) {
    x = x * 1103515245u + 12345u;
    DetectorLaunch l;
    l.token = x >> 8;
    s.launches.push_back(l);
  }
  StepDetector d;
  const auto out = run(d, s);
  CHECK(out.empty());
  CHECK(d.stats().state == DetectionState::kSearching);
  CHECK(d.stats().period == 0);
  CHECK(d.stats().searches > 0);
  // One long kernel: nothing to repeat either.
  StepDetector one;
  std::vector<DetectedBoundary> none;
  one.add(DetectorLaunch{7, false, false});
  one.decide(true, &none);
  CHECK(none.empty());
}

TEST_CASE("the anchor ends a step at each launch it names, with no search", "[step_detector]") {
  DetectorOptions o;
  o.anchor = true;
  StepDetector d(o);
  std::vector<DetectedBoundary> out;
  const std::string seq = "xxabcAabcAabdcA";  // A: the anchor; the steps differ, so no period
  for (char ch : seq) {
    d.add(DetectorLaunch{static_cast<uint32_t>(ch), false, ch == 'A'});
    d.decide(false, &out);
  }
  d.decide(true, &out);
  CHECK(ends(out) == std::vector<uint64_t>{6, 10, 15});
  CHECK(d.stats().state == DetectionState::kAnchor);
}

TEST_CASE("mid-run: an interruption holds the step open until the pattern returns", "[step_detector]") {
  Seq s;
  s.repeat("abcdefgh", 6).add("zzzzzzzzzzzzzzzzzzzz").repeat("abcdefgh", 3);
  StepDetector d(small());
  std::vector<DetectedBoundary> out;
  for (std::size_t i = 0; i < 6 * 8 + 10; ++i) {
    d.add(s.launches[i]);
    d.decide(false, &out);
  }
  CHECK(ends(out) == std::vector<uint64_t>{8, 16, 24, 32, 40, 48});
  CHECK(d.stats().state == DetectionState::kInterrupted);
  for (std::size_t i = 6 * 8 + 10; i < s.launches.size(); ++i) {
    d.add(s.launches[i]);
    d.decide(false, &out);
  }
  d.decide(true, &out);
  CHECK(ends(out) == s.truth);
  CHECK(d.stats().relocks == 1);
  CHECK(d.stats().state == DetectionState::kLocked);
}

TEST_CASE("a forced decision after the loop changed locks on the new pattern", "[step_detector]") {
  Seq s;
  s.repeat("abcdefgh", 6).repeat("mnopqr", 6);
  StepDetector d(small());
  auto out = run(d, s);
  // The first loop's steps, then the new loop's, found when the end forces a decision.
  CHECK(ends(out) == s.truth);
  CHECK(d.stats().new_periods == 1);
  CHECK(d.stats().period == 6);
}

TEST_CASE("forgetting launches keeps them in the step in progress", "[step_detector]") {
  StepDetector d;
  for (char ch : std::string("qwertyuiop")) d.add(DetectorLaunch{static_cast<uint32_t>(ch), false, false});
  d.forget_before(6);
  CHECK(d.step_start() == 6);
  CHECK(d.held() == 4);
  CHECK(d.launches() == 10);
}
