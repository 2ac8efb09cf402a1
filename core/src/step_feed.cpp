// The step feed (step_feed.h): activities held in launch order until the detector ends their step.
#include "traintime/core/step_feed.h"

#include <algorithm>
#include <functional>
#include <string_view>
#include <utility>

#include "traintime/core/gpu_aggregator.h"
#include "traintime/core/nccl_kernel_name.h"
#include "traintime/core/summaries.h"

namespace traintime::core {
namespace {

constexpr std::size_t kFirstKept = 1024;  // steps whose first GPU start is kept (period_ns)
constexpr uint32_t kOverflowToken = 0xffffffffu;  // every launch kind past max_tokens
constexpr uint64_t kSeqMask = (uint64_t{1} << 48) - 1;

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
  } else if (names_.size() >= opt_.max_names) {
    ++names_over_cap_;
    return UINT32_MAX;  // hold() keeps a copy while the activity is held
  } else {
    id = static_cast<uint32_t>(names_.size());
    names_.emplace_back(name);
    name_ids_.emplace(std::string_view(names_.back()), id);
  }
  slot = {name.data(), name.size(), id};
  return id;
}

uint32_t StepFeed::token_for(uint64_t key, uint32_t comm) {
  auto it = tokens_.find(key);
  if (it != tokens_.end()) return it->second;
  if (tokens_.size() >= opt_.max_tokens) {
    ++tokens_over_cap_;
    return kOverflowToken;
  }
  const auto token = static_cast<uint32_t>(tokens_.size());
  tokens_.emplace(key, token);
  token_comm_.push_back(comm);
  return token;
}

DetectorLaunch StepFeed::launch_of(const GpuActivity& a, const LaunchContext& ctx, uint32_t name) {
  DetectorLaunch l;
  uint64_t key = static_cast<uint64_t>(a.kind) + 1;
  uint32_t comm = 0;
  if (ctx.comm.op != CommOp::kNone) {
    if (ctx.comm.seq != 0) comm = ctx.comm.comm_id;
    l.collective = true;
    key = mix(mix(mix(key, 0x100 + static_cast<uint64_t>(ctx.comm.op)), ctx.comm.comm_id),
              sized_by_model(ctx.comm.op) ? ctx.comm.bytes : 0);
    if (!opt_.anchor.empty()) l.anchor = comm_op_name(ctx.comm.op) == opt_.anchor;
  } else if (a.graph_id != 0) {
    key = mix(mix(key, 0x200), a.graph_id);
  } else if (a.kind == ActivityKind::kKernel) {
    l.collective = is_nccl_kernel(a.name);
    // With and without its grid (step_detector.h "Grids"); a name past max_names by its
    // characters.
    const uint64_t by_name = name != UINT32_MAX ? name : std::hash<std::string_view>{}(a.name) | (uint64_t{1} << 63);
    key = mix(mix(key, 0x300), by_name);
    l.token = token_for(key, 0);
    l.fine = token_for(mix(key, a.grid), 0) + 1;
    if (!opt_.anchor.empty()) l.anchor = a.name.find(opt_.anchor) != std::string_view::npos;
    return l;
  } else {
    key = mix(key, 0x400 + static_cast<uint64_t>(a.copy_kind));  // sizes follow the batch's data
  }
  l.token = token_for(key, comm);
  return l;
}

