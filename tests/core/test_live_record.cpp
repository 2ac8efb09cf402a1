// The always-current record (core/live_record.h): the reader behind read_rank_file takes the
// newest complete slot and the header's later step counters; a record without a complete slot,
// a truncated one or another version is refused with a reason.
#include <catch2/catch.hpp>

#include <csignal>
#include <cstring>
#include <string>

#include "traintime/core/live_record.h"
#include "traintime/core/rank_file_json.h"
#include <nlohmann/json.hpp>

using namespace traintime::core;

namespace {

RankFile slot_file(uint64_t steps) {
  RankFile f;
  f.schema = "traintime/1";
  f.job_id = "job-7";
  f.rank = 1;
  f.world_size = 2;
  f.role = Role::kRank;
  f.host = "node3";
  f.pid = 4242;
  f.snapshot = true;
  f.exit_reason = "snapshot";
  f.steps.count = steps;
  f.steps.warmup = 2;
  f.communicators.push_back({});
  f.communicators.back().id = "00000000000000ab";
  f.communicators.back().size = 2;
  f.communicators.back().ops_enqueued = 7;
  f.communicators.back().ops_completed = 6;
  f.communicators.back().in_flight.push_back({7, CommOp::kAllReduce, 4096});
  return f;
}

// A record as the preload writes it: the header, then slot `current` at its offset; the other
// slot holds `stale` text (a slot being rewritten when the process died).
std::string record(const RankFile& f, uint64_t current, const LiveSteps* steps, uint64_t sig = 0) {
  const std::string text = rank_file_to_json(f).dump();
  LiveRecordHeader h;
  std::memset(&h, 0, sizeof h);
  std::memcpy(h.magic, kLiveRecordMagic, sizeof h.magic);
  h.version = kLiveRecordVersion;
  h.header_bytes = kLiveRecordHeaderBytes;
  h.current = current;
  h.slot_offset[0] = kLiveRecordHeaderBytes;
  h.slot_capacity[0] = text.size() + 100;
  h.slot_offset[1] = kLiveRecordHeaderBytes + h.slot_capacity[0];
  h.slot_capacity[1] = text.size() + 100;
  h.slot_bytes[current > 1 ? 0 : current] = text.size();
  h.slot_bytes[current == 1 ? 0 : 1] = 10;
  h.signal = sig;
  h.steps_current = kLiveRecordNone;
  if (steps) {
    h.steps_current = 1;
    h.steps[1] = *steps;
  }
  std::string bytes(kLiveRecordHeaderBytes + h.slot_capacity[0] + h.slot_capacity[1], '\0');
  std::memcpy(&bytes[0], &h, sizeof h);
  const uint64_t at = h.slot_offset[current > 1 ? 0 : current];
  std::memcpy(&bytes[at], text.data(), text.size());
  const uint64_t other = h.slot_offset[current == 1 ? 0 : 1];
  std::memcpy(&bytes[other], "{\"schema\":", 10);
  return bytes;
}

}  // namespace

TEST_CASE("a record reads as its newest slot's rank file, marked as killed", "[live_record]") {
  const std::string bytes = record(slot_file(5), 1, nullptr);
  REQUIRE(is_live_record(bytes));
  std::string error;
  const std::optional<RankFile> f = rank_file_from_live_record(bytes, &error);
  INFO(error);
  REQUIRE(f);
  CHECK(f->job_id == "job-7");
  CHECK(f->rank == 1);
  CHECK(f->steps.count == 5);
  CHECK(f->snapshot);
  CHECK(f->exit_reason == "killed");
  REQUIRE(f->communicators.size() == 1);
  REQUIRE(f->communicators[0].in_flight.size() == 1);
  CHECK(f->communicators[0].in_flight[0].seq == 7);
}

TEST_CASE("a record's step counters count the steps finished after its slot", "[live_record]") {
  LiveSteps later{9, 90, 900, 7, 7000, 900, 1100, 70, 700};
  const std::optional<RankFile> f = rank_file_from_live_record(record(slot_file(5), 0, &later), nullptr);
  REQUIRE(f);
  CHECK(f->steps.count == 9);
  CHECK(f->steps.samples == 90);
  CHECK(f->steps.tokens == 900);
  CHECK(f->steps.wall_ns.count == 7);
  CHECK(f->steps.wall_ns.total_ns == 7000);
  CHECK(f->steps.wall_ns.mean_ns == 1000);
  CHECK(f->steps.wall_ns.min_ns == 900);
  CHECK(f->steps.wall_ns.max_ns == 1100);
  CHECK(f->steps.samples_per_s == Approx(70 / 7e-6));

  LiveSteps earlier{3, 30, 300, 1, 1000, 1000, 1000, 10, 100};  // older than the slot: ignored
  const std::optional<RankFile> g = rank_file_from_live_record(record(slot_file(5), 0, &earlier), nullptr);
  REQUIRE(g);
  CHECK(g->steps.count == 5);
}

TEST_CASE("a record says the signal its process was ending by", "[live_record]") {
  const std::optional<RankFile> f =
      rank_file_from_live_record(record(slot_file(2), 0, nullptr, SIGABRT), nullptr);
  REQUIRE(f);
  CHECK(f->exit_reason == "signal SIGABRT");
}

TEST_CASE("a record without a complete slot, truncated, or of another version is refused",
          "[live_record]") {
  std::string error;
  CHECK_FALSE(rank_file_from_live_record(record(slot_file(2), kLiveRecordNone, nullptr), &error));
  CHECK(error.find("no complete rank file") != std::string::npos);

  std::string cut = record(slot_file(2), 1, nullptr);
  cut.resize(cut.size() - 150);
  CHECK_FALSE(rank_file_from_live_record(cut, &error));
  CHECK(error.find("truncated") != std::string::npos);

  std::string other = record(slot_file(2), 0, nullptr);
  other[8] = 9;  // version
  CHECK_FALSE(rank_file_from_live_record(other, &error));
  CHECK(error.find("version 9") != std::string::npos);

  CHECK_FALSE(is_live_record("{\"schema\": \"traintime/1\"}"));
}
