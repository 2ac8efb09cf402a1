// SIMULATION tests of the simgpu fakes themselves (not of traintime): callbacks, record layouts
// read back with cuptiActivityGetNextRecord, correlation ids, streams, flushing, graphs, NCCL.
#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "profiler_client.h"
#include "sim_costs.h"
#include "simgpu/engine.h"
#include "simgpu/nvcc_runtime_decls.h"

using namespace simtest;

namespace {

char g_kernel_stub;
const char* const kKernelName = "_Z10sim_kernelPfi";

cudaKernel_t test_kernel() {
  static cudaKernel_t k = [] {
    static const char fatbin[] = "test";
    void** h = __cudaRegisterFatBinary(const_cast<char*>(fatbin));
    __cudaRegisterFunction(h, &g_kernel_stub, nullptr, kKernelName, -1, nullptr, nullptr, nullptr, nullptr, nullptr);
    cudaKernel_t out = nullptr;
    __cudaGetKernel(&out, &g_kernel_stub);
    return out;
  }();
  return k;
}

cudaError_t launch(unsigned blocks, cudaStream_t s) {
  void* args[1] = {nullptr};
  return __cudaLaunchKernel(test_kernel(), dim3(blocks), dim3(128), args, 0, s);
}

// Starts each test from delivered, empty collections.
struct Fresh {
  Fresh() {
    cudaDeviceSynchronize();
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    reset();
  }
};

std::vector<ApiEvent> api_events() {
  std::lock_guard<std::mutex> lock(collected().mu);
  return collected().api;
}

std::vector<Record> all_records() {
  std::lock_guard<std::mutex> lock(collected().mu);
  return collected().records;
}

const ApiEvent* find_event(const std::vector<ApiEvent>& ev, CUpti_CallbackDomain d, CUpti_CallbackId cbid,
                           CUpti_ApiCallbackSite site, size_t nth = 0) {
  for (const auto& e : ev)
    if (e.domain == d && e.cbid == cbid && e.site == site && nth-- == 0) return &e;
  return nullptr;
}

}  // namespace

