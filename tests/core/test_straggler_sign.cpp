// StragglerSign (core/straggler_sign.h): the local sign that turns NCCL's ProxyStep on with
// TRAINTIME_NCCL_PROXY_STEPS=auto — a collective far beyond its op's recent durations of the
// same size on its communicator — and what must not raise it.
#include <catch2/catch.hpp>

#include "traintime/core/straggler_sign.h"

namespace {

using traintime::core::CommOp;
using traintime::core::Communicator;
using traintime::core::RecentCollective;
using traintime::core::StragglerSign;

constexpr uint64_t kMs = 1'000'000;

// A communicator whose ring holds collectives of `op` and `bytes` lasting `durations` (ns), in order.
Communicator comm(const std::vector<uint64_t>& durations, CommOp op = CommOp::kAllReduce, uint64_t bytes = 1 << 20,
                  uint64_t first_seq = 1) {
  Communicator c;
  c.id = "c0";
  c.size = 2;
  uint64_t t = 1'000'000'000;
  for (std::size_t k = 0; k < durations.size(); ++k) {
    c.recent.push_back(RecentCollective{first_seq + k, op, bytes, t, t + durations[k], 0});
    t += durations[k] + 10 * kMs;
  }
  c.ops_enqueued = c.ops_completed = first_seq + durations.size() - 1;
  return c;
}

}  // namespace

TEST_CASE("straggler sign: a collective far beyond its op's recent durations raises it, once", "[straggler]") {
  StragglerSign sign;
  CHECK_FALSE(sign.observe({comm({2 * kMs, 2 * kMs, 2 * kMs, 2 * kMs, 2 * kMs})}));
  // The next look: a peer is late, this rank waited 40 ms in the same op of the same size.
  CHECK(sign.observe({comm({2 * kMs, 2 * kMs, 2 * kMs, 2 * kMs, 2 * kMs, 40 * kMs})}));
  // Already looked at: not raised again by the same collective.
  CHECK_FALSE(sign.observe({comm({2 * kMs, 2 * kMs, 2 * kMs, 2 * kMs, 2 * kMs, 40 * kMs})}));
}

TEST_CASE("straggler sign: jitter, too few samples, another size or a pipeline's Recv do not raise it",
          "[straggler]") {
  SECTION("twice the median is jitter, not a straggler") {
    StragglerSign sign;
    CHECK_FALSE(sign.observe({comm({2 * kMs, 2 * kMs, 2 * kMs, 2 * kMs, 4 * kMs, 7 * kMs})}));
  }
  SECTION("far beyond in ratio but less than 1 ms beyond") {
    StragglerSign sign;
    CHECK_FALSE(sign.observe({comm({10'000, 10'000, 10'000, 10'000, 900'000})}));
  }
  SECTION("fewer than 4 earlier ones of that op") {
    StragglerSign sign;
    CHECK_FALSE(sign.observe({comm({2 * kMs, 2 * kMs, 2 * kMs, 40 * kMs})}));
  }
  SECTION("a larger collective of the same op is compared with its own size only") {
    StragglerSign sign;
    Communicator c = comm({2 * kMs, 2 * kMs, 2 * kMs, 2 * kMs});
    c.recent.push_back(RecentCollective{5, CommOp::kAllReduce, 64 << 20, 3'000'000'000, 3'000'000'000 + 60 * kMs, 0});
    CHECK_FALSE(sign.observe({c}));
  }
  SECTION("a Recv waiting for the previous pipeline stage") {
    StragglerSign sign;
    CHECK_FALSE(sign.observe({comm({2 * kMs, 2 * kMs, 2 * kMs, 2 * kMs, 2 * kMs, 90 * kMs}, CommOp::kRecv)}));
  }
  SECTION("a CPU process group's collectives") {
    StragglerSign sign;
    Communicator c = comm({2 * kMs, 2 * kMs, 2 * kMs, 2 * kMs, 2 * kMs, 90 * kMs});
    c.cpu_clock = true;
    CHECK_FALSE(sign.observe({c}));
  }
}