void StepFeed::hold(const GpuActivity& a, const LaunchContext& ctx, Category region_category) {
  if (ctx.step != 0) return take_marker(a, ctx, region_category);
  const uint32_t c = a.correlation_id;
  Held h{a, ctx, region_category};
  uint32_t name = 0;
  if (a.kind == ActivityKind::kKernel && !a.name.empty()) {
    name = name_id(a.name);
    if (name != UINT32_MAX) {
      h.activity.name = names_[name];
    } else {
      overflow_names_.emplace_back(a.name);
      h.activity.name = overflow_names_.back();
    }
  }
  if (c >= fed_below_) {
    const uint64_t seq_key = ctx.comm.op != CommOp::kNone && ctx.comm.seq != 0
                                 ? uint64_t{ctx.comm.comm_id} << 48 | (ctx.comm.seq & kSeqMask) : 0;
    pending_.push_back({c, launch_of(a, ctx, name), seq_key});
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
    fed_seq_.push_back(p.seq_key);
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
  // The steps ended, each with its first collective (Numbering): all of them first, so that the
  // sequence numbers one period spans are known from two exact steps in a row (at a lock the
  // steps back over the window come at once) before any of them is numbered.
  ended_.clear();
  std::size_t from = 0;  // fed_ index of the first launch of the step the next boundary ends
  for (const DetectedBoundary& b : scratch_) {
    if (b.end <= fed_base_ || b.end - fed_base_ > fed_.size()) continue;  // never: ordinals fed
    const auto to = static_cast<std::size_t>(b.end - fed_base_);
    const uint32_t last = fed_[to - 1];
    if ((!ends_.empty() && last <= ends_.back()) || (!ended_.empty() && last <= ended_.back().last)) {
      from = std::max(from, to);
      continue;
    }
    uint64_t key = carried_key_;
    for (std::size_t i = from; key == 0 && i < to; ++i) key = fed_seq_[i];
    uint32_t own = 0;
    for (std::size_t i = from; key != 0 && i < to; ++i) own += (fed_seq_[i] >> 48) == (key >> 48) ? 1 : 0;
    carried_key_ = 0;
    ended_.push_back({last, key, own, b.exact});
    from = to;
  }
  for (const Ended& e : ended_) {
    // An exact step and the step after it: their first collectives are one period apart.
    if (prev_exact_ && prev_key_ != 0 && e.key != 0 && (prev_key_ >> 48) == (e.key >> 48) && e.key > prev_key_)
      period_seqs_ = (e.key & kSeqMask) - (prev_key_ & kSeqMask);
    prev_key_ = e.key;
    prev_exact_ = e.exact;
  }
  for (const Ended& e : ended_) {
    numbers_.push_back(progress_numbered_ ? progress_number_ : number_for(e.key, e.own));
    progress_numbered_ = false;
    ends_.push_back(e.last);
    if (!any_known_ || e.last > known_through_) known_through_ = e.last;
    any_known_ = true;
  }
  scratch_.clear();
  // fed_ keeps the launches the detector still holds (the step in progress).
  const uint64_t start = detector_.step_start();
  if (start > fed_base_) {
    const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(start - fed_base_, fed_.size()));
    // Launches dropped without a step ending (a fold) stay in the step in progress.
    for (std::size_t i = from; carried_key_ == 0 && i < n; ++i) carried_key_ = fed_seq_[i];
    fed_.erase(fed_.begin(), fed_.begin() + static_cast<std::ptrdiff_t>(n));
    fed_seq_.erase(fed_seq_.begin(), fed_seq_.begin() + static_cast<std::ptrdiff_t>(n));
    fed_base_ += n;
  }
}

uint64_t StepFeed::number_for(uint64_t seq_key, uint32_t own_count) {
  const uint64_t local = next_number();
  if (seq_key == 0) return local;
  const auto comm = static_cast<uint32_t>(seq_key >> 48);
  const uint64_t seq = seq_key & kSeqMask;
  // Sequence numbers one period spans: measured between two exact steps in a row (a grouped
  // launch takes one number per member); before that, the collectives on that communicator in
  // the locked pattern (an anchor's step, which has no pattern, is one period: its own).
  uint64_t per = 0;
  if (period_seqs_ > 0 && comm == static_cast<uint32_t>(prev_key_ >> 48)) {
    per = period_seqs_;
  } else if (detector_.pattern().empty()) {
    per = own_count;
  } else {
    for (const uint32_t t : detector_.pattern())
      per += t < token_comm_.size() && token_comm_[t] == comm ? 1 : 0;
  }
  if (per == 0) return local;
  if (ref_comm_ == 0) ref_comm_ = comm;
  if (comm != ref_comm_ || seq < ref_seq_) return local;
  const uint64_t n = ref_number_ + (seq - ref_seq_) / per;
  if (n < local) return local;  // never back: this rank's steps disagree with the sequence
  ref_seq_ = seq;
  ref_number_ = n;
  ++seq_numbered_;
  return n;
}

void StepFeed::number_progress() {
  if (progress_numbered_) return;
  uint64_t key = carried_key_;
  for (std::size_t i = 0; key == 0 && i < fed_seq_.size(); ++i) key = fed_seq_[i];
  uint32_t own = 0;
  for (std::size_t i = 0; key != 0 && i < fed_seq_.size(); ++i) own += (fed_seq_[i] >> 48) == (key >> 48) ? 1 : 0;
  if (key != 0 && own == 0) own = 1;  // its first collective was folded away with the rest
  progress_number_ = number_for(key, own);
  progress_numbered_ = true;
}

uint64_t StepFeed::step_of(uint32_t correlation) const {
  const auto i = static_cast<std::size_t>(std::lower_bound(ends_.begin(), ends_.end(), correlation) - ends_.begin());
  if (i < numbers_.size()) return numbers_[i];
  return progress_numbered_ ? progress_number_ : next_number();
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
    if (!overflow_names_.empty() && h.activity.name.data() == overflow_names_.front().data())
      overflow_names_.pop_front();
    held_.pop_front();
  }
  // Memory records leave in correlation order: a buffer's records that arrived behind a newer
  // buffer's (per-thread buffers come in any order) must not wait behind records of a step that
  // has not ended, or a step that ended would lack them in the tracker (memory_complete_below).
  if (held_memory_unsorted_) {
    std::stable_sort(held_memory_.begin(), held_memory_.end(),
                     [](const HeldMemory& x, const HeldMemory& y) { return x.correlation < y.correlation; });
    held_memory_unsorted_ = false;
  }
  while (!held_memory_.empty() && held_memory_.front().correlation <= known_through_) {
    MemoryEvent e = held_memory_.front().event;
    e.step = step_of(held_memory_.front().correlation);
    memory_->add(e);
    held_memory_.pop_front();
  }
}

