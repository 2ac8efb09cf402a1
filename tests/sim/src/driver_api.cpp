// SIMULATION: the fake libcuda.so.1 — cuInit with the CUDA_INJECTION64_PATH protocol, the one
// simulated device and its primary context, and the driver queries a profiler makes.
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <cuda.h>
#include <cupti.h>  // cuLaunchKernelEx_params and its callback id

#include "simgpu/engine.h"
#include "sim_costs.h"

struct CUctx_st {
  uint32_t id;
};

namespace {

CUctx_st g_context{1};
std::atomic<int> g_injections{0};
std::mutex g_init_mu;
std::atomic<bool> g_torn_down{false};
std::atomic<int> g_init_state{0};  // 0 not started, 1 running, 2 done
std::thread::id g_init_owner;
std::atomic<bool> g_context_announced{false};
thread_local bool tls_has_current = false;

// Loads the tool named by CUDA_INJECTION64_PATH and calls its InitializeInjection(), as the
// real driver does from cuInit. A missing library or symbol is ignored, like the driver does.
void run_injection() {
  const char* path = std::getenv("CUDA_INJECTION64_PATH");
  if (!path || !*path) return;
  void* lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!lib) return;
  using InitFn = int (*)(void);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "InitializeInjection"));
  if (!init) return;
  g_injections.fetch_add(1, std::memory_order_relaxed);
  init();
}

void announce(int event) { simgpu::raise_resource(event, &g_context, nullptr, nullptr); }

// SIMGPU_ABORT_AFTER=SECONDS: SECONDS after cuInit a thread of the "driver" calls abort(), as
// PyTorch's NCCL watchdog thread ends a process whose collective timed out.
void start_abort_timer() {
  const char* v = std::getenv("SIMGPU_ABORT_AFTER");
  if (!v || !*v) return;
  char* end = nullptr;
  const double secs = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(secs >= 0)) {
    std::fprintf(stderr, "simgpu: SIMGPU_ABORT_AFTER wants SECONDS, got %s\n", v);
    std::exit(2);
  }
  std::thread([secs] {
    std::this_thread::sleep_for(std::chrono::duration<double>(secs));
    std::abort();
  }).detach();
}

}  // namespace

