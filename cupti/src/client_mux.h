// Another CUPTI client in the process — torch.profiler's Kineto — sharing the one CUPTI
// with traintime (docs/attribution.md, "Sharing CUPTI with torch.profiler"). libtorch calls the
// CUPTI entry points through its PLT, so libtraintime.so exports the ones that can change what
// traintime receives (cupti_interpose.cpp) and they land here with the caller's own real function.
//
// Callbacks. CUPTI up to 13.2 (and any release for a client that uses cuptiSubscribe, not _v2
// with multiple subscribers allowed) has one subscriber, and traintime holds it from cuInit; Kineto
// subscribes first thing in libkineto_init and, refused, stays CPU-only for the life of the
// process (no buffers, no kinds: no GPU trace). So a subscription the loaded CUPTI refuses while
// traintime holds it becomes a virtual one here: the client gets success and a handle of its own;
// each callback it enables (cuptiEnableCallback/EnableDomain/EnableAllDomains on that handle) is
// switched on in traintime's real subscription if traintime does not use it already, and
// traintime's callback hands each call the client enabled to the client's function with the
// client's userdata (dispatch(): no lock). Its cuptiUnsubscribe switches off only what was
// switched on for it. A subscription the loaded CUPTI accepts is the client's own: passed through.
//
// Activity records. While traintime captures, CUPTI has one buffer registration: traintime's.
// Multiplexing:
//  - the buffer callbacks the client registers (at every profiler start) are kept here;
//  - an activity kind the client enables is switched on in CUPTI only when traintime does not
//    use it, and its Disable switches it off only then (one user count per kind and client);
//  - the client holds a buffer as it would with CUPTI alone: one is requested from it when it
//    enables its first kind, and every completed buffer of traintime's has the records of the
//    kinds the client enabled copied, whole and in order, into it (a full one is handed to its
//    completed callback and the next requested). The open one is handed over at the client's own
//    cuptiActivityFlushAll, after the real flush, so its flush has every record when it returns
//    and neither side loses a record or sees a gap. Kineto relies on this: it disables its kinds
//    first, then flushes only if it still holds a buffer CUPTI requested (CuptiActivityApi::
//    activityBuffers), so a client whose buffers were all handed back already gets no trace;
//  - a kind the client disables keeps being forwarded until its next flush (CUPTI delivers the
//    records of work in flight at the disable too), then stops;
//  - a buffer the client allocated before traintime registered, completed to traintime, is
//    handed back to the client untouched;
//  - the client's PER_THREAD_ACTIVITY_BUFFER change (undefined mid-session, says the header)
//    and its cuptiFinalize (which would end traintime's subscription) are absorbed: success,
//    and the client's callbacks are forgotten at Finalize;
//  - its timestamp callback is not applied to CUPTI but to the records copied to it (ClientClock);
//  - its API-record switch-offs (cuptiActivityEnableRuntimeApi/DriverApi) are passed through and
//    traintime's per-launch API records switched on again;
//  - when traintime's capture ends, the client's callbacks are registered with CUPTI again and
//    the kinds only traintime used are switched off.
// While traintime does not capture, every call goes straight to CUPTI and is remembered, so a
// capture that starts later adopts the client. Calls made from inside a libcupti (its own PLT
// calls) and calls whose real function is another CUPTI than traintime's always go straight
// through.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "cupti_library.h"

namespace traintime::cupti {

// Copies the records of a completed buffer whose kind `wanted[kind]` marks, whole and in order,
// into buffers from `request`, each handed to `complete` when full and the last one at the end.
// A record's size is the distance to the next one as the library's own
// cuptiActivityGetNextRecord steps (the last ends at valid_size), so a walk of the copies with
// the same function finds exactly the same records. A record no buffer can take is lost.
struct ForwardCounts {
  uint64_t copied = 0;
  uint64_t lost = 0;
};
// The client's buffers as its callbacks give and take them: `data` is the open one (requested,
// not yet handed back), `used` bytes of it filled.
struct ClientSink {
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  uint8_t* data = nullptr;
  size_t size = 0;
  size_t used = 0;
  bool open() const { return data != nullptr; }
  // Requests a buffer when none is open; false when the client gave none.
  bool ensure_open();
  // Hands the open buffer (possibly empty) to the client's completed callback.
  void hand_over();
};
// The client's own clock (its cuptiActivityRegisterTimestampCallback, not applied to CUPTI while
// traintime captures): one reading of CUPTI's clock and the client's taken together at
// registration. With it, the start and end of each copied record of a kind whose layout is known
// (kernel, memcpy, peer-to-peer memcpy, memset, runtime and driver API, synchronization,
// overhead) are moved to the client's clock, at the rate between the two clocks measured from
// that reading to the forward; other kinds keep CUPTI's clock.
struct ClientClock {
  CUpti_TimestampCallbackFunc now = nullptr;
  uint64_t cupti0 = 0;
  uint64_t client0 = 0;
};
// Appends to `sink`'s open buffer (requesting one when none is open, handing a full one over);
// the last one stays open: the caller hands it over when the client flushes.
ForwardCounts forward_records(const CuptiLibrary& lib, uint8_t* buffer, size_t valid_size,
                              const std::atomic<uint8_t>* wanted, ClientSink& sink,
                              const ClientClock* clock = nullptr);

// An activity kind of this header's enum (a newer CUPTI's kinds lie outside it).
inline bool valid_kind(CUpti_ActivityKind kind) {
  return kind > CUPTI_ACTIVITY_KIND_INVALID && kind < CUPTI_ACTIVITY_KIND_COUNT;
}

class ClientMux {
 public:
  static ClientMux& get();

