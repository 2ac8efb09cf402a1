// The driver's stream-capture query for the NCCL wrappers. Only the unresolved path does any
// work; it runs again only after the process loaded a new object.
#include "nccl_resolve.h"

#include <dlfcn.h>
#include <link.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

#include "traintime/nccl/nccl_interposer.h"
#include "traintime/support/loader.h"

namespace traintime::nccl {

namespace {

// CUresult cuStreamIsCapturing(CUstream, CUstreamCaptureStatus*): both are plain handles/enums,
// declared here so preload needs no cuda.h for one call.
using IsCapturingFn = int (*)(void* stream, int* status);

std::atomic<void*> g_is_capturing{nullptr};
std::atomic<unsigned long long> g_is_capturing_tried_at{~0ULL};
// Calls left before a process without the driver function asks the loader again. The loader's
// add counter is read under the loader's lock (dl_iterate_phdr), too dear for every collective;
// libcuda is loaded before any communicator exists, so a later appearance is rare and a delay
// of a few calls in noticing it is harmless. Plain load/store: a race only shifts the next check.
constexpr unsigned kLoaderCheckInterval = 256;
std::atomic<unsigned> g_is_capturing_skip{0};

IsCapturingFn resolve_is_capturing() noexcept {
  void* fn = g_is_capturing.load(std::memory_order_acquire);
  if (fn != nullptr) return reinterpret_cast<IsCapturingFn>(fn);
  const unsigned skip = g_is_capturing_skip.load(std::memory_order_relaxed);
  if (skip > 0) {
    g_is_capturing_skip.store(skip - 1, std::memory_order_relaxed);
    return nullptr;
  }
  g_is_capturing_skip.store(kLoaderCheckInterval - 1, std::memory_order_relaxed);
  const unsigned long long adds = support::loaded_object_adds();
  if (g_is_capturing_tried_at.load(std::memory_order_relaxed) == adds) return nullptr;
  void* handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (handle != nullptr) fn = dlsym(handle, "cuStreamIsCapturing");
  dlerror();
  if (fn == nullptr) {
    if (handle != nullptr) dlclose(handle);
    g_is_capturing_tried_at.store(adds, std::memory_order_relaxed);
    return nullptr;
  }
  g_is_capturing.store(fn, std::memory_order_release);
  return reinterpret_cast<IsCapturingFn>(fn);
}

}  // namespace

std::atomic<int> g_capture_unseen{0};  // 0: ask the driver
namespace {
// Keeps a watch that starts after a capture began off.
std::atomic<bool> g_capture_begun{false};
}  // namespace

void set_capture_watch(bool watching) noexcept {
  if (!watching || g_capture_begun.load(std::memory_order_acquire)) {
    g_capture_unseen.store(0, std::memory_order_release);
    return;
  }
  g_capture_unseen.store(1, std::memory_order_release);
  // A capture noted meanwhile wins.
  if (g_capture_begun.load(std::memory_order_acquire)) g_capture_unseen.store(0, std::memory_order_release);
}

void note_capture_begin() noexcept {
  g_capture_begun.store(true, std::memory_order_release);
  g_capture_unseen.store(0, std::memory_order_release);
}

bool ask_is_capturing(void* stream) noexcept {
  const int saved_errno = errno;
  bool capturing = false;
  if (IsCapturingFn fn = resolve_is_capturing()) {
    int status = 0;  // CU_STREAM_CAPTURE_STATUS_NONE
    // ACTIVE and INVALIDATED both mean the work is not executed now (an invalidated capture
    // never runs at all), so neither counts as an enqueued operation.
    capturing = fn(stream, &status) == 0 && status != 0;
  }
  errno = saved_errno;
  return capturing;
}

}  // namespace traintime::nccl