extern "C" {

int simgpu_ensure_init(void) {
  if (g_init_state.load(std::memory_order_acquire) == 2) return CUDA_SUCCESS;
  {
    std::unique_lock<std::mutex> lock(g_init_mu, std::defer_lock);
    // A tool may call back into CUDA from InitializeInjection (on this thread): let it through.
    if (g_init_state.load(std::memory_order_acquire) == 1 && g_init_owner == std::this_thread::get_id())
      return CUDA_SUCCESS;
    lock.lock();
    if (g_init_state.load(std::memory_order_acquire) == 2) return CUDA_SUCCESS;
    g_init_owner = std::this_thread::get_id();
    g_init_state.store(1, std::memory_order_release);
    // CUDA's own teardown runs from an atexit handler registered as CUDA initialises, before
    // the injected tool's InitializeInjection (NVIDIA's injection sample registers its flush
    // there, and it runs first). Exit work a tool registered before cuInit runs after it
    // (simgpu_cuda_torn_down says so from then on).
    std::atexit([] { g_torn_down.store(true, std::memory_order_release); });
    run_injection();
    g_init_state.store(2, std::memory_order_release);
  }
  start_abort_timer();
  announce(SIMGPU_RES_CU_INIT_FINISHED);
  return CUDA_SUCCESS;
}

int simgpu_cuda_torn_down(void) { return g_torn_down.load(std::memory_order_acquire) ? 1 : 0; }

void* simgpu_context(void) { return &g_context; }
uint32_t simgpu_context_id(void) { return g_context.id; }
int simgpuInjectionCount(void) { return g_injections.load(std::memory_order_relaxed); }

// The runtime makes the primary context current on first use; announce it once.
void simgpu_make_context_current(void) {
  tls_has_current = true;
  bool expected = false;
  if (g_context_announced.compare_exchange_strong(expected, true)) announce(SIMGPU_RES_CONTEXT_CREATED);
}

CUresult CUDAAPI cuInit(unsigned int Flags) {
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return static_cast<CUresult>(simgpu_ensure_init());
}

CUresult CUDAAPI cuDriverGetVersion(int* driverVersion) {
  if (!driverVersion) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = CUDA_VERSION;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int* count) {
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  if (g_init_state.load() == 0) return CUDA_ERROR_NOT_INITIALIZED;
  *count = 1;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (g_init_state.load() == 0) return CUDA_ERROR_NOT_INITIALIZED;
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  // SIMGPU_DEVICE_NAME: the name a real GPU would report (MFU's peak table is keyed by it).
  const char* given = std::getenv("SIMGPU_DEVICE_NAME");
  std::snprintf(name, static_cast<size_t>(len), "%s", given && *given ? given : "simgpu (SIMULATED GPU)");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  if (!uuid) return CUDA_ERROR_INVALID_VALUE;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  // A fixed UUID per rank, so ranks look like distinct GPUs.
  std::memset(uuid->bytes, 0, sizeof uuid->bytes);
  std::memcpy(uuid->bytes, "simgpu", 6);
  const int rank = simgpu_rank();
  std::memcpy(uuid->bytes + 8, &rank, sizeof rank);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem(size_t* bytes, CUdevice dev) {
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = size_t{80} << 30;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  if (!pi) return CUDA_ERROR_INVALID_VALUE;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 132; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *pi = simgpu_rank(); break;
    default: *pi = 0; break;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  *pctx = &g_context;
  return CUDA_SUCCESS;
}

// Active once the runtime made the primary context current (what "the device is in use" means
// to a profiler that asks the driver).
CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  *flags = 0;
  *active = g_context_announced.load() ? 1 : 0;
  return CUDA_SUCCESS;
}

// The bus id matches CU_DEVICE_ATTRIBUTE_PCI_BUS_ID (the rank), as on a node of 8 GPUs.
CUresult CUDAAPI cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
  if (!pciBusId || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(pciBusId, static_cast<size_t>(len), "0000:%02X:00.0", simgpu_rank() & 0xff);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext* pctx) {
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  *pctx = tls_has_current ? &g_context : nullptr;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  tls_has_current = ctx != nullptr;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) {
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  *device = 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetId(CUcontext ctx, unsigned long long* ctxId) {
  if (!ctxId) return CUDA_ERROR_INVALID_VALUE;
  if (ctx && ctx != &g_context) return CUDA_ERROR_INVALID_CONTEXT;
  if (!ctx && !tls_has_current) return CUDA_ERROR_INVALID_CONTEXT;
  *ctxId = g_context.id;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSynchronize(void) { return static_cast<CUresult>(simgpu_device_synchronize()); }

// Profilers ask the driver whether a stream is being captured (the NCCL wrappers do, to count
// captured collectives per replay): answer from the same capture state the runtime uses.
CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus* captureStatus) {
  if (!captureStatus) return CUDA_ERROR_INVALID_VALUE;
  *captureStatus = simgpu_is_capturing(hStream) ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                                : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

}  // extern "C"

namespace {
// A kernel launched through the driver API (no runtime call around it): `f` is a function handle
// as the runtime's registration made it (simgpu: the host stub's address).
CUresult launch_from_driver(uint32_t cbid, const char* api, const void* params, const CUlaunchConfig* config,
                            CUfunction f) {
  const char* name = simgpu_kernel_name(reinterpret_cast<const void*>(f));
  simgpu_api_frame frame{};
  CUresult result = CUDA_SUCCESS;
  simgpu_api_enter(&frame, 1, cbid, api, name, params, &result);
  if (!config || !name) {
    result = CUDA_ERROR_INVALID_VALUE;
  } else {
    simgpu_launch l{};
    l.kind = SIMGPU_KERNEL;
    l.name = name;
    const uint64_t blocks = uint64_t{config->gridDimX} * config->gridDimY * config->gridDimZ;
    l.duration_ns = static_cast<uint64_t>(
        static_cast<double>(blocks * SIMGPU_NS_PER_BLOCK) * simgpu_slowdown(simgpu_rank()) + 0.5);
    l.grid[0] = config->gridDimX, l.grid[1] = config->gridDimY, l.grid[2] = config->gridDimZ;
    l.block[0] = config->blockDimX, l.block[1] = config->blockDimY, l.block[2] = config->blockDimZ;
    l.shared_mem = config->sharedMemBytes;
    result = simgpu_enqueue(config->hStream, &l) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  }
  simgpu_api_exit(&frame);
  return result;
}
}  // namespace

extern "C" {

// The driver's plain launch (Triton's and other JIT compilers' kernels): driver callbacks only.
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra) {
  CUlaunchConfig config{};
  config.gridDimX = gridDimX, config.gridDimY = gridDimY, config.gridDimZ = gridDimZ;
  config.blockDimX = blockDimX, config.blockDimY = blockDimY, config.blockDimZ = blockDimZ;
  config.sharedMemBytes = sharedMemBytes;
  config.hStream = hStream;
  cuLaunchKernel_params params{f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                               sharedMemBytes, hStream, kernelParams, extra};
  return launch_from_driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel", &params, &config, f);
}

// What real NCCL (runtime and driver >= 11.8) launches its kernels with, found through
// cuGetProcAddress: traced in the driver domain only, with no runtime call around it. `f` is a
// function handle as the runtime's registration made it (simgpu: the host stub's address).
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams,
                                  void** extra) {
  cuLaunchKernelEx_params params{config, f, kernelParams, extra};
  return launch_from_driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, "cuLaunchKernelEx", &params, config, f);
}

