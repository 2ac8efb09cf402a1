#include "traintime/core/rank_file_builder.h"

#include "traintime/core/live_metrics.h"
#include "traintime/core/peak_flops.h"

#include <algorithm>
#include <array>
#include <map>
#include <unordered_map>
#include <utility>

namespace traintime::core {
namespace {

void add_regions(RankFile& f, const CpuSummary& cpu, const GpuSummary& gpu) {
  f.regions = cpu.regions;
  std::unordered_map<PathId, std::size_t> row_of;
  for (std::size_t i = 0; i < cpu.region_ids.size() && i < f.regions.size(); ++i)
    row_of.emplace(cpu.region_ids[i], i);
  for (const GpuSummary::Region& g : gpu.regions) {
    auto found = row_of.find(g.path);
    std::size_t idx;
    if (found != row_of.end()) {
      idx = found->second;
    } else {
      RegionRow row;
      row.path = g.path < cpu.path_names.size() ? cpu.path_names[g.path] : std::string();
      row.category = g.category;
      f.regions.push_back(std::move(row));
      idx = f.regions.size() - 1;
      row_of.emplace(g.path, idx);
    }
    static_cast<RegionGpu&>(f.regions[idx]) = g;
  }
}

// Whether the collectives' GPU times come from NCCL's own timers (its profiler plugin's
// kernel-channel events) instead of CUPTI's records: CUPTI did not capture (held by another
// tool, refused, turned off) and the plugin measured some.
bool times_from_kernel_ch(const GpuSummary& gpu, const CommSummary& comm) {
  return gpu.capture != GpuCapture::kCupti && !comm.kernel_ch.rings.empty();
}

struct RowAcc {
  CommRow row;  // calls, bytes, bytes_known and gpu_ns; the rest is set in add_comm_rows
  std::array<SizeBucket, kSizeBuckets> sizes{};
};
using CommRows = std::map<std::pair<CommOp, uint32_t>, RowAcc>;

// GPU time per (communicator, op) into the rows of its op and communicator size.
void add_gpu_time(CommRows& rows, const std::vector<GpuSummary::Comm>& times, const CommSummary& comm) {
  for (const GpuSummary::Comm& c : times) {
    const CommGpuTime& g = c.time;
    if (c.comm_index == GpuSummary::kByName) {
      CommRow& row = rows[{c.op, 0}].row;
      row.calls += g.kernels;  // one kernel per collective when NCCL is not interposed
      row.gpu_ns += g.gpu_ns;
      row.bytes_known = false;
      continue;
    }
    const CommCallTable::CommSnapshot* cs = comm.calls.find(c.comm_index);
    RowAcc& acc = rows[{c.op, cs != nullptr ? cs->size : 0}];
    acc.row.gpu_ns += g.gpu_ns;
    acc.row.calls += g.captured_calls;
    acc.row.bytes += g.captured_bytes;
    for (uint32_t b = 0; b < kSizeBuckets; ++b) {
      acc.sizes[b].gpu_ns += g.bucket_gpu_ns[b];
      acc.sizes[b].calls += g.bucket_captured_calls[b];
      acc.sizes[b].bytes += g.bucket_captured_bytes[b];
    }
  }
}

// Comm rows per (op, comm_size): CPU calls/bytes from the call table, GPU time from records.
void add_comm_rows(RankFile& f, const GpuSummary& gpu, const CommSummary& comm) {
  CommRows rows;
  for (const CommCallTable::CommSnapshot& cs : comm.calls.comms) {
    for (std::size_t o = 1; o < kCommOpCount; ++o) {
      const CommCallTable::OpCounts& oc = cs.ops[o];
      if (oc.calls == 0) continue;
      RowAcc& acc = rows[{static_cast<CommOp>(o), cs.size}];
      acc.row.seen_by |= cs.seen_by;
      acc.row.calls += oc.calls;
      acc.row.bytes += oc.bytes;
      for (uint32_t b = 0; b < kSizeBuckets; ++b) {
        acc.sizes[b].calls += oc.bucket_calls[b];
        acc.sizes[b].bytes += oc.bucket_bytes[b];
      }
    }
  }
  add_gpu_time(rows, times_from_kernel_ch(gpu, comm) ? comm.kernel_ch.comm : gpu.comm, comm);
  // Rows ordered by op name, then size (as the schema's readers have always seen them).
  std::map<std::pair<std::string, uint32_t>, std::pair<CommOp, const RowAcc*>> ordered;
  for (const auto& [key, ra] : rows)
    ordered[{std::string(comm_op_name(key.first)), key.second}] = {key.first, &ra};
  for (const auto& [key, value] : ordered) {
    const RowAcc& acc = *value.second;
    CommRow row = acc.row;
    row.op = value.first;
    row.comm_size = key.second;
    // bytes per ns is 1e9 bytes/s: algbw over all calls is total bytes / total GPU time.
    if (row.bytes_known && row.gpu_ns > 0)
      row.algbw_gbps = static_cast<double>(row.bytes) / static_cast<double>(row.gpu_ns);
    row.busbw_gbps = row.algbw_gbps * busbw_factor(value.first, row.comm_size);
    for (uint32_t b = 0; b < kSizeBuckets; ++b) {
      SizeBucket sb = acc.sizes[b];
      if (sb.calls == 0 && sb.gpu_ns == 0) continue;
      sb.lo_bytes = size_bucket_lo(b);
      row.sizes.push_back(sb);
    }
    f.comm.push_back(std::move(row));
  }
  // The collectives recorded on the CPU (gloo, MPI): rows of their own, after NCCL's, by op name,
  // size and backend; no GPU time, so no bandwidth.
  std::map<std::tuple<std::string, uint32_t, std::string>, CommRow> cpu_rows;
  for (const CpuCollectives::Group& g : comm.cpu.groups)
    for (std::size_t o = 1; o < kCommOpCount; ++o) {
      const CpuCollectives::OpTotals& t = g.ops[o];
      if (t.calls == 0) continue;
      const auto op = static_cast<CommOp>(o);
      CommRow& row = cpu_rows[{std::string(comm_op_name(op)), g.size, g.backend}];
      row.op = op;
      row.comm_size = g.size;
      row.backend = g.backend;
      row.calls += t.calls;
      row.bytes += t.bytes;
      row.cpu_ns += t.cpu_ns;
    }
  for (auto& [key, row] : cpu_rows) f.comm.push_back(std::move(row));
}

// One entry per call-table index seen by either side, in index order.
void add_communicators(RankFile& f, const GpuSummary& gpu, const CommSummary& comm) {
  std::map<uint32_t, Communicator> comms;
  for (const CommCallTable::CommSnapshot& cs : comm.calls.comms) {
    Communicator& c = comms[cs.index];
    c.id = communicator_id(cs.stable_id);
    c.size = cs.size;
    c.rank = cs.rank;
    c.ops_enqueued = cs.ops_enqueued;
  }
  // What was enqueued and has not completed: only where GPU completion is observed at all
  // (CUPTI's records, else NCCL's own timers).
  const bool kernel_ch = times_from_kernel_ch(gpu, comm);
  const bool completion_known = gpu.capture == GpuCapture::kCupti || kernel_ch;
  for (const GpuSummary::Ring& ring : kernel_ch ? comm.kernel_ch.rings : gpu.rings) {
    auto [it, fresh] = comms.try_emplace(ring.comm_index);
    Communicator& c = it->second;
    if (fresh) {
      const CommCallTable::CommSnapshot* cs = comm.calls.find(ring.comm_index);
      c.id = communicator_id(cs != nullptr ? cs->stable_id : 0);
    }
    c.ops_completed = ring.ops_completed;
    c.recent = ring.recent;
  }
  // With both: NCCL's own GPU time of each collective beside CUPTI's, by sequence number.
  if (!kernel_ch) {
    for (const GpuSummary::Ring& ring : comm.kernel_ch.rings) {
      auto it = comms.find(ring.comm_index);
      if (it == comms.end()) continue;
      std::unordered_map<uint64_t, uint64_t> ns_of_seq;
      for (const RecentCollective& r : ring.recent) ns_of_seq[r.seq] = r.kernel_ch_ns;
      for (RecentCollective& r : it->second.recent)
        if (auto found = ns_of_seq.find(r.seq); found != ns_of_seq.end()) r.kernel_ch_ns = found->second;
    }
  }
  if (completion_known) {
    for (const CommCallTable::CommSnapshot& cs : comm.calls.comms) {
      Communicator& c = comms[cs.index];
      for (const CommCallTable::CommSnapshot::Enqueued& e : cs.recent_enqueued)
        if (e.seq > c.ops_completed) c.in_flight.push_back({e.seq, e.op, e.bytes});
    }
  }
  for (auto& [index, c] : comms) f.communicators.push_back(std::move(c));
  for (const CpuCollectives::Group& g : comm.cpu.groups) {
    Communicator c;
    c.id = g.id;
    c.size = g.size;
    c.rank = g.rank;
    c.ops_enqueued = g.ops_enqueued;
    c.ops_completed = g.ops_completed;
    c.recent = g.recent;
    c.backend = g.backend;
    c.cpu_clock = true;
    f.communicators.push_back(std::move(c));
  }
}

// TFLOP/s over the measured (post-warm-up) steps, MFU against the device's peak, and HFU.
void add_model_flops(RankFile& f, const ModelFlops& model, const std::string& device_name) {
  f.device_name = device_name;
  const Peak peak = resolve_peak(model.peak_tflops, device_name, model.dtype);
  f.peak_tflops = peak.tflops;
  if (!device_name.empty() || peak.tflops > 0) f.peak_source = peak.source;
  Steps& s = f.steps;
  const double secs = static_cast<double>(s.wall_ns.total_ns) / 1e9;
  const double tokens = s.tokens_per_s * secs;  // tokens of the measured steps
  const double flops = model_flops(model.flops_per_step, model.flops_per_token, s.wall_ns.count,
                                   static_cast<uint64_t>(tokens + 0.5));
  if (flops <= 0 || secs <= 0 || s.wall_ns.count == 0) return;
  s.flops_per_step = flops / static_cast<double>(s.wall_ns.count);
  s.tflops = flops / secs / 1e12;
  if (peak.tflops > 0) s.mfu = s.tflops / peak.tflops;
  // HFU from the file's own recompute and forward GPU time (f.categories is filled first).
  const auto busy = [&f](Category c) { return f.categories[c].gpu_busy_ns; };
  s.hfu = hfu_from_mfu(s.mfu, busy(Category::kRecompute), busy(Category::kForward));
}

// steps.detail: the GPU rows (span, totals, busy by category) with the CPU wall time of the same
// step index, and CPU-only rows for kept steps that launched no GPU work. Each side keeps its own
// most recent TRAINTIME_STEP_DETAIL steps; the union keeps as many rows as the larger side.
std::vector<Steps::Detail> join_step_detail(const std::vector<Steps::Detail>& cpu,
                                            const std::vector<Steps::Detail>& gpu) {
  std::map<uint64_t, Steps::Detail> by_index;
  for (const Steps::Detail& g : gpu) by_index[g.index] = g;
  for (const Steps::Detail& c : cpu) {
    auto [it, added] = by_index.try_emplace(c.index, c);
    if (!added) {
      it->second.wall_ns = c.wall_ns;
      it->second.torch_memory = c.torch_memory;
    }
  }
  const std::size_t keep = std::max(cpu.size(), gpu.size());
  while (by_index.size() > keep) by_index.erase(by_index.begin());
  std::vector<Steps::Detail> out;
  out.reserve(by_index.size());
  for (auto& [index, row] : by_index) out.push_back(std::move(row));
  return out;
}

// steps.detail[].gpu_health: each device's compact figures of the row's step (a step without
// samples gets none), in the order of the rows (device by device).
void add_step_health(std::vector<Steps::Detail>& detail, const std::vector<HealthSummary::StepRow>& rows) {
  for (const HealthSummary::StepRow& r : rows) {
    const auto row = std::lower_bound(detail.begin(), detail.end(), r.index,
                                      [](const Steps::Detail& d, uint64_t i) { return d.index < i; });
    if (row != detail.end() && row->index == r.index) row->gpu_health.push_back(r.health);
  }
}

// steps.detail[].memory: the tracker's row of each detail step, or what the last earlier step
// with records left in use.
void add_step_memory(std::vector<Steps::Detail>& detail, const MemorySummary& memory) {
  if (!memory.run.present) return;
  std::vector<uint64_t> indexes;
  indexes.reserve(detail.size());
  for (const Steps::Detail& d : detail) indexes.push_back(d.index);
  std::vector<MemoryFigures> rows = memory.rows_for(indexes);
  for (std::size_t i = 0; i < detail.size(); ++i) detail[i].memory = std::move(rows[i]);
}

// self_cost: the process's own figures and every section's rows, in the sections' order; pct
// over the steps after warm-up.
void add_self_cost(RankFile& f, const ProcessCost& own, const std::vector<const Section*>& sections) {
  if (!own.present) return;
  SelfCost& c = f.self_cost;
  c.present = true;
  c.threads = own.threads;
  c.written_bytes = own.written_bytes;
  for (const Section* s : sections) {
    c.callbacks.insert(c.callbacks.end(), s->costs.begin(), s->costs.end());
    c.memory.insert(c.memory.end(), s->memory.begin(), s->memory.end());
  }
  for (const CallbackCost& row : c.callbacks)
    if (row.measured) c.callbacks_ns += row.estimated_ns;
  for (const MemoryCost& m : c.memory) c.peak_bytes += m.peak_bytes;
  const DurationStats& wall = f.steps.wall_ns;
  if (wall.count > 0 && wall.total_ns > 0) {
    c.has_pct = true;
    c.steps_wall_ns = wall.total_ns;
    c.steps_callbacks_ns = own.steps_callbacks_ns;
    c.pct = 100.0 * static_cast<double>(own.steps_callbacks_ns) / static_cast<double>(wall.total_ns);
  }
}

}  // namespace

RankFile build_rank_file(const Identity& identity, const CpuSummary& cpu, const GpuSummary& gpu,
                         const CommSummary& comm, const std::vector<Section>& modules,
                         const HealthSummary& health) {
  RankFile f;
  static_cast<RankIdentity&>(f) = identity;
  f.gpu_capture = gpu.capture;
  f.gpu_capture_reason = gpu.capture_reason;
  f.gpu_records_complete = gpu.records_complete;

  for (std::size_t c = 0; c < kCategoryCount; ++c)
    f.categories.set(static_cast<Category>(c)) = gpu.categories[c];
  for (const CopyKind k : kStandardCopyKinds) f.memcpy[k] = MemcpyStat{};
  for (const auto& [kind, stat] : gpu.memcpy) f.memcpy[kind] = stat;

  add_regions(f, cpu, gpu);
  f.top_kernels = gpu.top_kernels;
  f.unbalanced_pops = cpu.unbalanced_pops;

  f.steps = cpu.steps;
  // TRAINTIME_STEPS=off: no steps. The GPU side put every activity in step 0; the markers the
  // program called end no step either: their count and wall times go (the samples and tokens
  // they reported stay), and the reason says how many there were.
  const uint64_t ignored_markers = gpu.steps_off ? f.steps.count : 0;
  if (gpu.steps_off) {
    f.steps.count = 0;
    f.steps.wall_ns = DurationStats{};
    f.steps.samples_per_s = f.steps.tokens_per_s = 0;
    f.steps.last_end_unix_ns = 0;
    f.steps.detail.clear();
  }
  add_model_flops(f, identity.model, gpu.device_name);
  f.steps.totals = gpu.totals;
  f.steps.partial_final_step = gpu.partial_final_step;
  // Steps found without a marker (core/step_feed.h): their count, and the marker's rows moved
  // to the step numbers they have when detected steps came before the first marker.
  f.steps.source = gpu.steps_source;
  f.steps.detection = gpu.steps_detection;
  const uint64_t shift = gpu.steps_detection.marker_from_step;
  if (gpu.steps_source == "detected" || shift > 0) f.steps.count = gpu.steps_count;
  if (f.steps.source == "marker" && f.steps.count == 0) f.steps.source = "none";
  if (gpu.steps_off) {
    f.steps.source = "none";
    f.steps.detection.present = true;
    if (f.steps.detection.reason.empty())  // no GPU capture: the GPU side said nothing
      f.steps.detection.reason = "TRAINTIME_STEPS=off: steps are not told apart";
    if (ignored_markers > 0)
      f.steps.detection.reason += "; " + std::to_string(ignored_markers) +
                                  " step marker(s) (tt_step, NVTX step ranges) were ignored";
  }
  std::vector<Steps::Detail> cpu_detail = gpu.steps_off ? std::vector<Steps::Detail>() : cpu.steps.detail;
  for (Steps::Detail& d : cpu_detail) d.index += shift;
  f.steps.detail = join_step_detail(cpu_detail, gpu.detail);

  add_comm_rows(f, gpu, comm);
  add_communicators(f, gpu, comm);
  f.threads = cpu.threads;
  f.dropped_records = gpu.dropped_records;
  f.capture_stats = gpu.capture_stats;
  add_step_health(f.steps.detail, health.steps);
  add_step_memory(f.steps.detail, gpu.memory);
  f.memory = gpu.memory.run;

  f.warnings = identity.warnings;
  std::vector<const Section*> sections;
  for (const Section& m : modules) sections.push_back(&m);
  for (const Section* s : {&cpu.section, &gpu.section, &comm.section, &comm.cpu.section, &health.section})
    sections.push_back(s);
  add_self_cost(f, identity.cost, sections);
  for (const Section* s : sections) {
    f.warnings.insert(f.warnings.end(), s->warnings.begin(), s->warnings.end());
    if (s->data) f.module_data[std::string(s->name)] = s->data;
    if (s->name.empty() || s->counters.counters.empty()) continue;
    std::map<std::string, uint64_t>& into = f.modules[std::string(s->name)].counters;
    for (const auto& [key, count] : s->counters.counters) into[key] += count;
  }
  return f;
}

RankFile build_rank_file(const Identity& identity, const CpuSummary& cpu, const GpuSummary& gpu,
                         const CommSummary& comm, const std::vector<Section>& modules) {
  return build_rank_file(identity, cpu, gpu, comm, modules, HealthSummary());
}

RankFile build_rank_file(const Identity& identity, const CpuSummary& cpu, const GpuSummary& gpu,
                         const CommSummary& comm) {
  return build_rank_file(identity, cpu, gpu, comm, std::vector<Section>());
}

}  // namespace traintime::core
