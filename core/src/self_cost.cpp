#include "traintime/core/self_cost.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <new>
#include <string>

#include "traintime/core/fast_clock.h"

namespace traintime::core {
namespace {

// x += v on a double with no fetch_add (C++17): a compare-exchange loop, on timed calls only.
void add_double(std::atomic<double>& x, double v) noexcept {
  double old = x.load(std::memory_order_relaxed);
  while (!x.compare_exchange_weak(old, old + v, std::memory_order_relaxed)) {
  }
}

void add_u64(std::atomic<uint64_t>& x, uint64_t v) noexcept { x.fetch_add(v, std::memory_order_relaxed); }

// Rounded to the nearest ns without libm (llround): the library needs no libm at all, whose
// loading every preloaded process would pay at start (core/CMakeLists.txt builds this file with
// -fno-math-errno, so std::sqrt below is one instruction, not a libm call either).
uint64_t round_u64(double x) {
  if (!(x > 0) || !std::isfinite(x)) return 0;
  return x >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(x + 0.5);
}
uint64_t clamp_ns(double ns) { return round_u64(ns); }

}  // namespace

void CostSums::add(uint64_t ticks, uint32_t pairs) noexcept {
  add(ticks, pairs, process_clock().ticks_for_ns(kInterruptedNs));
}

void CostSums::add(uint64_t ticks, uint32_t pairs, uint64_t interrupted_ticks) noexcept {
  if (ticks > interrupted_ticks) {
    add_u64(interrupted_, 1);
    return;
  }
  const auto t = static_cast<double>(ticks), p = static_cast<double>(pairs);
  add_u64(ticks_, ticks);
  add_u64(pairs_, pairs);
  add_double(ticks_squared_, t * t);
  add_double(ticks_pairs_, t * p);
  add_double(pairs_squared_, p * p);
  // Last: a reader that sees the sample sees its sums (a step's mark reads samples_ first).
  samples_.fetch_add(1, std::memory_order_release);
}

void CostSums::reset() noexcept {
  samples_.store(0, std::memory_order_relaxed);
  ticks_.store(0, std::memory_order_relaxed);
  pairs_.store(0, std::memory_order_relaxed);
  interrupted_.store(0, std::memory_order_relaxed);
  ticks_squared_.store(0, std::memory_order_relaxed);
  ticks_pairs_.store(0, std::memory_order_relaxed);
  pairs_squared_.store(0, std::memory_order_relaxed);
}

CostSums::Totals CostSums::totals() const noexcept {
  Totals t;
  t.samples = samples_.load(std::memory_order_acquire);
  t.ticks = ticks_.load(std::memory_order_relaxed);
  t.pairs = pairs_.load(std::memory_order_relaxed);
  t.ticks_squared = ticks_squared_.load(std::memory_order_relaxed);
  t.ticks_pairs = ticks_pairs_.load(std::memory_order_relaxed);
  t.pairs_squared = pairs_squared_.load(std::memory_order_relaxed);
  t.interrupted = interrupted_.load(std::memory_order_relaxed);
  return t;
}

CostSums::SoFar CostSums::so_far(uint64_t pair_ticks) const noexcept {
  SoFar f;
  f.samples = samples_.load(std::memory_order_acquire);
  const uint64_t ticks = ticks_.load(std::memory_order_relaxed);
  const uint64_t own = pairs_.load(std::memory_order_relaxed) * pair_ticks;
  f.own_ticks = ticks > own ? ticks - own : 0;
  return f;
}

uint64_t window_ticks(uint64_t calls, uint64_t samples, uint64_t own_from, uint64_t own_to) {
  if (samples == 0 || own_to <= own_from) return 0;
  const double share = static_cast<double>(own_to - own_from) / static_cast<double>(samples);
  return round_u64(static_cast<double>(calls) * share);
}

ThreadCalls::Counter* ThreadCalls::join() noexcept {
  auto* c = new (std::nothrow) Counter();
  if (c == nullptr) return nullptr;
  c->next = head_.load(std::memory_order_relaxed);
  while (!head_.compare_exchange_weak(c->next, c, std::memory_order_release, std::memory_order_relaxed)) {
  }
  return c;
}

void ThreadCalls::forget() noexcept {
  Counter* chain = head_.exchange(nullptr, std::memory_order_acq_rel);
  if (chain == nullptr) return;
  Counter* tail = chain;
  while (tail->next != nullptr) tail = tail->next;
  tail->next = retired_.load(std::memory_order_relaxed);
  while (!retired_.compare_exchange_weak(tail->next, chain, std::memory_order_release, std::memory_order_relaxed)) {
  }
}

uint64_t ThreadCalls::total() const noexcept {
  uint64_t n = 0;
  for (const Counter* c = head_.load(std::memory_order_acquire); c != nullptr; c = c->next)
    n += c->calls.load(std::memory_order_relaxed);
  return n;
}

CallbackCost cost_row(std::string_view what, uint64_t calls, uint64_t every, const CostSums::Totals& t,
                      uint64_t pair_ticks, double ns_per_tick) {
  CallbackCost row;
  row.what = std::string(what);
  row.calls = calls;
  row.sampled_every = every;
  row.samples = t.samples;
  row.interrupted = t.interrupted;
  row.estimated = every > 1;
  if (t.samples == 0) {
    row.measured = calls == 0;  // no call: 0 is measured; calls with no timed one: n/a
    return row;
  }
  const auto n = static_cast<double>(t.samples);
  const auto c = static_cast<double>(pair_ticks);
  // Each timed call's own time y = ticks - pairs x c; the mean of y and its variance.
  const double sum_y = static_cast<double>(t.ticks) - c * static_cast<double>(t.pairs);
  const double sum_y2 = t.ticks_squared - 2 * c * t.ticks_pairs + c * c * t.pairs_squared;
  const double mean = std::max(0.0, sum_y / n);
  const double var = t.samples > 1 ? std::max(0.0, (sum_y2 - sum_y * sum_y / n) / (n - 1)) : 0.0;
  const auto k = static_cast<double>(calls);
  // With every call timed the total is the sum itself: no sampling error.
  const double total = every <= 1 && t.samples >= calls ? std::max(0.0, sum_y) : k * mean;
  row.estimated_ns = clamp_ns(total * ns_per_tick);
  if (every > 1)
    row.spread_ns = t.samples > 1 ? clamp_ns(k * std::sqrt(var / n) * ns_per_tick) : row.estimated_ns;
  return row;
}

CallbackCost cost_row(std::string_view what, uint64_t calls, uint64_t every, const CostSums& sums) {
  FastClock& clock = process_clock();
  const CostSums::Totals t = sums.totals();
  if (t.samples == 0) return cost_row(what, calls, every, t, 0, 1.0);
  return cost_row(what, calls, every, t, clock.pair_ticks(), clock.ns_per_tick());
}

CallbackCost exact_row(std::string_view what, uint64_t calls, uint64_t ns) {
  CallbackCost row;
  row.what = std::string(what);
  row.calls = calls;
  row.sampled_every = 1;
  row.samples = calls;
  row.estimated = false;
  row.estimated_ns = ns;
  return row;
}

}  // namespace traintime::core
