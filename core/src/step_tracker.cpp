#include "traintime/core/step_tracker.h"

#include <algorithm>

namespace traintime::core {

void StepTracker::set_origin(uint64_t now_ns) {
  if (origin_set_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (origin_set_.load(std::memory_order_relaxed)) return;
  origin_ns_.store(now_ns, std::memory_order_relaxed);
  origin_set_.store(true, std::memory_order_release);
}

void StepTracker::step(uint64_t now_ns, uint64_t samples, uint64_t tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint32_t index = count_.load(std::memory_order_relaxed);
  uint64_t prev = last_ns_;
  if (index == 0) {
    prev = origin_set_.load(std::memory_order_relaxed) ? origin_ns_.load(std::memory_order_relaxed)
                                                       : now_ns;
  }
  const uint64_t wall = now_ns >= prev ? now_ns - prev : 0;
  last_ns_ = now_ns;
  live_.totals.steps = index + 1;
  live_.totals.wall_ns += wall;
  live_.totals.samples += samples;
  live_.totals.tokens += tokens;
  live_.last_wall_ns = wall;
  live_.last_samples = samples;
  live_.last_tokens = tokens;
  if (index >= warmup_) {
    measured_wall_ns_ += wall;
    measured_samples_ += samples;
    measured_tokens_ += tokens;
    min_wall_ns_ = measured_ == 0 ? wall : std::min(min_wall_ns_, wall);
    max_wall_ns_ = std::max(max_wall_ns_, wall);
    ++measured_;
    if (walls_.size() < kMaxWallSamples) {
      walls_.push_back(wall);
    } else {
      // Reservoir sampling (xorshift64): every measured step is kept with equal probability.
      rng_ ^= rng_ << 13;
      rng_ ^= rng_ >> 7;
      rng_ ^= rng_ << 17;
      const uint64_t slot = rng_ % measured_;
      if (slot < walls_.size()) walls_[slot] = wall;
    }
  }
  if (detail_steps_ > 0) {
    if (recent_walls_.size() < detail_steps_) {
      recent_walls_.push_back(wall);
      recent_torch_.push_back(torch_pending_);
    } else {
      recent_walls_[index % detail_steps_] = wall;
      recent_torch_[index % detail_steps_] = torch_pending_;
    }
  }
  torch_pending_ = TorchMemory{};
  count_.store(index + 1, std::memory_order_relaxed);
  if (Sink sink = sink_.load(std::memory_order_acquire))
    sink(LiveSteps{index + 1u, live_.totals.samples, live_.totals.tokens, measured_, measured_wall_ns_,
                   min_wall_ns_, max_wall_ns_, measured_samples_, measured_tokens_});
}

void StepTracker::set_torch_memory(const TorchMemory& m) {
  std::lock_guard<std::mutex> lock(mu_);
  torch_pending_ = m;
  torch_pending_.present = true;
}

StepTracker::Live StepTracker::live() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_;
}

Steps StepTracker::summary() const {
  Steps s;
  summary(Deadline::never(), &s);
  return s;
}

bool StepTracker::summary(const Deadline& deadline, Steps* out, uint64_t* last_step_ns) const {
  Steps s;
  std::vector<uint64_t> walls;
  {
    std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
    if (!lock_until(lock, deadline)) return false;
    s.count = count_.load(std::memory_order_relaxed);
    if (last_step_ns) *last_step_ns = s.count > 0 ? last_ns_ : 0;
    s.warmup = warmup_;
    s.samples = live_.totals.samples;
    s.tokens = live_.totals.tokens;
    if (measured_wall_ns_ > 0) {
      const double secs = static_cast<double>(measured_wall_ns_) / 1e9;
      s.samples_per_s = static_cast<double>(measured_samples_) / secs;
      s.tokens_per_s = static_cast<double>(measured_tokens_) / secs;
    }
    walls = walls_;
    s.wall_ns = duration_stats(std::move(walls));
    // Mean, min, max and total are exact even when the percentiles come from a sample.
    s.wall_ns.count = measured_;
    s.wall_ns.total_ns = measured_wall_ns_;
    s.wall_ns.min_ns = min_wall_ns_;
    s.wall_ns.max_ns = max_wall_ns_;
    s.wall_ns.mean_ns = measured_ ? measured_wall_ns_ / measured_ : 0;
    // The ring holds steps count−kept … count−1; step i sits at i % detail_steps_ (while the
    // ring fills, i % detail_steps_ == i).
    const uint64_t kept = recent_walls_.size();
    for (uint64_t i = s.count - kept; i < s.count; ++i) {
      Steps::Detail d;
      d.index = i;
      d.wall_ns = recent_walls_[i % detail_steps_];
      d.torch_memory = recent_torch_[i % detail_steps_];
      s.detail.push_back(d);
    }
  }
  *out = std::move(s);
  return true;
}

DurationStats duration_stats(std::vector<uint64_t> values) {
  DurationStats d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.count = values.size();
  for (uint64_t v : values) d.total_ns += v;
  d.min_ns = values.front();
  d.max_ns = values.back();
  d.mean_ns = d.total_ns / d.count;
  // Nearest rank: the smallest value with at least p% of the samples at or below it.
  auto rank = [&](unsigned pct) {
    std::size_t r = (values.size() * pct + 99) / 100;
    return values[r == 0 ? 0 : r - 1];
  };
  d.p50_ns = rank(50);
  d.p90_ns = rank(90);
  return d;
}

}  // namespace traintime::core