// ---- virtual memory management (cuMemCreate, cuMemMap ...) ----
// As PyTorch's expandable segments and NCCL's buffers use it: physical memory made by
// cuMemCreate (a handle holding one reference), mapped into reserved address ranges, freed once
// no reference (cuMemRelease, cuMemRetainAllocationHandle) and no mapping (cuMemUnmap) is left.
// SIMGPU_VMM_MEMORY_RECORDS says whether the fake CUPTI also makes memory records for them
// (nothing documents what real CUPTI does): unset or "none", no records; "create", an allocation
// record at cuMemCreate and a release record where the memory is freed (address: the handle);
// "map", a record at each cuMemMap and cuMemUnmap (address: the mapped range).

}  // extern "C"

namespace {

struct VmmHandle {
  size_t size = 0;
  int references = 1;
  int mappings = 0;
};
struct Vmm {
  std::mutex mu;
  uint64_t next_handle = 1;
  uint64_t next_reserve = 0x7d0000000000ull;
  std::map<uint64_t, VmmHandle> handles;
  std::map<uint64_t, std::pair<size_t, uint64_t>> mappings;  // address -> (size, handle)
  std::map<uint64_t, size_t> reserved;                       // address -> size
};
Vmm& vmm() {
  static Vmm* v = new Vmm();
  return *v;
}

enum class VmmRecords { kNone, kCreate, kMap };
VmmRecords vmm_records() {
  static const VmmRecords mode = [] {
    const char* v = std::getenv("SIMGPU_VMM_MEMORY_RECORDS");
    if (!v || !*v || std::strcmp(v, "none") == 0) return VmmRecords::kNone;
    if (std::strcmp(v, "create") == 0) return VmmRecords::kCreate;
    if (std::strcmp(v, "map") == 0) return VmmRecords::kMap;
    std::fprintf(stderr, "simgpu: SIMGPU_VMM_MEMORY_RECORDS wants none, create or map, got %s\n", v);
    std::exit(2);
  }();
  return mode;
}

// A device memory record of the call being traced (its frame's correlation id), as the fake
// runtime's allocations make them.
void vmm_record(VmmRecords when, bool release, uint64_t address, uint64_t bytes) {
  if (vmm_records() != when) return;
  simgpu_memory_op op{};
  op.release = release ? 1 : 0;
  op.memory_kind = 3;  // CUPTI_ACTIVITY_MEMORY_KIND_DEVICE
  op.address = address;
  op.bytes = bytes;
  op.timestamp_ns = simgpu_host_now();
  const simgpu_api_frame* f = simgpu_current_frame();
  op.correlation_id = f ? f->correlation_id : 0;
  simgpu_report_memory(&op);
}

// Called with vmm().mu held: the handle's memory is freed when nothing holds it.
void vmm_free_if_unused(Vmm& v, std::map<uint64_t, VmmHandle>::iterator it) {
  if (it->second.references > 0 || it->second.mappings > 0) return;
  vmm_record(VmmRecords::kCreate, true, it->first, it->second.size);
  v.handles.erase(it);
}

// One traced driver call: ENTER on construction, EXIT in finish().
class TracedDriverCall {
 public:
  TracedDriverCall(uint32_t cbid, const char* name, const void* params) {
    simgpu_ensure_init();
    simgpu_api_enter(&frame_, 1, cbid, name, nullptr, params, &result_);
  }
  CUresult finish(CUresult r) {
    result_ = r;
    simgpu_api_exit(&frame_);
    return r;
  }

