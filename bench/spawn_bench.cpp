// Extra wall time of an inert process under the preload (DESIGN §9: ≤ 2 ms for /bin/true).
// Starts COMMAND RUNS times bare and RUNS times with LD_PRELOAD=LIB, in pairs whose order
// alternates (bare first, then preloaded first), so a drift in machine speed hits both sides;
// the figure to judge is the median of the per-pair differences. Prints one JSON object.
//   bench_spawn --runs N --preload LIB -- COMMAND [ARG...]
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

extern char** environ;

namespace {

// Wall nanoseconds from spawn to reap; -1 if the command could not run or failed.
int64_t run_once(char* const* argv, char* const* envp) {
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  if (posix_spawnp(&pid, argv[0], nullptr, nullptr, argv, envp) != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  const auto t1 = std::chrono::steady_clock::now();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
}

double quantile(std::vector<int64_t> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return static_cast<double>(v[lo]) + (pos - static_cast<double>(lo)) * static_cast<double>(v[hi] - v[lo]);
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 200;
  std::string lib;
  int cmd = -1;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) runs = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--preload") && i + 1 < argc) lib = argv[++i];
    else if (!std::strcmp(argv[i], "--") && i + 1 < argc) { cmd = i + 1; break; }
    else { cmd = -1; break; }
  }
  if (cmd < 0 || lib.empty() || runs < 1) {
    std::fprintf(stderr, "usage: bench_spawn --runs N --preload LIB -- COMMAND [ARG...]\n");
    return 2;
  }
  // Both environments are the caller's, without any LD_PRELOAD it had; one adds ours.
  std::vector<std::string> base_env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0) base_env.emplace_back(*e);
  std::vector<std::string> pre_env = base_env;
  pre_env.push_back("LD_PRELOAD=" + lib);
  auto pointers = [](std::vector<std::string>& v) {
    std::vector<char*> p;
    for (auto& s : v) p.push_back(s.data());
    p.push_back(nullptr);
    return p;
  };
  std::vector<char*> base_p = pointers(base_env), pre_p = pointers(pre_env);
  char* const* av = argv + cmd;

  // One unmeasured pair warms the page cache for both.
  if (run_once(av, base_p.data()) < 0 || run_once(av, pre_p.data()) < 0) {
    std::fprintf(stderr, "bench_spawn: %s did not run and exit 0\n", av[0]);
    return 1;
  }
  std::vector<int64_t> base, pre, diff;
  for (int i = 0; i < runs; ++i) {
    int64_t b = 0, p = 0;
    if (i % 2 == 0) {
      b = run_once(av, base_p.data());
      p = run_once(av, pre_p.data());
    } else {
      p = run_once(av, pre_p.data());
      b = run_once(av, base_p.data());
    }
    if (b < 0 || p < 0) {
      std::fprintf(stderr, "bench_spawn: %s failed during the runs\n", av[0]);
      return 1;
    }
    base.push_back(b);
    pre.push_back(p);
    diff.push_back(p - b);
  }
  const nlohmann::json out = {{"command", av[0]},
                              {"runs", runs},
                              {"bare_median_ns", quantile(base, 0.5)},
                              {"preloaded_median_ns", quantile(pre, 0.5)},
                              {"extra_median_ns", quantile(diff, 0.5)},
                              {"extra_p25_ns", quantile(diff, 0.25)},
                              {"extra_p75_ns", quantile(diff, 0.75)}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