void StepFeed::memory(MemoryEvent e, uint32_t correlation) {
  if (opt_.mode == StepsMode::kOff) {
    e.step = 0;
  } else if (pass_) {
    e.step = e.step == 0 && any_known_ ? step_of(correlation) : marker_offset_ + e.step;
  } else if (!any_known_ || correlation > known_through_) {
    if (!held_memory_.empty() && correlation < held_memory_.back().correlation) held_memory_unsorted_ = true;
    held_memory_.push_back({e, correlation});
    if (held_memory_.size() <= opt_.max_held) return;
    // More than the window holds: the oldest goes to the step in progress.
    e = held_memory_.front().event;
    e.step = step_of(held_memory_.front().correlation);
    held_memory_.pop_front();
  } else {
    e.step = step_of(correlation);
  }
  memory_->add(e);
}

uint64_t StepFeed::memory_complete_below(uint64_t whole) const {
  if (whole < 2 || whole > numbers_.size()) return 0;
  uint64_t below = numbers_[whole - 2] + 1;
  if (held_memory_.empty()) return below;
  // A record still held keeps its step, and every later one, open: the tracker does not have it.
  uint32_t first = held_memory_.front().correlation;
  if (held_memory_unsorted_)
    for (const HeldMemory& m : held_memory_) first = std::min(first, m.correlation);
  return std::min(below, step_of(first));
}

