// SIMULATION: the fake libcudart.so.13 — the subset of the CUDA runtime that sim_train and the
// fake NCCL use. Every call is traced like the real runtime: a runtime-domain callback around
// the call and, for work submission, a nested driver-domain call with its own correlation id.
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <mutex>
#include <vector>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>  // the *_params structs and callback ids, the way CUPTI clients see them

#include "simgpu/engine.h"
#include "sim_costs.h"

#include "simgpu/nvcc_runtime_decls.h"

namespace {

thread_local cudaError_t tls_last_error = cudaSuccess;

void init_runtime() {
  simgpu_ensure_init();
  simgpu_make_context_current();
}

// One traced runtime call: ENTER on construction, EXIT in finish().
class RuntimeCall {
 public:
  RuntimeCall(uint32_t cbid, const char* name, const void* params, const char* symbol = nullptr) {
    init_runtime();
    simgpu_api_enter(&frame_, 2, cbid, name, symbol, params, &result_);
  }
  cudaError_t finish(cudaError_t r) {
    result_ = r;
    simgpu_api_exit(&frame_);
    if (r != cudaSuccess) tls_last_error = r;
    return r;
  }

 private:
  simgpu_api_frame frame_{};
  cudaError_t result_ = cudaSuccess;
};

// The driver call a runtime call makes, traced in the driver domain.
class DriverCall {
 public:
  DriverCall(uint32_t cbid, const char* name, const void* params, const char* symbol = nullptr) {
    simgpu_api_enter(&frame_, 1, cbid, name, symbol, params, &result_);
  }
  int finish(int cuda_error) {
    result_ = cuda_error == cudaSuccess ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    simgpu_api_exit(&frame_);
    return cuda_error;
  }

 private:
  simgpu_api_frame frame_{};
  CUresult result_ = CUDA_SUCCESS;
};

// The plain name is computed once per call site (a function-local static), not per call.
#define RT_CALL(api, ...)                                                                 \
  static const char* const name_ = simgpu_rt_name(#api);                                  \
  api##_params params_{__VA_ARGS__};                                                      \
  RuntimeCall call_(CUPTI_RUNTIME_TRACE_CBID_##api, name_, &params_)

// "cudaMalloc_v3020" -> "cudaMalloc": the callback's functionName is the plain API name.
const char* simgpu_rt_name(const char* versioned) {
  static std::mutex mu;
  static std::map<std::string, std::string>* names = new std::map<std::string, std::string>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = names->find(versioned);
  if (it == names->end()) {
    std::string plain(versioned);
    const size_t v = plain.rfind("_v");
    if (v != std::string::npos) plain.resize(v);
    it = names->emplace(versioned, plain).first;
  }
  return it->second.c_str();
}

// Simulated memory: device allocations are address ranges nobody dereferences; pinned host
// allocations are real memory whose range is remembered so copies know their memory kind.
struct Allocation {
  size_t size = 0;
  bool pool = false;  // cudaMallocAsync
};
using Ranges = std::map<uintptr_t, Allocation>;  // base -> allocation
struct Memory {
  std::mutex mu;
  uint64_t next_device = 0x7f0000000000ull;
  Ranges device;
  Ranges pinned;
};
Memory& memory() {
  static Memory* m = new Memory();
  return *m;
}

bool in_ranges(const Ranges& r, const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = r.upper_bound(a);
  if (it == r.begin()) return false;
  --it;
  return a < it->first + it->second.size;
}

// Inside a traced runtime call: tells the fake CUPTI (the innermost frame is that call's).
void report_memory(bool release, uint8_t kind, bool pool, uintptr_t address, size_t bytes, uint32_t stream) {
  simgpu_memory_op op{};
  op.release = release ? 1 : 0;
  op.memory_kind = kind;
  op.pool = pool ? 1 : 0;
  op.address = address;
  op.bytes = bytes;
  op.timestamp_ns = simgpu_host_now();
  const simgpu_api_frame* f = simgpu_current_frame();
  op.correlation_id = f ? f->correlation_id : 0;
  op.stream_id = stream;
  simgpu_report_memory(&op);
}

uintptr_t allocate_device(size_t size, bool pool, uint32_t stream) {
  Memory& m = memory();
  uint64_t base = 0;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    base = m.next_device;
    m.next_device += (size + 0xFFFF) & ~uint64_t{0xFFFF};
    m.device[base] = {size ? size : 1, pool};
  }
  report_memory(false, 3, pool, base, size ? size : 1, stream);
  return base;
}

// Forgets a range and reports its release (memory kind `kind`); unknown or null: nothing.
void release(Ranges& ranges, void* p, uint8_t kind, uint32_t stream) {
  if (!p) return;
  Memory& m = memory();
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    auto it = ranges.find(reinterpret_cast<uintptr_t>(p));
    if (it == ranges.end()) return;
    a = it->second;
    ranges.erase(it);
  }
  report_memory(true, kind, a.pool, reinterpret_cast<uintptr_t>(p), a.size, stream);
}

uint8_t memory_kind(const void* p) {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mu);
  if (in_ranges(m.device, p)) return 3;  // CUPTI_ACTIVITY_MEMORY_KIND_DEVICE
  if (in_ranges(m.pinned, p)) return 2;  // PINNED
  return 1;                              // PAGEABLE
}

