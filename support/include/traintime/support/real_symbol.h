// Finding the real function behind an entry point libtraintime.so interposes (DESIGN §5): NCCL's
// collectives and CUPTI's activity API. Looks only at what the process has already loaded: no
// DT_NEEDED, no dlopen of anything new.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace traintime::support {

// The real implementation of an interposed entry point (an NCCL or CUPTI function exported by
// libtraintime.so), as the object that made the call sees it.
//
// A process may hold more than one implementation: PyTorch source builds link
// libnccl_static.a into libtorch_cuda.so, which Python loads RTLD_LOCAL and which exports the
// entry points, while another package brings libnccl.so.2; libtorch_cuda.so's own libcupti is
// in its local scope, where RTLD_NEXT cannot see it. A call must reach the library its caller
// was built with, and the helpers a wrapper calls (ncclCommCount, ncclCommUserRank) must come
// from that same library, never from another. So the answer depends on the calling object: it is looked up once
// per calling object (the object whose mapped segments hold the return address; dl_iterate_phdr
// takes the loader's lock, so never per call) and cached by that object's address range.
//
// Order tried for a caller (first hit wins), never accepting a definition in the object that
// holds the wrappers (this library):
//  1. the calling object's own definition of the name or its alias (e.g. NCCL linked statically
//     into it and exported, so its PLT call came to us through the global scope);
//  2. dlsym(RTLD_NEXT, name): the next definition in the global scope, where the loader itself
//     would have bound the call (libnccl.so.2, or another interposer preloaded after us, which
//     keeps chaining working);
//  3. the calling object's own lookup scope (itself and its dependencies): a libnccl.so.2 or
//     libcupti.so it depends on, loaded RTLD_LOCAL with it (RTLD_NEXT cannot see a local scope);
//  4. dlsym(RTLD_DEFAULT, alias): e.g. NCCL's strong alias pncclX of the weak ncclX (PROFAPI);
//  5. any loaded object whose file name starts with `preferred_prefix` that defines it, then any
//     other loaded object that defines it (e.g. a library dlopen'ed RTLD_LOCAL by other code).
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

  // `alias` may be null (no alias); `preferred_prefix` is the library file name searched first
  // in step 5 ("libnccl", "libcupti").
  constexpr RealSymbol(const char* name, const char* alias, const char* preferred_prefix)
      : name_(name), pname_(alias), prefix_(preferred_prefix) {}

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
  const char* prefix_;
  // slots_[0, used_) are immutable once published by the release store of used_.
  Slot slots_[kCallerSlots] = {};
  std::atomic<unsigned> used_{0};
  std::atomic<void*> any_{nullptr};  // the answer for an unknown caller
  std::atomic<unsigned long long> missing_at_adds_{~0ULL};
  std::mutex mutex_;  // writers of slots_
};

// Whether a loaded object other than the one holding `self`, and not named `skip_prefix`*.so*,
// itself defines (and exports) `name`; its path goes to `path`. E.g. a library with CUPTI
// linked into it statically: its calls never reach an interposer. Slow (loader lock); errno kept.
bool object_defining(const char* name, const char* skip_prefix, const void* self, char* path,
                     size_t path_size) noexcept;

}  // namespace traintime::support
