// The always-current record (DESIGN §2): the one file a rank leaves when it is killed without a
// chance to write its rank file (SIGKILL, the OOM killer, a node's time limit). Darshan's way: a
// versioned binary layout shared by the runtime that writes it and the reader (read_rank_file),
// kept current in a file-backed shared mapping, so whatever moment the process dies the kernel
// still holds the newest complete state in the file.
//
// Layout (host byte order and alignment; read on the kind of machine that wrote it):
//   [0, kHeaderBytes)  LiveRecordHeader, mapped MAP_SHARED by the writer. Its step counters are
//                      stored by every step as it ends (no syscall, no lock, no allocation).
//   slots              two areas holding a whole rank file as JSON (schema traintime/1, the
//                      rank-file writer's output), refreshed by a background thread; the one
//                      named by `current` is complete, the other is the one being written.
// The reader takes the complete slot's rank file and, when the header holds more finished steps
// than that file, the header's step counters: so the record holds every step the CPU side
// finished, and the rest as of the last refresh. The final rank file replaces the record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "traintime/core/rank_file.h"

namespace traintime::core {

inline constexpr char kLiveRecordMagic[8] = {'T', 'T', 'L', 'I', 'V', 'E', '\n', '\0'};
inline constexpr uint64_t kLiveRecordVersion = 1;
inline constexpr std::size_t kLiveRecordHeaderBytes = 4096;
inline constexpr uint64_t kLiveRecordNone = 2;  // `current` / `steps_current` before any write

// Cumulative step counters after the latest finished step (the StepTracker's figures).
struct LiveSteps {
  uint64_t count;  // tt_step calls, warm-up included
  uint64_t samples;
  uint64_t tokens;
  uint64_t measured;  // post-warm-up steps, and their wall time, shortest, longest, samples, tokens
  uint64_t measured_wall_ns;
  uint64_t min_wall_ns;
  uint64_t max_wall_ns;
  uint64_t measured_samples;
  uint64_t measured_tokens;
};

struct LiveRecordHeader {
  char magic[8];
  uint64_t version;
  uint64_t header_bytes;
  // The slot holding the newest complete rank file (0 or 1; kLiveRecordNone: none yet). A slot
  // is written completely, then published by storing its index here (release order).
  uint64_t current;
  uint64_t slot_offset[2];
  uint64_t slot_bytes[2];  // length of the JSON text in the slot
  uint64_t slot_capacity[2];
  // The terminating signal the process got (SIGTERM, SIGINT, SIGABRT), stored by the handler;
  // 0 while none. A record with a signal says the process was ending by it.
  uint64_t signal;
  // Double-buffered step counters: steps[steps_current] is complete (kLiveRecordNone: none).
  uint64_t steps_current;
  LiveSteps steps[2];
};
static_assert(sizeof(LiveRecordHeader) <= kLiveRecordHeaderBytes);
static_assert(offsetof(LiveRecordHeader, current) == 24 && offsetof(LiveRecordHeader, signal) == 80 &&
              offsetof(LiveRecordHeader, steps) == 96 && sizeof(LiveSteps) == 72,
              "the record layout is a file format: change kLiveRecordVersion with it");

// The exit_reason of a file written on (or a record left by) a terminating signal:
// "signal SIGTERM", "signal SIGINT", "signal SIGABRT", else "signal".
const char* signal_exit_reason(uint64_t sig);

// True when `bytes` starts like a record (the reader's dispatch).
bool is_live_record(const std::string& bytes);

// The record's rank file: the newest complete slot, its steps brought up to the header's
// counters, exit_reason "killed" (or "signal SIGxxx" when the handler saw one) and snapshot
// true. nullopt with *error = the reason (no reason prefix, no path) when it has no complete
// slot or is damaged. Throws nothing.
std::optional<RankFile> rank_file_from_live_record(const std::string& bytes, std::string* error);

}  // namespace traintime::core
