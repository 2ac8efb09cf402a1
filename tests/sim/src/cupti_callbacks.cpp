// SIMULATION: the fake libcupti.so.13's callback API — one subscriber (CUPTI before 13.3),
// runtime/driver API callbacks raised with the real callback ids around every traced call,
// resource callbacks, and the real callback-name table generated from the toolkit headers.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cupti_state.h"
#include "cupti_tables.inc"

struct CUpti_Subscriber_st {
  CUpti_CallbackFunc callback;
  void* userdata;
  std::string name;  // "CUPTI for <subscriberName>" (cuptiSubscribe_v2), else "CUPTI"
};

namespace simcupti {
namespace {

std::mutex g_mu;
std::atomic<CUpti_Subscriber_st*> g_subscriber{nullptr};
// Unsubscribed handles stay allocated (a callback may still be running on another thread).
std::vector<std::unique_ptr<CUpti_Subscriber_st>>* g_retired = new std::vector<std::unique_ptr<CUpti_Subscriber_st>>();
// enabled[domain][cbid]; read on every traced call without a lock.
std::atomic<uint8_t> g_enabled[CUPTI_CB_DOMAIN_SIZE][kMaxCbid];

uint32_t domain_size(CUpti_CallbackDomain d) {
  switch (d) {
    case CUPTI_CB_DOMAIN_DRIVER_API: return kDriverCbidSize;
    case CUPTI_CB_DOMAIN_RUNTIME_API: return kRuntimeCbidSize;
    case CUPTI_CB_DOMAIN_RESOURCE: return CUPTI_CBID_RESOURCE_SIZE;
    case CUPTI_CB_DOMAIN_SYNCHRONIZE: return CUPTI_CBID_SYNCHRONIZE_SIZE;
    case CUPTI_CB_DOMAIN_NVTX: return 128;
    case CUPTI_CB_DOMAIN_STATE: return CUPTI_CBID_STATE_SIZE;
    default: return 0;
  }
}

bool enabled(int domain, uint32_t cbid) {
  return domain > 0 && domain < CUPTI_CB_DOMAIN_SIZE && cbid < kMaxCbid &&
         g_enabled[domain][cbid].load(std::memory_order_relaxed);
}

void raise_api(simgpu_api_frame* f, CUpti_ApiCallbackSite site) {
  CUpti_Subscriber_st* sub = g_subscriber.load(std::memory_order_acquire);
  if (!sub || !enabled(f->domain, f->cbid)) return;
  CUpti_CallbackData data{};
  data.callbackSite = site;
  data.functionName = f->function_name;
  data.functionParams = f->params;
  data.functionReturnValue = f->return_value;
  data.symbolName = f->symbol_name;
  data.context = static_cast<CUcontext>(simgpu_context());
  data.contextUid = simgpu_context_id();
  data.correlationData = &f->correlation_data;
  data.correlationId = f->correlation_id;
  sub->callback(sub->userdata, static_cast<CUpti_CallbackDomain>(f->domain), f->cbid, &data);
}

const char* lookup(const SimNameEntry* table, size_t n, uint32_t value) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (table[mid].value < value) lo = mid + 1;
    else hi = mid;
  }
  return lo < n && table[lo].value == value ? table[lo].name : nullptr;
}

}  // namespace

void on_api_enter(simgpu_api_frame* f) {
  record_external_correlation(f);
  raise_api(f, CUPTI_API_ENTER);
}

void on_api_exit(simgpu_api_frame* f) {
  raise_api(f, CUPTI_API_EXIT);
  record_api(f);
}

