// Launch callbacks are chosen by name from CUPTI's callback-name table (DESIGN §2, §4).
#include <catch2/catch.hpp>

#include <cupti.h>

#include <set>
#include <string>

#include "callback_selection.h"
#include "cupti_library.h"

using traintime::cupti::ApiRole;
using traintime::cupti::classify_api_name;

TEST_CASE("kernel launches of the runtime and the driver are selected, __cudaLaunchKernel included",
          "[selection]") {
  for (const char* name : {"cudaLaunchKernel_v7000", "cudaLaunchKernel_ptsz_v7000",
                           "__cudaLaunchKernel_v13000", "__cudaLaunchKernel_ptsz_v13000",
                           "cudaLaunchKernelExC_v11060", "cudaLaunchCooperativeKernel_v9000",
                           "cudaLaunchCooperativeKernelMultiDevice_v9000", "cudaLaunch_v3020",
                           "cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx",
                           "cuLaunchCooperativeKernel", "cuLaunchGridAsync"})
    CHECK(classify_api_name(name) == ApiRole::kKernelLaunch);
  for (const char* name : {"cudaGraphLaunch_v10000", "cudaGraphLaunch_ptsz_v10000", "cuGraphLaunch",
                           "cuGraphLaunch_ptsz"})
    CHECK(classify_api_name(name) == ApiRole::kGraphLaunch);
}

TEST_CASE("memcpy (peer and batch variants) and memset are selected", "[selection]") {
  for (const char* name : {"cudaMemcpy_v3020", "cudaMemcpyAsync_ptsz_v7000", "cudaMemcpyPeerAsync_v4000",
                           "cudaMemcpyBatchAsync_v12080", "cudaMemcpy3DBatchAsync_v13000",
                           "cudaMemcpyToSymbol_v3020", "cuMemcpyHtoDAsync_v2", "cuMemcpyBatchAsync_v2_ptsz",
                           "cuMemcpy3DPeerAsync", "cuMemcpy"})
    CHECK(classify_api_name(name) == ApiRole::kMemcpy);
  for (const char* name : {"cudaMemset_v3020", "cudaMemsetAsync_ptsz_v7000", "cudaMemset3DAsync_v3020",
                           "cuMemsetD8_v2", "cuMemsetD2D32Async"})
    CHECK(classify_api_name(name) == ApiRole::kMemset);
}

TEST_CASE("APIs that launch no GPU work are not selected", "[selection]") {
  for (const char* name : {"cudaLaunchHostFunc_v10000", "cuLaunchHostFunc_ptsz", "cuMemSetAccess",
                           "cudaMemSetMemPool_v13000", "cudaGraphAddMemcpyNode_v10000",
                           "cudaStreamSynchronize_v3020", "cuCtxSynchronize", "cudaGraphInstantiate_v10000",
                           "cudaMemPoolTrimTo_v11020", "cudaDeviceResetSomething", "cuMemMapArrayAsync",
                           "cuMemMapArrayAsync_ptsz", "cuMemAddressReserve", "cuMemAddressFree",
                           "cuMemExportToShareableHandle", "cuMemImportFromShareableHandle",
                           "cuMemGetAllocationGranularity"})
    CHECK(classify_api_name(name) == ApiRole::kNone);
}

TEST_CASE("allocations and releases are selected for the step of their memory records", "[selection]") {
  for (const char* name : {"cudaMalloc_v3020", "cudaFree_v3020", "cudaMallocAsync_v11020",
                           "cudaFreeAsync_ptsz_v11020", "cudaMallocFromPoolAsync_v11020",
                           "cudaMallocManaged_v6000", "cudaMallocHost_v3020", "cudaFreeHost_v3020",
                           "cuMemAlloc_v2", "cuMemFree_v2", "cuMemAllocAsync", "cuMemFreeAsync_ptsz",
                           "cuMemAllocFromPoolAsync", "cuMemAllocManaged"})
    CHECK(classify_api_name(name) == ApiRole::kMemory);
}

TEST_CASE("CUDA's virtual memory calls are selected for the VMM ledger, by whole name", "[selection]") {
  CHECK(classify_api_name("cuMemCreate") == ApiRole::kVmmCreate);
  CHECK(classify_api_name("cuMemRetainAllocationHandle") == ApiRole::kVmmRetain);
  CHECK(classify_api_name("cuMemRelease") == ApiRole::kVmmRelease);
  CHECK(classify_api_name("cuMemMap") == ApiRole::kVmmMap);
  CHECK(classify_api_name("cuMemUnmap") == ApiRole::kVmmUnmap);
  // They store no launch context; allocations and launches do.
  for (ApiRole role : {ApiRole::kVmmCreate, ApiRole::kVmmRetain, ApiRole::kVmmRelease, ApiRole::kVmmMap,
                       ApiRole::kVmmUnmap, ApiRole::kContextTeardown, ApiRole::kCaptureBegin})
    CHECK(traintime::cupti::is_control_role(role));
  for (ApiRole role : {ApiRole::kKernelLaunch, ApiRole::kGraphLaunch, ApiRole::kMemcpy, ApiRole::kMemset,
                       ApiRole::kMemory})
    CHECK_FALSE(traintime::cupti::is_control_role(role));
}

