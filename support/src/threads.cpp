#include "traintime/support/threads.h"

#include <pthread.h>

#include <array>
#include <cerrno>
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

// What runs first on every thread of ours.
std::function<void()> wrapped(OwnThread which, std::function<void()> fn) {
  return [which, fn = std::move(fn)] {
    // The name is a copy of the table's, NUL-terminated (string_view promises no terminator).
    char name[16] = {};
    const std::string_view n = thread_name(which);
    n.copy(name, sizeof name - 1);
    pthread_setname_np(pthread_self(), name);
    fn();
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

bool start_detached(OwnThread which, std::function<void()> fn) noexcept {
  try {
    start_thread(which, std::move(fn)).detach();
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace traintime::support
