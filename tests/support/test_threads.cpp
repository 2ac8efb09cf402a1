// Every thread traintime starts (support/threads.h): its name, its signal mask from its first
// instruction, and the starting thread left as it was (its mask, its errno).
#include <pthread.h>
#include <signal.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "traintime/support/threads.h"

using traintime::support::OwnThread;
using traintime::support::start_detached;
using traintime::support::start_thread;
using traintime::support::thread_name;

namespace {

const int kAsynchronous[] = {SIGTERM, SIGINT,  SIGHUP,  SIGQUIT, SIGUSR1, SIGUSR2,
                             SIGALRM, SIGCHLD, SIGPIPE, SIGPROF, SIGWINCH, SIGRTMIN};
constexpr int kSynchronous[] = {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS};

// What a thread of ours sees of itself.
struct Seen {
  std::string name;
  sigset_t mask;
};

Seen look() {
  Seen s;
  char name[32] = {};
  pthread_getname_np(pthread_self(), name, sizeof name);
  s.name = name;
  pthread_sigmask(SIG_BLOCK, nullptr, &s.mask);
  return s;
}

}  // namespace

TEST_CASE("each thread of ours has its tt- name, at most 15 characters", "[threads]") {
  const std::vector<std::pair<OwnThread, std::string>> expected = {
      {OwnThread::kCupti, "tt-cupti"},       {OwnThread::kWriter, "tt-writer"},
      {OwnThread::kSnapshot, "tt-snapshot"}, {OwnThread::kHang, "tt-hang"},
      {OwnThread::kNvml, "tt-nvml"}};
  REQUIRE(expected.size() == traintime::support::kOwnThreadCount);
  for (const auto& [which, name] : expected) {
    INFO(name);
    CHECK(std::string(thread_name(which)) == name);
    std::promise<Seen> seen;
    std::thread t = start_thread(which, [&seen] { seen.set_value(look()); });
    const Seen s = seen.get_future().get();
    t.join();
    CHECK(s.name == name);
    CHECK(s.name.size() <= 15);
  }
}

TEST_CASE("a thread of ours blocks the asynchronous signals and none of the synchronous ones",
          "[threads]") {
  // Whatever the starting thread blocks: here nothing, then everything.
  for (const bool caller_blocks_all : {false, true}) {
    INFO("the starting thread blocks " << (caller_blocks_all ? "every signal" : "none"));
    sigset_t set, before;
    caller_blocks_all ? sigfillset(&set) : sigemptyset(&set);
    pthread_sigmask(SIG_SETMASK, &set, &before);
    std::promise<Seen> seen;
    errno = 4321;
    std::thread t = start_thread(OwnThread::kHang, [&seen] { seen.set_value(look()); });
    CHECK(errno == 4321);
    // The starting thread's own mask is as it was.
    sigset_t after;
    pthread_sigmask(SIG_SETMASK, &before, &after);
    for (int sig : kAsynchronous) CHECK(sigismember(&after, sig) == (caller_blocks_all ? 1 : 0));
    const Seen s = seen.get_future().get();
    t.join();
    for (int sig : kAsynchronous) {
      INFO("signal " << sig << " (" << strsignal(sig) << ")");
      CHECK(sigismember(&s.mask, sig) == 1);
    }
    for (int sig : kSynchronous) {
      INFO("signal " << sig << " (" << strsignal(sig) << ")");
      CHECK(sigismember(&s.mask, sig) == 0);
    }
  }
}

TEST_CASE("a detached thread of ours runs, named, and says it started", "[threads]") {
  // Shared: the detached thread may still be leaving set_value when the test has its answer.
  auto seen = std::make_shared<std::promise<Seen>>();
  std::future<Seen> answer = seen->get_future();
  errno = 77;
  REQUIRE(start_detached(OwnThread::kWriter, [seen] { seen->set_value(look()); }));
  CHECK(errno == 77);
  CHECK(answer.get().name == "tt-writer");
}
