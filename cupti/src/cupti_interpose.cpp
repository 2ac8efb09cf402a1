// The CUPTI entry points torch.profiler (Kineto) calls that can change what traintime receives,
// exported by libtraintime.so (libtraintime.map) with CUPTI's exact prototypes. libtorch calls them through
// its PLT, so the global scope brings the calls here; each finds the caller's own libcupti
// (support::RealSymbol: libtorch_cuda.so's libcupti sits in a local scope that RTLD_NEXT cannot
// see) and hands over to ClientMux, which forwards or multiplexes (client_mux.h).
//
// Of the other CUPTI calls libtorch_cpu.so imports (torch 2.11), these are not interposed because
// they cannot change traintime's records: cuptiActivityPushExternalCorrelationId/Pop (they add
// EXTERNAL_CORRELATION records, a kind traintime neither enables nor decodes, and leave the
// correlation ids alone), cuptiActivityEnableCudaEventDeviceTimestamps (CUDA event records only),
// cuptiActivityGetNextRecord, cuptiActivityGetNumDroppedRecords, cuptiGetVersion and
// cuptiGetResultString (reads).
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
RealSymbol g_subscribe_v2{"cuptiSubscribe_v2", nullptr, "libcupti"};
RealSymbol g_unsubscribe{"cuptiUnsubscribe", nullptr, "libcupti"};
RealSymbol g_enable_callback{"cuptiEnableCallback", nullptr, "libcupti"};
RealSymbol g_enable_domain{"cuptiEnableDomain", nullptr, "libcupti"};
RealSymbol g_enable_all_domains{"cuptiEnableAllDomains", nullptr, "libcupti"};
RealSymbol g_enable_runtime_api{"cuptiActivityEnableRuntimeApi", nullptr, "libcupti"};
RealSymbol g_enable_driver_api{"cuptiActivityEnableDriverApi", nullptr, "libcupti"};
RealSymbol g_register_timestamp{"cuptiActivityRegisterTimestampCallback", nullptr, "libcupti"};

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

// The real flush delivers traintime's buffers, and with them (synchronously, before this
// returns) the client's records; then the client's open buffer is handed to it (client_mux.h).
CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  const void* caller = TT_CALLER;
  const tc::Lookup l(caller);
  auto fn = tc::real(tc::g_flush_all, &cuptiActivityFlushAll, caller);
  l.done();
  if (fn == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  return tc::ClientMux::get().flush_all(flag, fn, l.cupti);
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

// A refusal while traintime holds the subscription becomes a subscription of the caller's own,
// served from traintime's (client_mux.h); an accepted one is the caller's.
CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                    void* userdata) {
  const void* caller = TT_CALLER;
  const tc::Lookup l(caller);
  auto fn = tc::real(tc::g_subscribe, &cuptiSubscribe, caller);
  l.done();
  if (fn == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  const CUptiResult rc = fn(subscriber, callback, userdata);
  return tc::ClientMux::get().subscribed(rc, subscriber, callback, userdata,
                                         reinterpret_cast<const void*>(fn), l.cupti);
}

CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                       void* userdata, CUpti_SubscriberParams* params) {
  const void* caller = TT_CALLER;
  const tc::Lookup l(caller);
  auto fn = tc::real(tc::g_subscribe_v2, &cuptiSubscribe_v2, caller);
  l.done();
  if (fn == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  const CUptiResult rc = fn(subscriber, callback, userdata, params);
  return tc::ClientMux::get().subscribed(rc, subscriber, callback, userdata,
                                         reinterpret_cast<const void*>(fn), l.cupti);
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  const void* caller = TT_CALLER;
  const tc::Lookup l(caller);
  auto fn = tc::real(tc::g_unsubscribe, &cuptiUnsubscribe, caller);
  l.done();
  if (fn == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  return tc::ClientMux::get().unsubscribe(subscriber, fn);
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                         CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  const void* caller = TT_CALLER;
  const tc::Lookup l(caller);
  auto fn = tc::real(tc::g_enable_callback, &cuptiEnableCallback, caller);
  l.done();
  if (fn == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  return tc::ClientMux::get().enable_callback(enable, subscriber, domain, cbid, fn);
}

CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                       CUpti_CallbackDomain domain) {
  const void* caller = TT_CALLER;
  const tc::Lookup l(caller);
  auto fn = tc::real(tc::g_enable_domain, &cuptiEnableDomain, caller);
  l.done();
  if (fn == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  return tc::ClientMux::get().enable_domain(enable, subscriber, domain, fn);
}

CUptiResult CUPTIAPI cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle subscriber) {
  const void* caller = TT_CALLER;
  const tc::Lookup l(caller);
  auto fn = tc::real(tc::g_enable_all_domains, &cuptiEnableAllDomains, caller);
  l.done();
  if (fn == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  return tc::ClientMux::get().enable_all_domains(enable, subscriber, fn);
}

// Kineto switches API records of noisy cbids off (cudaGetDevice, cuCtxGetCurrent): passed
// through, and traintime's per-launch API records are switched on again after any switch-off.
CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
  const void* caller = TT_CALLER;
  const tc::Lookup l(caller);
  auto fn = tc::real(tc::g_enable_runtime_api, &cuptiActivityEnableRuntimeApi, caller);
  l.done();
  if (fn == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  return tc::ClientMux::get().enable_api_records(cbid, enable, fn(cbid, enable), l.cupti);
}

CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
  const void* caller = TT_CALLER;
  const tc::Lookup l(caller);
  auto fn = tc::real(tc::g_enable_driver_api, &cuptiActivityEnableDriverApi, caller);
  l.done();
  if (fn == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  return tc::ClientMux::get().enable_api_records(cbid, enable, fn(cbid, enable), l.cupti);
}

// Kineto registers its TSC clock at every profiler start (and converts its GPU timestamps as TSC
// whatever CUPTI answers). While traintime captures it is not applied to CUPTI (it would move
// every record, traintime's included, to another clock mid-session) but to the records forwarded
// to Kineto (client_mux.h, ClientClock). Before traintime captures it passes through.
CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc funcTimestamp) {
  const void* caller = TT_CALLER;
  const tc::Lookup l(caller);
  auto fn = tc::real(tc::g_register_timestamp, &cuptiActivityRegisterTimestampCallback, caller);
  l.done();
  if (fn == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  return tc::ClientMux::get().register_timestamp(funcTimestamp, fn, l.cupti);
}

}  // extern "C"
