// Launch-parameter decoding for the launch callback (launch_callbacks.cpp): inline, so the hot
// path compiles as one function as before.
#pragma once

#include <cupti.h>  // the *_params structs of generated_cuda*_meta.h

namespace traintime::cupti {

// The stream a kernel launch API was given, from its parameters (the *_params structs of
// CUPTI's generated_cuda*_meta.h), for the launch APIs NCCL uses: the runtime's
// cudaLaunchKernel (NCCL before 2.19, old drivers) and the driver's cuLaunchKernel and
// cuLaunchKernelEx (NCCL with runtime and driver >= 11.8). False for any other API.
inline bool launch_stream(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* params,
                   const void** stream) {
  if (params == nullptr) return false;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    switch (cbid) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
        *stream = static_cast<const cudaLaunchKernel_v7000_params*>(params)->stream;
        return true;
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
        *stream = static_cast<const cudaLaunchKernel_ptsz_v7000_params*>(params)->stream;
        return true;
      default:
        return false;
    }
  }
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return false;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
      *stream = static_cast<const cuLaunchKernel_params*>(params)->hStream;
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
      *stream = static_cast<const cuLaunchKernel_ptsz_params*>(params)->hStream;
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
      const CUlaunchConfig* config = static_cast<const cuLaunchKernelEx_params*>(params)->config;
      if (config == nullptr) return false;
      *stream = config->hStream;
      return true;
    }
    default:
      return false;
  }
}

}  // namespace traintime::cupti
