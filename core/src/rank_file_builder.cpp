#include "traintime/core/rank_file_builder.h"

#include <array>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <unordered_map>
#include <utility>

namespace traintime::core {
namespace {

std::string hex_id(uint64_t id) {
  char text[17];
  std::snprintf(text, sizeof text, "%016" PRIx64, id);
  return text;
}

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
    RegionRow& row = f.regions[idx];
    row.gpu_busy_ns = g.gpu_busy_ns;
    row.gpu_sum_ns = g.gpu_sum_ns;
    row.gpu_span_ns = g.gpu_span_ns;
    row.kernels = g.kernels;
    row.by_category = g.by_category;
    row.top_kernels = g.top_kernels;
  }
}

// Comm rows per (op, comm_size): CPU calls/bytes from the call table, GPU time from records.
void add_comm_rows(RankFile& f, const GpuSummary& gpu, const CommSummary& comm) {
  struct RowAcc {
    uint64_t calls = 0, bytes = 0, gpu_ns = 0;
    bool bytes_known = true;
    std::array<SizeBucket, kSizeBuckets> sizes{};
  };
  std::map<std::pair<CommOp, uint32_t>, RowAcc> rows;
  for (const CommCallTable::CommSnapshot& cs : comm.calls.comms) {
    for (std::size_t o = 1; o < kCommOpCount; ++o) {
      const CommCallTable::OpCounts& oc = cs.ops[o];
      if (oc.calls == 0) continue;
      RowAcc& row = rows[{static_cast<CommOp>(o), cs.size}];
      row.calls += oc.calls;
      row.bytes += oc.bytes;
      for (uint32_t b = 0; b < kSizeBuckets; ++b) {
        row.sizes[b].calls += oc.bucket_calls[b];
        row.sizes[b].bytes += oc.bucket_bytes[b];
      }
    }
  }
  for (const GpuSummary::Comm& g : gpu.comm) {
    if (g.comm_index == GpuSummary::kByName) {
      RowAcc& row = rows[{g.op, 0}];
      row.calls += g.kernels;  // one kernel per collective when NCCL is not interposed
      row.gpu_ns += g.gpu_ns;
      row.bytes_known = false;
      continue;
    }
    const CommCallTable::CommSnapshot* cs = comm.calls.find(g.comm_index);
    RowAcc& row = rows[{g.op, cs != nullptr ? cs->size : 0}];
    row.gpu_ns += g.gpu_ns;
    row.calls += g.captured_calls;
    row.bytes += g.captured_bytes;
    for (uint32_t b = 0; b < kSizeBuckets; ++b) {
      row.sizes[b].gpu_ns += g.bucket_gpu_ns[b];
      row.sizes[b].calls += g.bucket_captured_calls[b];
      row.sizes[b].bytes += g.bucket_captured_bytes[b];
    }
  }
  // Rows ordered by op name, then size (as the schema's readers have always seen them).
  std::map<std::pair<std::string, uint32_t>, std::pair<CommOp, const RowAcc*>> ordered;
  for (const auto& [key, ra] : rows)
    ordered[{std::string(comm_op_name(key.first)), key.second}] = {key.first, &ra};
  for (const auto& [key, value] : ordered) {
    const RowAcc& ra = *value.second;
    CommRow row;
    row.op = key.first;
    row.comm_size = key.second;
    row.calls = ra.calls;
    row.bytes = ra.bytes;
    row.bytes_known = ra.bytes_known;
    row.gpu_ns = ra.gpu_ns;
    // bytes per ns is 1e9 bytes/s: algbw over all calls is total bytes / total GPU time.
    row.algbw_gbps = (ra.bytes_known && ra.gpu_ns > 0)
                         ? static_cast<double>(ra.bytes) / static_cast<double>(ra.gpu_ns)
                         : 0.0;
    row.busbw_gbps = row.algbw_gbps * busbw_factor(value.first, row.comm_size);
    for (uint32_t b = 0; b < kSizeBuckets; ++b) {
      SizeBucket sb = ra.sizes[b];
      if (sb.calls == 0 && sb.gpu_ns == 0) continue;
      sb.lo_bytes = size_bucket_lo(b);
      row.sizes.push_back(sb);
    }
    f.comm.push_back(std::move(row));
  }
}

// One entry per call-table index seen by either side, in index order.
void add_communicators(RankFile& f, const GpuSummary& gpu, const CommSummary& comm) {
  std::map<uint32_t, Communicator> comms;
  for (const CommCallTable::CommSnapshot& cs : comm.calls.comms) {
    Communicator& c = comms[cs.index];
    c.id = hex_id(cs.stable_id);
    c.size = cs.size;
    c.rank = cs.rank;
    c.ops_enqueued = cs.ops_enqueued;
  }
  for (const GpuSummary::Ring& ring : gpu.rings) {
    auto [it, fresh] = comms.try_emplace(ring.comm_index);
    Communicator& c = it->second;
    if (fresh) {
      const CommCallTable::CommSnapshot* cs = comm.calls.find(ring.comm_index);
      c.id = hex_id(cs != nullptr ? cs->stable_id : 0);
    }
    c.ops_completed = ring.ops_completed;
    c.recent = ring.recent;
  }
  for (auto& [index, c] : comms) f.communicators.push_back(std::move(c));
}

}  // namespace

RankFile build_rank_file(const Identity& identity, const CpuSummary& cpu, const GpuSummary& gpu,
                         const CommSummary& comm) {
  RankFile f;
  f.job_id = identity.job_id;
  f.rank = identity.rank;
  f.world_size = identity.world_size;
  f.role = identity.role;
  f.host = identity.host;
  f.pid = identity.pid;
  f.snapshot = identity.snapshot;
  f.exit_reason = identity.exit_reason;
  f.start_unix_ns = identity.start_unix_ns;
  f.end_unix_ns = identity.end_unix_ns;
  f.gpu_capture = gpu.capture;
  f.gpu_capture_reason = gpu.capture_reason;

  for (std::size_t c = 0; c < kCategoryCount; ++c)
    f.categories[std::string(kCategoryNames[c])] = gpu.categories[c];
  for (const char* k : {"HtoD", "DtoH", "DtoD", "PtoP"}) f.memcpy[k] = MemcpyStat{};
  for (const auto& [kind, stat] : gpu.memcpy) f.memcpy[kind] = stat;

  add_regions(f, cpu, gpu);
  f.unbalanced_pops = cpu.unbalanced_pops;

  f.steps = cpu.steps;
  f.steps.totals = gpu.totals;
  f.steps.partial_final_step = gpu.partial_final_step;
  f.steps.detail = gpu.detail;

  add_comm_rows(f, gpu, comm);
  add_communicators(f, gpu, comm);
  f.dropped_records = gpu.dropped_records;

  f.warnings = identity.warnings;
  for (const auto* list : {&cpu.warnings, &gpu.warnings, &comm.warnings})
    f.warnings.insert(f.warnings.end(), list->begin(), list->end());
  return f;
}

}  // namespace traintime::core
