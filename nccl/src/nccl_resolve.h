// Finding the real NCCL behind an interposed entry point (DESIGN §5), and asking the CUDA driver
// whether a stream is being captured into a graph. Neither adds a DT_NEEDED: both look only at
// what the process has already loaded.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

namespace traintime::nccl {

// The real implementation of one NCCL entry point, as the object that made the call sees it.
//
// A process may hold more than one NCCL: PyTorch source builds link libnccl_static.a into
// libtorch_cuda.so, which Python loads RTLD_LOCAL and which exports the entry points, while
// another package brings libnccl.so.2. A call must reach the NCCL its caller was built with,
// and the helpers a wrapper calls (ncclCommCount, ncclCommUserRank) must come from that same
// NCCL, never from another. So the answer depends on the calling object: it is looked up once
// per calling object (the object whose mapped segments hold the return address; dl_iterate_phdr
// takes the loader's lock, so never per call) and cached by that object's address range.
//
// Order tried for a caller (first hit wins), never accepting a definition in the object that
// holds the wrappers (this library):
//  1. the calling object's own definition of "ncclX" or "pncclX" (NCCL linked statically into
//     it and exported, so its PLT call came to us through the global scope);
//  2. dlsym(RTLD_NEXT, "ncclX"): the next definition in the global scope, where the loader
//     itself would have bound the call (libnccl.so.2, or another interposer preloaded after us,
//     which keeps chaining working);
//  3. the calling object's own lookup scope (itself and its dependencies): a libnccl.so.2 it
//     depends on, loaded RTLD_LOCAL with it (RTLD_NEXT cannot see a local scope);
//  4. dlsym(RTLD_DEFAULT, "pncclX"): NCCL's strong alias of the weak ncclX (PROFAPI builds);
//  5. any loaded object named libnccl*.so* that defines it, then any other loaded object that
//     defines it (e.g. a NCCL dlopen'ed RTLD_LOCAL by code other than the caller).
// A definition found is never given up (its object's reference is kept): the pointer must
// outlive any dlclose of the app. When nothing defines it, the search runs again only after
// the process loaded a new object (dl_iterate_phdr's add counter).
//
// A calling object unloaded and replaced by another at the same addresses keeps the first
// answer (NCCL callers are not unloaded in practice). Beyond kCallerSlots calling objects of
// one entry point, further callers are resolved on every call (correct, but slow).
class RealSymbol {
 public:
  static constexpr unsigned kCallerSlots = 8;

  constexpr RealSymbol(const char* name, const char* pname) : name_(name), pname_(pname) {}

  const char* name() const { return name_; }

  // The real function for a call made from code at `caller` (a return address; nullptr when
  // unknown: then steps 2-5), or nullptr when no loaded object provides it. `self` is the
  // wrapper's own address, which also names the object whose definitions are never accepted.
  // Lock-free once the calling object was seen; errno and dlerror() untouched.
  void* get(const void* self, const void* caller) noexcept {
    const auto address = reinterpret_cast<uintptr_t>(caller);
    const unsigned n = used_.load(std::memory_order_acquire);
    for (unsigned i = 0; i < n; ++i) {
      const Slot& s = slots_[i];
      if (address - s.lo < s.hi - s.lo) return s.fn;
    }
    if (caller == nullptr) {
      if (void* fn = any_.load(std::memory_order_acquire)) return fn;
    }
    return resolve(self, caller);
  }

 private:
  struct Slot {
    uintptr_t lo = 0;  // the calling object's mapped range [lo, hi)
    uintptr_t hi = 0;
    void* fn = nullptr;
  };

  void* resolve(const void* self, const void* caller) noexcept;

  const char* name_;
  const char* pname_;
  // slots_[0, used_) are immutable once published by the release store of used_.
  Slot slots_[kCallerSlots] = {};
  std::atomic<unsigned> used_{0};
  std::atomic<void*> any_{nullptr};  // the answer for an unknown caller
  std::atomic<unsigned long long> missing_at_adds_{~0ULL};
  std::mutex mutex_;  // writers of slots_
};

// True when the CUDA driver says `stream` is being captured into a graph (active capture).
// Uses cuStreamIsCapturing from an already loaded libcuda.so.1 (dlopen RTLD_NOLOAD), never the
// runtime's cudaStreamIsCapturing, whose failures would set cudaGetLastError() under the app.
// False when libcuda is not loaded, lacks the symbol, or the query fails. errno is preserved.
bool stream_is_capturing(void* stream) noexcept;

}  // namespace traintime::nccl
