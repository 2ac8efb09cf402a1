// The entry points other software calls by name (libtraintime.map exports them): the CUDA
// driver's InitializeInjection (CUDA_INJECTION64_PATH) and NVTX's InitializeInjectionNvtx2
// (NVTX_INJECTION64_PATH). Each hands over to its adapter; the annotation table
// (traintime_get_api_v1) is in annotation_api.cpp.
#include <cerrno>

#include "session.h"
#include "traintime/cupti/gpu_capture.h"
#include "traintime/nvtx/nvtx_injection.h"

extern "C" {

// Called by the CUDA driver while cuInit runs. Once per process, thread-safe; returns 1.
__attribute__((visibility("default"))) int InitializeInjection(void) {
  const int saved_errno = errno;
  if (traintime::preload::session() != nullptr)
    traintime::cupti::start("by the CUDA driver (CUDA_INJECTION64_PATH)");
  errno = saved_errno;
  return 1;
}

// Called by every module that carries NVTX v3 on its first NVTX call.
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    traintime::nvtx::GetExportTable get_export_table) {
  const int saved_errno = errno;
  const traintime::preload::Session* s = traintime::preload::session();
  const int ok = s != nullptr ? traintime::nvtx::inject(traintime::preload::nvtx_regions(),
                                                        s->identity.config.nvtx_domains,
                                                        get_export_table)
                              : 0;
  errno = saved_errno;
  return ok;
}

}  // extern "C"