TEST_CASE("every stream capture begin is selected, for the NCCL wrappers", "[selection]") {
  for (const char* name : {"cudaStreamBeginCapture_v10000", "cudaStreamBeginCapture_ptsz_v10000",
                           "cudaStreamBeginCaptureToGraph_v12030", "cuStreamBeginCapture",
                           "cuStreamBeginCapture_v2", "cuStreamBeginCapture_v2_ptsz",
                           "cuStreamBeginCaptureToGraph"})
    CHECK(classify_api_name(name) == ApiRole::kCaptureBegin);
  for (const char* name : {"cudaStreamEndCapture_v10000", "cudaStreamIsCapturing_v10000",
                           "cuStreamGetCaptureInfo_v2"})
    CHECK(classify_api_name(name) == ApiRole::kNone);
}

TEST_CASE("context teardown APIs are selected to flush at their exit", "[selection]") {
  for (const char* name : {"cudaDeviceReset_v3020", "cuCtxDestroy_v2", "cuDevicePrimaryCtxReset_v2"})
    CHECK(classify_api_name(name) == ApiRole::kContextTeardown);
}

TEST_CASE("cuDevicePrimaryCtxRelease, which CUDA calls during its own exit teardown, is not "
          "selected", "[selection]") {
  CHECK(classify_api_name("cuDevicePrimaryCtxRelease_v2") == ApiRole::kNone);
}

TEST_CASE("select_callbacks walks both API domains and keeps only named roles", "[selection]") {
  auto names = [](CUpti_CallbackDomain d, CUpti_CallbackId id) -> const char* {
    if (d == CUPTI_CB_DOMAIN_RUNTIME_API && id == 7) return "__cudaLaunchKernel_v13000";
    if (d == CUPTI_CB_DOMAIN_RUNTIME_API && id == 8) return "cudaMalloc_v3020";
    if (d == CUPTI_CB_DOMAIN_DRIVER_API && id == 3) return "cuMemcpyBatchAsync_v2";
    return nullptr;
  };
  auto selected = traintime::cupti::select_callbacks(names, 16);
  REQUIRE(selected.size() == 3);
  CHECK(selected[0].domain == CUPTI_CB_DOMAIN_RUNTIME_API);
  CHECK(selected[0].cbid == 7);
  CHECK(selected[0].role == ApiRole::kKernelLaunch);
  CHECK(selected[1].cbid == 8);
  CHECK(selected[1].role == ApiRole::kMemory);
  CHECK(selected[2].domain == CUPTI_CB_DOMAIN_DRIVER_API);
  CHECK(selected[2].cbid == 3);
  CHECK(selected[2].role == ApiRole::kMemcpy);
}

// Over the whole table of a libcupti: every launch cbid the 13.0 headers name is found by name,
// and no cbid the headers call a host function or an allocation is.
static void check_launch_cbids_selected(const char* path) {
  traintime::cupti::CuptiLibrary lib;
  std::string why;
  REQUIRE(lib.load(path, &why));
  REQUIRE(lib.path() == path);  // each test case runs in its own process
  auto selected = traintime::cupti::select_callbacks(
      [&](CUpti_CallbackDomain d, CUpti_CallbackId id) -> const char* {
        const char* n = nullptr;
        return lib.api().cuptiGetCallbackName(d, id, &n) == CUPTI_SUCCESS ? n : nullptr;
      },
      traintime::cupti::RoleTable::kMaxCbid);
  std::set<std::pair<int, uint32_t>> got;
  for (const auto& s : selected) got.insert({s.domain, s.cbid});
  auto has = [&](CUpti_CallbackDomain d, uint32_t id) { return got.count({d, id}) == 1; };
  CHECK(has(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  CHECK(has(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000));
  CHECK(has(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000));
  CHECK(has(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060));
  CHECK(has(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000));
  CHECK(has(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000));
  CHECK(has(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v12080));
  CHECK(has(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020));
  CHECK(has(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
  CHECK(has(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx));
  CHECK(has(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch));
  CHECK(has(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync));
  CHECK(has(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2));
  CHECK_FALSE(has(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchHostFunc_v10000));
  CHECK(has(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020));  // kMemory
  CHECK(has(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020));
  CHECK_FALSE(has(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemSetAccess));
}

TEST_CASE("the simulated libcupti's name table yields the 13.0 launch cbids", "[selection][simgpu]") {
  check_launch_cbids_selected(SIM_CUPTI);
}

#ifdef TOOLKIT_CUPTI
// The real table, not simgpu's copy of it: cuptiGetCallbackName answers without a GPU.
TEST_CASE("the toolkit's real libcupti name table yields the 13.0 launch cbids", "[selection][toolkit]") {
  check_launch_cbids_selected(TOOLKIT_CUPTI);
}
#endif