TEST_CASE("a <<<>>> launch raises nested runtime and driver callbacks with distinct correlation ids") {
  Profiler p;
  REQUIRE(p.subscribe_result == CUPTI_SUCCESS);
  cudaStream_t s;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  Fresh fresh;
  REQUIRE(launch(10, s) == cudaSuccess);
  const auto ev = api_events();
  REQUIRE(ev.size() == 4);
  CHECK(ev[0].domain == CUPTI_CB_DOMAIN_RUNTIME_API);
  CHECK(ev[0].cbid == CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000);
  CHECK(ev[0].site == CUPTI_API_ENTER);
  CHECK(ev[0].function == "__cudaLaunchKernel");
  CHECK(ev[0].symbol == kKernelName);
  CHECK(ev[1].domain == CUPTI_CB_DOMAIN_DRIVER_API);
  CHECK(ev[1].cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
  CHECK(ev[1].depth == 1);
  CHECK(ev[2].domain == CUPTI_CB_DOMAIN_DRIVER_API);
  CHECK(ev[2].site == CUPTI_API_EXIT);
  CHECK(ev[3].domain == CUPTI_CB_DOMAIN_RUNTIME_API);
  CHECK(ev[3].site == CUPTI_API_EXIT);
  CHECK(ev[0].correlation == ev[3].correlation);
  CHECK(ev[1].correlation == ev[2].correlation);
  CHECK(ev[0].correlation != ev[1].correlation);
  CHECK(ev[0].grid_x == 10);  // runtime functionParams
  CHECK(ev[1].grid_x == 10);  // driver cuLaunchKernel_params
  CHECK(ev[1].block_x == 128);

  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  REQUIRE(cuptiActivityFlushAll(0) == CUPTI_SUCCESS);
  const auto kernels = records_of<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  REQUIRE(kernels.size() == 1);
  const auto& k = kernels[0];
  CHECK(k.correlationId == ev[0].correlation);  // the runtime call's id
  CHECK(std::string(k.name) == kKernelName);
  CHECK(k.end - k.start == 10 * SIMGPU_NS_PER_BLOCK);
  CHECK(k.completed == k.end);
  CHECK(k.gridX == 10);
  CHECK(k.blockX == 128);
  uint32_t stream_id = 0;
  REQUIRE(cuptiGetStreamId(nullptr, reinterpret_cast<CUstream>(s), &stream_id) == CUPTI_SUCCESS);
  CHECK(k.streamId == stream_id);
  CHECK(k.graphId == 0);
}

TEST_CASE("cudaLaunchKernel is traced with its own callback id") {
  Profiler p;
  Fresh fresh;
  test_kernel();
  void* args[1] = {nullptr};
  REQUIRE(cudaLaunchKernel(&g_kernel_stub, dim3(3), dim3(32), args, 0, nullptr) == cudaSuccess);
  const auto ev = api_events();
  const ApiEvent* enter = find_event(ev, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_API_ENTER);
  REQUIRE(enter);
  CHECK(enter->function == "cudaLaunchKernel");
  CHECK(enter->func == &g_kernel_stub);
  CHECK(enter->grid_x == 3);
}

TEST_CASE("memcpy records carry the driver correlation id and the runtime one") {
  Profiler p;
  void *host = nullptr, *dev = nullptr;
  REQUIRE(cudaMallocHost(&host, 1 << 20) == cudaSuccess);
  REQUIRE(cudaMalloc(&dev, 1 << 20) == cudaSuccess);
  Fresh fresh;
  REQUIRE(cudaMemcpyAsync(dev, host, 1 << 20, cudaMemcpyHostToDevice, nullptr) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(dev, 7, 4096, nullptr) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cuptiActivityFlushAll(0) == CUPTI_SUCCESS);
  const auto ev = api_events();
  const ApiEvent* rt = find_event(ev, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, CUPTI_API_ENTER);
  const ApiEvent* drv = find_event(ev, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2, CUPTI_API_ENTER);
  REQUIRE(rt);
  REQUIRE(drv);
  CHECK(rt->correlation != drv->correlation);
  const auto copies = records_of<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  REQUIRE(copies.size() == 1);
  CHECK(copies[0].correlationId == drv->correlation);
  CHECK(copies[0].runtimeCorrelationId == rt->correlation);
  CHECK(copies[0].copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
  CHECK(copies[0].srcKind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED);
  CHECK(copies[0].dstKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  CHECK(copies[0].bytes == (1u << 20));
  CHECK(copies[0].end - copies[0].start == simgpu::copy_duration_ns(1 << 20, true));

  const ApiEvent* mdrv = find_event(ev, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async, CUPTI_API_ENTER);
  REQUIRE(mdrv);
  const auto sets = records_of<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
  REQUIRE(sets.size() == 1);
  CHECK(sets[0].correlationId == mdrv->correlation);
  CHECK(sets[0].bytes == 4096);
  CHECK(sets[0].value == 7);
  CHECK(sets[0].start >= copies[0].end);  // same stream: after the copy
}

TEST_CASE("API records use CUpti_ActivityAPI and share the callbacks' correlation ids") {
  Profiler p(true);
  Fresh fresh;
  REQUIRE(launch(1, nullptr) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cuptiActivityFlushAll(0) == CUPTI_SUCCESS);
  const auto ev = api_events();
  const ApiEvent* rt = find_event(ev, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, CUPTI_API_ENTER);
  const ApiEvent* drv = find_event(ev, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_API_ENTER);
  REQUIRE(rt);
  REQUIRE(drv);
  bool runtime_found = false, driver_found = false;
  for (const auto& r : records_of<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME))
    if (r.cbid == CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000 && r.correlationId == rt->correlation) {
      runtime_found = true;
      CHECK(r.start < r.end);
    }
  for (const auto& r : records_of<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_DRIVER))
    if (r.cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel && r.correlationId == drv->correlation) driver_found = true;
  CHECK(runtime_found);
  CHECK(driver_found);
}

TEST_CASE("work on one stream is serial, streams overlap, events order streams") {
  Profiler p;
  cudaStream_t s1, s2;
  cudaEvent_t e;
  REQUIRE(cudaStreamCreate(&s1) == cudaSuccess);
  REQUIRE(cudaStreamCreate(&s2) == cudaSuccess);
  REQUIRE(cudaEventCreate(&e) == cudaSuccess);
  Fresh fresh;
  REQUIRE(launch(1000, s1) == cudaSuccess);  // A
  REQUIRE(launch(1000, s1) == cudaSuccess);  // B
  REQUIRE(launch(500, s2) == cudaSuccess);   // C
  REQUIRE(cudaEventRecord(e, s1) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(s2, e, 0) == cudaSuccess);
  REQUIRE(launch(10, s2) == cudaSuccess);    // D
  REQUIRE(cudaStreamSynchronize(s2) == cudaSuccess);
  uint64_t now = 0;
  REQUIRE(cuptiGetTimestamp(&now) == CUPTI_SUCCESS);
  REQUIRE(cuptiActivityFlushAll(0) == CUPTI_SUCCESS);
  auto k = records_of<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  REQUIRE(k.size() == 4);
  std::sort(k.begin(), k.end(), [](const auto& a, const auto& b) { return a.correlationId < b.correlationId; });
  const auto &A = k[0], &B = k[1], &C = k[2], &D = k[3];
  CHECK(B.start >= A.end);                    // serial on s1
  CHECK(C.start < A.end);                     // s2 overlaps s1
  CHECK(D.start >= B.end);                    // waited for the event recorded after B
  CHECK(now >= D.end);                        // synchronize advanced the host clock
  REQUIRE(cudaEventDestroy(e) == cudaSuccess);
}

TEST_CASE("a normal flush returns only complete buffers, a forced flush incomplete records too") {
  Profiler p;
  cudaStream_t s;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  Fresh fresh;
  REQUIRE(launch(100000, s) == cudaSuccess);  // 10 ms of virtual GPU time, not waited for
  REQUIRE(cuptiActivityFlushAll(0) == CUPTI_SUCCESS);
  CHECK(records_of<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, true).empty());
  REQUIRE(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS);
  CHECK(records_of<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, false).empty());
  const auto incomplete = records_of<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, true);
  REQUIRE(incomplete.size() == 1);
  CHECK(incomplete[0].end == CUPTI_TIMESTAMP_UNKNOWN);
  CHECK(std::string(incomplete[0].name) == kKernelName);
  // Once the work is done a later kernel is delivered complete by a normal flush.
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  reset();
  REQUIRE(launch(1, s) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  REQUIRE(cuptiActivityFlushAll(0) == CUPTI_SUCCESS);
  CHECK(records_of<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size() == 1);
}

