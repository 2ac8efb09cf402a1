// A stand-in for libcuda.so.1 with the one entry point the NCCL wrappers ask it: whether a stream
// is being captured into a CUDA graph. The test marks streams as capturing.
#include <cerrno>

extern "C" {

__attribute__((visibility("default"))) void fake_cuda_set_capturing(void* stream);

namespace {
void* g_capturing = nullptr;
}

void fake_cuda_set_capturing(void* stream) { g_capturing = stream; }

// CUresult cuStreamIsCapturing(CUstream, CUstreamCaptureStatus*). Like a driver call it may
// leave errno changed (the wrappers must hide that from the application).
__attribute__((visibility("default"))) int cuStreamIsCapturing(void* stream, int* status) {
  errno = EAGAIN;
  *status = (stream != nullptr && stream == g_capturing) ? 1 : 0;  // ACTIVE : NONE
  return 0;                                                       // CUDA_SUCCESS
}

}  // extern "C"
