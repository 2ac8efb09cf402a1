// Collectives the library cannot see from C: PyTorch's gloo and MPI process groups run them on
// the CPU, inside libtorch, so no interposer or CUPTI record ever shows them. The Python package
// (traintime.torch) times each one and hands it over (tt_api_v1::collective); this keeps them per
// process group as NCCL's call table and GPU ring keep NCCL's: calls, bytes and time per op, and a
// bounded ring of the recent ones with their sequence numbers and times, so the report lines the
// same collective up across ranks (docs/schema.md, communicators[] with "clock": "cpu").
//
// Not a hot path: one short lock per collective (milliseconds of communication each).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "traintime/core/activity.h"
#include "traintime/core/comm_stats.h"
#include "traintime/core/lock_order.h"
#include "traintime/core/rank_file.h"
#include "traintime/core/section.h"

namespace traintime::core {

// One collective as the caller timed it, on CLOCK_MONOTONIC: from when it could start (issued,
// and its group's previous collective done) to its completion, waiting for the peers included.
struct CpuCollective {
  std::string group;    // the process group's id: 16 hex digits, equal on every member
  std::string backend;  // "gloo", "mpi", ...
  uint32_t group_size = 0;
  uint32_t group_rank = 0;
  CommOp op = CommOp::kUnknown;
  uint64_t bytes = 0;  // the nccl-tests convention, as comm[].bytes
  uint64_t seq = 0;    // 1, 2, ... per group in call order: equal on every member
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
};

class CpuCollectives {
 public:
  static constexpr std::size_t kMaxGroups = 64;  // beyond: counted, not kept
  static constexpr std::size_t kRecent = 256;    // ring per group, as NCCL's

  // Keeps c (a malformed one, without a group or with end before start, is counted as dropped).
  void record(const CpuCollective& c);

  struct OpTotals {
    uint64_t calls = 0, bytes = 0, cpu_ns = 0;
  };
  struct Group {
    std::string id, backend;
    uint32_t size = 0, rank = 0;
    uint64_t ops_enqueued = 0;  // the highest sequence number seen
    uint64_t ops_completed = 0;
    std::array<OpTotals, kCommOpCount> ops{};
    std::vector<RecentCollective> recent;  // oldest first; times are the CPU's
  };
  struct Summary {
    std::vector<Group> groups;  // in the order they were first seen
    // Rank file modules.collectives: "recorded" and "dropped" (too many groups, or malformed).
    Section section{"collectives"};
  };
  // `deadline` bounds the wait for the lock (a terminating signal's write, lock_order.h): past
  // it, the summary last handed out, and the section says so.
  Summary summary(const Deadline& deadline = Deadline::never()) const;

 private:
  struct Ring {
    Group group;
    std::vector<RecentCollective> ring;  // kRecent slots, written round-robin
    uint64_t written = 0;
  };
  mutable std::mutex mu_;
  std::vector<Ring> groups_;
  uint64_t recorded_ = 0;
  uint64_t dropped_ = 0;
  mutable LastPublished<Summary> published_;
};

}  // namespace traintime::core