uint64_t kernel_duration(dim3 grid) {
  const uint64_t blocks = uint64_t{grid.x} * grid.y * grid.z;
  const double ns = static_cast<double>(blocks * SIMGPU_NS_PER_BLOCK) * simgpu_slowdown(simgpu_rank());
  return static_cast<uint64_t>(ns + 0.5);
}

int enqueue_kernel(const char* name, dim3 grid, dim3 block, size_t shmem, cudaStream_t stream) {
  simgpu_launch l{};
  l.kind = SIMGPU_KERNEL;
  l.name = name;
  l.duration_ns = kernel_duration(grid);
  l.grid[0] = grid.x, l.grid[1] = grid.y, l.grid[2] = grid.z;
  l.block[0] = block.x, l.block[1] = block.y, l.block[2] = block.z;
  l.shared_mem = static_cast<uint32_t>(shmem);
  return simgpu_enqueue(stream, &l);
}

cudaError_t launch(uint32_t rt_cbid, const char* rt_name, const void* handle, dim3 grid, dim3 block,
                   void** args, size_t shmem, cudaStream_t stream, bool ptsz) {
  const char* name = simgpu_kernel_name(handle);
  cudaLaunchKernel_v7000_params rp{handle, grid, block, args, shmem, stream};
  RuntimeCall call(rt_cbid, rt_name, &rp, name);
  if (!name) return call.finish(cudaErrorInvalidDeviceFunction);
  cuLaunchKernel_params dp{reinterpret_cast<CUfunction>(const_cast<void*>(handle)), grid.x, grid.y, grid.z,
                           block.x, block.y, block.z, static_cast<unsigned>(shmem),
                           reinterpret_cast<CUstream>(stream), args, nullptr};
  DriverCall drv(ptsz ? CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz : CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
                 ptsz ? "cuLaunchKernel_ptsz" : "cuLaunchKernel", &dp, name);
  const int r = drv.finish(enqueue_kernel(name, grid, block, shmem, stream));
  return call.finish(static_cast<cudaError_t>(r));
}

// Creates an engine object (stream, event) into a typed runtime handle.
template <class Handle>
cudaError_t create_handle(Handle* out, int (*create)(void**)) {
  if (!out) return cudaErrorInvalidValue;
  void* h = nullptr;
  const int r = create(&h);
  if (r == cudaSuccess) *out = static_cast<Handle>(h);
  return static_cast<cudaError_t>(r);
}

struct CallConfig {
  dim3 grid, block;
  size_t shmem;
  cudaStream_t stream;
};
thread_local std::vector<CallConfig> tls_configs;

}  // namespace

