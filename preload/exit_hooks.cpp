// How a recording process ends (DESIGN §2): the rank file is written once, at normal exit or on
// a terminating SIGTERM/SIGINT/SIGABRT, plus periodic snapshots. Installed at the first record.
//
// Signals. The handler does only async-signal-safe work: it writes the signal number into a
// pipe and waits (poll, bounded) for the writer thread to answer, then restores the prior
// disposition and re-raises, so the process ends exactly as it would have without traintime.
// A prior SIGTERM/SIGINT handler that is a function (Python's SIGINT handler, a trainer's
// checkpoint-on-SIGTERM) is simply chained: the application then decides, and a normal exit
// writes the file. SIGABRT (abort(): PyTorch's NCCL watchdog, a failed assertion, glibc's heap
// checks) is different: the process ends whatever a handler does, so the file is written first
// and a prior function handler (Python's faulthandler) is chained after; when it returns,
// abort() itself restores the default action and the process dies by SIGABRT, core dump and
// all. abort() can come from any thread, inside malloc or holding any lock: the handler itself
// takes no lock and allocates nothing and the writer thread does the work. The thread the signal
// stopped may hold any lock, for ever (an abort() on tt-cupti in the middle of ingest holds the
// aggregator's): the writer waits for each lock until one deadline, kSignalLockWaitMs after it
// started, and takes what that module last published for a lock it did not get (the file then
// says summary_from_last_publish). The handler's own wait is bounded too (kHandlerWaitMs), and the
// always-current record (live_record.cpp) holds the rank's data whatever happens.
// Threads of ours (tt-writer, tt-snapshot, here; tt-hang, tt-cupti, tt-nvml elsewhere) start
// through support/threads.h: none takes the application's asynchronous signals, and each still
// takes the synchronous ones (an abort() or a fault on it, or a tgkill'd SIGABRT, ends the
// process through this handler like one on any thread).
// Lock order: core/lock_order.h. Output::mu is taken by the writer, snapshot and watchdog threads
// and by atexit, after the modules' summaries, never in the handler; the modules' stop (GPU
// capture's shutdown among them) runs before it is taken.
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "session.h"
#include "traintime/core/live_record.h"
#include "traintime/support/log.h"
#include "traintime/support/threads.h"

namespace traintime::preload {
namespace {

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGABRT};
constexpr int kHandlerWaitMs = 20000;  // a stuck write must not keep a dying process alive
// How long the signal-time write waits, in all, for the locks it needs (core/lock_order.h): a
// healthy holder releases them within milliseconds; one the signal stopped never does.
constexpr auto kSignalLockWait = std::chrono::milliseconds(500);
// Before them, how long a terminating signal's write waits for CUPTI's records: the processing
// thread's forced flush and ingest (milliseconds on an H200; never on the writer's own thread).
constexpr auto kSignalFlushWait = std::chrono::milliseconds(600);
// After its signal-time write, how long a rank waits for its peers' (see wait_for_peers).
constexpr int kPeerWaitMs = 1000;
// TRAINTIME_PROMETHEUS_FILE's period when TRAINTIME_SNAPSHOT_SEC is unset.
constexpr uint32_t kPrometheusDefaultSec = 10;

struct sigaction g_prior[NSIG];
std::atomic<bool> g_handling{false};
std::atomic<bool> g_finished{false};
std::atomic<pid_t> g_writer_pid{0};  // the process whose writer thread reads the pipes
std::atomic<long> g_writer_tid{0};   // that thread: an abort() on it must not wait for itself
int g_request_fd[2] = {-1, -1};
int g_done_fd[2] = {-1, -1};

// Leaked: a snapshot thread may be waiting on them while static destructors run at exit.
struct SnapshotControl {
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
};
SnapshotControl* g_snapshots = nullptr;

void call_prior(const struct sigaction& prior, int sig, siginfo_t* info, void* context) {
  if (prior.sa_flags & SA_SIGINFO)
    prior.sa_sigaction(sig, info, context);
  else
    prior.sa_handler(sig);
}

void on_signal(int sig, siginfo_t* info, void* context) {
  const int saved = errno;
  const struct sigaction& prior = g_prior[sig];
  const bool prior_is_function = prior.sa_handler != SIG_DFL && prior.sa_handler != SIG_IGN;
  if (prior_is_function && sig != SIGABRT) {
    call_prior(prior, sig, info, context);
    errno = saved;
    return;
  }
  live_record_signal(sig);  // a store into the mapped record: the process is ending by `sig`
  if (g_handling.exchange(true)) {
    // A repeated signal (launchers send several) while the first is being handled: the first
    // one ends the process. An abort() returning here ends it at once (abort restores SIG_DFL).
    if (prior_is_function) call_prior(prior, sig, info, context);
    errno = saved;
    return;
  }
  if (g_writer_pid.load() == getpid() && g_request_fd[1] >= 0 &&
      g_writer_tid.load() != syscall(SYS_gettid)) {
    const unsigned char byte = static_cast<unsigned char>(sig);
    if (write(g_request_fd[1], &byte, 1) == 1) {
      pollfd p = {g_done_fd[0], POLLIN, 0};
      while (poll(&p, 1, kHandlerWaitMs) < 0 && errno == EINTR) {
      }
    }
  }
  if (prior_is_function) {  // SIGABRT: the application's handler, then abort() goes on
    call_prior(prior, sig, info, context);
    errno = saved;
    return;
  }
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  raise(sig);
  errno = saved;  // reached only if the default action does not terminate
}

// The number of ranks on this host, as the launcher says (else the world's size).
int64_t local_ranks(int64_t world) {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE", "MPI_LOCALNRANKS"}) {
    const char* v = std::getenv(var);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (end != v && *end == '\0' && n > 0) return n;
  }
  return world;
}

