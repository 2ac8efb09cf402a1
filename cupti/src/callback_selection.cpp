#include "callback_selection.h"

#include <string>

namespace traintime::cupti {
namespace {

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// "cuCtxDestroy_v2" -> "cuCtxDestroy", "cudaDeviceReset_v3020" -> "cudaDeviceReset": drops the
// version and per-thread-stream suffixes CUPTI appends to the API's own name.
std::string_view stem(std::string_view name) {
  for (;;) {
    const size_t us = name.rfind('_');
    if (us == std::string_view::npos || us == 0) return name;
    const std::string_view tail = name.substr(us + 1);
    const bool version = tail.size() >= 2 && tail[0] == 'v' &&
                         tail.find_first_not_of("0123456789", 1) == std::string_view::npos;
    if (!(version || tail == "ptsz" || tail == "ptds")) return name;
    name = name.substr(0, us);
  }
}

}  // namespace

const char* api_role_name(ApiRole role) {
  switch (role) {
    case ApiRole::kKernelLaunch: return "kernel_launch";
    case ApiRole::kGraphLaunch: return "graph_launch";
    case ApiRole::kMemcpy: return "memcpy";
    case ApiRole::kMemset: return "memset";
    case ApiRole::kContextTeardown: return "context_teardown";
    case ApiRole::kCaptureBegin: return "capture_begin";
    case ApiRole::kMemory: return "memory";
    case ApiRole::kVmmCreate: return "vmm_create";
    case ApiRole::kVmmRetain: return "vmm_retain";
    case ApiRole::kVmmRelease: return "vmm_release";
    case ApiRole::kVmmMap: return "vmm_map";
    case ApiRole::kVmmUnmap: return "vmm_unmap";
    case ApiRole::kNone: break;
  }
  return "none";
}

ApiRole classify_api_name(std::string_view name) {
  // __cudaLaunchKernel (13.0) is what the <<<>>> syntax calls: treat leading underscores as noise.
  while (!name.empty() && name.front() == '_') name.remove_prefix(1);
  // Host functions run on a CPU thread and leave no kernel/memcpy/memset record.
  if (name.find("HostFunc") != std::string_view::npos) return ApiRole::kNone;
  if (starts_with(name, "cudaGraphLaunch") || starts_with(name, "cuGraphLaunch"))
    return ApiRole::kGraphLaunch;
  if (starts_with(name, "cudaLaunch") || starts_with(name, "cuLaunch")) return ApiRole::kKernelLaunch;
  // Case matters: cuMemSetAccess / cudaMemSetMemPool are not memsets.
  if (starts_with(name, "cudaMemcpy") || starts_with(name, "cuMemcpy")) return ApiRole::kMemcpy;
  if (starts_with(name, "cudaMemset") || starts_with(name, "cuMemset")) return ApiRole::kMemset;
  // Every way a stream starts capturing into a graph (ToGraph, _ptsz, _v2 included).
  if (starts_with(name, "cudaStreamBeginCapture") || starts_with(name, "cuStreamBeginCapture"))
    return ApiRole::kCaptureBegin;
  // Allocations and releases (host, pool and async ones included): their memory records join
  // on the call's correlation id for the step, as launches' records do.
  if (starts_with(name, "cudaMalloc") || starts_with(name, "cudaFree") || starts_with(name, "cuMemAlloc") ||
      starts_with(name, "cuMemFree"))
    return ApiRole::kMemory;
  const std::string_view s = stem(name);
  // Not cuDevicePrimaryCtxRelease: CUDA calls it itself during its exit teardown, where a flush
  // would run on a stack being torn down (and a context release need not destroy anything).
  if (s == "cudaDeviceReset" || s == "cuCtxDestroy" || s == "cuDevicePrimaryCtxReset")
    return ApiRole::kContextTeardown;
  // Whole names only: cuMemMapArrayAsync maps sparse arrays, not allocations.
  if (s == "cuMemCreate") return ApiRole::kVmmCreate;
  if (s == "cuMemRetainAllocationHandle") return ApiRole::kVmmRetain;
  if (s == "cuMemRelease") return ApiRole::kVmmRelease;
  if (s == "cuMemMap") return ApiRole::kVmmMap;
  if (s == "cuMemUnmap") return ApiRole::kVmmUnmap;
  return ApiRole::kNone;
}

std::vector<SelectedCallback> select_callbacks(const CallbackNameFn& name_of, CUpti_CallbackId limit) {
  std::vector<SelectedCallback> out;
  for (CUpti_CallbackDomain domain : {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API}) {
    for (CUpti_CallbackId cbid = 1; cbid < limit; ++cbid) {
      const char* name = name_of(domain, cbid);
      if (!name) continue;
      const ApiRole role = classify_api_name(name);
      if (role != ApiRole::kNone) out.push_back({domain, cbid, role, name});
    }
  }
  return out;
}

void RoleTable::set(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, ApiRole role) {
  if (cbid >= kMaxCbid) return;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) runtime_[cbid] = role;
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) driver_[cbid] = role;
}

}  // namespace traintime::cupti