void on_resource(int event, void* context, void* handle, void* graph) {
  CUpti_CallbackId cbid;
  switch (event) {
    case SIMGPU_RES_CU_INIT_FINISHED: cbid = CUPTI_CBID_RESOURCE_CU_INIT_FINISHED; break;
    case SIMGPU_RES_CONTEXT_CREATED: cbid = CUPTI_CBID_RESOURCE_CONTEXT_CREATED; break;
    case SIMGPU_RES_STREAM_CREATED: cbid = CUPTI_CBID_RESOURCE_STREAM_CREATED; break;
    case SIMGPU_RES_GRAPHNODE_CREATED: cbid = CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED; break;
    case SIMGPU_RES_GRAPHNODE_CLONED: cbid = CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED; break;
    case SIMGPU_RES_GRAPHEXEC_DESTROY_STARTING: cbid = CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING; break;
    case SIMGPU_RES_GRAPH_DESTROY_STARTING: cbid = CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING; break;
    default: return;
  }
  CUpti_Subscriber_st* sub = g_subscriber.load(std::memory_order_acquire);
  if (!sub || !enabled(CUPTI_CB_DOMAIN_RESOURCE, cbid)) return;
  CUpti_GraphData graph_data{};
  CUpti_ResourceData data{};
  data.context = static_cast<CUcontext>(context);
  switch (event) {
    case SIMGPU_RES_STREAM_CREATED: data.resourceHandle.stream = static_cast<CUstream>(handle); break;
    case SIMGPU_RES_GRAPHNODE_CREATED:
      graph_data.graph = static_cast<CUgraph>(graph);
      graph_data.node = static_cast<CUgraphNode>(handle);
      graph_data.nodeType = static_cast<CUgraphNodeType>(simgpu_graph_node_type(handle));
      data.resourceDescriptor = &graph_data;
      break;
    case SIMGPU_RES_GRAPHNODE_CLONED:  // context = the exec being instantiated
      data.context = static_cast<CUcontext>(simgpu_context());
      graph_data.graphExec = static_cast<CUgraphExec>(context);
      graph_data.node = static_cast<CUgraphNode>(handle);
      graph_data.originalNode = static_cast<CUgraphNode>(graph);
      graph_data.nodeType = static_cast<CUgraphNodeType>(simgpu_graph_node_type(handle));
      data.resourceDescriptor = &graph_data;
      break;
    case SIMGPU_RES_GRAPHEXEC_DESTROY_STARTING:
      graph_data.graphExec = static_cast<CUgraphExec>(handle);
      data.resourceDescriptor = &graph_data;
      break;
    case SIMGPU_RES_GRAPH_DESTROY_STARTING:
      graph_data.graph = static_cast<CUgraph>(graph);
      data.resourceDescriptor = &graph_data;
      break;
    default: break;
  }
  sub->callback(sub->userdata, CUPTI_CB_DOMAIN_RESOURCE, cbid, &data);
}

void reset_callbacks() {
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& d : g_enabled)
    for (auto& c : d) c.store(0, std::memory_order_relaxed);
  if (CUpti_Subscriber_st* sub = g_subscriber.exchange(nullptr)) g_retired->emplace_back(sub);
}

}  // namespace simcupti

using namespace simcupti;

extern "C" {

// Both entry points, as CUPTI 13.0 has them. A refusal names the holder through v2's params:
// SIMGPU_REFUSE_SUBSCRIBE=1 stands for a tool holding CUPTI from outside ("Nsight Systems").
CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                       void* userdata, CUpti_SubscriberParams* params) {
  ensure_hooks();
  if (!subscriber || !callback) return CUPTI_ERROR_INVALID_PARAMETER;
  if (params && params->structSize == 0) return CUPTI_ERROR_INVALID_PARAMETER;
  auto refused = [params](const std::string& holder) {
    if (params && params->oldSubscriberName && params->oldSubscriberSize > 0) {
      std::strncpy(params->oldSubscriberName, holder.c_str(), params->oldSubscriberSize - 1);
      params->oldSubscriberName[params->oldSubscriberSize - 1] = '\0';
    }
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  };
  const char* refuse = std::getenv("SIMGPU_REFUSE_SUBSCRIBE");
  if (refuse && std::strcmp(refuse, "1") == 0) return refused("Nsight Systems");
  std::lock_guard<std::mutex> lock(g_mu);
  if (CUpti_Subscriber_st* held = g_subscriber.load()) return refused(held->name);
  const std::string name = params && params->subscriberName
                               ? std::string("CUPTI for ") + params->subscriberName
                               : std::string("CUPTI");
  auto* sub = new CUpti_Subscriber_st{callback, userdata, name};
  g_subscriber.store(sub, std::memory_order_release);
  *subscriber = sub;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                    void* userdata) {
  return cuptiSubscribe_v2(subscriber, callback, userdata, nullptr);
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!subscriber || g_subscriber.load() != subscriber) return CUPTI_ERROR_INVALID_PARAMETER;
  for (auto& d : g_enabled)
    for (auto& c : d) c.store(0, std::memory_order_relaxed);
  g_subscriber.store(nullptr, std::memory_order_release);
  g_retired->emplace_back(subscriber);
  return CUPTI_SUCCESS;
}

