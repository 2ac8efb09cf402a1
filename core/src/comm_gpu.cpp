// GPU time of NCCL work per (communicator, op) and the ring of recent collectives per
// communicator; group kernels are split across the group's members (comm_stats.h).
#include <algorithm>

#include "aggregator_internal.h"
#include "traintime/core/gpu_aggregator.h"

namespace traintime::core {

using namespace aggregator_detail;

GpuAggregator::CommRing& GpuAggregator::ring_for(uint32_t comm_id) {
  // Collectives come in runs on one communicator: the last one found is asked first (map nodes
  // are stable).
  if (last_ring_ != nullptr && last_ring_id_ == comm_id) return *last_ring_;
  CommRing& ring = rings_[comm_id];
  if (ring.ring.empty()) ring.ring.resize(std::max<uint32_t>(opt_.recent_collectives, 1));
  last_ring_id_ = comm_id;
  last_ring_ = &ring;
  return ring;
}

GpuAggregator::CommGpu& GpuAggregator::comm_gpu_for(uint64_t key) {
  // As ring_for: the last (communicator, op) first; unordered_map elements do not move on rehash.
  if (last_comm_gpu_ != nullptr && last_comm_key_ == key) return *last_comm_gpu_;
  CommGpu& g = comm_gpu_[key];
  last_comm_key_ = key;
  last_comm_gpu_ = &g;
  return g;
}

void GpuAggregator::add_comm_share(uint32_t comm_id, CommOp op, uint64_t seq, uint64_t bytes,
                                   uint64_t share, const GpuActivity& a, bool captured) {
  CommGpu& g = comm_gpu_for((static_cast<uint64_t>(comm_id) << 8) | static_cast<uint64_t>(op));
  const uint32_t b = size_bucket(bytes);
  g.gpu_ns += share;
  ++g.kernels;
  g.bucket_gpu_ns[b] += share;
  if (captured) {
    ++g.captured_calls;
    g.captured_bytes += bytes;
    ++g.bucket_captured_calls[b];
    g.bucket_captured_bytes[b] += bytes;
  }
  if (comm_id == 0 || seq == 0) return;
  CommRing& ring = ring_for(comm_id);
  ring.ops_completed = std::max(ring.ops_completed, seq);
  RingEntry& e = ring.ring[seq % ring.ring.size()];
  const uint64_t end = std::max(a.end_ns, a.start_ns);
  if (e.seq == seq) {  // another kernel of the same collective (e.g. a group spanning streams)
    e.start = std::min(e.start, a.start_ns);
    e.end = std::max(e.end, end);
  } else if (seq > e.seq) {
    e = RingEntry{seq, op, bytes, a.start_ns, end};
  }
}

void GpuAggregator::ingest_comm(const GpuActivity& a, const LaunchContext& ctx, uint64_t dur,
                                uint32_t name_id) {
  if (ctx.comm.op == CommOp::kNone) {  // found by kernel name: no interposition
    CommOp op = name_id > kOtherKernels ? name_op_[name_id] : comm_op_from_kernel_name(a.name);
    CommGpu& g = comm_gpu_for(kByNameKey | static_cast<uint64_t>(op));
    g.gpu_ns += dur;
    ++g.kernels;
    return;
  }
  if (ctx.comm.group_id != 0 && split_groups_) {  // split once its members are known
    pending_groups_.push_back(PendingGroupKernel{ctx.comm, a.start_ns, a.end_ns, dur});
    return;
  }
  add_comm_share(ctx.comm.comm_id, ctx.comm.op, ctx.comm.seq, ctx.comm.bytes, dur, a,
                 ctx.comm.captured);
}

void GpuAggregator::add_group_kernel(const PendingGroupKernel& k, const CommGroupRecord* group) {
  GpuActivity a;  // what add_comm_share reads of the record: its interval
  a.start_ns = k.start_ns;
  a.end_ns = k.end_ns;
  if (group == nullptr || group->count == 0) {
    ++group_lookups_missed_;
    add_comm_share(k.comm.comm_id, k.comm.op, k.comm.seq, k.comm.bytes, k.dur, a, k.comm.captured);
    return;
  }
  uint64_t total = 0;
  for (uint32_t i = 0; i < group->count; ++i) total += group->members[i].bytes;
  uint64_t given = 0;
  for (uint32_t i = 0; i < group->count; ++i) {
    const CommGroupMember& m = group->members[i];
    uint64_t share;
    if (i + 1 == group->count) {
      share = k.dur - given;  // the remainder, so the shares add up to the kernel exactly
    } else if (total > 0) {
      share = static_cast<uint64_t>(static_cast<unsigned __int128>(k.dur) * m.bytes / total);
    } else {
      share = k.dur / group->count;
    }
    given += share;
    add_comm_share(m.comm_id, m.op, m.seq, m.bytes, share, a, k.comm.captured);
  }
}

}  // namespace traintime::core