extern "C" {

// ---- kernel registration (what nvcc's generated host code calls) ----
void** CUDARTAPI __cudaRegisterFatBinary(void* fatCubin) {
  static void* handles[1];
  handles[0] = fatCubin;
  return handles;
}
void CUDARTAPI __cudaRegisterFatBinaryEnd(void**) {}
void CUDARTAPI __cudaUnregisterFatBinary(void**) {}
void CUDARTAPI __cudaRegisterFunction(void**, const char* hostFun, char*, const char* deviceName, int,
                                      uint3*, uint3*, dim3*, dim3*, int*) {
  simgpu_register_kernel(hostFun, deviceName);
}
cudaError_t CUDARTAPI __cudaGetKernel(cudaKernel_t* kernel, const void* hostFun) {
  if (!kernel) return cudaErrorInvalidValue;
  void* h = simgpu_kernel_handle(hostFun);
  if (!h) return cudaErrorInvalidDeviceFunction;
  *kernel = static_cast<cudaKernel_t>(h);
  return cudaSuccess;
}
unsigned CUDARTAPI __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                               struct CUstream_st* stream) {
  tls_configs.push_back({gridDim, blockDim, sharedMem, stream});
  return 0;
}
cudaError_t CUDARTAPI __cudaPopCallConfiguration(dim3* gridDim, dim3* blockDim, size_t* sharedMem,
                                                 void* stream) {
  if (tls_configs.empty()) return cudaErrorMissingConfiguration;
  const CallConfig c = tls_configs.back();
  tls_configs.pop_back();
  *gridDim = c.grid;
  *blockDim = c.block;
  *sharedMem = c.shmem;
  *static_cast<cudaStream_t*>(stream) = c.stream;
  return cudaSuccess;
}

// ---- launches ----
cudaError_t CUDARTAPI __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void** args,
                                         size_t sharedMem, cudaStream_t stream) {
  return launch(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, "__cudaLaunchKernel", kernel, gridDim,
                blockDim, args, sharedMem, stream, false);
}
cudaError_t CUDARTAPI __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void** args,
                                              size_t sharedMem, cudaStream_t stream) {
  return launch(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000, "__cudaLaunchKernel_ptsz", kernel,
                gridDim, blockDim, args, sharedMem, stream, true);
}
cudaError_t CUDARTAPI cudaLaunchKernel(const void* func, dim3 gridDim, dim3 blockDim, void** args,
                                       size_t sharedMem, cudaStream_t stream) {
  return launch(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, "cudaLaunchKernel", func, gridDim, blockDim,
                args, sharedMem, stream, false);
}

// The extensible launch (PyTorch and NCCL use it for launch attributes): traced as
// cudaLaunchKernelExC around the driver's cuLaunchKernelEx, as the real runtime does.
cudaError_t CUDARTAPI cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func, void** args) {
  const char* name = simgpu_kernel_name(func);
  cudaLaunchKernelExC_v11060_params rp{config, func, args};
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, "cudaLaunchKernelExC", &rp, name);
  if (!config) return call.finish(cudaErrorInvalidValue);
  if (!name) return call.finish(cudaErrorInvalidDeviceFunction);
  CUlaunchConfig dc{};
  dc.gridDimX = config->gridDim.x, dc.gridDimY = config->gridDim.y, dc.gridDimZ = config->gridDim.z;
  dc.blockDimX = config->blockDim.x, dc.blockDimY = config->blockDim.y, dc.blockDimZ = config->blockDim.z;
  dc.sharedMemBytes = static_cast<unsigned>(config->dynamicSmemBytes);
  dc.hStream = reinterpret_cast<CUstream>(config->stream);
  cuLaunchKernelEx_params dp{&dc, reinterpret_cast<CUfunction>(const_cast<void*>(func)), args, nullptr};
  DriverCall drv(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, "cuLaunchKernelEx", &dp, name);
  const int r = drv.finish(enqueue_kernel(name, config->gridDim, config->blockDim, config->dynamicSmemBytes,
                                          config->stream));
  return call.finish(static_cast<cudaError_t>(r));
}

// ---- memory ----
// Every allocation and release is reported to the fake CUPTI (MEMORY2 records) inside its call,
// with the call's correlation id; a release of an address never allocated reports nothing.
cudaError_t CUDARTAPI cudaMalloc(void** devPtr, size_t size) {
  RT_CALL(cudaMalloc_v3020, devPtr, size);
  if (!devPtr) return call_.finish(cudaErrorInvalidValue);
  *devPtr = reinterpret_cast<void*>(allocate_device(size, false, 0));
  return call_.finish(cudaSuccess);
}

cudaError_t CUDARTAPI cudaFree(void* devPtr) {
  RT_CALL(cudaFree_v3020, devPtr);
  release(memory().device, devPtr, 3, 0);
  return call_.finish(cudaSuccess);
}

