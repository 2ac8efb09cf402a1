// The nccl module's data section (rank file proxy_progress and proxy_steps, docs/schema.md):
// where each channel of a collective in flight had got to, from NCCL's profiler plugin events,
// for the hang report. Written and read by the module's format (nccl_format.cpp, in
// traintime_formats: libtraintime.so and traintime-report both link it); filled by the plugin's
// progress table (nccl/src/proxy_progress.h) when the rank file is assembled.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "traintime/core/rank_file.h"

namespace traintime::nccl {

// One channel of a collective in flight (rank file proxy_progress[]): a network transfer with one
// peer in one direction (ProxyOp, with ProxyStep when it was on), or a kernel channel that had
// not finished (intra-node transports have no proxy: KernelCh only).
struct ProxyProgress {
  static constexpr uint64_t kUnknown = ~uint64_t{0};  // not measured: absent from the file
  std::string communicator;  // core::Communicator::id; empty for a PXN op (another process's, below)
  uint64_t nccl_seq = kUnknown;  // NCCL's seqNumber of its collective (per op type), when known
  core::CommOp op = core::CommOp::kUnknown;  // the collective's, when known
  int32_t rank = -1;     // the rank whose operation it is (a PXN op: another process's rank)
  uint32_t channel = 0;
  int32_t peer = -1;     // -1: a kernel channel (no peer)
  std::string direction;  // "send", "recv" or "kernel"
  std::string state;      // the state it waits in (docs/schema.md)
  std::string source;     // "proxy_step" (bytes known), "proxy_op" or "kernel_channel"
  bool pxn = false;       // a ProxyOp of another process, progressed by this process's proxy
  uint64_t steps_total = kUnknown;  // the op's network steps (ProxyOp nSteps)
  uint64_t steps_posted = kUnknown;
  uint64_t steps_done = kUnknown;
  uint64_t bytes_done = kUnknown;
  uint64_t since_ns = 0;  // CLOCK_MONOTONIC when it entered `state` (it has not moved since)
  uint64_t idle_ns = 0;   // how long before the file was written that was
};

// The module's data section (core::ModuleData): present once NCCL registered traintime as its
// profiler plugin; absent in files from before the plugin.
struct ProxyProgressSection : core::ModuleData {
  // Channels of collectives in flight, at most the progress table's 1024 rows; empty (and the
  // key omitted from the file) when none.
  std::vector<ProxyProgress> rows;
  // TRAINTIME_NCCL_PROXY_STEPS as the plugin applied it ("auto", "on", "off").
  std::string proxy_steps;
};

// The rank file's proxy_progress and proxy_steps as the module's reader read them; null when the
// file has neither (the plugin was not registered, an older file, or a section newer than this
// reader: RankFile::read_notes).
const ProxyProgressSection* proxy_progress(const core::RankFile& f);

}  // namespace traintime::nccl
