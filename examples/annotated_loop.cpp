// A training loop annotated with traintime.h, for the demo and the end-to-end tests. It does
// CPU work only; the region structure and counts are what a real trainer would produce:
//
//   step 0..N-1:  data_load (io) | forward/layer0..2 | backward (+ a worker thread's grad_hook,
//                 which inherits nothing: it is a top-level path) | optimizer | tt_step
//
// Options: --steps N (default 10)   --work-us U busy work per leaf region (default 200)
//          --fork       a fork child that inherited RANK records a region and exits (aux file)
//          --spawn-self runs this program again (fork + exec) with the same environment
//          --wait-for-signal  after the loop, print "ready" and sleep until killed
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "traintime/traintime.h"

namespace {

// Keeps the busy loop from being optimised away; per thread, since several threads spin.
thread_local volatile uint64_t g_sink = 0;

void busy(int us) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  uint64_t x = 1;
  while (std::chrono::steady_clock::now() < end) x = x * 6364136223846793005ull + 1;
  g_sink = x;
}

void forward(int work_us) {
  TT_SCOPE("forward");
  for (int layer = 0; layer < 3; ++layer) {
    static const char* const kNames[] = {"layer0", "layer1", "layer2"};
    tt_push(kNames[layer]);
    busy(work_us);
    tt_pop();
  }
}

void backward(int work_us) {
  TT_SCOPE("backward");
  // Gradient hooks run on another thread, as in PyTorch's autograd engine.
  std::thread hook([work_us] {
    TT_SCOPE_CATEGORY(TT_COMM, "grad_hook");
    busy(work_us / 2);
  });
  busy(work_us);
  hook.join();
}

int run_loop(int steps, int work_us) {
  for (int s = 0; s < steps; ++s) {
    {
      TT_SCOPE("data_load");
      busy(work_us / 2);
    }
    forward(work_us);
    backward(work_us);
    {
      TT_SCOPE("optimizer");
      busy(work_us / 2);
    }
    tt_step(32, 32 * 128);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 10, work_us = 200;
  bool do_fork = false, spawn_self = false, wait_for_signal = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) steps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--work-us") && i + 1 < argc) work_us = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--fork")) do_fork = true;
    else if (!std::strcmp(argv[i], "--spawn-self")) spawn_self = true;
    else if (!std::strcmp(argv[i], "--wait-for-signal")) wait_for_signal = true;
    else {
      std::fprintf(stderr, "usage: %s [--steps N] [--work-us U] [--fork] [--spawn-self] "
                   "[--wait-for-signal]\n", argv[0]);
      return 2;
    }
  }
  run_loop(steps, work_us);

  if (do_fork) {
    const pid_t pid = fork();
    if (pid == 0) {
      TT_SCOPE("child_work");
      busy(work_us);
      std::exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
  }
  if (spawn_self) {
    const pid_t pid = fork();
    if (pid == 0) {
      execl("/proc/self/exe", argv[0], "--steps", "2", "--work-us", "50", (char*)nullptr);
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 3;
  }
  if (wait_for_signal) {
    std::printf("ready\n");
    std::fflush(stdout);
    for (;;) pause();
  }
  return 0;
}