// Stream-ordered allocation from the device's default memory pool (the pool itself is not
// simulated: each allocation is its own range, reported as a pool allocation).
cudaError_t CUDARTAPI cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream) {
  RT_CALL(cudaMallocAsync_v11020, devPtr, size, hStream);
  if (!devPtr) return call_.finish(cudaErrorInvalidValue);
  *devPtr = reinterpret_cast<void*>(allocate_device(size, true, simgpu_stream_id(hStream)));
  return call_.finish(cudaSuccess);
}

cudaError_t CUDARTAPI cudaFreeAsync(void* devPtr, cudaStream_t hStream) {
  RT_CALL(cudaFreeAsync_v11020, devPtr, hStream);
  release(memory().device, devPtr, 3, simgpu_stream_id(hStream));
  return call_.finish(cudaSuccess);
}

cudaError_t CUDARTAPI cudaMallocHost(void** ptr, size_t size) {
  RT_CALL(cudaMallocHost_v3020, ptr, size);
  if (!ptr) return call_.finish(cudaErrorInvalidValue);
  void* p = std::calloc(1, size ? size : 1);
  if (!p) return call_.finish(cudaErrorMemoryAllocation);
  Memory& m = memory();
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.pinned[reinterpret_cast<uintptr_t>(p)] = {size ? size : 1, false};
  }
  report_memory(false, 2, false, reinterpret_cast<uintptr_t>(p), size ? size : 1, 0);
  *ptr = p;
  return call_.finish(cudaSuccess);
}

cudaError_t CUDARTAPI cudaFreeHost(void* ptr) {
  RT_CALL(cudaFreeHost_v3020, ptr);
  release(memory().pinned, ptr, 2, 0);
  std::free(ptr);
  return call_.finish(cudaSuccess);
}

