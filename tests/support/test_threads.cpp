// Every thread traintime starts (support/threads.h): its name, its signal mask from its first
// instruction, and the starting thread left as it was (its mask, its errno).
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

namespace {

// Burns about `ms` of this thread's CPU time.
void burn_cpu(int ms) {
  timespec start{}, now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
  volatile uint64_t sink = 0;
  do {
    for (int i = 0; i < 100000; ++i) sink = sink + static_cast<uint64_t>(i);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < ms);
}

uint64_t cpu_of(const std::vector<traintime::core::ThreadCost>& threads, const std::string& name) {
  for (const auto& t : threads)
    if (t.name == name) return t.cpu_ns;
  return 0;
}

bool listed(const std::vector<traintime::core::ThreadCost>& threads, const std::string& name) {
  for (const auto& t : threads)
    if (t.name == name) return true;
  return false;
}

}  // namespace

TEST_CASE("each thread of ours is accounted for by name: its CPU time while it runs and after it ends",
          "[threads][self_cost]") {
  using traintime::support::own_thread_cpu;
  const uint64_t before = cpu_of(own_thread_cpu(), "tt-snapshot");
  std::promise<void> burnt, finish;
  std::thread t = start_thread(OwnThread::kSnapshot, [&] {
    burn_cpu(60);
    burnt.set_value();
    finish.get_future().wait();
  });
  burnt.get_future().wait();
  // Live: read from its CPU clock.
  const uint64_t running = cpu_of(own_thread_cpu(), "tt-snapshot") - before;
  CHECK(running >= 55'000'000);
  CHECK(running < 2'000'000'000);
  finish.set_value();
  t.join();
  // Ended: its last reading stays.
  const uint64_t ended = cpu_of(own_thread_cpu(), "tt-snapshot") - before;
  CHECK(ended >= running);
  // A second thread of the same name adds to the first.
  std::thread again = start_thread(OwnThread::kSnapshot, [] { burn_cpu(30); });
  again.join();
  CHECK(cpu_of(own_thread_cpu(), "tt-snapshot") - before >= ended + 25'000'000);
}

TEST_CASE("a kind never started is not listed; after a fork the child lists none of the parent's",
          "[threads][self_cost]") {
  using traintime::support::own_thread_cpu;
  std::thread t = start_thread(OwnThread::kHang, [] {});
  t.join();
  CHECK(listed(own_thread_cpu(), "tt-hang"));
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    traintime::support::forget_own_threads_after_fork();
    if (!own_thread_cpu().empty()) _exit(1);
    // Only the kind the child starts is listed.
    std::thread nvml = start_thread(OwnThread::kNvml, [] {});
    nvml.join();
    const auto threads = own_thread_cpu();
    _exit(threads.size() == 1 && threads[0].name == "tt-nvml" ? 0 : 2);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
