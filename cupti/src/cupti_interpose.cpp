// The CUPTI entry points torch.profiler (Kineto) calls to share CUPTI, exported by
// libtraintime.so (libtraintime.map) with CUPTI's exact prototypes. libtorch calls them through
// its PLT, so the global scope brings the calls here; each finds the caller's own libcupti
// (support::RealSymbol: libtorch_cuda.so's libcupti sits in a local scope that RTLD_NEXT cannot
// see) and hands over to ClientMux, which forwards or multiplexes (client_mux.h).
//
// No real function anywhere (the caller could not have linked without one, so only code that
// looked our export up by name lands there): CUPTI_ERROR_NOT_INITIALIZED. errno is what the real
// call leaves; our own lookup keeps the caller's.
#include <dlfcn.h>

#include <cerrno>
#include <cstring>

#pragma GCC visibility push(default)
#include <cupti.h>
#pragma GCC visibility pop

#include "client_mux.h"
#include "traintime/support/real_symbol.h"

namespace traintime::cupti {
namespace {

using support::RealSymbol;

// A call made from inside a libcupti (its own calls through its PLT): straight through.
bool from_cupti(const void* caller) {
  Dl_info info{};
  if (caller == nullptr || dladdr(caller, &info) == 0 || info.dli_fname == nullptr) return false;
  const char* base = std::strrchr(info.dli_fname, '/');
  base = base != nullptr ? base + 1 : info.dli_fname;
  return std::strncmp(base, "libcupti", 8) == 0;
}

template <typename Fn>
Fn real(RealSymbol& symbol, Fn self, const void* caller) {
  return reinterpret_cast<Fn>(symbol.get(reinterpret_cast<const void*>(self), caller));
}

RealSymbol g_register{"cuptiActivityRegisterCallbacks", nullptr, "libcupti"};
RealSymbol g_enable{"cuptiActivityEnable", nullptr, "libcupti"};
RealSymbol g_disable{"cuptiActivityDisable", nullptr, "libcupti"};
RealSymbol g_flush_all{"cuptiActivityFlushAll", nullptr, "libcupti"};
RealSymbol g_set_attribute{"cuptiActivitySetAttribute", nullptr, "libcupti"};
RealSymbol g_finalize{"cuptiFinalize", nullptr, "libcupti"};
RealSymbol g_subscribe{"cuptiSubscribe", nullptr, "libcupti"};

// The caller's errno around our own lookup; the real call then sets it as it would alone.
struct Lookup {
  int saved = errno;
  bool cupti;
  explicit Lookup(const void* caller) : cupti(from_cupti(caller)) {}
  void done() const { errno = saved; }
};

}  // namespace
}  // namespace traintime::cupti

namespace tc = traintime::cupti;
#define TT_CALLER __builtin_return_address(0)

extern "C" {

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
                                                    CUpti_BuffersCallbackCompleteFunc funcBufferCompleted) {
  const void* caller = TT_CALLER;
  const tc::Lookup l(caller);
  auto fn = tc::real(tc::g_register, &cuptiActivityRegisterCallbacks, caller);
  l.done();
  if (fn == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  return tc::ClientMux::get().register_callbacks(funcBufferRequested, funcBufferCompleted, fn, l.cupti);
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  const void* caller = TT_CALLER;
  const tc::Lookup l(caller);
  auto fn = tc::real(tc::g_enable, &cuptiActivityEnable, caller);
  l.done();
  if (fn == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  return tc::ClientMux::get().enable(kind, fn, l.cupti);
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  const void* caller = TT_CALLER;
  const tc::Lookup l(caller);
  auto fn = tc::real(tc::g_disable, &cuptiActivityDisable, caller);
  l.done();
  if (fn == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  return tc::ClientMux::get().disable(kind, fn, l.cupti);
}

// Forwarded as it is: the flush delivers traintime's buffers, and with them (synchronously,
// before this returns) the client's records.
CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  const void* caller = TT_CALLER;
  const int saved = errno;
  auto fn = tc::real(tc::g_flush_all, &cuptiActivityFlushAll, caller);
  errno = saved;
  if (fn == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  return fn(flag);
}

CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t* valueSize, void* value) {
  const void* caller = TT_CALLER;
  const tc::Lookup l(caller);
  auto fn = tc::real(tc::g_set_attribute, &cuptiActivitySetAttribute, caller);
  l.done();
  if (fn == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  return tc::ClientMux::get().set_attribute(attr, valueSize, value, fn, l.cupti);
}

CUptiResult CUPTIAPI cuptiFinalize(void) {
  const void* caller = TT_CALLER;
  const tc::Lookup l(caller);
  auto fn = tc::real(tc::g_finalize, &cuptiFinalize, caller);
  l.done();
  if (fn == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  return tc::ClientMux::get().finalize(fn, l.cupti);
}

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                    void* userdata) {
  const void* caller = TT_CALLER;
  const int saved = errno;
  auto fn = tc::real(tc::g_subscribe, &cuptiSubscribe, caller);
  errno = saved;
  if (fn == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  const CUptiResult rc = fn(subscriber, callback, userdata);
  tc::ClientMux::get().note_subscribe_result(rc);
  return rc;
}

}  // extern "C"
