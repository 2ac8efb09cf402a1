// The yardstick for the launch-callback budget: a bare CUPTI kernel tracer, loaded through
// CUDA_INJECTION64_PATH. It enables what traintime enables (runtime and driver API callbacks,
// kernel/memcpy/memset activity records, buffers of the same record cap) and does nothing with
// them beyond walking each delivered buffer, so traintime's cost minus this one is traintime's
// own work. Benchmark use only (bench/); it writes nothing.
#include <cupti.h>

#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <mutex>
#include <vector>

namespace {

constexpr size_t kBufferBytes = 8u << 20;
constexpr size_t kMaxRecords = 4096;  // traintime's minimum records per buffer

// Buffers are kept for reuse, as traintime's pool keeps its own: a buffer freed and allocated
// afresh each time is a new mapping (8 MiB: above malloc's mmap threshold), whose pages fault in
// again as records are written into it, which is no tracer's necessary cost and would be taken
// off traintime's own work by the comparison.
std::mutex g_mu;
std::vector<uint8_t*> g_free;

void CUPTIAPI on_request(uint8_t** buffer, size_t* size, size_t* max_records) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_free.empty()) {
      *buffer = g_free.back();
      g_free.pop_back();
    } else {
      *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
    }
  }
  *size = *buffer ? kBufferBytes : 0;
  *max_records = kMaxRecords;
}

void CUPTIAPI on_complete(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  volatile uint64_t records = 0;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) records = records + 1;
  std::lock_guard<std::mutex> lock(g_mu);
  g_free.push_back(buffer);
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  CUpti_SubscriberHandle subscriber;
  if (cuptiSubscribe(&subscriber, on_callback, nullptr) != CUPTI_SUCCESS) return 1;
  cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
  cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
  cuptiActivityRegisterCallbacks(on_request, on_complete);
  for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                  CUPTI_ACTIVITY_KIND_MEMSET})
    cuptiActivityEnable(kind);
  return 1;
}