// A launcher that forwards SIGTERM to every rank (mpirun) kills all the others as soon as the
// first one dies: on a busy host a rank that has not been scheduled yet then leaves no file.
// So a rank that wrote its signal-time file waits, at most kPeerWaitMs, until the ranks of its
// host have written theirs: each appends one byte to the job's hidden signal file in the output
// directory and the wait ends when it holds as many bytes as this host has ranks (on a shared
// filesystem, other hosts' bytes only end it sooner). The process still ends by its signal.
void wait_for_peers(Session& s) {
  int64_t rank = 0, world = 1;
  effective_rank(s, &rank, &world);
  if (world <= 1 || s.output.role != core::Role::kRank || s.output.dir.empty()) return;
  const int64_t peers = local_ranks(world);
  if (peers <= 1) return;
  const std::string path = s.output.dir + "/.signal-" + s.identity.job_id;
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return;
  const unsigned char one = 1;
  const bool counted = write(fd, &one, 1) == 1;
  close(fd);
  if (!counted) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kPeerWaitMs);
  struct stat st;
  while (std::chrono::steady_clock::now() < deadline) {
    if (stat(path.c_str(), &st) != 0 || st.st_size >= peers) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void writer_loop() {
  g_writer_tid.store(syscall(SYS_gettid));
  for (;;) {
    unsigned char sig = 0;
    const ssize_t n = read(g_request_fd[0], &sig, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n != 1) return;
    finish(core::signal_exit_reason(sig), true);
    if (Session* s = session()) wait_for_peers(*s);
    const unsigned char done = 1;
    while (write(g_done_fd[1], &done, 1) < 0 && errno == EINTR) {
    }
  }
}

// Every period: the rank-file snapshot (TRAINTIME_SNAPSHOT_SEC) and the Prometheus file
// (TRAINTIME_PROMETHEUS_FILE), whichever is on.
void snapshot_loop(uint32_t period_sec) {
  SnapshotControl* c = g_snapshots;
  std::unique_lock<std::mutex> lock(c->mu);
  for (;;) {
    if (c->cv.wait_for(lock, std::chrono::seconds(period_sec), [c] { return c->stop; })) return;
    lock.unlock();
    if (Session* s = session()) {
      if (s->identity.config.snapshot_sec > 0) {
        // Measured (CUPTI flushed and ingested) before the file lock: core/lock_order.h.
        const Measured m = measure(*s, true, core::Deadline::never());
        std::lock_guard<std::mutex> state_lock(s->output.mu);
        write_rank_file_locked(*s, true, core::ExitReason::kSnapshot, m);
      }
      write_prometheus(*s);
    }
    lock.lock();
  }
}

void install_signal_handlers() {
  for (int sig : kSignals) {
    struct sigaction current;
    if (sigaction(sig, nullptr, &current) != 0) continue;
    // Never over an inherited SIG_IGN (nohup, launchers): the process must keep ignoring it.
    if (current.sa_handler == SIG_IGN) continue;
    // After a fork our handler is already installed, with the prior disposition saved.
    if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_signal) continue;
    g_prior[sig] = current;
    struct sigaction mine;
    std::memset(&mine, 0, sizeof mine);
    mine.sa_sigaction = on_signal;
    mine.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&mine.sa_mask);
    for (int other : kSignals) sigaddset(&mine.sa_mask, other);
    sigaction(sig, &mine, nullptr);
  }
}

// A terminating signal is being handled on another thread (an abort() on a library's thread while
// the main thread returns from main): without traintime the process dies by it. Its handler is
// writing the file and then raises it again, so the exit waits for that, bounded, rather than end
// the process with the exit status first, which would turn a crash into a success.
void wait_for_signal_in_progress() {
  if (!g_handling.load()) return;
  const int saved = errno;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kHandlerWaitMs + kPeerWaitMs);
  while (g_handling.load() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  errno = saved;
}

void on_exit_handler() {
  wait_for_signal_in_progress();
  finish(core::ExitReason::kExit, false);
}

}  // namespace

void exit_hook_after_cuda() noexcept {
  static std::atomic<bool> registered{false};  // atexit entries survive fork: once per image
  if (!registered.exchange(true)) std::atexit(on_exit_handler);  // finish() runs once
}

