// abort() on another thread while the main thread returns from main (test_abnormal_exits.py):
// without traintime the process dies by SIGABRT. With it, the handler on the aborting thread
// writes the rank file (and, as rank 0 of 2 on this host, waits up to a second for its peer's):
// the main thread's exit must not end the process with status 0 meanwhile.
//   abort_beside_exit
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "traintime/traintime.h"

namespace {

std::atomic<bool> g_aborting{false};

void* aborter(void*) {
  g_aborting.store(true);
  std::abort();
  return nullptr;
}

}  // namespace

int main() {
  tt_push("train");
  tt_step(1, 0);
  tt_pop();
  pthread_t t;
  if (pthread_create(&t, nullptr, aborter, nullptr) != 0) return 3;
  while (!g_aborting.load()) usleep(100);
  usleep(50000);  // the handler has begun: it writes for far longer than this (its peer wait)
  return 0;
}
