// The always-current record (core/live_record.h): the reader behind read_rank_file takes the
// newest complete slot and the header's later step counters; a record without a complete slot,
// a truncated one or another version is refused with a reason.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

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
  f.exit_reason = ExitReason::kSnapshot;
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
// slot holds `stale` text (a slot being rewritten when the process died, its word odd).
std::string record(const RankFile& f, uint64_t current, const LiveSteps* steps, uint64_t sig = 0) {
  const std::string text = rank_file_to_json(f).dump();
  LiveRecordHeader h;
  live_record_init(&h);
  const uint64_t cur = current > 1 ? 0 : current, other = current == 1 ? 0 : 1;
  h.current = current;
  h.slot_offset[0] = kLiveRecordHeaderBytes;
  h.slot_capacity[0] = text.size() + 100;
  h.slot_offset[1] = kLiveRecordHeaderBytes + h.slot_capacity[0];
  h.slot_capacity[1] = text.size() + 100;
  h.slot_bytes[cur] = text.size();
  h.slot_seq[cur] = 4;
  h.slot_bytes[other] = 10;
  h.slot_seq[other] = 5;
  h.signal = sig;
  if (steps) live_record_store_steps(&h, *steps);
  std::string bytes(kLiveRecordHeaderBytes + h.slot_capacity[0] + h.slot_capacity[1], '\0');
  std::memcpy(&bytes[0], &h, sizeof h);
  std::memcpy(&bytes[h.slot_offset[cur]], text.data(), text.size());
  std::memcpy(&bytes[h.slot_offset[other]], "{\"schema\":", 10);
  return bytes;
}

// The same as version 1 wrote it (no sequence words): still read.
std::string record_v1(const RankFile& f, const LiveSteps* steps) {
  const std::string text = rank_file_to_json(f).dump();
  LiveRecordHeaderV1 h;
  std::memset(&h, 0, sizeof h);
  std::memcpy(h.magic, kLiveRecordMagic, sizeof h.magic);
  h.version = 1;
  h.header_bytes = kLiveRecordHeaderBytes;
  h.current = 0;
  h.slot_offset[0] = kLiveRecordHeaderBytes;
  h.slot_capacity[0] = h.slot_bytes[0] = text.size();
  h.steps_current = kLiveRecordNone;
  if (steps) {
    h.steps_current = 1;
    h.steps[1] = *steps;
  }
  std::string bytes(kLiveRecordHeaderBytes + text.size(), '\0');
  std::memcpy(&bytes[0], &h, sizeof h);
  std::memcpy(&bytes[kLiveRecordHeaderBytes], text.data(), text.size());
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
  CHECK(f->exit_reason == ExitReason::kKilled);
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
  CHECK(f->exit_reason == ExitReason::kSigabrt);
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
  CHECK(error.find("knows 1 and 2") != std::string::npos);

  CHECK_FALSE(is_live_record("{\"schema\": \"traintime/1\"}"));
}

TEST_CASE("a version 1 record is still read", "[live_record]") {
  LiveSteps later{9, 90, 900, 7, 7000, 900, 1100, 70, 700};
  const std::optional<RankFile> f = rank_file_from_live_record(record_v1(slot_file(5), &later), nullptr);
  REQUIRE(f);
  CHECK(f->job_id == "job-7");
  CHECK(f->steps.count == 9);
  CHECK(f->exit_reason == ExitReason::kKilled);
  const std::optional<RankFile> g = rank_file_from_live_record(record_v1(slot_file(5), nullptr), nullptr);
  REQUIRE(g);
  CHECK(g->steps.count == 5);
}

TEST_CASE("a step block or slot left half-written is skipped for the complete one", "[live_record]") {
  // Steps alternate between the two blocks: a kill in the middle of the newer one's stores
  // leaves its word odd, and the step before, complete in the other block, is read.
  LiveSteps s7{7, 70, 700, 5, 5000, 900, 1100, 50, 500}, s8{8, 80, 800, 6, 6000, 900, 1100, 60, 600};
  std::string bytes = record(slot_file(5), 0, &s7);
  LiveRecordHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  live_record_store_steps(&h, s8);
  const uint64_t newest = h.steps_newest;
  h.steps[newest].seq |= 1;  // killed between its first and last store
  h.steps[newest].steps.count = 99;
  std::memcpy(&bytes[0], &h, sizeof h);
  std::optional<RankFile> f = rank_file_from_live_record(bytes, nullptr);
  REQUIRE(f);
  CHECK(f->steps.count == 7);

  // The newest slot read while it was rewritten: the older complete one stands in.
  h.steps[newest].seq += 1;
  h.steps[newest].steps.count = 8;
  h.slot_seq[0] = 7;  // slot 0 (current) odd
  h.slot_seq[1] = 2;
  std::memcpy(&bytes[0], &h, sizeof h);
  std::string error;
  f = rank_file_from_live_record(bytes, &error);
  CHECK_FALSE(f);  // slot 1 holds only the start of a file: unreadable, said so
  CHECK(error.find("unreadable") != std::string::npos);
  h.slot_bytes[1] = 0;  // never completed: nothing to fall back to
  std::memcpy(&bytes[0], &h, sizeof h);
  CHECK_FALSE(rank_file_from_live_record(bytes, &error));
  CHECK(error.find("being rewritten") != std::string::npos);
}

