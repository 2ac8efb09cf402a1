// Which CUDA API callbacks the adapter subscribes to, chosen by NAME from CUPTI's own
// callback-name table (cuptiGetCallbackName) at start-up, never from a hand list of ids, and
// never a whole API domain (DESIGN §2, §4): ids differ between CUPTI releases, names do not, and
// a launch API added by a later CUDA (as __cudaLaunchKernel was in 13.0) is still caught.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace traintime::cupti {

enum class ApiRole : uint8_t {
  kNone = 0,
  kKernelLaunch,     // cudaLaunchKernel*, __cudaLaunchKernel, cudaLaunchCooperativeKernel*, cuLaunch*
  kGraphLaunch,      // cudaGraphLaunch, cuGraphLaunch
  kMemcpy,           // cudaMemcpy*, cuMemcpy* (peer, 2D/3D, batch variants included)
  kMemset,           // cudaMemset*, cuMemset*
  kMemory,           // cudaMalloc*, cudaFree*, cuMemAlloc*, cuMemFree*: the step of a memory record
  // The roles from here on store no launch context (on_api_control): one comparison on the
  // launch path tells them apart.
  kContextTeardown,  // cudaDeviceReset, cuCtxDestroy, cuDevicePrimaryCtxReset: flush at their exit
  kCaptureBegin,     // cudaStreamBeginCapture*, cuStreamBeginCapture*: tells the NCCL wrappers
  // CUDA's virtual memory management calls (traintime/core/vmm_ledger.h): device memory that
  // CUPTI's memory records are not documented to cover. Last: is_vmm_role is one comparison.
  kVmmCreate,        // cuMemCreate
  kVmmRetain,        // cuMemRetainAllocationHandle
  kVmmRelease,       // cuMemRelease
  kVmmMap,           // cuMemMap
  kVmmUnmap,         // cuMemUnmap
};

// The roles whose calls store no launch context.
constexpr bool is_control_role(ApiRole role) { return role >= ApiRole::kContextTeardown; }
constexpr bool is_vmm_role(ApiRole role) { return role >= ApiRole::kVmmCreate; }

const char* api_role_name(ApiRole role);

// Classifies one runtime/driver API callback name as cuptiGetCallbackName spells it
// ("cudaLaunchKernel_v7000", "__cudaLaunchKernel_ptsz_v13000", "cuMemcpyHtoDAsync_v2_ptsz").
ApiRole classify_api_name(std::string_view name);

struct SelectedCallback {
  CUpti_CallbackDomain domain;
  CUpti_CallbackId cbid;
  ApiRole role;
  const char* name;  // CUPTI's static string
};

// Walks cbids 1..limit-1 of the runtime and driver domains through `name_of` (which returns
// nullptr for an id the library does not know) and keeps every id whose name has a role.
using CallbackNameFn = std::function<const char*(CUpti_CallbackDomain, CUpti_CallbackId)>;
std::vector<SelectedCallback> select_callbacks(const CallbackNameFn& name_of, CUpti_CallbackId limit);

// Role lookup for the hot path: a flat table per domain indexed by cbid.
class RoleTable {
 public:
  static constexpr CUpti_CallbackId kMaxCbid = 4096;
  void set(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, ApiRole role);
  ApiRole get(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) const noexcept {
    if (cbid >= kMaxCbid) return ApiRole::kNone;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) return runtime_[cbid];
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API) return driver_[cbid];
    return ApiRole::kNone;
  }

 private:
  ApiRole runtime_[kMaxCbid] = {};
  ApiRole driver_[kMaxCbid] = {};
};

}  // namespace traintime::cupti