// SIMGPU_DRIVER_LACKS=PREFIX,...: callbacks whose names start with one of the prefixes stand for
// calls of a later CUDA than the driver's. As a real CUPTI newer than the driver answers (seen on
// an H200, driver 580 / CUDA 13.0, with CUPTI 13.1 and 13.5), enabling one is INVALID_PARAMETER
// while the name table still has it.
static bool driver_lacks(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  const char* list = std::getenv("SIMGPU_DRIVER_LACKS");
  const char* name = nullptr;
  if (!list || !*list || cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || !name) return false;
  const std::string all(list);
  for (size_t at = 0; at <= all.size();) {
    size_t end = all.find(',', at);
    if (end == std::string::npos) end = all.size();
    const std::string prefix = all.substr(at, end - at);
    if (!prefix.empty() && std::strncmp(name, prefix.c_str(), prefix.size()) == 0) return true;
    at = end + 1;
  }
  return false;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                         CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (!subscriber || subscriber != g_subscriber.load()) return CUPTI_ERROR_INVALID_PARAMETER;
  if (domain <= CUPTI_CB_DOMAIN_INVALID || domain >= CUPTI_CB_DOMAIN_SIZE || cbid >= domain_size(domain))
    return CUPTI_ERROR_INVALID_PARAMETER;
  if (enable && driver_lacks(domain, cbid)) return CUPTI_ERROR_INVALID_PARAMETER;
  g_enabled[domain][cbid].store(enable ? 1 : 0, std::memory_order_relaxed);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                       CUpti_CallbackDomain domain) {
  if (!subscriber || subscriber != g_subscriber.load()) return CUPTI_ERROR_INVALID_PARAMETER;
  if (domain <= CUPTI_CB_DOMAIN_INVALID || domain >= CUPTI_CB_DOMAIN_SIZE) return CUPTI_ERROR_INVALID_PARAMETER;
  for (uint32_t c = 0; c < domain_size(domain); ++c) g_enabled[domain][c].store(enable ? 1 : 0, std::memory_order_relaxed);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle subscriber) {
  for (int d = CUPTI_CB_DOMAIN_DRIVER_API; d < CUPTI_CB_DOMAIN_SIZE; ++d) {
    const CUptiResult r = cuptiEnableDomain(enable, subscriber, static_cast<CUpti_CallbackDomain>(d));
    if (r != CUPTI_SUCCESS) return r;
  }
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetCallbackState(uint32_t* enable, CUpti_SubscriberHandle subscriber,
                                           CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (!enable || !subscriber || subscriber != g_subscriber.load()) return CUPTI_ERROR_INVALID_PARAMETER;
  if (domain <= CUPTI_CB_DOMAIN_INVALID || domain >= CUPTI_CB_DOMAIN_SIZE || cbid >= domain_size(domain))
    return CUPTI_ERROR_INVALID_PARAMETER;
  *enable = g_enabled[domain][cbid].load(std::memory_order_relaxed);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
  if (!name) return CUPTI_ERROR_INVALID_PARAMETER;
  const char* found = nullptr;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
    found = lookup(kRuntimeCallbackNames, sizeof kRuntimeCallbackNames / sizeof *kRuntimeCallbackNames, cbid);
  else if (domain == CUPTI_CB_DOMAIN_DRIVER_API)
    found = lookup(kDriverCallbackNames, sizeof kDriverCallbackNames / sizeof *kDriverCallbackNames, cbid);
  if (!found) return CUPTI_ERROR_INVALID_PARAMETER;
  *name = found;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSupportedDomains(size_t* domainCount, CUpti_DomainTable* domainTable) {
  static CUpti_CallbackDomain domains[] = {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_CB_DOMAIN_RUNTIME_API,
                                           CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CB_DOMAIN_SYNCHRONIZE,
                                           CUPTI_CB_DOMAIN_NVTX, CUPTI_CB_DOMAIN_STATE};
  if (!domainCount || !domainTable) return CUPTI_ERROR_INVALID_PARAMETER;
  *domainCount = sizeof domains / sizeof *domains;
  *domainTable = domains;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
  if (!str) return CUPTI_ERROR_INVALID_PARAMETER;
  const char* found = lookup(kResultNames, sizeof kResultNames / sizeof *kResultNames, result);
  if (!found) return CUPTI_ERROR_INVALID_PARAMETER;
  *str = found;
  return CUPTI_SUCCESS;
}

}  // extern "C"