  // --- The interposed entry points (each gets the caller's real function). ---
  CUptiResult register_callbacks(CUpti_BuffersCallbackRequestFunc request,
                                 CUpti_BuffersCallbackCompleteFunc complete,
                                 decltype(&::cuptiActivityRegisterCallbacks) real, bool from_cupti);
  CUptiResult enable(CUpti_ActivityKind kind, decltype(&::cuptiActivityEnable) real, bool from_cupti);
  CUptiResult disable(CUpti_ActivityKind kind, decltype(&::cuptiActivityDisable) real, bool from_cupti);
  CUptiResult set_attribute(CUpti_ActivityAttribute attr, size_t* size, void* value,
                            decltype(&::cuptiActivitySetAttribute) real, bool from_cupti);
  // The client's cuptiActivityFlushAll: the real flush (traintime's buffers complete, the
  // client's records in them are forwarded), then its open buffer is handed over and the kinds
  // it disabled since its last flush stop being forwarded.
  CUptiResult flush_all(uint32_t flag, decltype(&::cuptiActivityFlushAll) real, bool from_cupti);
  CUptiResult finalize(decltype(&::cuptiFinalize) real, bool from_cupti);
  // cuptiSubscribe/_v2 answered `rc` by the caller's real function `real`: a refusal while
  // traintime holds the subscription on that library becomes a virtual subscription.
  CUptiResult subscribed(CUptiResult rc, CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                         void* userdata, const void* real, bool from_cupti);
  // The callback calls on a handle: the virtual one is served here, any other goes to `real`.
  CUptiResult enable_callback(uint32_t enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain,
                              CUpti_CallbackId cbid, decltype(&::cuptiEnableCallback) real);
  CUptiResult enable_domain(uint32_t enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain,
                            decltype(&::cuptiEnableDomain) real);
  CUptiResult enable_all_domains(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                 decltype(&::cuptiEnableAllDomains) real);
  CUptiResult unsubscribe(CUpti_SubscriberHandle subscriber, decltype(&::cuptiUnsubscribe) real);
  // cuptiActivityEnableRuntimeApi/EnableDriverApi: passed through; a cbid switched off while
  // traintime captures gets traintime's per-launch API records back (they carry its correlation ids).
  CUptiResult enable_api_records(CUpti_CallbackId cbid, uint8_t enable, CUptiResult rc, bool from_cupti);
  // cuptiActivityRegisterTimestampCallback: while traintime captures, kept here (CUPTI keeps its
  // clock, traintime's records with it) and applied to the records forwarded to the client.
  CUptiResult register_timestamp(CUpti_TimestampCallbackFunc fn,
                                 decltype(&::cuptiActivityRegisterTimestampCallback) real, bool from_cupti);

  // Traintime's callback, for every call it receives (hot path: no lock, no allocation): the
  // virtual subscriber's function, if it enabled this one.
  void dispatch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
    if (active()) dispatch_slow(domain, cbid, data);
  }
  // Whether a virtual subscriber has a callback: the caller may test this first and keep its
  // common path free of the call.
  bool active() const { return callback_.load(std::memory_order_acquire) != nullptr; }