TEST_CASE("per-thread buffers are delivered out of launch order") {
  Profiler p;
  Fresh fresh;
  REQUIRE(launch(5, nullptr) == cudaSuccess);  // main thread, first
  std::thread([] { REQUIRE(launch(5, nullptr) == cudaSuccess); }).join();  // later, another thread
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cuptiActivityFlushAll(0) == CUPTI_SUCCESS);
  std::vector<Record> kernels;
  for (const auto& r : all_records())
    if (r.kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) kernels.push_back(r);
  REQUIRE(kernels.size() == 2);
  const auto& first = kernels[0].as<CUpti_ActivityKernel10>();
  const auto& second = kernels[1].as<CUpti_ActivityKernel10>();
  CHECK(kernels[0].delivery != kernels[1].delivery);  // separate per-thread buffers
  CHECK(first.correlationId > second.correlationId);  // the later launch arrives first
}

TEST_CASE("full buffers are delivered without a flush") {
  Profiler p;
  Fresh fresh;
  collected().buffer_size = 4 * sizeof(CUpti_ActivityKernel10);
  for (int i = 0; i < 20; ++i) REQUIRE(launch(1, nullptr) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  size_t n = 0;
  for (int i = 0; i < 500 && n < 16; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    n = records_of<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size();
  }
  collected().buffer_size = 64 * 1024;
  CHECK(n == 16);  // four full buffers; the fifth is still being filled
  REQUIRE(cuptiActivityFlushAll(0) == CUPTI_SUCCESS);
  CHECK(records_of<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size() == 20);
}

TEST_CASE("graph kernels share the launch's correlation id and carry graph and node ids") {
  Profiler p;
  cudaStream_t s;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  Fresh fresh;
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
  for (int i = 0; i < 3; ++i) REQUIRE(launch(10 + i, s) == cudaSuccess);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
  std::vector<NodeEvent> nodes;
  {
    std::lock_guard<std::mutex> lock(collected().mu);
    nodes = collected().nodes;
  }
  REQUIRE(nodes.size() == 3);  // node-creation callbacks at capture time
  uint32_t graph_id = 0;
  REQUIRE(cuptiGetGraphId(reinterpret_cast<CUgraph>(graph), &graph_id) == CUPTI_SUCCESS);
  for (const auto& n : nodes) {
    CHECK(n.graph_id == graph_id);
    CHECK(n.node_type == CU_GRAPH_NODE_TYPE_KERNEL);
  }
  // Captured launches raised their callbacks but produced no GPU work.
  CHECK(find_event(api_events(), CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, CUPTI_API_ENTER, 2));
  REQUIRE(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS);
  CHECK(records_of<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, true).empty());

  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  // Instantiation clones every node (GRAPHNODE_CLONED names clone and original); the source
  // graph can go before the first replay, as PyTorch does it.
  std::vector<NodeEvent> clones;
  {
    std::lock_guard<std::mutex> lock(collected().mu);
    for (const auto& n : collected().nodes)
      if (n.original_id != 0) clones.push_back(n);
  }
  REQUIRE(clones.size() == 3);
  for (const auto& c : clones) {
    bool of_a_captured_node = false;
    for (const auto& n : nodes) of_a_captured_node = of_a_captured_node || n.node_id == c.original_id;
    CHECK(of_a_captured_node);
    for (const auto& n : nodes) CHECK(n.node_id != c.node_id);  // ids of their own
  }
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
  REQUIRE(cuptiActivityFlushAll(0) == CUPTI_SUCCESS);
  const auto ev = api_events();
  const ApiEvent* l1 = find_event(ev, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, CUPTI_API_ENTER, 0);
  const ApiEvent* l2 = find_event(ev, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, CUPTI_API_ENTER, 1);
  const ApiEvent* d1 = find_event(ev, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, CUPTI_API_ENTER, 0);
  REQUIRE(l1);
  REQUIRE(l2);
  REQUIRE(d1);
  CHECK(d1->correlation != l1->correlation);
  const auto k = records_of<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  REQUIRE(k.size() == 6);
  size_t first = 0, second = 0;
  for (const auto& r : k) {
    CHECK(r.graphId == graph_id);
    bool a_clone = false;  // records of a replay carry the exec's clone ids
    for (const auto& c : clones) a_clone = a_clone || c.node_id == r.graphNodeId;
    CHECK(a_clone);
    if (r.correlationId == l1->correlation) ++first;
    if (r.correlationId == l2->correlation) ++second;
  }
  CHECK(first == 3);
  CHECK(second == 3);
}

