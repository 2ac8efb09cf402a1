// SIMULATION test helper: a tool library for CUDA_INJECTION64_PATH that counts how often the
// driver calls its InitializeInjection.
#include <atomic>

namespace {
std::atomic<int> g_calls{0};
}

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  g_calls.fetch_add(1);
  return 1;
}

extern "C" __attribute__((visibility("default"))) int simgpu_test_injection_calls(void) { return g_calls.load(); }
