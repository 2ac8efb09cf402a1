// SIMULATION: a second in-process CUPTI client that uses CUPTI in the order torch.profiler's
// Kineto does (torch 2.11: libkineto's init.cpp, CuptiCallbackApi.cpp and CuptiActivityApi.cpp),
// for sim_train --profiler-window. Linked against simgpu's libcupti and loaded with
// dlopen(RTLD_LOCAL), as libtorch_cuda.so is: its CUPTI calls go through its PLT.
//
// First start (libkineto_init): cuptiSubscribe before anything else. Refused, the client is
//   CPU-only for the life of the process, as Kineto is ("CUPTI initialization failed - CUDA
//   profiler activities will be missing"): it never registers buffers nor enables a kind, so its
//   windows see no kernel. Subscribed, it enables the resource callback CONTEXT_CREATED (Kineto's)
//   and the runtime launch callbacks (Kineto's CUDA_LAUNCH_KERNEL), with a userdata of its own.
// start: re-subscribes if a teardown ended the subscription (Kineto's lazy re-init), switches the
//   per-thread buffers on, registers its buffer callbacks (at every start, as Kineto does),
//   enables CONCURRENT_KERNEL, MEMCPY and RUNTIME, and notes the CUPTI timestamp. (Kineto also
//   switches the API records of a few noisy cbids off; simgpu has no per-cbid API records.)
// stop: disables its kinds (CuptiActivityProfiler's stopTrace), then collects as Kineto's
//   CuptiActivityApi::activityBuffers does: when it holds no buffer CUPTI requested (none
//   allocated and not yet completed) it takes nothing and does not flush, so it has no GPU trace;
//   otherwise a forced cuptiActivityFlushAll, then per-thread buffers off. With TEARDOWN_CUPTI=1
//   it tears CUPTI down as Kineto does: enables the
//   whole RUNTIME and DRIVER callback domains and waits for the exit of the next API call, in
//   whose callback it unsubscribes and calls cuptiFinalize; the wait is one CUDA call here (where
//   Kineto would wait for ever, this returns an error). Then it walks every buffer it got back
//   with cuptiActivityGetNextRecord and counts the kernel records inside its window [start, stop]
//   (Kineto keeps only activities inside its capture window).
// Its completed callback drops a buffer it did not allocate, as Kineto's does, and counts it. Its
// callback function counts the launch callbacks of each window and any call it did not enable or
// that came with another userdata than its own (simgpu_profiler_callbacks).
#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <vector>

namespace {

constexpr size_t kBufferBytes = 256u << 10;  // small: several buffers per window
constexpr CUpti_CallbackId kLaunches[] = {CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
                                          CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000};

struct Client {
  std::mutex mu;
  std::set<uint8_t*> allocated;  // requested and not yet completed (Kineto's allocatedGpuTraceBuffers_)
  std::set<uint8_t*> owned;      // every buffer it allocated and has not freed
  std::vector<std::pair<uint8_t*, size_t>> completed;
  uint64_t foreign = 0;
  bool initialised = false;
  bool cpu_only = false;
  CUpti_SubscriberHandle subscriber = nullptr;  // nullptr after a teardown
  uint64_t t_start = 0;
  // Callback counts since the last simgpu_profiler_callbacks.
  std::atomic<uint64_t> launch_enter{0}, launch_exit{0}, unwanted{0}, wrong_userdata{0};
  std::atomic<bool> teardown{false};   // Kineto's teardownCupti_
  std::atomic<bool> domains{false};    // the whole RUNTIME and DRIVER domains are enabled
};

Client& client() {
  static Client* c = new Client();
  return *c;
}

char g_userdata;  // its address is the client's userdata

void CUPTIAPI request(uint8_t** buffer, size_t* size, size_t* max_records) {
  auto* b = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  {
    std::lock_guard<std::mutex> lock(client().mu);
    if (b) client().allocated.insert(b), client().owned.insert(b);
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
  c.allocated.erase(buffer);  // Kineto moves it from allocated to ready
  c.completed.emplace_back(buffer, valid_size);
}

bool is_launch(CUpti_CallbackId cbid) {
  for (CUpti_CallbackId l : kLaunches)
    if (cbid == l) return true;
  return false;
}

// Kineto's callback_switchboard.
void CUPTIAPI on_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const void* data) {
  Client& c = client();
  if (userdata != &g_userdata) c.wrong_userdata.fetch_add(1);
  const bool api = domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API;
  const bool wanted = (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) ||
                      (domain == CUPTI_CB_DOMAIN_RUNTIME_API && is_launch(cbid)) ||
                      (api && c.domains.load());
  if (!wanted) c.unwanted.fetch_add(1);
  if (!api) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && is_launch(cbid))
    (cb->callbackSite == CUPTI_API_ENTER ? c.launch_enter : c.launch_exit).fetch_add(1);
  if (c.teardown.load() && cb->callbackSite == CUPTI_API_EXIT) {
    cuptiUnsubscribe(c.subscriber);
    cuptiFinalize();
    c.subscriber = nullptr;
    c.domains.store(false);
    c.teardown.store(false);
  }
}