TEST_CASE("callback names and result strings come from the toolkit headers") {
  const char* name = nullptr;
  REQUIRE(cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, &name) == CUPTI_SUCCESS);
  CHECK(std::string(name) == "__cudaLaunchKernel_v13000");
  REQUIRE(cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, &name) == CUPTI_SUCCESS);
  CHECK(std::string(name) == "cudaGraphLaunch_v10000");
  REQUIRE(cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &name) == CUPTI_SUCCESS);
  CHECK(std::string(name) == "cuLaunchKernel");
  CHECK(cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE, &name) == CUPTI_ERROR_INVALID_PARAMETER);
  const char* str = nullptr;
  REQUIRE(cuptiGetResultString(CUPTI_ERROR_INVALID_KIND, &str) == CUPTI_SUCCESS);
  CHECK(std::string(str) == "CUPTI_ERROR_INVALID_KIND");
  uint32_t version = 0;
  REQUIRE(cuptiGetVersion(&version) == CUPTI_SUCCESS);
  CHECK(version == 130001);
}

TEST_CASE("external correlation records precede the API records made under a pushed id") {
  Profiler p(true);
  REQUIRE(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) == CUPTI_SUCCESS);
  Fresh fresh;
  REQUIRE(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 4242) == CUPTI_SUCCESS);
  REQUIRE(launch(1, nullptr) == cudaSuccess);
  uint64_t last = 0;
  REQUIRE(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last) == CUPTI_SUCCESS);
  CHECK(last == 4242);
  CHECK(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last) == CUPTI_ERROR_QUEUE_EMPTY);
  REQUIRE(launch(1, nullptr) == cudaSuccess);  // after the pop: no external record
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cuptiActivityFlushAll(0) == CUPTI_SUCCESS);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  const auto ev = api_events();
  const ApiEvent* rt = find_event(ev, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, CUPTI_API_ENTER);
  REQUIRE(rt);
  const auto ext = records_of<CUpti_ActivityExternalCorrelation>(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  REQUIRE(ext.size() == 2);  // the runtime call and its nested driver call
  CHECK(ext[0].externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
  CHECK(ext[0].externalId == 4242);
  CHECK(ext[0].correlationId == rt->correlation);
}

TEST_CASE("driver queries answer for one simulated device, also through cuGetProcAddress") {
  REQUIRE(cuInit(0) == CUDA_SUCCESS);
  int count = 0, version = 0;
  REQUIRE(cuDeviceGetCount(&count) == CUDA_SUCCESS);
  CHECK(count == 1);
  REQUIRE(cuDriverGetVersion(&version) == CUDA_SUCCESS);
  CHECK(version == CUDA_VERSION);
  char name[64] = {};
  REQUIRE(cuDeviceGetName(name, sizeof name, 0) == CUDA_SUCCESS);
  CHECK(std::string(name).find("SIMULATED") != std::string::npos);
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status;
  REQUIRE(cuGetProcAddress("cuDeviceGetUuid", &fn, CUDA_VERSION, 0, &status) == CUDA_SUCCESS);
  CHECK(status == CU_GET_PROC_ADDRESS_SUCCESS);
  CUuuid a{}, b{};
  REQUIRE(reinterpret_cast<CUresult (*)(CUuuid*, CUdevice)>(fn)(&a, 0) == CUDA_SUCCESS);
  REQUIRE(cuDeviceGetUuid(&b, 0) == CUDA_SUCCESS);
  CHECK(std::memcmp(a.bytes, b.bytes, sizeof a.bytes) == 0);
  CHECK(cuGetProcAddress("cuNoSuchFunction", &fn, CUDA_VERSION, 0, &status) == CUDA_ERROR_NOT_FOUND);
  REQUIRE(cudaFree(nullptr) == cudaSuccess);  // the runtime makes the primary context current
  CUcontext ctx = nullptr;
  REQUIRE(cuCtxGetCurrent(&ctx) == CUDA_SUCCESS);
  REQUIRE(ctx);
  unsigned long long id = 0;
  REQUIRE(cuCtxGetId(ctx, &id) == CUDA_SUCCESS);
  uint32_t cupti_id = 0;
  REQUIRE(cuptiGetContextId(ctx, &cupti_id) == CUPTI_SUCCESS);
  CHECK(id == cupti_id);
}

TEST_CASE("activity attributes read back what was set, with CUPTI's defaults otherwise") {
  size_t value = 0, size = sizeof value;
  REQUIRE(cuptiActivityGetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &size, &value) == CUPTI_SUCCESS);
  CHECK(value == (3u << 20));
  value = 8u << 20;
  REQUIRE(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &size, &value) == CUPTI_SUCCESS);
  value = 0;
  REQUIRE(cuptiActivityGetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &size, &value) == CUPTI_SUCCESS);
  CHECK(value == (8u << 20));
  uint8_t per_thread = 0;
  size = sizeof per_thread;
  REQUIRE(cuptiActivityGetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &size, &per_thread) == CUPTI_SUCCESS);
  CHECK(per_thread == 1);
}

