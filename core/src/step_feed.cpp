// The step feed (step_feed.h): activities held in launch order until the detector ends their step.
#include "traintime/core/step_feed.h"

#include <algorithm>
#include <utility>

#include "traintime/core/gpu_aggregator.h"
#include "traintime/core/nccl_kernel_name.h"
#include "traintime/core/summaries.h"

namespace traintime::core {
namespace {

constexpr std::size_t kFirstKept = 1024;  // steps whose first GPU start is kept (period_ns)

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

// Collectives whose size the model fixes (gradient buckets, sharded parameters): their bytes
// tell two steps' calls apart. The others (AlltoAll of embeddings, point-to-point) carry
// data-dependent sizes that change every step.
bool sized_by_model(CommOp op) {
  switch (op) {
    case CommOp::kAllReduce:
    case CommOp::kAllGather:
    case CommOp::kReduceScatter:
    case CommOp::kBroadcast:
    case CommOp::kReduce:
      return true;
    default:
      return false;
  }
}

}  // namespace

StepFeed::StepFeed(GpuAggregator& aggregator, StepFeedOptions options)
    : agg_(aggregator), opt_(std::move(options)), detector_([this] {
        DetectorOptions d = opt_.detector;
        d.anchor = !opt_.anchor.empty();
        return d;
      }()) {
  pass_ = opt_.mode != StepsMode::kAuto;
  direct_ = opt_.mode == StepsMode::kMarker;
}

StepFeed::~StepFeed() = default;

void StepFeed::forward(const GpuActivity& a, const LaunchContext& ctx, Category region_category) {
  if (opt_.mode == StepsMode::kMarker) return agg_.ingest(a, ctx, region_category);
  LaunchContext c = ctx;
  if (opt_.mode == StepsMode::kOff) {
    c.step = 0;
  } else if (ctx.step == 0 && any_known_) {
    c.step = static_cast<uint32_t>(step_of(a.correlation_id));  // before the marker's first step
  } else {
    c.step = static_cast<uint32_t>(marker_offset_ + ctx.step);
  }
  agg_.ingest(a, c, region_category);
}

uint32_t StepFeed::name_id(std::string_view name) {
  // Kernel names sit at stable addresses in CUPTI (or the replay's table): a direct-mapped
  // cache by address, checked against the kept characters, spares hashing the whole name.
  NameSlot& slot = name_cache_[(reinterpret_cast<uintptr_t>(name.data()) >> 4) & (kNameCache - 1)];
  if (slot.ptr == name.data() && slot.len == name.size() && names_[slot.id] == name) return slot.id;
  auto it = name_ids_.find(name);
  uint32_t id;
  if (it != name_ids_.end()) {
    id = it->second;
  } else {
    id = static_cast<uint32_t>(names_.size());
    names_.emplace_back(name);
    name_ids_.emplace(std::string_view(names_.back()), id);
  }
  slot = {name.data(), name.size(), id};
  return id;
}

DetectorLaunch StepFeed::launch_of(const GpuActivity& a, const LaunchContext& ctx, uint32_t name) {
  DetectorLaunch l;
  uint64_t key = static_cast<uint64_t>(a.kind) + 1;
  if (ctx.comm.op != CommOp::kNone) {
    l.collective = true;
    key = mix(mix(mix(key, 0x100 + static_cast<uint64_t>(ctx.comm.op)), ctx.comm.comm_id),
              sized_by_model(ctx.comm.op) ? ctx.comm.bytes : 0);
    if (!opt_.anchor.empty()) l.anchor = comm_op_name(ctx.comm.op) == opt_.anchor;
  } else if (a.graph_id != 0) {
    key = mix(mix(key, 0x200), a.graph_id);
  } else if (a.kind == ActivityKind::kKernel) {
    l.collective = is_nccl_kernel(a.name);
    key = mix(mix(key, 0x300), name);
    if (!opt_.anchor.empty()) l.anchor = a.name.find(opt_.anchor) != std::string_view::npos;
  } else {
    key = mix(key, 0x400 + static_cast<uint64_t>(a.copy_kind));  // sizes follow the batch's data
  }
  auto [it, added] = tokens_.emplace(key, static_cast<uint32_t>(tokens_.size()));
  l.token = it->second;
  return l;
}

void StepFeed::hold(const GpuActivity& a, const LaunchContext& ctx, Category region_category) {
  if (ctx.step != 0) return take_marker(a, ctx, region_category);
  const uint32_t c = a.correlation_id;
  Held h{a, ctx, region_category};
  uint32_t name = 0;
  if (a.kind == ActivityKind::kKernel && !a.name.empty()) {
    name = name_id(a.name);
    h.activity.name = names_[name];
  }
  if (c >= fed_below_) {
    pending_.push_back({c, launch_of(a, ctx, name)});
  } else if (!std::binary_search(fed_.begin(), fed_.end(), c)) {
    ++late_launches_;  // its place in the sequence was fed without it
  }
  max_correlation_ = std::max(max_correlation_, c);
  if (first_device_ < 0) first_device_ = static_cast<int>(a.device);
  held_.push_back(h);
}

void StepFeed::feed(uint32_t bound, bool all) {
  if (pending_head_ == pending_.size()) return;
  // Launches arrive nearly in correlation order: the new ones are sorted (usually already) and
  // merged behind the sorted rest only when they overlap it.
  auto by_id = [](const Pending& x, const Pending& y) { return x.correlation < y.correlation; };
  const auto fresh = pending_.begin() + static_cast<std::ptrdiff_t>(pending_sorted_);
  if (!std::is_sorted(fresh, pending_.end(), by_id)) std::stable_sort(fresh, pending_.end(), by_id);
  if (pending_sorted_ > pending_head_ && fresh != pending_.end() && by_id(*fresh, *(fresh - 1)))
    std::inplace_merge(pending_.begin() + static_cast<std::ptrdiff_t>(pending_head_), fresh, pending_.end(), by_id);
  pending_sorted_ = pending_.size();
  std::size_t i = pending_head_;
  for (; i < pending_.size(); ++i) {
    const Pending& p = pending_[i];
    if (!all && p.correlation >= bound) break;
    if (!fed_.empty() && fed_.back() >= p.correlation) continue;  // another record of a fed launch
    detector_.add(p.launch);
    fed_.push_back(p.correlation);
  }
  if (all || i > pending_head_) {
    const uint32_t through = i > pending_head_ ? pending_[i - 1].correlation : 0;
    fed_below_ = std::max(fed_below_, all ? max_correlation_ + 1 : std::max(bound, through + 1));
  }
  pending_head_ = i;
  if (pending_head_ == pending_.size() || pending_head_ > pending_.size() / 2) {
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(pending_head_));
    pending_sorted_ -= pending_head_;
    pending_head_ = 0;
  }
}

