// Reading the always-current record (core/live_record.h): the newest complete slot's rank file,
// brought up to the steps the header counted after it.
#include "traintime/core/live_record.h"

#include <csignal>
#include <cstring>
#include <exception>

#include <nlohmann/json.hpp>

#include "traintime/core/rank_file_json.h"

namespace traintime::core {
namespace {

// Brings the slot's steps up to the header's counters (taken at a later step than the slot).
void apply_steps(Steps& s, const LiveSteps& h) {
  if (h.count <= s.count) return;
  s.count = h.count;
  s.samples = h.samples;
  s.tokens = h.tokens;
  s.wall_ns.count = h.measured;
  s.wall_ns.total_ns = h.measured_wall_ns;
  s.wall_ns.min_ns = h.min_wall_ns;
  s.wall_ns.max_ns = h.max_wall_ns;
  s.wall_ns.mean_ns = h.measured ? h.measured_wall_ns / h.measured : 0;
  if (h.measured_wall_ns > 0) {
    const double secs = static_cast<double>(h.measured_wall_ns) / 1e9;
    s.samples_per_s = static_cast<double>(h.measured_samples) / secs;
    s.tokens_per_s = static_cast<double>(h.measured_tokens) / secs;
  }
}

}  // namespace

const char* signal_exit_reason(uint64_t sig) {
  switch (sig) {
    case SIGTERM: return "signal SIGTERM";
    case SIGINT: return "signal SIGINT";
    case SIGABRT: return "signal SIGABRT";
  }
  return "signal";
}

bool is_live_record(const std::string& bytes) {
  return bytes.size() >= sizeof kLiveRecordMagic &&
         std::memcmp(bytes.data(), kLiveRecordMagic, sizeof kLiveRecordMagic) == 0;
}

std::optional<RankFile> rank_file_from_live_record(const std::string& bytes, std::string* error) {
  auto fail = [&](const std::string& why) {
    if (error) *error = why;
    return std::nullopt;
  };
  LiveRecordHeader h;
  if (!is_live_record(bytes) || bytes.size() < sizeof h) return fail("not a traintime record (bad header)");
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.version != kLiveRecordVersion)
    return fail("record version " + std::to_string(h.version) + " (this reader knows " +
                std::to_string(kLiveRecordVersion) + ")");
  if (h.current > 1) return fail("record holds no complete rank file yet (the process died at its start)");
  const uint64_t off = h.slot_offset[h.current], len = h.slot_bytes[h.current];
  if (off < h.header_bytes || off > bytes.size() || len > bytes.size() - off)
    return fail("record truncated (its newest slot lies past the end of the file)");
  std::optional<RankFile> f;
  try {
    f = rank_file_from_json(nlohmann::json::parse(bytes.data() + off, bytes.data() + off + len));
  } catch (const std::exception& e) {
    return fail(std::string("record's rank file unreadable: ") + e.what());
  }
  if (h.steps_current <= 1) apply_steps(f->steps, h.steps[h.steps_current]);
  f->snapshot = true;
  f->exit_reason = h.signal != 0 ? signal_exit_reason(h.signal) : "killed";
  return f;
}

}  // namespace traintime::core
