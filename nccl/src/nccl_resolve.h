// Finding the real NCCL behind an interposed entry point (DESIGN §5), and asking the CUDA driver
// whether a stream is being captured into a graph. Neither adds a DT_NEEDED: both look only at
// what the process has already loaded.
#pragma once

#include <atomic>

namespace traintime::nccl {

// The real implementation of one NCCL entry point. get() is one acquire load once resolved.
// While unresolved it retries, but only when the set of loaded objects changed since the last
// attempt (dl_iterate_phdr's add counter), so a process without NCCL pays no dlsym per call.
//
// Order tried (first hit wins), never accepting the address of our own export `self`:
//  1. dlsym(RTLD_NEXT, "ncclX")   the next definition in the global scope (libnccl, or another
//                                  interposer preloaded after us, which keeps chaining working);
//  2. dlsym(RTLD_DEFAULT, "pncclX") NCCL's strong alias of the weak ncclX (PROFAPI builds);
//  3. every loaded object whose file name starts with "libnccl" (dl_iterate_phdr), reopened with
//     dlopen(RTLD_NOLOAD): "ncclX", then "pncclX". This finds a NCCL that was dlopen'ed with
//     RTLD_LOCAL (e.g. a dependency of a Python extension), which RTLD_NEXT cannot see.
class RealSymbol {
 public:
  constexpr RealSymbol(const char* name, const char* pname) : name_(name), pname_(pname) {}

  // The real function, or nullptr when no loaded object provides it. `self` is the wrapper's
  // own address (so a lookup that comes back to us is rejected).
  void* get(const void* self) noexcept {
    void* fn = fn_.load(std::memory_order_acquire);
    return fn != nullptr ? fn : resolve(self);
  }

 private:
  void* resolve(const void* self) noexcept;

  const char* name_;
  const char* pname_;
  std::atomic<void*> fn_{nullptr};
  std::atomic<unsigned long long> tried_at_adds_{~0ULL};
};

// True when the CUDA driver says `stream` is being captured into a graph (active capture).
// Uses cuStreamIsCapturing from an already loaded libcuda.so.1 (dlopen RTLD_NOLOAD), never the
// runtime's cudaStreamIsCapturing, whose failures would set cudaGetLastError() under the app.
// False when libcuda is not loaded, lacks the symbol, or the query fails. errno is preserved.
bool stream_is_capturing(void* stream) noexcept;

}  // namespace traintime::nccl