  // --- GpuCapture. ---
  // Capture started on `lib` with traintime's callbacks registered, `own` kinds enabled, and
  // traintime's real subscription `subscriber`.
  // `restore_api_records` re-enables traintime's per-cbid API records after the client disabled
  // the whole RUNTIME or DRIVER kind.
  void attach(const CuptiLibrary* lib, CUpti_SubscriberHandle subscriber, const CUpti_ActivityKind* own,
              int own_count, void (*restore_api_records)());
  // Capture ended: the client, if any, gets CUPTI back. `subscriber`: traintime's subscription
  // when it is kept (a virtual subscriber's callbacks go on through it), nullptr when it ended.
  void detach(CUpti_SubscriberHandle subscriber);
  // A completed buffer: true when it was the client's (it has been handed back). Otherwise the
  // client's records in it are forwarded to the client; traintime keeps the buffer.
  bool on_completed(uint8_t* buffer, size_t size, size_t valid_size, bool ours);

  // Whether the client is given the records of `kind` (enabled, or still draining).
  bool client_takes(CUpti_ActivityKind kind) const {
    return kind > CUPTI_ACTIVITY_KIND_INVALID && kind < CUPTI_ACTIVITY_KIND_COUNT &&
           client_kinds_[kind].load(std::memory_order_acquire) != 0;
  }

  // For gpu_capture_reason / warnings: empty when no other client showed up.
  std::string describe() const;

 private:
  ClientMux() = default;
  bool multiplexing(const void* real, const void* ours) const;
  void forward(const CuptiLibrary& lib, uint8_t* buffer, size_t valid_size);
  // Hands the client's open buffer over (out_mu_ taken here), then, with `reopen`, requests the
  // next one while the client still has kinds on.
  void hand_over_open(bool reopen);
  void dispatch_slow(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);
  bool is_virtual(CUpti_SubscriberHandle h) const {
    return h != nullptr && h == reinterpret_cast<CUpti_SubscriberHandle>(const_cast<char*>(&virtual_handle_));
  }
  // Under mu_: the virtual subscriber wants (domain, cbid) (on=true) or no longer does.
  CUptiResult want(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, bool on);
  CUptiResult want_domain(CUpti_CallbackDomain domain, bool on);
  void forget_subscriber();  // under mu_

  std::mutex mu_;  // the client's calls and attach/detach
  std::atomic<const CuptiLibrary*> lib_{nullptr};
  std::atomic<CUpti_BuffersCallbackRequestFunc> request_{nullptr};
  std::atomic<CUpti_BuffersCallbackCompleteFunc> complete_{nullptr};
  // Per kind: 0 off, kOn enabled by the client, kDraining disabled by it but still forwarded
  // until its next flush. client_kind_count_ counts the kinds not off.
  static constexpr uint8_t kOn = 1, kDraining = 2;
  std::atomic<uint8_t> client_kinds_[CUPTI_ACTIVITY_KIND_COUNT] = {};
  std::atomic<int> client_kind_count_{0};
  // The client's open buffer. out_mu_ is taken last (inside mu_ at most), never across a call
  // into CUPTI; the client's request/complete callbacks run under it (Kineto's take only its
  // own buffer lock, which it never holds while calling CUPTI). Lock order: core/lock_order.h.
  std::mutex out_mu_;
  ClientSink sink_;
  uint8_t own_kinds_[CUPTI_ACTIVITY_KIND_COUNT] = {};  // under mu_ (set by attach)
  void (*restore_api_records_)() = nullptr;
  std::atomic<uint64_t> registrations_{0};
  std::atomic<uint64_t> forwarded_{0};
  std::atomic<uint64_t> lost_{0};          // client records with no client buffer to take them
  std::atomic<uint64_t> handed_back_{0};

  // The virtual subscription (one; a further refused cuptiSubscribe stays refused).
  static constexpr int kDomains = CUPTI_CB_DOMAIN_SIZE;
  static constexpr CUpti_CallbackId kCbids = 4096;  // RoleTable::kMaxCbid: past every release's ids
  char virtual_handle_ = 0;  // its address is the handle
  const CuptiLibrary* sub_lib_ = nullptr;            // under mu_: the library of real_sub_
  CUpti_SubscriberHandle real_sub_ = nullptr;        // under mu_: traintime's subscription
  std::atomic<CUpti_CallbackFunc> callback_{nullptr};
  std::atomic<void*> userdata_{nullptr};
  std::atomic<uint8_t> wanted_[kDomains][kCbids] = {};
  uint8_t added_[kDomains][kCbids] = {};  // under mu_: switched on in real_sub_ for the client
  std::atomic<uint64_t> virtual_subscriptions_{0};
  std::atomic<uint64_t> callbacks_delivered_{0};
  // The client's clock (register_timestamp): `clock_now_` published last, read first.
  std::atomic<CUpti_TimestampCallbackFunc> clock_now_{nullptr};
  std::atomic<uint64_t> clock_cupti0_{0};
  std::atomic<uint64_t> clock_client0_{0};
  std::atomic<bool> clock_applied_{false};
};

}  // namespace traintime::cupti
