// SIMULATION tests: a minimal CUPTI client that subscribes and collects the way a profiler
// does, talking to the fake libraries directly (not traintime), so the fakes' behaviour is
// tested on its own.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <cupti.h>

namespace simtest {

struct ApiEvent {
  CUpti_CallbackDomain domain;
  CUpti_CallbackId cbid;
  CUpti_ApiCallbackSite site;
  std::string function;
  std::string symbol;
  uint32_t correlation;
  const void* params;  // valid only during the callback
  int depth;           // nesting depth on the calling thread at ENTER
  unsigned grid_x;     // launches: copied from functionParams during the callback
  unsigned block_x;
  const void* func;
};

struct NodeEvent {
  uint64_t node_id;
  uint32_t graph_id;
  int node_type;
  uint64_t original_id;  // clones (GRAPHNODE_CLONED at instantiation): the node cloned; else 0
};

struct Record {
  CUpti_ActivityKind kind;
  std::vector<uint8_t> bytes;  // the record as delivered
  bool incomplete;             // cuptiActivityGetNextRecord said INVALID_KIND
  size_t delivery;             // index of the buffer delivery it came in
  template <class T> const T& as() const { return *reinterpret_cast<const T*>(bytes.data()); }
};

struct Collected {
  std::mutex mu;
  std::vector<ApiEvent> api;
  std::vector<NodeEvent> nodes;
  std::vector<Record> records;
  size_t deliveries = 0;
  size_t buffer_size = 64 * 1024;
};

inline Collected& collected() {
  static Collected* c = new Collected();
  return *c;
}

inline thread_local int tls_depth = 0;

inline void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  Collected& c = collected();
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    if (cbid != CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED && cbid != CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) return;
    const auto* rd = static_cast<const CUpti_ResourceData*>(data);
    const auto* gd = static_cast<const CUpti_GraphData*>(rd->resourceDescriptor);
    NodeEvent n{};
    cuptiGetGraphNodeId(gd->node, &n.node_id);
    if (gd->graph) cuptiGetGraphId(gd->graph, &n.graph_id);
    if (gd->originalNode) cuptiGetGraphNodeId(gd->originalNode, &n.original_id);
    n.node_type = gd->nodeType;
    std::lock_guard<std::mutex> lock(c.mu);
    c.nodes.push_back(n);
    return;
  }
  const auto* cd = static_cast<const CUpti_CallbackData*>(data);
  if (cd->callbackSite == CUPTI_API_EXIT) --tls_depth;
  ApiEvent e{domain, cbid, cd->callbackSite, cd->functionName ? cd->functionName : "",
             cd->symbolName ? cd->symbolName : "", cd->correlationId, cd->functionParams, tls_depth, 0, 0, nullptr};
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && (cbid == CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000 ||
                                                cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000)) {
    const auto* p = static_cast<const cudaLaunchKernel_v7000_params*>(cd->functionParams);
    e.grid_x = p->gridDim.x;
    e.block_x = p->blockDim.x;
    e.func = p->func;
  } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) {
    const auto* p = static_cast<const cuLaunchKernel_params*>(cd->functionParams);
    e.grid_x = p->gridDimX;
    e.block_x = p->blockDimX;
  }
  if (cd->callbackSite == CUPTI_API_ENTER) ++tls_depth;
  std::lock_guard<std::mutex> lock(c.mu);
  c.api.push_back(e);
}

inline void CUPTIAPI on_request(uint8_t** buffer, size_t* size, size_t* max_records) {
  Collected& c = collected();
  *size = c.buffer_size;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

inline void CUPTIAPI on_complete(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  Collected& c = collected();
  std::lock_guard<std::mutex> lock(c.mu);
  const size_t delivery = c.deliveries++;
  CUpti_Activity* rec = nullptr;
  for (;;) {
    const CUptiResult r = cuptiActivityGetNextRecord(buffer, valid, &rec);
    if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
    if (r != CUPTI_SUCCESS && r != CUPTI_ERROR_INVALID_KIND) break;
    if (r == CUPTI_ERROR_INVALID_KIND && !rec) break;
    size_t size = 0;
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: size = sizeof(CUpti_ActivityKernel10); break;
      case CUPTI_ACTIVITY_KIND_MEMCPY: size = sizeof(CUpti_ActivityMemcpy6); break;
      case CUPTI_ACTIVITY_KIND_MEMSET: size = sizeof(CUpti_ActivityMemset4); break;
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: size = sizeof(CUpti_ActivityAPI); break;
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: size = sizeof(CUpti_ActivityExternalCorrelation); break;
      default: size = sizeof(CUpti_Activity); break;
    }
    Record out{rec->kind, std::vector<uint8_t>(reinterpret_cast<uint8_t*>(rec), reinterpret_cast<uint8_t*>(rec) + size),
               r == CUPTI_ERROR_INVALID_KIND, delivery};
    c.records.push_back(std::move(out));
  }
  std::free(buffer);
}

// Subscribes like a profiler: runtime + driver + resource callbacks, kernel/memcpy/memset records.
struct Profiler {
  CUpti_SubscriberHandle sub = nullptr;
  CUptiResult subscribe_result;
  explicit Profiler(bool api_records = false) {
    subscribe_result = cuptiSubscribe(&sub, on_callback, nullptr);
    if (subscribe_result != CUPTI_SUCCESS) return;
    cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
    cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API);
    cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED);
    cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
    cuptiActivityRegisterCallbacks(on_request, on_complete);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
    if (api_records) {
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER);
    }
  }
  ~Profiler() {
    if (sub) cuptiUnsubscribe(sub);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER);
  }
};

template <class T>
std::vector<T> records_of(CUpti_ActivityKind kind, bool include_incomplete = false) {
  Collected& c = collected();
  std::lock_guard<std::mutex> lock(c.mu);
  std::vector<T> out;
  for (const auto& r : c.records)
    if (r.kind == kind && (include_incomplete || !r.incomplete)) out.push_back(r.as<T>());
  return out;
}

inline void reset() {
  Collected& c = collected();
  std::lock_guard<std::mutex> lock(c.mu);
  c.api.clear();
  c.nodes.clear();
  c.records.clear();
  c.deliveries = 0;
}

}  // namespace simtest
