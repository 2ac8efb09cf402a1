// SIMULATION test helper: a minimal CUPTI tool loaded through CUDA_INJECTION64_PATH, as a
// profiler is. It subscribes from InitializeInjection, collects kernel/memcpy/memset records
// and, at exit, writes what it saw to $SIMGPU_CLIENT_OUT, so a test can hold the fakes'
// end-to-end output (sim_train -> driver -> CUPTI) against sim_train's own truth.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <mutex>

#include <cupti.h>
#include <nlohmann/json.hpp>

namespace {

struct Seen {
  std::mutex mu;
  uint64_t kernels = 0, memcpys = 0, memsets = 0, incomplete = 0, graph_kernels = 0;
  uint64_t gpu_sum_ns = 0, memcpy_bytes = 0, memcpy_both_ids = 0;
  uint64_t launch_callbacks = 0, deliveries = 0;
};
Seen& seen() {
  static Seen* s = new Seen();
  return *s;
}

void CUPTIAPI on_request(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 16 * 1024;  // small on purpose: many buffers, full-buffer delivery exercised
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI on_complete(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  Seen& s = seen();
  std::lock_guard<std::mutex> lock(s.mu);
  ++s.deliveries;
  CUpti_Activity* rec = nullptr;
  for (;;) {
    const CUptiResult r = cuptiActivityGetNextRecord(buffer, valid, &rec);
    if (r == CUPTI_ERROR_INVALID_KIND && rec) {
      ++s.incomplete;
      continue;
    }
    if (r != CUPTI_SUCCESS) break;
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(rec);
        ++s.kernels;
        s.gpu_sum_ns += k->end - k->start;
        if (k->graphId) ++s.graph_kernels;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(rec);
        ++s.memcpys;
        s.gpu_sum_ns += m->end - m->start;
        s.memcpy_bytes += m->bytes;
        if (m->runtimeCorrelationId && m->correlationId != m->runtimeCorrelationId) ++s.memcpy_both_ids;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(rec);
        ++s.memsets;
        s.gpu_sum_ns += m->end - m->start;
        break;
      }
      default: break;
    }
  }
  std::free(buffer);
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  const auto* cd = static_cast<const CUpti_CallbackData*>(data);
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cd->callbackSite == CUPTI_API_ENTER &&
      (cbid == CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000 || cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000)) {
    std::lock_guard<std::mutex> lock(seen().mu);
    ++seen().launch_callbacks;
  }
}

void at_exit() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  const char* out = std::getenv("SIMGPU_CLIENT_OUT");
  if (!out) return;
  Seen& s = seen();
  std::lock_guard<std::mutex> lock(s.mu);
  nlohmann::json j = {{"kernels", s.kernels}, {"memcpys", s.memcpys}, {"memsets", s.memsets},
                      {"incomplete", s.incomplete}, {"graph_kernels", s.graph_kernels},
                      {"gpu_sum_ns", s.gpu_sum_ns}, {"memcpy_bytes", s.memcpy_bytes},
                      {"memcpy_both_ids", s.memcpy_both_ids}, {"launch_callbacks", s.launch_callbacks},
                      {"deliveries", s.deliveries}, {"dropped", dropped}};
  std::ofstream(out) << j.dump() << '\n';
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  CUpti_SubscriberHandle sub = nullptr;
  if (cuptiSubscribe(&sub, on_callback, nullptr) != CUPTI_SUCCESS) return 0;
  cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
  cuptiActivityRegisterCallbacks(on_request, on_complete);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
  std::atexit(at_exit);
  return 1;
}