namespace {

// Every field a function of the step count: a read mixing two steps' stores cannot satisfy it.
LiveSteps steps_at(uint64_t n) { return {n, 10 * n, 100 * n, n, 1000 * n, 1000, 1000 + n, 10 * n, 100 * n}; }

}  // namespace

TEST_CASE("a reader never sees a record torn while its writer stores steps and slots", "[live_record]") {
  // The writer as the preload runs it: step counters stored into the MAP_SHARED page as fast as
  // the thread goes, and the slot rewritten over and over (its text growing, so slots move),
  // while this thread reads the file through read_rank_file as traintime-report --watch does.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tt-live-hammer-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "rank-00000.live").string();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, kLiveRecordHeaderBytes) == 0);
  void* page = ::mmap(nullptr, kLiveRecordHeaderBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  REQUIRE(page != MAP_FAILED);
  auto* h = static_cast<LiveRecordHeader*>(page);
  live_record_init(h);
  uint64_t file_end = kLiveRecordHeaderBytes;
  // A first slot and step before the reader starts: every read from then on must succeed.
  RankFile f = slot_file(0);
  f.job_id = "gen-0";
  f.host.clear();
  f.pid = 0;
  REQUIRE(live_record_write_slot(h, fd, &file_end, rank_file_to_json(f).dump()));
  live_record_store_steps(h, steps_at(1));

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> slots_written{0};
  // A step every 2 us (a fast training step is a millisecond): steps_writer spins between stores.
  auto spin_us = [](int us) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
    while (std::chrono::steady_clock::now() < until) {
    }
  };
  std::thread steps_writer([&] {
    for (uint64_t n = 2; !stop.load(std::memory_order_relaxed); ++n) {
      live_record_store_steps(h, steps_at(n));
      spin_us(2);
    }
  });
  // Slots large enough that copying one takes longer than rewriting the other, prepared ahead so
  // the writer does nothing but write: without the sequence words, reads come out torn.
  constexpr uint64_t kTexts = 16;
  auto host_of = [](uint64_t g) { return std::string(200000 + (g % kTexts) * 1000, 'h'); };
  std::vector<std::string> texts;
  for (uint64_t g = 1; g <= kTexts; ++g) {  // generation 0 is the first slot's
    RankFile s = slot_file(0);
    s.job_id = "gen-" + std::to_string(g);
    s.host = host_of(g);
    s.pid = static_cast<int64_t>(g);
    texts.push_back(rank_file_to_json(s).dump());
  }
  std::thread slot_writer([&] {
    for (uint64_t g = 1; !stop.load(std::memory_order_relaxed); ++g) {
      live_record_write_slot(h, fd, &file_end, texts[g % kTexts]);
      slots_written.fetch_add(1, std::memory_order_relaxed);
      // A slot every 0.5 ms, a thousand times the snapshot rate: reads still overlap writes often.
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  });
  // A read either succeeds with one consistent step block and one consistent slot, or says that the
  // slot moved under every one of its tries ("read it again"): --watch reads again a second later.
  // That refusal is honest, not torn; it happens when one read takes longer than many slot writes
  // (a sanitizer slows the copy of a 3 MB file some thirty times, the writer does not wait for it).
  // A torn read is any success with mixed data, or any other error.
  uint64_t reads = 0, last_count = 0, bad = 0, refused = 0;
  std::string first_bad;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  while (std::chrono::steady_clock::now() < until || reads < 200) {
    std::string error;
    const std::optional<RankFile> r = read_rank_file(path, &error);
    ++reads;
    bool ok = r.has_value();
    if (ok) {
      const Steps& st = r->steps;
      const uint64_t n = st.count;
      const uint64_t g = std::stoull(r->job_id.substr(4));
      ok = n >= last_count && st.samples == 10 * n && st.tokens == 100 * n && st.wall_ns.count == n &&
           st.wall_ns.total_ns == 1000 * n && st.wall_ns.max_ns == 1000 + n &&
           (g == 0 ? r->host.empty() : r->host == host_of(g)) && static_cast<uint64_t>(r->pid) == g;
      last_count = n;
      if (!ok) error = "slot " + std::to_string(g) + ", step " + std::to_string(n) + " read with samples " + std::to_string(st.samples) +
                       ", tokens " + std::to_string(st.tokens) + ", wall " + std::to_string(st.wall_ns.total_ns);
    }
    if (!r && error.find("being rewritten whenever it was read; read it again") != std::string::npos) {
      ++refused;
      continue;
    }
    if (!ok && bad++ == 0) first_bad = error;
  }
  stop = true;
  steps_writer.join();
  slot_writer.join();
  ::munmap(page, kLiveRecordHeaderBytes);
  ::close(fd);
  std::filesystem::remove_all(dir);
  INFO(reads << " reads (" << refused << " refused as being rewritten) against " << slots_written.load()
             << " slot writes; first bad read: " << first_bad);
  CHECK(slots_written.load() > 10);
  CHECK(last_count > 2);
  CHECK(bad == 0);
  // Most reads get a file: a reader that always refused would pass the line above.
  CHECK(refused * 2 < reads);
}
