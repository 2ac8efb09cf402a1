// The always-current record (core/live_record.h, DESIGN §2): rank-%05d.live beside the rank file
// it stands in for, kept current so that a SIGKILL, the OOM killer or a node's time limit still
// leaves the report something to read. Darshan's way: the counters that change every step live
// in a file-backed MAP_SHARED page, so each step's store is in the file the moment it is made and
// survives the process; the whole rank file (regions, categories, comm, in-flight collectives,
// threads) is refreshed into one of two slots by the watchdog thread (hang_watchdog.cpp) and
// published by one store once complete. The final rank file replaces the record.
//
// Threads: the step sink runs on the stepping thread under the StepTracker's lock (single
// writer of the step counters); the signal handler stores the signal number; everything else
// runs under Output::mu. The mapping is never unmapped (a step may be storing into it while the
// record is dropped): a dropped record is unlinked and its page left mapped.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "session.h"
#include "traintime/core/live_record.h"
#include "traintime/core/rank_file_json.h"
#include "traintime/support/log.h"
#include <nlohmann/json.hpp>

namespace traintime::preload {
namespace {

std::atomic<core::LiveRecordHeader*> g_header{nullptr};
// Under Output::mu.
int g_fd = -1;
std::string g_path;
uint64_t g_file_end = 0;
bool g_failed = false;  // creating it failed once: not retried (one warning)
// The largest rank file text written into a slot (self_cost.memory): read without Output::mu.
std::atomic<uint64_t> g_largest_text{0};

void on_step(const core::LiveSteps& steps) noexcept {
  if (core::LiveRecordHeader* h = g_header.load(std::memory_order_acquire)) core::live_record_store_steps(h, steps);
}

// The step counters go into the record as each step ends, except under TRAINTIME_STEPS=off: the
// rank file then has no steps (the markers end none), and a record read after a SIGKILL must not
// bring back the steps the final file would not have had.
void attach_step_sink(Session& s) {
  core::RegionRegistry* r = s.recorder.registry.load(std::memory_order_acquire);
  if (r && !steps_off(s)) r->steps().set_sink(on_step);
}

std::string record_path(const std::string& rank_file) {
  std::string p = rank_file;
  if (p.size() > 5 && p.compare(p.size() - 5, 5, ".json") == 0) p.resize(p.size() - 5);
  return p + ".live";
}

bool create(Session& s, const std::string& path) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return false;
  void* page = MAP_FAILED;
  if (ftruncate(fd, core::kLiveRecordHeaderBytes) == 0)
    page = mmap(nullptr, core::kLiveRecordHeaderBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (page == MAP_FAILED) {
    close(fd);
    unlink(path.c_str());
    return false;
  }
  auto* h = static_cast<core::LiveRecordHeader*>(page);
  core::live_record_init(h);
  g_fd = fd;
  g_path = path;
  g_file_end = core::kLiveRecordHeaderBytes;
  g_header.store(h, std::memory_order_release);
  attach_step_sink(s);
  return true;
}

}  // namespace

void live_record_update_locked(Session& s, const core::RankFile& f) {
  if (s.output.final_written || s.output.file_path.empty() || g_failed) return;
  const int saved = errno;
  const std::string path = record_path(s.output.file_path);
  if (g_fd >= 0 && g_path != path) {  // the rank file moved (the rank became known later)
    if (rename(g_path.c_str(), path.c_str()) == 0) g_path = path;
  }
  if (g_fd < 0 && !create(s, path)) {
    // Not a warning: a directory that cannot take it will not take the rank file either, and
    // that write says so in its one error line.
    g_failed = true;
    support::log(support::LogLevel::kInfo,
                 "cannot create the always-current record {} ({}); a rank killed outright "
                 "(SIGKILL, out of memory) will leave no file: check TRAINTIME_OUTPUT",
                 path, std::strerror(errno));
    errno = saved;
    return;
  }
  // A process without steps of its own yet may have made its registry after the record.
  attach_step_sink(s);
  core::LiveRecordHeader* h = g_header.load(std::memory_order_relaxed);
  const std::string text =
      core::rank_file_to_json(f).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > g_largest_text.load(std::memory_order_relaxed))
    g_largest_text.store(text.size(), std::memory_order_relaxed);
  if (core::live_record_write_slot(h, g_fd, &g_file_end, text)) note_written(text.size());
  errno = saved;
}

uint64_t live_record_bytes(const Session&) {
  const bool mapped = g_header.load(std::memory_order_acquire) != nullptr;
  return (mapped ? core::kLiveRecordHeaderBytes : 0) + g_largest_text.load(std::memory_order_relaxed);
}

void live_record_signal(int sig) noexcept {
  if (core::LiveRecordHeader* h = g_header.load(std::memory_order_acquire))
    __atomic_store_n(&h->signal, static_cast<uint64_t>(sig), __ATOMIC_RELAXED);
}

void live_record_remove_locked(Session& s) {
  core::LiveRecordHeader* h = g_header.exchange(nullptr, std::memory_order_acq_rel);
  if (core::RegionRegistry* r = s.recorder.registry.load(std::memory_order_acquire))
    r->steps().set_sink(nullptr);
  (void)h;  // left mapped: a step may still be storing into it
  if (g_fd < 0) return;
  const int saved = errno;
  unlink(g_path.c_str());
  close(g_fd);
  g_fd = -1;
  g_path.clear();
  errno = saved;
}

void live_record_reset_after_fork() {
  // The mapping is the parent's (shared with its file): the child must never store into it.
  g_header.store(nullptr, std::memory_order_release);
  if (g_fd >= 0) close(g_fd);
  g_fd = -1;
  g_path.clear();
  g_file_end = 0;
  g_failed = false;
  g_largest_text.store(0, std::memory_order_relaxed);
}

}  // namespace traintime::preload
