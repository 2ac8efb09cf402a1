// Real-symbol lookup for the NCCL wrappers and the driver's stream-capture query. Only the
// unresolved path does any work; it runs again only after the process loaded a new object.
#include "nccl_resolve.h"

#include <dlfcn.h>
#include <link.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "traintime/support/loader.h"

namespace traintime::nccl {
namespace {

bool is_nccl_file(const char* path) noexcept {
  if (path == nullptr || path[0] == '\0') return false;
  const char* base = std::strrchr(path, '/');
  base = base != nullptr ? base + 1 : path;
  return std::strncmp(base, "libnccl", 7) == 0 && std::strstr(base, ".so") != nullptr &&
         std::strncmp(base, "libnccl-net", 11) != 0 && std::strncmp(base, "libnccl-profiler", 16) != 0 &&
         std::strncmp(base, "libnccl-tuner", 13) != 0;
}

struct ObjectSearch {
  const char* name;
  const char* pname;
  const void* self;
  void* found;
};

void* checked(void* fn, const void* self) noexcept { return fn == self ? nullptr : fn; }

// Objects named libnccl*.so* that are loaded, possibly RTLD_LOCAL: reopen each by path with
// RTLD_NOLOAD (which only takes a reference on what is already there) and look inside it. The
// reference is kept on success: the function pointer must outlive any dlclose of the app.
void* search_loaded_nccl(const char* name, const char* pname, const void* self) noexcept {
  ObjectSearch search{name, pname, self, nullptr};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* arg) -> int {
        auto* s = static_cast<ObjectSearch*>(arg);
        if (!is_nccl_file(info->dlpi_name)) return 0;
        void* handle = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
        if (handle == nullptr) return 0;
        void* fn = checked(dlsym(handle, s->name), s->self);
        if (fn == nullptr) fn = checked(dlsym(handle, s->pname), s->self);
        if (fn == nullptr) {
          dlclose(handle);
          return 0;
        }
        s->found = fn;
        return 1;
      },
      &search);
  return search.found;
}

}  // namespace

void* RealSymbol::resolve(const void* self) noexcept {
  const int saved_errno = errno;
  const unsigned long long adds = support::loaded_object_adds();
  void* fn = nullptr;
  if (tried_at_adds_.load(std::memory_order_relaxed) != adds) {
    fn = checked(dlsym(RTLD_NEXT, name_), self);
    if (fn == nullptr) fn = checked(dlsym(RTLD_DEFAULT, pname_), self);
    if (fn == nullptr) fn = search_loaded_nccl(name_, pname_, self);
    if (fn != nullptr) {
      fn_.store(fn, std::memory_order_release);
    } else {
      tried_at_adds_.store(adds, std::memory_order_relaxed);
    }
  }
  dlerror();  // a failed dlsym leaves a message the app's next dlerror() would otherwise read
  errno = saved_errno;
  return fn;
}

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

bool stream_is_capturing(void* stream) noexcept {
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
