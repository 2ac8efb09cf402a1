// SIMULATION: a second in-process CUPTI client that uses CUPTI exactly as torch.profiler's Kineto
// does (libkineto's CuptiActivityApi and CuptiCallbackApi), for sim_train --profiler-window.
// Linked against simgpu's libcupti and loaded with dlopen(RTLD_LOCAL), as libtorch_cuda.so is:
// its CUPTI calls go through its PLT.
//
// start: registers its buffer callbacks (at every start, as Kineto re-registers), tries
//   cuptiSubscribe (a refusal is remembered: Kineto then never calls cuptiFinalize), enables
//   CONCURRENT_KERNEL, MEMCPY and RUNTIME, and notes the CUPTI timestamp.
// stop: forced cuptiActivityFlushAll, sets PER_THREAD_ACTIVITY_BUFFER to 0 (as Kineto does at
//   collection), disables its kinds, cuptiFinalize only if it had subscribed, then walks every
//   buffer it got back with cuptiActivityGetNextRecord and counts the kernel records inside its
//   window [start, stop] (Kineto keeps only activities inside its capture window).
// Its completed callback drops a buffer it did not allocate, as Kineto's does, and counts it.
#include <cupti.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <set>
#include <vector>

namespace {

constexpr size_t kBufferBytes = 256u << 10;  // small: several buffers per window

struct Client {
  std::mutex mu;
  std::set<uint8_t*> allocated;
  std::vector<std::pair<uint8_t*, size_t>> completed;
  uint64_t foreign = 0;
  bool subscribed = false;
  CUpti_SubscriberHandle subscriber = nullptr;
  uint64_t t_start = 0;
};

Client& client() {
  static Client* c = new Client();
  return *c;
}

void CUPTIAPI request(uint8_t** buffer, size_t* size, size_t* max_records) {
  auto* b = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  {
    std::lock_guard<std::mutex> lock(client().mu);
    if (b) client().allocated.insert(b);
  }
  *buffer = b;
  *size = b ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI complete(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_size) {
  Client& c = client();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.allocated.count(buffer) == 0) {  // Kineto: "bufferCompleted called with unknown buffer"
    ++c.foreign;
    return;
  }
  c.completed.emplace_back(buffer, valid_size);
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

}  // namespace

extern "C" {

// Returns 0, or the CUptiResult of the first call that failed.
__attribute__((visibility("default"))) int simgpu_profiler_start(void) {
  Client& c = client();
  CUptiResult rc = cuptiActivityRegisterCallbacks(request, complete);
  if (rc != CUPTI_SUCCESS) return rc;
  c.subscribed = cuptiSubscribe(&c.subscriber, on_callback, nullptr) == CUPTI_SUCCESS;
  for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                  CUPTI_ACTIVITY_KIND_RUNTIME}) {
    rc = cuptiActivityEnable(kind);
    if (rc != CUPTI_SUCCESS) return rc;
  }
  return cuptiGetTimestamp(&c.t_start);
}

// Stops, then reports what it received: kernel records inside its window, buffers that were
// not its own (dropped), and its window's CUPTI timestamps.
__attribute__((visibility("default"))) int simgpu_profiler_stop(uint64_t* kernels, uint64_t* foreign,
                                                                uint64_t* t_start, uint64_t* t_stop) {
  Client& c = client();
  uint64_t stop_ts = 0;
  CUptiResult rc = cuptiGetTimestamp(&stop_ts);
  if (rc != CUPTI_SUCCESS) return rc;
  rc = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (rc != CUPTI_SUCCESS) return rc;
  uint8_t per_thread = 0;
  size_t size = sizeof per_thread;
  rc = cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &size, &per_thread);
  if (rc != CUPTI_SUCCESS) return rc;
  for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                  CUPTI_ACTIVITY_KIND_RUNTIME}) {
    rc = cuptiActivityDisable(kind);
    if (rc != CUPTI_SUCCESS) return rc;
  }
  if (c.subscribed) {
    cuptiUnsubscribe(c.subscriber);
    cuptiFinalize();
  }
  std::lock_guard<std::mutex> lock(c.mu);
  uint64_t count = 0;
  for (auto& [buffer, valid] : c.completed) {
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
      if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
      // start/end sit at the same offsets in every Kernel layout simgpu writes (9 and 10).
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      if (k->start >= c.t_start && k->end <= stop_ts) ++count;
    }
    c.allocated.erase(buffer);
    std::free(buffer);
  }
  c.completed.clear();
  *kernels = count;
  *foreign = c.foreign;
  *t_start = c.t_start;
  *t_stop = stop_ts;
  c.foreign = 0;
  return 0;
}

}  // extern "C"
