// Reading the always-current record (core/live_record.h): the newest complete slot's rank file,
// brought up to the steps the header counted after it.
#include "traintime/core/live_record.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <exception>
#include <thread>

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

// A step block or slot word: complete (even) and written at least once.
bool complete(uint64_t seq) { return seq != 0 && seq % 2 == 0; }

// Marks a block as being written in the bytes read (its word made odd): the parser skips it.
// The writer's fence between a block's odd word and its contents. GCC's TSan refuses thread
// fences (-Wtsan); its builds get a compiler barrier, which keeps the stores in order on x86,
// and the only readers of these words are other processes or pread, which TSan does not see.
inline void release_fence() noexcept {
#if defined(__SANITIZE_THREAD__)
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
#else
  std::atomic_thread_fence(std::memory_order_release);
#endif
}

void mark_torn(std::string* bytes, std::size_t word_offset) {
  uint64_t v = 1;
  std::memcpy(bytes->data() + word_offset, &v, sizeof v);
}

bool pread_all(int fd, char* out, std::size_t len, uint64_t off, std::size_t* got) {
  *got = 0;
  while (*got < len) {
    const ssize_t n = ::pread(fd, out + *got, len - *got, static_cast<off_t>(off + *got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;
    *got += static_cast<std::size_t>(n);
  }
  return true;
}

// The whole file from offset 0, however much it grew since it was opened.
bool read_whole(int fd, std::string* bytes) {
  struct stat st {};
  std::size_t size = ::fstat(fd, &st) == 0 && st.st_size > 0 ? static_cast<std::size_t>(st.st_size) + 1 : 65536;
  for (;;) {
    bytes->resize(size);
    std::size_t got = 0;
    if (!pread_all(fd, bytes->data(), size, 0, &got)) return false;
    if (got < size) {
      bytes->resize(got);
      return true;
    }
    size *= 2;
  }
}

// The two step blocks read again on their own, after the whole file: a step is stored in
// nanoseconds while reading a file of rank files takes far longer, so the blocks are taken from
// small reads of just them. Three reads each try: the words, the blocks, the words again; a block
// whose word stood still and even across them was read whole in the middle one (one read alone
// proves nothing: the kernel's copy need not read the word before the counters). A block that
// never stood still in kTries tries is marked torn: skipped.
void reread_steps(int fd, std::string* bytes) {
  constexpr std::size_t kAt = offsetof(LiveRecordHeader, steps);
  constexpr std::size_t kLen = 2 * sizeof(LiveStepsBlock);
  if (bytes->size() < kAt + kLen) return;
  constexpr int kTries = 256;
  bool have[2] = {false, false};
  LiveStepsBlock before[2], blocks[2], after[2];
  for (int attempt = 0; attempt < kTries && !(have[0] && have[1]); ++attempt) {
    std::size_t got = 0;
    for (LiveStepsBlock* r : {before, blocks, after})
      if (!pread_all(fd, reinterpret_cast<char*>(r), kLen, kAt, &got) || got < kLen) return;
    for (int b = 0; b < 2; ++b) {
      if (have[b] || before[b].seq != after[b].seq || before[b].seq % 2 != 0 || blocks[b].seq != before[b].seq)
        continue;
      std::memcpy(bytes->data() + kAt + b * sizeof(LiveStepsBlock), &blocks[b], sizeof blocks[b]);
      have[b] = true;
    }
  }
  for (int b = 0; b < 2; ++b)
    if (!have[b]) mark_torn(bytes, kAt + b * sizeof(LiveStepsBlock));
}

}  // namespace

void live_record_init(LiveRecordHeader* h) noexcept {
  std::memset(static_cast<void*>(h), 0, sizeof *h);
  h->version = kLiveRecordVersion;
  h->header_bytes = kLiveRecordHeaderBytes;
  h->current = kLiveRecordNone;
  h->steps_newest = 1;  // the first step goes to block 0
  release_fence();
  std::memcpy(h->magic, kLiveRecordMagic, sizeof h->magic);
}

void live_record_store_steps(LiveRecordHeader* h, const LiveSteps& steps) noexcept {
  const uint64_t b = h->steps_newest == 0 ? 1 : 0;
  LiveStepsBlock& block = h->steps[b];
  const uint64_t seq = __atomic_load_n(&block.seq, __ATOMIC_RELAXED);
  __atomic_store_n(&block.seq, seq + 1, __ATOMIC_RELAXED);  // odd: being written
  release_fence();      // ... before any of the counters
  block.steps = steps;
  __atomic_store_n(&block.seq, seq + 2, __ATOMIC_RELEASE);  // even: complete
  h->steps_newest = b;
}

bool live_record_write_slot(LiveRecordHeader* h, int fd, uint64_t* file_end, const std::string& text) noexcept {
  const uint64_t k = __atomic_load_n(&h->current, __ATOMIC_RELAXED) == 0 ? 1 : 0;
  const uint64_t seq = __atomic_load_n(&h->slot_seq[k], __ATOMIC_RELAXED) | 1;
  __atomic_store_n(&h->slot_seq[k], seq, __ATOMIC_RELAXED);  // odd: being written
  release_fence();
  if (h->slot_capacity[k] < text.size()) {  // the slot moves to the end of the file, with room
    h->slot_capacity[k] = text.size() + text.size() / 2 + 4096;
    h->slot_offset[k] = *file_end;
    *file_end += h->slot_capacity[k];
  }
  bool written = true;
  const char* data = text.data();
  std::size_t len = text.size();
  uint64_t off = h->slot_offset[k];
  while (len > 0 && written) {
    const ssize_t n = ::pwrite(fd, data, len, static_cast<off_t>(off));
    if (n < 0 && errno == EINTR) continue;
    written = n > 0;
    if (!written) break;
    data += n;
    len -= static_cast<std::size_t>(n);
    off += static_cast<uint64_t>(n);
  }
  // A slot that failed to write holds nothing complete (length 0) until a later write succeeds.
  h->slot_bytes[k] = written ? text.size() : 0;
  __atomic_store_n(&h->slot_seq[k], seq + 1, __ATOMIC_RELEASE);  // even: complete
  if (written) __atomic_store_n(&h->current, k, __ATOMIC_RELEASE);
  return written;
}

bool read_live_record(const std::string& path, std::string* bytes, std::string* error) {
  const int saved = errno;
  auto fail = [&](const std::string& why) {
    if (error) *error = why;
    bytes->clear();
    errno = saved;
    return false;
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(std::string("cannot open: ") + std::strerror(errno));
  // A few tries, a little apart: a slot is rewritten about once a second and a step's stores
  // take nanoseconds, so a second read almost always finds both still.
  constexpr int kTries = 8;
  LiveRecordHeader before{}, after{};
  bool ok = true;
  for (int attempt = 0; attempt < kTries; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::microseconds(500 << std::min(attempt, 3)));
    std::size_t got = 0;
    if (!pread_all(fd, reinterpret_cast<char*>(&before), sizeof before, 0, &got) || !read_whole(fd, bytes) ||
        !pread_all(fd, reinterpret_cast<char*>(&after), sizeof after, 0, &got)) {
      ok = false;
      break;
    }
    if (got < sizeof after || !is_live_record(*bytes) || after.version != kLiveRecordVersion ||
        bytes->size() < sizeof after)
      break;  // not a version-2 record (or too short to be one): the parser says what it is
    auto steady = [&](const uint64_t& b, const uint64_t& a) { return b == a && b % 2 == 0; };
    const bool slot_ok = before.current == after.current &&
                         (before.current > 1 || steady(before.slot_seq[before.current], after.slot_seq[before.current]));
    // The step blocks are taken by reread_steps below, whatever they did meanwhile.
    if (slot_ok) break;
    if (attempt + 1 == kTries) {  // still moving: every slot that did is skipped
      for (int k = 0; k < 2; ++k)
        if (!steady(before.slot_seq[k], after.slot_seq[k]) || before.current != after.current)
          mark_torn(bytes, offsetof(LiveRecordHeader, slot_seq) + k * sizeof(uint64_t));
    }
  }
  if (ok && is_live_record(*bytes) && after.version == kLiveRecordVersion) reread_steps(fd, bytes);
  ::close(fd);
  if (!ok) return fail("read failed");
  errno = saved;
  return true;
}

ExitReason signal_exit_reason(uint64_t sig) {
  switch (sig) {
    case SIGTERM: return ExitReason::kSigterm;
    case SIGINT: return ExitReason::kSigint;
    case SIGABRT: return ExitReason::kSigabrt;
  }
  return ExitReason::kSignal;
}

bool is_live_record(const std::string& bytes) {
  return bytes.size() >= sizeof kLiveRecordMagic &&
         std::memcmp(bytes.data(), kLiveRecordMagic, sizeof kLiveRecordMagic) == 0;
}

namespace {

std::optional<RankFile> slot_file(const std::string& bytes, uint64_t header_bytes, uint64_t off, uint64_t len,
                                  std::string* why) {
  if (off < header_bytes || off > bytes.size() || len > bytes.size() - off) {
    *why = "record truncated (its newest slot lies past the end of the file)";
    return std::nullopt;
  }
  try {
    return rank_file_from_json(parse_rank_file_json(bytes.data() + off, bytes.data() + off + len));
  } catch (const std::exception& e) {
    *why = std::string("record's rank file unreadable: ") + e.what();
    return std::nullopt;
  }
}

std::optional<RankFile> from_v1(const std::string& bytes, std::string* why) {
  LiveRecordHeaderV1 h;
  if (bytes.size() < sizeof h) {
    *why = "not a traintime record (bad header)";
    return std::nullopt;
  }
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.current > 1) {
    *why = "record holds no complete rank file yet (the process died at its start)";
    return std::nullopt;
  }
  std::optional<RankFile> f = slot_file(bytes, h.header_bytes, h.slot_offset[h.current], h.slot_bytes[h.current], why);
  if (f && h.steps_current <= 1) apply_steps(f->steps, h.steps[h.steps_current]);
  if (f) f->exit_reason = h.signal != 0 ? signal_exit_reason(h.signal) : ExitReason::kKilled;
  return f;
}

std::optional<RankFile> from_v2(const std::string& bytes, std::string* why) {
  LiveRecordHeader h;
  if (bytes.size() < sizeof h) {
    *why = "not a traintime record (bad header)";
    return std::nullopt;
  }
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.current > 1) {
    *why = "record holds no complete rank file yet (the process died at its start)";
    return std::nullopt;
  }
  // The current slot, unless it was being written as it was read (then the other one, when it
  // holds a complete older file).
  uint64_t k = h.current;
  if (!complete(h.slot_seq[k])) {
    const uint64_t other = k ^ 1;
    if (!complete(h.slot_seq[other]) || h.slot_bytes[other] == 0) {
      *why = "record's rank file was being rewritten whenever it was read; read it again";
      return std::nullopt;
    }
    k = other;
  }
  std::optional<RankFile> f = slot_file(bytes, h.header_bytes, h.slot_offset[k], h.slot_bytes[k], why);
  if (!f) return f;
  const LiveSteps* steps = nullptr;
  for (const LiveStepsBlock& b : h.steps)
    if (complete(b.seq) && (!steps || b.steps.count > steps->count)) steps = &b.steps;
  if (steps) apply_steps(f->steps, *steps);
  f->exit_reason = h.signal != 0 ? signal_exit_reason(h.signal) : ExitReason::kKilled;
  return f;
}

}  // namespace

std::optional<RankFile> rank_file_from_live_record(const std::string& bytes, std::string* error) {
  std::string why;
  std::optional<RankFile> f;
  uint64_t version = 0;
  if (!is_live_record(bytes) || bytes.size() < 16) {
    why = "not a traintime record (bad header)";
  } else {
    std::memcpy(&version, bytes.data() + 8, sizeof version);
    if (version == 1) f = from_v1(bytes, &why);
    else if (version == kLiveRecordVersion) f = from_v2(bytes, &why);
    else why = "record version " + std::to_string(version) + " (this reader knows 1 and " +
               std::to_string(kLiveRecordVersion) + ")";
  }
  if (!f) {
    if (error) *error = why;
    return std::nullopt;
  }
  f->snapshot = true;
  return f;
}

}  // namespace traintime::core