TEST_CASE("cuptiActivityFlushPeriod delivers complete buffers without an explicit flush") {
  Profiler p;
  Fresh fresh;
  REQUIRE(launch(1, nullptr) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cuptiActivityFlushPeriod(5) == CUPTI_SUCCESS);
  size_t n = 0;
  for (int i = 0; i < 500 && n == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    n = records_of<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size();
  }
  REQUIRE(cuptiActivityFlushPeriod(0) == CUPTI_SUCCESS);
  CHECK(n == 1);
}

TEST_CASE("a second subscriber is refused as by CUPTI before 13.3") {
  Profiler p;
  REQUIRE(p.subscribe_result == CUPTI_SUCCESS);
  CUpti_SubscriberHandle other = nullptr;
  CHECK(cuptiSubscribe(&other, on_callback, nullptr) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
}

TEST_CASE("SIMGPU_REFUSE_SUBSCRIBE refuses the first subscriber", "[.refuse]") {
  CUpti_SubscriberHandle sub = nullptr;
  CHECK(cuptiSubscribe(&sub, on_callback, nullptr) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
}

TEST_CASE("SIMGPU_DROP_EVERY drops every Nth record and counts it", "[.drop]") {
  Profiler p;
  Fresh fresh;
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  for (int i = 0; i < 9; ++i) REQUIRE(launch(1, nullptr) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cuptiActivityFlushAll(0) == CUPTI_SUCCESS);
  CHECK(records_of<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size() == 6);
  REQUIRE(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS);
  CHECK(dropped == 3);
  REQUIRE(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS);
  CHECK(dropped == 0);  // counted since the last call, as CUPTI does
}

// ---- NCCL ----

namespace {
int g_broadcast_calls = 0;
ncclComm_t make_comm(int nranks, int rank) {
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclComm_t c = nullptr;
  REQUIRE(ncclCommInitRank(&c, nranks, id, rank) == ncclSuccess);
  return c;
}
}  // namespace

// An interposer in the executable, as a preloaded profiler would be.
extern "C" ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      int root, ncclComm_t comm, cudaStream_t stream) {
  ++g_broadcast_calls;
  return pncclBroadcast(sendbuff, recvbuff, count, datatype, root, comm, stream);
}

TEST_CASE("ncclBcast reaches ncclBroadcast through the dynamic symbol") {
  ncclComm_t c = make_comm(2, 0);
  void* buf = nullptr;
  REQUIRE(cudaMalloc(&buf, 1024) == cudaSuccess);
  g_broadcast_calls = 0;
  REQUIRE(ncclBcast(buf, 256, ncclFloat32, 0, c, nullptr) == ncclSuccess);
  CHECK(g_broadcast_calls == 1);
  int version = 0;
  REQUIRE(ncclGetVersion(&version) == ncclSuccess);
  CHECK(version == NCCL_VERSION_CODE);
  ncclCommDestroy(c);
}

TEST_CASE("NCCL at world size 1 launches no collective kernel") {
  Profiler p;
  ncclComm_t c = make_comm(1, 0);
  void *a = nullptr, *b = nullptr;
  REQUIRE(cudaMalloc(&a, 4096) == cudaSuccess);
  REQUIRE(cudaMalloc(&b, 4096) == cudaSuccess);
  Fresh fresh;
  REQUIRE(ncclAllReduce(a, a, 1024, ncclFloat32, ncclSum, c, nullptr) == ncclSuccess);  // in place: nothing
  REQUIRE(ncclAllReduce(a, b, 1024, ncclFloat32, ncclSum, c, nullptr) == ncclSuccess);  // out of place: a copy
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cuptiActivityFlushAll(0) == CUPTI_SUCCESS);
  CHECK(records_of<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, true).empty());
  const auto copies = records_of<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  REQUIRE(copies.size() == 1);
  CHECK(copies[0].copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD);
  CHECK(copies[0].bytes == 4096);
  ncclCommDestroy(c);
}

