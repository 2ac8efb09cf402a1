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
//
// A reader (traintime-report --watch) reads the file while the job writes it. Version 2 guards
// every block a writer changes in place with a sequence word, odd while the block is being
// written (a seqlock): the two step blocks and the two slots. read_live_record reads the header's
// words before and after the whole file; a block whose word was odd or moved in between is read
// again, and skipped when it keeps moving (the other step block, the other complete slot). A
// process killed mid-write leaves that block's word odd: the reader skips it the same way.
// Version 1 records (no sequence words) are still read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "traintime/core/rank_file.h"

namespace traintime::core {

inline constexpr char kLiveRecordMagic[8] = {'T', 'T', 'L', 'I', 'V', 'E', '\n', '\0'};
inline constexpr uint64_t kLiveRecordVersion = 2;  // the version written; 1 is still read
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

// One step block: `seq` odd while `steps` is being stored (0: never written).
struct LiveStepsBlock {
  uint64_t seq;
  LiveSteps steps;
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
  // Per slot: odd while the slot (its offset, capacity, length and text) is being written.
  uint64_t slot_seq[2];
  // The block the last step went to (the writer's own; a reader takes the block with the most
  // steps among those complete). Steps alternate between the blocks, so a kill or a read in the
  // middle of one step's stores still finds the step before complete in the other.
  uint64_t steps_newest;
  LiveStepsBlock steps[2];
};
static_assert(sizeof(LiveRecordHeader) <= kLiveRecordHeaderBytes);
static_assert(offsetof(LiveRecordHeader, current) == 24 && offsetof(LiveRecordHeader, signal) == 80 &&
              offsetof(LiveRecordHeader, slot_seq) == 88 && offsetof(LiveRecordHeader, steps) == 112 &&
              sizeof(LiveStepsBlock) == 80 && sizeof(LiveSteps) == 72,
              "the record layout is a file format: change kLiveRecordVersion with it");

// Version 1's header (no sequence words), read only.
struct LiveRecordHeaderV1 {
  char magic[8];
  uint64_t version;
  uint64_t header_bytes;
  uint64_t current;
  uint64_t slot_offset[2];
  uint64_t slot_bytes[2];
  uint64_t slot_capacity[2];
  uint64_t signal;
  uint64_t steps_current;  // steps[steps_current] is complete (kLiveRecordNone: none)
  LiveSteps steps[2];
};
static_assert(offsetof(LiveRecordHeaderV1, steps) == 96, "version 1's layout is fixed");

// ---- Writing (the preload; one writer per block: the stepping thread for the step blocks, the
// refreshing thread for the slots). `h` points into the MAP_SHARED page. ----

// A fresh header: no slot, no steps; the magic stored last, so a reader sees all or nothing.
void live_record_init(LiveRecordHeader* h) noexcept;
// One step's counters into the block not holding the newest ones. No lock, no syscall.
void live_record_store_steps(LiveRecordHeader* h, const LiveSteps& steps) noexcept;
// A whole rank file's text into the slot that is not `current` (its word odd meanwhile), moved
// to *file_end, with room to grow, when it does not fit; published as `current` once written.
// `fd` is the record's file. false when the write failed (the slot is then left unused).
bool live_record_write_slot(LiveRecordHeader* h, int fd, uint64_t* file_end, const std::string& text) noexcept;

// The exit_reason of a file written on (or a record left by) a terminating signal: kSigterm,
// kSigint, kSigabrt, else kSignal. Async-signal-safe.
ExitReason signal_exit_reason(uint64_t sig);

// True when `bytes` starts like a record (the reader's dispatch).
bool is_live_record(const std::string& bytes);

// The whole record at `path` into *bytes, read consistently against a writer (the header's
// sequence words before and after; a block that moved is read again, up to a few times within
// about 20 ms, then marked in *bytes as being written, so rank_file_from_live_record skips it).
// false with *error = the reason alone ("cannot open: ...", "read failed": the caller names the
// file) when the file cannot be read. errno is preserved.
bool read_live_record(const std::string& path, std::string* bytes, std::string* error);

// The record's rank file: the newest complete slot, its steps brought up to the header's
// counters, exit_reason "killed" (or "signal SIGxxx" when the handler saw one) and snapshot
// true. nullopt with *error = the reason (no reason prefix, no path) when it has no complete
// slot or is damaged. Throws nothing.
std::optional<RankFile> rank_file_from_live_record(const std::string& bytes, std::string* error);

}  // namespace traintime::core