void StepFeed::apply() {
  for (const DetectedBoundary& b : scratch_) {
    if (b.end <= fed_base_ || b.end - fed_base_ > fed_.size()) continue;  // never: ordinals fed
    const uint32_t last = fed_[static_cast<std::size_t>(b.end - fed_base_ - 1)];
    if (!ends_.empty() && last <= ends_.back()) continue;
    ends_.push_back(last);
    if (!any_known_ || last > known_through_) known_through_ = last;
    any_known_ = true;
  }
  scratch_.clear();
  // fed_ keeps the launches the detector still holds (the step in progress).
  const uint64_t start = detector_.step_start();
  if (start > fed_base_) {
    const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(start - fed_base_, fed_.size()));
    fed_.erase(fed_.begin(), fed_.begin() + static_cast<std::ptrdiff_t>(n));
    fed_base_ += n;
  }
}

uint64_t StepFeed::step_of(uint32_t correlation) const {
  return static_cast<uint64_t>(std::lower_bound(ends_.begin(), ends_.end(), correlation) - ends_.begin());
}

void StepFeed::note_first(uint64_t step, uint64_t start_ns) {
  first_any_ns_ = std::min(first_any_ns_, start_ns);
  if (last_first_ != first_ns_.end() && last_first_->first == step) {
    last_first_->second = std::min(last_first_->second, start_ns);
    return;
  }
  auto [it, added] = first_ns_.emplace(step, start_ns);
  if (!added) it->second = std::min(it->second, start_ns);
  last_first_ = it;
  if (first_ns_.size() > kFirstKept) {
    if (last_first_ == first_ns_.begin()) last_first_ = first_ns_.end();
    first_ns_.erase(first_ns_.begin());
  }
}

void StepFeed::release() {
  // Arrival order is nearly launch order: the known steps are handed on from the front; a
  // record behind a newer one waits for it (the window's bound still holds).
  if (!any_known_) return;
  while (!held_.empty() && held_.front().activity.correlation_id <= known_through_) {
    Held& h = held_.front();
    const uint64_t step = step_of(h.activity.correlation_id);
    h.ctx.step = static_cast<uint32_t>(step);
    note_first(step, h.activity.start_ns);
    agg_.ingest(h.activity, h.ctx, h.category);
    held_.pop_front();
  }
}

void StepFeed::force_bound() {
  feed(0, true);
  detector_.decide(true, &scratch_);
  apply();
  release();
  if (held_.size() <= opt_.max_held / 2 || fed_.empty() || detector_.launches() <= detector_.step_start())
    return;
  // The window is full and the detector cannot end the step in progress: what it holds joins
  // that step as one block.
  ++folded_blocks_;
  folded_launches_ += detector_.launches() - detector_.step_start();
  known_through_ = std::max(known_through_, fed_.back());
  any_known_ = true;
  detector_.forget_before(detector_.launches());
  apply();
}

void StepFeed::settle() {
  if (pass_) return;
  const uint32_t bound = max_correlation_ > opt_.settle_lag ? max_correlation_ - opt_.settle_lag : 0;
  feed(bound, false);
  detector_.decide(false, &scratch_);
  apply();
  if (held_.size() > opt_.max_held) force_bound();
  release();
}