TEST_CASE("NCCL kernels are named as NCCL 2.28 names them, launched inside the call, one per group") {
  Profiler p;
  ncclComm_t c = make_comm(4, 0);
  void* buf = nullptr;
  REQUIRE(cudaMalloc(&buf, 8 << 20) == cudaSuccess);
  Fresh fresh;
  REQUIRE(ncclAllReduce(buf, buf, 1 << 20, ncclFloat32, ncclSum, c, nullptr) == ncclSuccess);
  const auto ev = api_events();
  const ApiEvent* launch_ev = find_event(ev, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_API_ENTER);
  REQUIRE(launch_ev);
  CHECK(launch_ev->symbol == "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  REQUIRE(ncclAllGather(buf, buf, 1024, ncclBfloat16, c, nullptr) == ncclSuccess);
  REQUIRE(ncclBroadcast(buf, buf, 1024, ncclInt8, 0, c, nullptr) == ncclSuccess);
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclSend(buf, 1000, ncclFloat32, 1, c, nullptr) == ncclSuccess);
  REQUIRE(ncclRecv(buf, 1000, ncclFloat32, 3, c, nullptr) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cuptiActivityFlushAll(0) == CUPTI_SUCCESS);
  auto k = records_of<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  std::sort(k.begin(), k.end(), [](const auto& a, const auto& b) { return a.correlationId < b.correlationId; });
  REQUIRE(k.size() == 4);
  CHECK(std::string(k[0].name) == "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  CHECK(std::string(k[1].name) == "ncclDevKernel_AllGather_RING_LL");
  CHECK(std::string(k[2].name) == "ncclDevKernel_Broadcast_RING_LL");
  CHECK(std::string(k[3].name) == "ncclDevKernel_SendRecv");
  // 4 MiB AllReduce on 4 ranks: 8 us + S * 2(n-1)/n / 100 GB/s (no straggler configured).
  CHECK(k[0].end - k[0].start == 8000 + 62915);
  CHECK(k[3].end - k[3].start == 8000 + 80);  // 2 x 4000 B grouped into one kernel
  ncclCommDestroy(c);
}

TEST_CASE("a straggler delays every rank's collective to the slowest arrival", "[.straggler]") {
  // Run with SIMGPU_SLOWDOWN=1:2 as rank 0 of 2: rank 1 needs twice our time to arrive.
  Profiler p;
  void* buf = nullptr;
  cudaStream_t s;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  REQUIRE(cudaMalloc(&buf, 1 << 20) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  uint64_t epoch = 0;
  cuptiGetTimestamp(&epoch);
  ncclComm_t c = make_comm(2, 0);  // ranks start together when the communicator is created
  Fresh fresh;
  REQUIRE(launch(1000, s) == cudaSuccess);
  REQUIRE(ncclAllReduce(buf, buf, 1000, ncclFloat32, ncclSum, c, s) == ncclSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  REQUIRE(cuptiActivityFlushAll(0) == CUPTI_SUCCESS);
  auto k = records_of<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  REQUIRE(k.size() == 2);
  std::sort(k.begin(), k.end(), [](const auto& a, const auto& b) { return a.correlationId < b.correlationId; });
  const uint64_t ready = k[0].end;
  const uint64_t segment = ready - epoch;
  CHECK(k[1].start == ready);
  CHECK(k[1].end == epoch + 2 * segment + 8000 + 40);  // 4000 B x 2(n-1)/n / 100
  ncclCommDestroy(c);
}

TEST_CASE("SIMGPU_NCCL_FAIL makes one function fail with errno set", "[.ncclfail]") {
  // Run with SIMGPU_NCCL_FAIL=ncclAllReduce:2
  ncclComm_t c = make_comm(2, 0);
  errno = 0;
  CHECK(ncclAllReduce(nullptr, nullptr, 1, ncclFloat32, ncclSum, c, nullptr) == ncclSystemError);
  CHECK(errno == EREMOTEIO);
  int n = 0;
  CHECK(ncclCommCount(c, &n) == ncclSuccess);
  CHECK(n == 2);
  ncclCommDestroy(c);
}
