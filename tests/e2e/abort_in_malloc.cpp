// abort() arriving while the main thread is inside malloc (test_abnormal_exits.py): the main
// thread records a step, then allocates and frees in a loop forever; after DELAY_US another
// thread either calls abort() itself (PyTorch's watchdog thread does) or sends SIGABRT to the
// main thread, so the handler runs on a thread interrupted inside the allocator, maybe holding
// its lock. The process must die by SIGABRT, never hang.
//   abort_in_malloc abort|signal DELAY_US
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "traintime/traintime.h"

namespace {

pthread_t g_main;
long g_delay_us = 0;
bool g_signal_main = false;

void* aborter(void*) {
  usleep(static_cast<useconds_t>(g_delay_us));
  if (g_signal_main)
    pthread_kill(g_main, SIGABRT);
  else
    std::abort();
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "abort") != 0 && std::strcmp(argv[1], "signal") != 0)) {
    std::fprintf(stderr, "usage: abort_in_malloc abort|signal DELAY_US\n");
    return 2;
  }
  g_signal_main = std::strcmp(argv[1], "signal") == 0;
  g_delay_us = std::atol(argv[2]);
  g_main = pthread_self();
  tt_push("train");
  tt_step(1, 0);
  pthread_t t;
  if (pthread_create(&t, nullptr, aborter, nullptr) != 0) return 3;
  void* keep[64] = {};
  for (unsigned i = 0;; ++i) {
    const unsigned slot = i % 64;
    std::free(keep[slot]);
    keep[slot] = std::malloc(16 + (i * 2654435761u) % 65536);  // small and large (mmap) blocks
  }
}