 private:
  simgpu_api_frame frame_{};
  CUresult result_ = CUDA_SUCCESS;
};

}  // namespace

extern "C" {

CUresult CUDAAPI cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                               CUmemAllocationGranularity_flags) {
  if (!granularity || !prop) return CUDA_ERROR_INVALID_VALUE;
  *granularity = size_t{2} << 20;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                     unsigned long long flags) {
  cuMemAddressReserve_params params{ptr, size, alignment, addr, flags};
  TracedDriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, "cuMemAddressReserve", &params);
  if (!ptr || size == 0) return call.finish(CUDA_ERROR_INVALID_VALUE);
  Vmm& v = vmm();
  std::lock_guard<std::mutex> lock(v.mu);
  *ptr = v.next_reserve;
  v.reserved[v.next_reserve] = size;
  v.next_reserve += (size + (uint64_t{2} << 20) - 1) & ~((uint64_t{2} << 20) - 1);
  return call.finish(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  cuMemAddressFree_params params{ptr, size};
  TracedDriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree, "cuMemAddressFree", &params);
  Vmm& v = vmm();
  std::lock_guard<std::mutex> lock(v.mu);
  return call.finish(v.reserved.erase(ptr) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                             unsigned long long flags) {
  cuMemCreate_params params{handle, size, prop, flags};
  TracedDriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, "cuMemCreate", &params);
  if (!handle || !prop || size == 0 || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return call.finish(CUDA_ERROR_INVALID_VALUE);
  if (prop->location.id != 0) return call.finish(CUDA_ERROR_INVALID_DEVICE);
  Vmm& v = vmm();
  std::lock_guard<std::mutex> lock(v.mu);
  *handle = v.next_handle++;
  v.handles[*handle] = VmmHandle{size, 1, 0};
  vmm_record(VmmRecords::kCreate, false, *handle, size);
  return call.finish(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  cuMemRetainAllocationHandle_params params{handle, addr};
  TracedDriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemRetainAllocationHandle, "cuMemRetainAllocationHandle",
                        &params);
  if (!handle) return call.finish(CUDA_ERROR_INVALID_VALUE);
  Vmm& v = vmm();
  std::lock_guard<std::mutex> lock(v.mu);
  const auto m = v.mappings.find(reinterpret_cast<uint64_t>(addr));
  if (m == v.mappings.end()) return call.finish(CUDA_ERROR_INVALID_VALUE);
  *handle = m->second.second;
  ++v.handles.at(*handle).references;
  return call.finish(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
  cuMemRelease_params params{handle};
  TracedDriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemRelease, "cuMemRelease", &params);
  Vmm& v = vmm();
  std::lock_guard<std::mutex> lock(v.mu);
  const auto it = v.handles.find(handle);
  if (it == v.handles.end() || it->second.references == 0) return call.finish(CUDA_ERROR_INVALID_VALUE);
  --it->second.references;
  vmm_free_if_unused(v, it);
  return call.finish(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                          unsigned long long flags) {
  cuMemMap_params params{ptr, size, offset, handle, flags};
  TracedDriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemMap, "cuMemMap", &params);
  Vmm& v = vmm();
  std::lock_guard<std::mutex> lock(v.mu);
  const auto it = v.handles.find(handle);
  if (it == v.handles.end() || it->second.references == 0 || offset + size > it->second.size ||
      v.mappings.count(ptr))
    return call.finish(CUDA_ERROR_INVALID_VALUE);
  ++it->second.mappings;
  v.mappings[ptr] = {size, handle};
  vmm_record(VmmRecords::kMap, false, ptr, size);
  return call.finish(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) {
  cuMemUnmap_params params{ptr, size};
  TracedDriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, "cuMemUnmap", &params);
  Vmm& v = vmm();
  std::lock_guard<std::mutex> lock(v.mu);
  auto m = v.mappings.lower_bound(ptr);
  if (m == v.mappings.end() || m->first >= ptr + size) return call.finish(CUDA_ERROR_INVALID_VALUE);
  while (m != v.mappings.end() && m->first < ptr + size) {
    const uint64_t handle = m->second.second;
    vmm_record(VmmRecords::kMap, true, m->first, m->second.first);
    m = v.mappings.erase(m);
    const auto it = v.handles.find(handle);
    --it->second.mappings;
    vmm_free_if_unused(v, it);
  }
  return call.finish(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  cuMemSetAccess_params params{ptr, size, desc, count};
  TracedDriverCall call(CUPTI_DRIVER_TRACE_CBID_cuMemSetAccess, "cuMemSetAccess", &params);
  return call.finish(desc && count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

// Driver entry points by name, as the runtime and libraries ask for them: the versioned
// export first (cuDeviceGetUuid -> cuDeviceGetUuid_v2), then the plain one.
CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** pfn, int, cuuint64_t,
                                  CUdriverProcAddressQueryResult* symbolStatus) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  static void* self = [] {
    Dl_info info{};
    dladdr(reinterpret_cast<void*>(&cuInit), &info);
    return info.dli_fname ? dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  }();
  void* fn = nullptr;
  if (self) {
    fn = dlsym(self, (std::string(symbol) + "_v2").c_str());
    if (!fn) fn = dlsym(self, symbol);
  }
  *pfn = fn;
  if (symbolStatus) *symbolStatus = fn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return fn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char** pStr) {
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS: *pStr = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *pStr = "invalid argument"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *pStr = "initialization error"; break;
    case CUDA_ERROR_INVALID_DEVICE: *pStr = "invalid device ordinal"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *pStr = "invalid device context"; break;
    default: *pStr = "unknown error (simgpu)"; break;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char** pStr) {
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS: *pStr = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *pStr = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *pStr = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case CUDA_ERROR_INVALID_DEVICE: *pStr = "CUDA_ERROR_INVALID_DEVICE"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *pStr = "CUDA_ERROR_INVALID_CONTEXT"; break;
    default: *pStr = "CUDA_ERROR_UNKNOWN"; break;
  }
  return CUDA_SUCCESS;
}

// The unversioned export real drivers keep beside cuDeviceGetUuid_v2 (same signature).
CUresult simgpu_cuDeviceGetUuid_v1(CUuuid* uuid, CUdevice dev) __asm__("cuDeviceGetUuid")
    __attribute__((alias("cuDeviceGetUuid_v2")));

}  // extern "C"
