#include "traintime/support/threads.h"

#include <pthread.h>
#include <time.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <mutex>
#include <string>
#include <utility>

namespace traintime::support {
namespace {

constexpr std::array<std::string_view, kOwnThreadCount> kNames = {
    "tt-cupti", "tt-writer", "tt-snapshot", "tt-hang", "tt-nvml"};

constexpr bool names_fit() {
  for (std::string_view n : kNames)
    if (n.empty() || n.size() > 15 || n.substr(0, 3) != "tt-") return false;
  return true;
}
static_assert(names_fit(), "a thread's name is tt-<what>, at most 15 characters (the kernel's comm)");

// Raised on the thread that aborts or faults: never blocked (see threads.h).
constexpr int kSynchronous[] = {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS};

// The caller's mask while one of our threads is made, restored on every way out; errno kept.
class MaskWhileStarting {
 public:
  MaskWhileStarting() noexcept {
    sigset_t mask;
    own_thread_mask(&mask);
    masked_ = pthread_sigmask(SIG_SETMASK, &mask, &old_) == 0;
  }
  ~MaskWhileStarting() {
    if (masked_) pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    errno = saved_errno_;
  }
  MaskWhileStarting(const MaskWhileStarting&) = delete;
  MaskWhileStarting& operator=(const MaskWhileStarting&) = delete;

 private:
  int saved_errno_ = errno;
  sigset_t old_;
  bool masked_ = false;
};

// The CPU time of our threads (own_thread_cpu). A live thread is in a slot with its CPU clock;
// when it ends it adds its last reading to its kind's total and frees its slot, both under the
// leaf lock, so a reader holding the lock never reads the clock of a thread that is gone. One
// per process image: a fork child makes a fresh one (the parent's lock may have been held by a
// thread the child does not have).
struct Accounting {
  struct Slot {
    bool live = false;
    OwnThread which = OwnThread::kCupti;
    clockid_t clock = 0;
  };
  static constexpr std::size_t kSlots = 32;  // live threads of ours at once (five kinds today)
  std::mutex mu;  // a leaf (core/lock_order.h)
  std::array<Slot, kSlots> slots{};
  std::array<uint64_t, kOwnThreadCount> ended_ns{};
  std::array<bool, kOwnThreadCount> started{};
};
std::atomic<Accounting*> g_accounting{new Accounting()};

uint64_t cpu_ns(clockid_t clock) {
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return 0;
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The calling thread (of kind `which`) counts from now; -1: no slot (its time is not seen).
int join_accounting(OwnThread which) {
  Accounting* a = g_accounting.load(std::memory_order_acquire);
  clockid_t clock;
  if (pthread_getcpuclockid(pthread_self(), &clock) != 0) return -1;
  std::lock_guard<std::mutex> lock(a->mu);
  a->started[static_cast<std::size_t>(which)] = true;
  for (std::size_t i = 0; i < Accounting::kSlots; ++i) {
    if (a->slots[i].live) continue;
    a->slots[i] = {true, which, clock};
    return static_cast<int>(i);
  }
  return -1;
}

void leave_accounting(OwnThread which, int slot) {
  Accounting* a = g_accounting.load(std::memory_order_acquire);
  const uint64_t used = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
  std::lock_guard<std::mutex> lock(a->mu);
  a->ended_ns[static_cast<std::size_t>(which)] += used;
  if (slot >= 0) a->slots[static_cast<std::size_t>(slot)].live = false;
}

// What runs first on every thread of ours.
std::function<void()> wrapped(OwnThread which, std::function<void()> fn) {
  return [which, fn = std::move(fn)] {
    // The name is a copy of the table's, NUL-terminated (string_view promises no terminator).
    char name[16] = {};
    const std::string_view n = thread_name(which);
    n.copy(name, sizeof name - 1);
    pthread_setname_np(pthread_self(), name);
    const int slot = join_accounting(which);
    fn();
    leave_accounting(which, slot);
  };
}

}  // namespace

std::string_view thread_name(OwnThread which) noexcept {
  const auto i = static_cast<std::size_t>(which);
  return i < kNames.size() ? kNames[i] : std::string_view("tt-thread");
}

void own_thread_mask(sigset_t* mask) noexcept {
  sigfillset(mask);
  for (int sig : kSynchronous) sigdelset(mask, sig);
}

std::thread start_thread(OwnThread which, std::function<void()> fn) {
  MaskWhileStarting mask;
  return std::thread(wrapped(which, std::move(fn)));
}

std::vector<core::ThreadCost> own_thread_cpu(const core::Deadline& deadline) {
  Accounting* a = g_accounting.load(std::memory_order_acquire);
  std::array<uint64_t, kOwnThreadCount> ns{};
  std::array<bool, kOwnThreadCount> started{};
  {
    std::unique_lock<std::mutex> lock(a->mu, std::defer_lock);
    if (!core::lock_until(lock, deadline)) return {};
    ns = a->ended_ns;
    started = a->started;
    for (const Accounting::Slot& s : a->slots)
      if (s.live) ns[static_cast<std::size_t>(s.which)] += cpu_ns(s.clock);
  }
  std::vector<core::ThreadCost> out;
  for (std::size_t i = 0; i < kOwnThreadCount; ++i)
    if (started[i]) out.push_back({std::string(thread_name(static_cast<OwnThread>(i))), ns[i]});
  return out;
}

void forget_own_threads_after_fork() noexcept {
  try {
    g_accounting.store(new Accounting(), std::memory_order_release);  // the parent's is leaked
  } catch (...) {
  }
}

bool start_detached(OwnThread which, std::function<void()> fn) noexcept {
  try {
    start_thread(which, std::move(fn)).detach();
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace traintime::support
