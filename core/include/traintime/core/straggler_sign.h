// A straggler seen from one rank (TRAINTIME_NCCL_PROXY_STEPS=auto, docs/report.md "Hang
// forensics"). Each rank sees only itself: a rank whose peer is late waits for it inside the
// collective, so its own collectives take far longer than the same op of the same size took just
// before on that communicator. That is the local sign: a collective completed since the last look
// whose GPU time (recent[]: start to end) is more than kFactor times, and kMinExcessNs beyond, the
// median of the op's earlier durations of the same size in the ring (at least kMinSamples of
// them). A straggler from the very first step leaves no such jump; the report's wait-free
// analysis across ranks names it anyway. Send and Recv are left out: a pipeline stage waiting for
// the previous one is their normal state.
//
// Runs on the watchdog thread over the rank file it assembles anyway (hang_watchdog.cpp): nothing
// on an application or NCCL thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "traintime/core/rank_file.h"

namespace traintime::core {

class StragglerSign {
 public:
  static constexpr uint64_t kFactor = 4;
  static constexpr uint64_t kMinExcessNs = 1'000'000;  // 1 ms: below it, jitter
  static constexpr std::size_t kMinSamples = 4;

  // One look at this rank's communicators: true when a collective completed since the last look
  // shows the sign.
  bool observe(const std::vector<Communicator>& comms);

 private:
  std::map<std::string, uint64_t> looked_;  // per communicator id: the newest seq looked at
};

}  // namespace traintime::core