// Kineto's CuptiCallbackApi::initCallbackApi and the callbacks it enables.
bool subscribe(Client& c) {
  if (cuptiSubscribe(&c.subscriber, on_callback, &g_userdata) != CUPTI_SUCCESS) {
    c.subscriber = nullptr;
    return false;
  }
  cuptiEnableCallback(1, c.subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
  for (CUpti_CallbackId cbid : kLaunches) cuptiEnableCallback(1, c.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, cbid);
  return true;
}

bool teardown_requested() {
  const char* v = std::getenv("TEARDOWN_CUPTI");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

}  // namespace

extern "C" {

// Returns 0, or the CUptiResult of the first call that failed.
__attribute__((visibility("default"))) int simgpu_profiler_start(void) {
  Client& c = client();
  if (!c.initialised) {  // libkineto_init: subscribe first; refused, CPU-only for good
    c.initialised = true;
    c.cpu_only = !subscribe(c);
  }
  if (c.cpu_only) return 0;
  if (c.subscriber == nullptr) subscribe(c);  // lazy re-init after a teardown
  uint8_t per_thread = 1;
  size_t size = sizeof per_thread;
  CUptiResult rc = cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &size, &per_thread);
  if (rc != CUPTI_SUCCESS) return rc;
  rc = cuptiActivityRegisterCallbacks(request, complete);
  if (rc != CUPTI_SUCCESS) return rc;
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
  bool collect = false;
  if (!c.cpu_only) {
    for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                    CUPTI_ACTIVITY_KIND_RUNTIME}) {
      rc = cuptiActivityDisable(kind);
      if (rc != CUPTI_SUCCESS) return rc;
    }
    {
      std::lock_guard<std::mutex> lock(c.mu);
      collect = !c.allocated.empty();  // activityBuffers(): nothing allocated, nothing returned
    }
    if (collect) {
      rc = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
      if (rc != CUPTI_SUCCESS) return rc;
      uint8_t per_thread = 0;
      size_t size = sizeof per_thread;
      rc = cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &size, &per_thread);
      if (rc != CUPTI_SUCCESS) return rc;
    }
  }
  if (!c.cpu_only && c.subscriber != nullptr && teardown_requested()) {
    // Kineto's teardownContext: its callbacks for every runtime and driver call, then the next
    // call's exit callback unsubscribes and finalizes.
    rc = cuptiEnableDomain(1, c.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
    if (rc != CUPTI_SUCCESS) return rc;
    rc = cuptiEnableDomain(1, c.subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
    if (rc != CUPTI_SUCCESS) return rc;
    c.domains.store(true);
    c.teardown.store(true);
    using SyncFn = int (*)();
    auto sync = reinterpret_cast<SyncFn>(dlsym(RTLD_DEFAULT, "cudaDeviceSynchronize"));
    if (sync == nullptr) return CUPTI_ERROR_UNKNOWN;
    sync();
    if (c.teardown.load()) return CUPTI_ERROR_NOT_READY;  // no exit callback came: Kineto hangs
  }
  std::lock_guard<std::mutex> lock(c.mu);
  uint64_t count = 0;
  // Kineto returns the ready buffers only from a collection that flushed; without one they wait
  // (and clearActivities throws them away at the next start).
  for (auto& [buffer, valid] : c.completed) {
    if (!collect) break;
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
      if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
      // start/end sit at the same offsets in every Kernel layout simgpu writes (9 and 10).
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      if (k->start >= c.t_start && k->end <= stop_ts) ++count;
    }
    c.owned.erase(buffer);
    std::free(buffer);
  }
  if (collect) c.completed.clear();
  *kernels = count;
  *foreign = c.foreign;
  *t_start = c.t_start;
  *t_stop = stop_ts;
  c.foreign = 0;
  return 0;
}

// The callbacks it received since the last call: launch ENTER and EXIT callbacks, calls it did
// not enable, and calls that came with another userdata than its own.
__attribute__((visibility("default"))) void simgpu_profiler_callbacks(uint64_t* launch_enter, uint64_t* launch_exit,
                                                                      uint64_t* unwanted, uint64_t* wrong_userdata) {
  Client& c = client();
  *launch_enter = c.launch_enter.exchange(0);
  *launch_exit = c.launch_exit.exchange(0);
  *unwanted = c.unwanted.exchange(0);
  *wrong_userdata = c.wrong_userdata.exchange(0);
}

}  // extern "C"