void install_exit_hooks(Session& s) {
  static bool atexit_registered = false;  // atexit entries survive fork: once per image
  if (!atexit_registered) {
    atexit_registered = true;
    std::atexit(on_exit_handler);
  }
  if (g_request_fd[0] < 0 && pipe2(g_request_fd, O_CLOEXEC) == 0) {
    if (pipe2(g_done_fd, O_CLOEXEC) != 0) {
      close(g_request_fd[0]);
      close(g_request_fd[1]);
      g_request_fd[0] = g_request_fd[1] = -1;
    }
  }
  if (g_request_fd[0] >= 0 && support::start_detached(support::OwnThread::kWriter, writer_loop))
    g_writer_pid.store(getpid());
  install_signal_handlers();
  const core::Config& c = s.identity.config;
  if (c.snapshot_sec > 0 || !c.prometheus_file.empty()) {
    if (!g_snapshots) g_snapshots = new SnapshotControl();
    const uint32_t period = c.snapshot_sec > 0 ? c.snapshot_sec : kPrometheusDefaultSec;
    support::start_detached(support::OwnThread::kSnapshot, [period] { snapshot_loop(period); });
  }
  start_watchdog(s);
}

void finish(core::ExitReason exit_reason, bool signal) {
  Session* s = session();
  if (!s || !s->recorder.activated.load(std::memory_order_acquire)) return;
  if (g_finished.exchange(true)) return;
  const int saved = errno;
  // On a terminating signal, CUPTI's records first, bounded: the processing thread flushes and
  // ingests them while this thread waits (an abort() on a healthy process loses nothing that
  // ran; the GPU work of its last steps was still in CUPTI's buffers).
  const bool flushed =
      signal && stop_modules(core::exit_reason_name(exit_reason).data(), true, core::Deadline::after(kSignalFlushWait));
  // Lock order: core/lock_order.h. On a terminating signal every lock is waited for until one
  // deadline at most: the thread the signal stopped may hold any of them for ever.
  const core::Deadline deadline =
      signal ? core::Deadline::after(kSignalLockWait) : core::Deadline::never();
  if (g_snapshots) {
    std::unique_lock<std::mutex> lock(g_snapshots->mu, std::defer_lock);
    // Not had in time: the snapshot thread is the one the signal stopped. It writes nothing
    // after the final file anyway (Output::final_written).
    if (core::lock_until(lock, deadline)) {
      g_snapshots->stop = true;
      g_snapshots->cv.notify_all();
    }
  }
  stop_watchdog(deadline);
  // At exit the modules stop, in the reverse of the table's order, before their summaries are
  // taken: the GPU health sampler takes no sample after the final file's summary, and records
  // still in CUPTI's buffers are flushed and ingested.
  if (!signal) stop_modules(core::exit_reason_name(exit_reason).data(), false, core::Deadline::never());
  // On a signal: launchers kill a signalled rank soon after, so what has been processed is
  // written; CUPTI was waited on only as long as kSignalFlushWait (its flush can block on a lock
  // the interrupted thread holds).
  Measured m = measure(*s, false, deadline);
  if (signal && !flushed && m.gpu.capture == core::GpuCapture::kCupti)
    m.gpu.section.note(std::string("written on ") + std::string(core::exit_reason_name(exit_reason)) +
                       " before CUPTI's records were all in (its flush did not finish within " +
                       std::to_string(kSignalFlushWait.count()) +
                       " ms): GPU work of the latest steps is missing");
  std::unique_lock<std::mutex> lock(s->output.mu, std::defer_lock);
  if (!core::lock_until(lock, deadline)) {
    // The thread the signal stopped holds the file lock (a snapshot or the watchdog in the
    // middle of its write): the always-current record, with the signal in its header, is the
    // rank's data, and the report reads it.
    errno = saved;
    return;
  }
  const bool ok = write_rank_file_locked(*s, false, exit_reason, m);
  s->output.final_written = true;
  const bool announce = ok && s->output.role == core::Role::kRank;
  const std::string dir = s->output.dir;
  lock.unlock();
  // Once more with the final figures at exit. Not on a signal: the live figures' locks may be
  // held by the thread it stopped, and the file of the last period stays.
  if (!signal) write_prometheus(*s);
  if (announce) {
    int64_t rank = 0, world = 1;
    effective_rank(*s, &rank, &world);
    if (rank == 0) support::notice("rank files (one per rank, world size {}) are in {}", world, dir);
  }
  errno = saved;
}

void reset_exit_hooks_after_fork() {
  // The writer and snapshot threads did not survive the fork; their pipes and control block
  // belong to the parent. The child gets its own when it records something.
  for (int* fds : {g_request_fd, g_done_fd}) {
    if (fds[0] >= 0) close(fds[0]);
    if (fds[1] >= 0) close(fds[1]);
    fds[0] = fds[1] = -1;
  }
  g_writer_pid.store(0);
  g_writer_tid.store(0);
  g_handling.store(false);
  g_finished.store(false);
  g_snapshots = nullptr;  // leaked: its mutex may have been held by a thread that is gone
}

}  // namespace traintime::preload