void StepFeed::snapshot_into(GpuAggregator& copy) const {
  for (const Held& h : held_) {
    LaunchContext ctx = h.ctx;
    ctx.step = static_cast<uint32_t>(any_known_ && h.activity.correlation_id <= known_through_
                                         ? step_of(h.activity.correlation_id)
                                         : progress_numbered_ ? progress_number_ : next_number());
    copy.ingest(h.activity, ctx, h.category);
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
  number_progress();
  known_through_ = std::max(known_through_, fed_.back());
  any_known_ = true;
  detector_.forget_before(detector_.launches());
  apply();
  release();
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
  marker_offset_ = progress_numbered_ ? progress_number_ : next_number();
  if (!progress_numbered_ && !ends_.empty() && max_correlation_ <= ends_.back()) --marker_offset_;
  progress_number_ = marker_offset_;
  progress_numbered_ = true;
  known_through_ = std::max(known_through_, max_correlation_);
  any_known_ = true;
  release();
  for (Held& h : held_) forward(h.activity, h.ctx, h.category);
  held_.clear();
  overflow_names_.clear();
  for (const HeldMemory& m : held_memory_) memory(m.event, m.correlation);
  held_memory_.clear();
  held_memory_unsorted_ = false;
  direct_ = ends_.empty();  // marker step m is step m: nothing to renumber
  forward(a, ctx, region_category);
}

void StepFeed::finish() {
  if (pass_) return;
  feed(0, true);
  detector_.decide(true, &scratch_);
  apply();
  // The rest is the step in progress: a final partial step, and so are the memory records of
  // calls after the last launch (frees at exit), now and from here on.
  number_progress();
  known_through_ = UINT32_MAX;
  any_known_ = true;
  release();
}

uint64_t StepFeed::steps_completed(uint64_t marker_steps) const {
  switch (opt_.mode) {
    case StepsMode::kOff: return 0;
    case StepsMode::kMarker: return marker_steps;
    case StepsMode::kAuto: break;
  }
  if (marker_seen_) return marker_offset_ + marker_steps;
  return progress_numbered_ ? progress_number_ : next_number();
}

bool StepFeed::live_steps(uint64_t step, uint64_t* steps, uint64_t* wall_ns, uint64_t* last_wall_ns) const {
  if (step + 2 > detected_ended()) return false;
  // Held records leave from the front: one of the step in progress keeps older steps' records
  // that arrived after it behind it. A scan, once per step published (not per record).
  const uint32_t last = ends_[step];
  for (const Held& h : held_)
    if (h.activity.correlation_id <= last) return false;
  const auto own = first_ns_.find(numbers_[step]);
  const auto next = first_ns_.find(numbers_[step + 1]);
  if (own == first_ns_.end() || next == first_ns_.end() || next->second <= own->second) return false;
  *steps = numbers_[step] + 1;
  *wall_ns = next->second > first_any_ns_ ? next->second - first_any_ns_ : 0;
  *last_wall_ns = next->second - own->second;
  return true;
}

StepAt StepFeed::step_at(uint64_t ns, uint64_t* step) const {
  if (opt_.mode != StepsMode::kAuto || marker_seen_) return StepAt::kMarker;
  const uint64_t progress = progress_numbered_ ? progress_number_ : next_number();
  // The last kept step that started at or before ns (the most recent steps are the usual answer).
  auto it = first_ns_.end();
  while (it != first_ns_.begin() && std::prev(it)->second > ns) --it;
  if (it == first_ns_.begin()) {  // before every kept step: the oldest one, once it ended
    *step = first_ns_.empty() ? progress : first_ns_.begin()->first;
    return !first_ns_.empty() && *step < next_number() ? StepAt::kKnown : StepAt::kNotYet;
  }
  *step = std::prev(it)->first;
  return it != first_ns_.end() && *step < next_number() ? StepAt::kKnown : StepAt::kNotYet;
}

StepsOrigin StepFeed::origin() const {
  StepsOrigin out;
  StepDetection& o = out.detection;
  const DetectorStats& s = detector_.stats();
  o.present = opt_.mode == StepsMode::kOff || (opt_.mode == StepsMode::kAuto && (s.launches > 0 || !held_.empty()));
  if (opt_.mode == StepsMode::kAuto) o.anchor = opt_.anchor;
  o.steps = marker_seen_ ? marker_offset_ : ends_.size();
  o.period_calls = s.period;
  o.relocks = s.relocks;
  o.warmup_launches = s.warmup_launches;
  o.late_launches = late_launches_;
  o.folded_blocks = folded_blocks_;
  o.folded_launches = folded_launches_;
  // How the detected steps were numbered; with none, nothing (the step in progress, numbered
  // from its first collective at the end, is no detected step).
  if (o.steps > 0) o.numbering = seq_numbered_ > 0 ? "nccl" : "local";
  o.tokens_over_cap = tokens_over_cap_;
  for (const Held& h : held_)
    o.undecided_launches += any_known_ && h.activity.correlation_id <= known_through_ ? 0 : 1;
  o.coverage = s.launches > 0 ? static_cast<double>(s.exact_launches) / static_cast<double>(s.launches) : 0;
  std::vector<uint64_t> gaps;
  uint64_t prev_step = 0, prev_ns = 0;
  bool have = false;
  for (const auto& [step, ns] : first_ns_) {
    if (have && step == prev_step + 1 && ns > prev_ns && step < next_number()) gaps.push_back(ns - prev_ns);
    prev_step = step;
    prev_ns = ns;
    have = true;
  }
  if (!gaps.empty()) {
    std::nth_element(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 2), gaps.end());
    o.period_ns = gaps[gaps.size() / 2];
  }
  std::string folded = folded_blocks_ == 0 ? std::string()
      : std::to_string(folded_launches_) + " launches in " + std::to_string(folded_blocks_) +
            " stretch(es) did not repeat within the open-step window; each stayed in its step as one block";
  if (tokens_over_cap_ > 0)
    folded += std::string(folded.empty() ? "" : "; ") + std::to_string(tokens_over_cap_) +
              " launches of kinds past the first " + std::to_string(opt_.max_tokens) +
              " distinct ones (kernel, grid, collective) were told apart no more";
  if (opt_.mode == StepsMode::kOff) {
    out.source = "none";
    o.reason = "TRAINTIME_STEPS=off: steps are not told apart, every activity is in one step (step 0)";
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
    o.reason = s.launches == 0 && !held_.empty()
                   ? "too little GPU work so far to look for a period (" + std::to_string(held_.size()) +
                         " activities, in the step in progress)"
               : s.launches == 0 ? "no GPU work was recorded"
               : !opt_.anchor.empty() ? "TRAINTIME_STEP_ANCHOR=" + opt_.anchor + " matched no launch"
                                      : "the launch sequence (" + std::to_string(s.launches) +
                                            " launches) never repeated twice in a row: no period";
    if (!folded.empty()) o.reason += "; " + folded;
  }
  return out;
}

uint64_t StepFeed::unanchored_launches() const {
  if (opt_.mode != StepsMode::kAuto || opt_.anchor.empty() || marker_seen_ || !ends_.empty()) return 0;
  return detector_.stats().launches;
}

void StepFeed::describe(uint64_t marker_steps, GpuSummary* out) const {
  StepsOrigin o = origin();
  out->steps_source = std::move(o.source);
  out->steps_detection = std::move(o.detection);
  out->steps_count = steps_completed(marker_steps);
  out->steps_off = opt_.mode == StepsMode::kOff;
}

}  // namespace traintime::core
