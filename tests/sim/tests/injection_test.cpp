// SIMULATION test: cuInit runs the CUDA_INJECTION64_PATH protocol exactly once per process,
// even when many threads make their first CUDA call at the same time.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "simgpu/engine.h"

int main() {
  setenv("CUDA_INJECTION64_PATH", SIMGPU_TEST_INJECTION_LIB, 1);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([] {
      void* p = nullptr;
      if (cudaMalloc(&p, 16) != cudaSuccess) std::abort();
    });
  for (auto& t : threads) t.join();
  if (cuInit(0) != CUDA_SUCCESS) return 1;
  auto calls = reinterpret_cast<int (*)(void)>(dlsym(RTLD_DEFAULT, "simgpu_test_injection_calls"));
  if (!calls) {
    std::fprintf(stderr, "injection library was not loaded\n");
    return 1;
  }
  if (calls() != 1 || simgpuInjectionCount() != 1) {
    std::fprintf(stderr, "InitializeInjection ran %d times (driver counted %d), expected once\n", calls(),
                 simgpuInjectionCount());
    return 1;
  }
  std::puts("InitializeInjection ran exactly once (simulated driver)");
  return 0;
}