void StepFeed::take_marker(const GpuActivity& a, const LaunchContext& ctx, Category region_category) {
  // A marker wins from here on. What the detector found so far stands (mid-run rule only: a
  // marked job's first step is not split by a loop inside it); the rest of the held launches
  // are marker step 0, which ends at the first marker.
  marker_seen_ = true;
  pass_ = true;
  feed(0, true);
  detector_.decide(false, &scratch_);
  apply();
  // Marker step 0 is what follows the last detected step; none (the last detected boundary is
  // the first marker's) and the first marker ends no step of its own.
  marker_offset_ = ends_.size();
  if (!ends_.empty() && max_correlation_ <= ends_.back()) --marker_offset_;
  known_through_ = std::max(known_through_, max_correlation_);
  any_known_ = true;
  release();
  for (Held& h : held_) forward(h.activity, h.ctx, h.category);
  held_.clear();
  direct_ = ends_.empty();  // marker step m is step m: nothing to renumber
  forward(a, ctx, region_category);
}

void StepFeed::finish() {
  if (pass_) return;
  feed(0, true);
  detector_.decide(true, &scratch_);
  apply();
  // The rest is the step in progress: a final partial step.
  known_through_ = std::max(known_through_, max_correlation_);
  any_known_ = true;
  release();
}

uint64_t StepFeed::steps_completed(uint64_t marker_steps) const {
  switch (opt_.mode) {
    case StepsMode::kOff: return 0;
    case StepsMode::kMarker: return marker_steps;
    case StepsMode::kAuto: break;
  }
  return marker_seen_ ? marker_offset_ + marker_steps : ends_.size();
}

bool StepFeed::live_steps(uint64_t step, uint64_t* steps, uint64_t* wall_ns, uint64_t* last_wall_ns) const {
  if (step + 2 > detected_ended()) return false;
  // Held records leave from the front: one of the step in progress keeps older steps' records
  // that arrived after it behind it. A scan, once per step published (not per record).
  const uint32_t last = ends_[step];
  for (const Held& h : held_)
    if (h.activity.correlation_id <= last) return false;
  const auto own = first_ns_.find(step);
  const auto next = first_ns_.find(step + 1);
  if (own == first_ns_.end() || next == first_ns_.end() || next->second <= own->second) return false;
  *steps = step + 1;
  *wall_ns = next->second > first_any_ns_ ? next->second - first_any_ns_ : 0;
  *last_wall_ns = next->second - own->second;
  return true;
}

StepsOrigin StepFeed::origin() const {
  StepsOrigin out;
  StepDetection& o = out.detection;
  const DetectorStats& s = detector_.stats();
  o.present = opt_.mode == StepsMode::kAuto && s.launches > 0;
  o.steps = marker_seen_ ? marker_offset_ : ends_.size();
  o.period_calls = s.period;
  o.relocks = s.relocks;
  o.warmup_launches = s.warmup_launches;
  o.late_launches = late_launches_;
  o.folded_blocks = folded_blocks_;
  o.folded_launches = folded_launches_;
  o.coverage = s.launches > 0 ? static_cast<double>(s.exact_launches) / static_cast<double>(s.launches) : 0;
  std::vector<uint64_t> gaps;
  uint64_t prev_step = 0, prev_ns = 0;
  bool have = false;
  for (const auto& [step, ns] : first_ns_) {
    if (have && step == prev_step + 1 && ns > prev_ns && step < o.steps) gaps.push_back(ns - prev_ns);
    prev_step = step;
    prev_ns = ns;
    have = true;
  }
  if (!gaps.empty()) {
    std::nth_element(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 2), gaps.end());
    o.period_ns = gaps[gaps.size() / 2];
  }
  const std::string folded = folded_blocks_ == 0 ? std::string()
      : std::to_string(folded_launches_) + " launches in " + std::to_string(folded_blocks_) +
            " stretch(es) did not repeat within the open-step window; each stayed in its step as one block";
  if (opt_.mode == StepsMode::kOff) {
    out.source = "none";
  } else if (opt_.mode == StepsMode::kMarker) {
    out.source = "marker";
  } else if (marker_seen_) {
    out.source = "marker";
    o.marker_from_step = marker_offset_;
    o.reason = o.steps > 0 ? "a step marker appeared and decides the steps from step " +
                                 std::to_string(marker_offset_) + " on"
                           : "a step marker decides the steps";
  } else if (o.steps > 0) {
    out.source = "detected";
    o.reason = folded;
  } else {
    out.source = "none";
    o.reason = s.launches == 0 ? "no GPU work was recorded"
               : !opt_.anchor.empty() ? "TRAINTIME_STEP_ANCHOR=" + opt_.anchor + " matched no launch"
                                      : "the launch sequence (" + std::to_string(s.launches) +
                                            " launches) never repeated twice in a row: no period";
    if (!folded.empty()) o.reason += "; " + folded;
  }
  return out;
}

void StepFeed::describe(uint64_t marker_steps, GpuSummary* out) const {
  StepsOrigin o = origin();
  out->steps_source = std::move(o.source);
  out->steps_detection = std::move(o.detection);
  out->steps_count = steps_completed(marker_steps);
}

}  // namespace traintime::core
