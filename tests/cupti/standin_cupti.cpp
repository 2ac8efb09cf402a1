// A stand-in libcupti.so.13 for test_kineto_shares_cupti.py: found before the wheel's own copy
// (LD_LIBRARY_PATH beats libtorch's RUNPATH), it answers every CUPTI call libtorch_cpu.so imports
// and the ones traintime needs, without a GPU, and logs each call, one line with its arguments,
// to $TT_STANDIN_CUPTI_LOG. It has CUPTI's one-subscriber rule: a cuptiSubscribe while a
// subscriber is held gets CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; one while none is held
// gets $TT_STANDIN_CUPTI_SUBSCRIBE (a CUptiResult; default 0, success). It reports the CUDA 13.0
// toolkit's version and names one launch callback (cudaLaunchKernel), so traintime captures on it.
#include <cupti.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>

namespace {

constexpr CUpti_CallbackId kCbids = 1024;
std::mutex g_mu;
CUpti_SubscriberHandle g_subscriber = nullptr;
char g_handle;  // its address is the one subscriber's handle
uint8_t g_enabled[CUPTI_CB_DOMAIN_SIZE][kCbids];

void log(const char* fmt, ...) {
  const char* path = std::getenv("TT_STANDIN_CUPTI_LOG");
  if (path == nullptr) return;
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  int n = std::vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (n > static_cast<int>(sizeof line) - 2) n = sizeof line - 2;
  line[n++] = '\n';
  const int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  (void)!write(fd, line, static_cast<size_t>(n));
  close(fd);
}

bool valid(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  return domain > CUPTI_CB_DOMAIN_INVALID && domain < CUPTI_CB_DOMAIN_SIZE && cbid < kCbids;
}

}  // namespace

extern "C" {

#define STANDIN __attribute__((visibility("default"))) CUptiResult CUPTIAPI

STANDIN cuptiGetVersion(uint32_t* version) {
  log("cuptiGetVersion");
  if (version == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *version = 130001;
  return CUPTI_SUCCESS;
}

STANDIN cuptiGetResultString(CUptiResult result, const char** str) {
  if (str == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *str = result == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR (stand-in)";
  return CUPTI_SUCCESS;
}

STANDIN cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
  if (name == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) {
    *name = "cudaLaunchKernel_v7000";
    return CUPTI_SUCCESS;
  }
  return CUPTI_ERROR_INVALID_PARAMETER;
}

STANDIN cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc, void* userdata) {
  std::lock_guard<std::mutex> lock(g_mu);
  CUptiResult rc = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  if (g_subscriber == nullptr) {
    const char* s = std::getenv("TT_STANDIN_CUPTI_SUBSCRIBE");
    rc = static_cast<CUptiResult>(s != nullptr ? std::atoi(s) : 0);
  }
  if (rc == CUPTI_SUCCESS) {
    g_subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&g_handle);
    std::memset(g_enabled, 0, sizeof g_enabled);
    *subscriber = g_subscriber;
  }
  log("cuptiSubscribe userdata=%p -> %d", userdata, static_cast<int>(rc));
  return rc;
}

STANDIN cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  std::lock_guard<std::mutex> lock(g_mu);
  log("cuptiUnsubscribe");
  if (subscriber == nullptr || subscriber != g_subscriber) return CUPTI_ERROR_INVALID_PARAMETER;
  g_subscriber = nullptr;
  return CUPTI_SUCCESS;
}

STANDIN cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain,
                            CUpti_CallbackId cbid) {
  std::lock_guard<std::mutex> lock(g_mu);
  log("cuptiEnableCallback %u %d %u", enable, static_cast<int>(domain), cbid);
  if (subscriber == nullptr || subscriber != g_subscriber || !valid(domain, cbid))
    return CUPTI_ERROR_INVALID_PARAMETER;
  g_enabled[domain][cbid] = enable != 0;
  return CUPTI_SUCCESS;
}

STANDIN cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain) {
  std::lock_guard<std::mutex> lock(g_mu);
  log("cuptiEnableDomain %u %d", enable, static_cast<int>(domain));
  if (subscriber == nullptr || subscriber != g_subscriber || !valid(domain, 0)) return CUPTI_ERROR_INVALID_PARAMETER;
  std::memset(g_enabled[domain], enable != 0, kCbids);
  return CUPTI_SUCCESS;
}

STANDIN cuptiGetCallbackState(uint32_t* enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain,
                              CUpti_CallbackId cbid) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (enable == nullptr || subscriber == nullptr || subscriber != g_subscriber || !valid(domain, cbid))
    return CUPTI_ERROR_INVALID_PARAMETER;
  *enable = g_enabled[domain][cbid];
  return CUPTI_SUCCESS;
}

STANDIN cuptiFinalize(void) {
  log("cuptiFinalize");
  return CUPTI_SUCCESS;
}

STANDIN cuptiGetGraphNodeId(CUgraphNode, uint64_t* id) {
  if (id == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *id = 0;
  return CUPTI_SUCCESS;
}

STANDIN cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                       CUpti_BuffersCallbackCompleteFunc complete) {
  log("cuptiActivityRegisterCallbacks %d", request != nullptr && complete != nullptr);
  return CUPTI_SUCCESS;
}

STANDIN cuptiActivityEnable(CUpti_ActivityKind kind) {
  log("cuptiActivityEnable %d", static_cast<int>(kind));
  return CUPTI_SUCCESS;
}

STANDIN cuptiActivityDisable(CUpti_ActivityKind kind) {
  log("cuptiActivityDisable %d", static_cast<int>(kind));
  return CUPTI_SUCCESS;
}

STANDIN cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
  log("cuptiActivityEnableRuntimeApi %u %u", cbid, enable);
  return CUPTI_SUCCESS;
}

STANDIN cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
  log("cuptiActivityEnableDriverApi %u %u", cbid, enable);
  return CUPTI_SUCCESS;
}

STANDIN cuptiActivityEnableCudaEventDeviceTimestamps(uint8_t enable) {
  log("cuptiActivityEnableCudaEventDeviceTimestamps %u", enable);
  return CUPTI_SUCCESS;
}

STANDIN cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc fn) {
  log("cuptiActivityRegisterTimestampCallback %d", fn != nullptr);
  return CUPTI_SUCCESS;
}

STANDIN cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t* size, void* value) {
  log("cuptiActivitySetAttribute %d", static_cast<int>(attr));
  return size != nullptr && value != nullptr ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

STANDIN cuptiActivityFlushAll(uint32_t flag) {
  log("cuptiActivityFlushAll %u", flag);
  return CUPTI_SUCCESS;
}

STANDIN cuptiGetTimestamp(uint64_t* timestamp) {
  if (timestamp == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  *timestamp = static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
  return CUPTI_SUCCESS;
}

STANDIN cuptiActivityGetNextRecord(uint8_t*, size_t, CUpti_Activity**) { return CUPTI_ERROR_MAX_LIMIT_REACHED; }

STANDIN cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  if (dropped == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *dropped = 0;
  return CUPTI_SUCCESS;
}

STANDIN cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id) {
  log("cuptiActivityPushExternalCorrelationId %d %llu", static_cast<int>(kind), static_cast<unsigned long long>(id));
  return CUPTI_SUCCESS;
}

STANDIN cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t* last) {
  log("cuptiActivityPopExternalCorrelationId %d", static_cast<int>(kind));
  if (last != nullptr) *last = 0;
  return CUPTI_SUCCESS;
}

}  // extern "C"