cudaError_t CUDARTAPI cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                                      cudaStream_t stream) {
  RT_CALL(cudaMemcpyAsync_v3020, dst, src, count, kind, stream);
  const uint8_t src_kind = memory_kind(src), dst_kind = memory_kind(dst);
  const bool src_dev = src_kind == 3, dst_dev = dst_kind == 3;
  if (kind == cudaMemcpyDefault)
    kind = src_dev ? (dst_dev ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                   : (dst_dev ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  simgpu_launch l{};
  l.kind = SIMGPU_MEMCPY;
  l.bytes = count;
  l.src_kind = src_kind;
  l.dst_kind = dst_kind;
  const auto dptr = reinterpret_cast<CUdeviceptr>(dst);
  const auto sptr = reinterpret_cast<CUdeviceptr>(src);
  const auto cs = reinterpret_cast<CUstream>(stream);
  int r;
  switch (kind) {
    case cudaMemcpyHostToDevice: {
      l.copy_kind = 1;
      l.duration_ns = simgpu::copy_duration_ns(count, true);
      cuMemcpyHtoDAsync_v2_params p{dptr, src, count, cs};
      DriverCall d(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2, "cuMemcpyHtoDAsync_v2", &p);
      r = d.finish(simgpu_enqueue(stream, &l));
      break;
    }
    case cudaMemcpyDeviceToHost: {
      l.copy_kind = 2;
      l.duration_ns = simgpu::copy_duration_ns(count, true);
      cuMemcpyDtoHAsync_v2_params p{dst, sptr, count, cs};
      DriverCall d(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2, "cuMemcpyDtoHAsync_v2", &p);
      r = d.finish(simgpu_enqueue(stream, &l));
      break;
    }
    case cudaMemcpyDeviceToDevice: {
      l.copy_kind = 8;
      l.duration_ns = simgpu::copy_duration_ns(count, false);
      cuMemcpyDtoDAsync_v2_params p{dptr, sptr, count, cs};
      DriverCall d(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2, "cuMemcpyDtoDAsync_v2", &p);
      r = d.finish(simgpu_enqueue(stream, &l));
      break;
    }
    case cudaMemcpyHostToHost: {
      l.copy_kind = 9;
      l.duration_ns = simgpu::copy_duration_ns(count, true);
      cuMemcpyAsync_params p{dptr, sptr, count, cs};
      DriverCall d(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync, "cuMemcpyAsync", &p);
      r = d.finish(simgpu_enqueue(stream, &l));
      break;
    }
    default:
      r = cudaErrorInvalidMemcpyDirection;
  }
  return call_.finish(static_cast<cudaError_t>(r));
}

// A copy between two devices' memory. One simulated device: the record says PtoP (CUPTI's
// MEMCPY kind 10) with both devices 0, as a peer copy inside one GPU is recorded.
cudaError_t CUDARTAPI cudaMemcpyPeerAsync(void* dst, int dstDevice, const void* src, int srcDevice, size_t count,
                                          cudaStream_t stream) {
  RT_CALL(cudaMemcpyPeerAsync_v4000, dst, dstDevice, src, srcDevice, count, stream);
  if (dstDevice != 0 || srcDevice != 0) return call_.finish(cudaErrorInvalidDevice);
  simgpu_launch l{};
  l.kind = SIMGPU_MEMCPY;
  l.bytes = count;
  l.copy_kind = 10;  // CUPTI_ACTIVITY_MEMCPY_KIND_PTOP
  l.src_kind = l.dst_kind = 3;
  l.duration_ns = simgpu::copy_duration_ns(count, false);
  cuMemcpyPeerAsync_params p{reinterpret_cast<CUdeviceptr>(dst), static_cast<CUcontext>(simgpu_context()),
                             reinterpret_cast<CUdeviceptr>(src), static_cast<CUcontext>(simgpu_context()), count,
                             reinterpret_cast<CUstream>(stream)};
  DriverCall d(CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync, "cuMemcpyPeerAsync", &p);
  return call_.finish(static_cast<cudaError_t>(d.finish(simgpu_enqueue(stream, &l))));
}

cudaError_t CUDARTAPI cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
  RT_CALL(cudaMemsetAsync_v3020, devPtr, value, count, stream);
  simgpu_launch l{};
  l.kind = SIMGPU_MEMSET;
  l.bytes = count;
  l.memset_value = static_cast<uint32_t>(value);
  l.dst_kind = memory_kind(devPtr);
  l.duration_ns = simgpu::copy_duration_ns(count, false);
  cuMemsetD8Async_params p{reinterpret_cast<CUdeviceptr>(devPtr), static_cast<unsigned char>(value), count,
                           reinterpret_cast<CUstream>(stream)};
  DriverCall d(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async, "cuMemsetD8Async", &p);
  const int r = d.finish(simgpu_enqueue(stream, &l));
  return call_.finish(static_cast<cudaError_t>(r));
}

// ---- streams, events, synchronization ----
cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t* pStream) {
  RT_CALL(cudaStreamCreate_v3020, pStream);
  return call_.finish(create_handle(pStream, simgpu_stream_create));
}

cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
  RT_CALL(cudaStreamCreateWithFlags_v5000, pStream, flags);
  return call_.finish(create_handle(pStream, simgpu_stream_create));
}

cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream) {
  RT_CALL(cudaStreamDestroy_v5050, stream);
  return call_.finish(static_cast<cudaError_t>(simgpu_stream_destroy(stream)));
}

cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream) {
  RT_CALL(cudaStreamSynchronize_v3020, stream);
  return call_.finish(static_cast<cudaError_t>(simgpu_stream_synchronize(stream)));
}

cudaError_t CUDARTAPI cudaDeviceSynchronize(void) {
  RuntimeCall call(CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, "cudaDeviceSynchronize", nullptr);
  return call.finish(static_cast<cudaError_t>(simgpu_device_synchronize()));
}

cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t* event) {
  RT_CALL(cudaEventCreate_v3020, event);
  return call_.finish(create_handle(event, simgpu_event_create));
}

cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  RT_CALL(cudaEventCreateWithFlags_v3020, event, flags);
  return call_.finish(create_handle(event, simgpu_event_create));
}

cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t event) {
  RT_CALL(cudaEventDestroy_v3020, event);
  return call_.finish(static_cast<cudaError_t>(simgpu_event_destroy(event)));
}

cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  RT_CALL(cudaEventRecord_v3020, event, stream);
  return call_.finish(static_cast<cudaError_t>(simgpu_event_record(event, stream)));
}

cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  RT_CALL(cudaStreamWaitEvent_v3020, stream, event, flags);
  return call_.finish(static_cast<cudaError_t>(simgpu_stream_wait_event(stream, event)));
}

cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event) {
  RT_CALL(cudaEventSynchronize_v3020, event);
  return call_.finish(static_cast<cudaError_t>(simgpu_event_synchronize(event)));
}

// ---- graphs ----
cudaError_t CUDARTAPI cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  RT_CALL(cudaStreamBeginCapture_v10000, stream, mode);
  return call_.finish(static_cast<cudaError_t>(simgpu_begin_capture(stream)));
}

cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* pGraph) {
  RT_CALL(cudaStreamEndCapture_v10000, stream, pGraph);
  void* g = nullptr;
  const int r = simgpu_end_capture(stream, &g);
  if (r == cudaSuccess && pGraph) *pGraph = static_cast<cudaGraph_t>(g);
  return call_.finish(static_cast<cudaError_t>(r));
}

cudaError_t CUDARTAPI cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus* pCaptureStatus) {
  RT_CALL(cudaStreamIsCapturing_v10000, stream, pCaptureStatus);
  if (!pCaptureStatus) return call_.finish(cudaErrorInvalidValue);
  *pCaptureStatus = simgpu_is_capturing(stream) ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  return call_.finish(cudaSuccess);
}

cudaError_t CUDARTAPI cudaGraphInstantiate(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                           unsigned long long flags) {
  RT_CALL(cudaGraphInstantiate_v12000, pGraphExec, graph, flags);
  void* x = nullptr;
  const int r = simgpu_graph_instantiate(&x, graph);
  if (r == cudaSuccess) *pGraphExec = static_cast<cudaGraphExec_t>(x);
  return call_.finish(static_cast<cudaError_t>(r));
}

cudaError_t CUDARTAPI cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
  RT_CALL(cudaGraphLaunch_v10000, graphExec, stream);
  cuGraphLaunch_params p{reinterpret_cast<CUgraphExec>(graphExec), reinterpret_cast<CUstream>(stream)};
  DriverCall d(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, "cuGraphLaunch", &p);
  const int r = d.finish(simgpu_graph_launch(graphExec, stream));
  return call_.finish(static_cast<cudaError_t>(r));
}

cudaError_t CUDARTAPI cudaGraphDestroy(cudaGraph_t graph) {
  RT_CALL(cudaGraphDestroy_v10000, graph);
  return call_.finish(static_cast<cudaError_t>(simgpu_graph_destroy(graph)));
}

cudaError_t CUDARTAPI cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
  RT_CALL(cudaGraphExecDestroy_v10000, graphExec);
  return call_.finish(static_cast<cudaError_t>(simgpu_graph_exec_destroy(graphExec)));
}

// ---- device and errors ----
cudaError_t CUDARTAPI cudaGetDeviceCount(int* count) {
  RT_CALL(cudaGetDeviceCount_v3020, count);
  if (!count) return call_.finish(cudaErrorInvalidValue);
  *count = 1;
  return call_.finish(cudaSuccess);
}

cudaError_t CUDARTAPI cudaSetDevice(int device) {
  RT_CALL(cudaSetDevice_v3020, device);
  return call_.finish(device == 0 ? cudaSuccess : cudaErrorInvalidDevice);
}

cudaError_t CUDARTAPI cudaGetDevice(int* device) {
  RT_CALL(cudaGetDevice_v3020, device);
  if (!device) return call_.finish(cudaErrorInvalidValue);
  *device = 0;
  return call_.finish(cudaSuccess);
}

cudaError_t CUDARTAPI cudaDriverGetVersion(int* driverVersion) {
  if (!driverVersion) return cudaErrorInvalidValue;
  *driverVersion = CUDA_VERSION;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaRuntimeGetVersion(int* runtimeVersion) {
  if (!runtimeVersion) return cudaErrorInvalidValue;
  *runtimeVersion = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGetLastError(void) {
  const cudaError_t e = tls_last_error;
  tls_last_error = cudaSuccess;
  return e;
}

cudaError_t CUDARTAPI cudaPeekAtLastError(void) { return tls_last_error; }

const char* CUDARTAPI cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    default: return "unknown error (simgpu)";
  }
}

const char* CUDARTAPI cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    default: return "cudaErrorUnknown";
  }
}

}  // extern "C"
