// Sharing CUPTI with torch.profiler (client_mux.h; docs/attribution.md). What each side gets:
// torch.profiler keeps its whole GPU trace under the preload: its cuptiSubscribe is served from
// traintime's subscription with exactly the callbacks it enables, and its buffers get every record
// of the kinds it enables (copied from traintime's buffers, on its own TSC clock when it registered
// one). traintime, while the profiler holds activity kinds, records exactly what it records
// without it: its kernels, copies and memsets, joined by its own launch callbacks; the profiler's
// extra kinds are decoded and dropped, and CUPTI keeps traintime's clock.
#include "client_mux.h"

#include <cupti_activity_deprecated.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace traintime::cupti {
namespace {

bool valid_kind(CUpti_ActivityKind kind) {
  return kind > CUPTI_ACTIVITY_KIND_INVALID && kind < CUPTI_ACTIVITY_KIND_COUNT;
}

}  // namespace

ClientMux& ClientMux::get() {
  static ClientMux* mux = new ClientMux();  // leaked: CUPTI may call back until exit
  return *mux;
}

bool ClientMux::multiplexing(const void* real, const void* ours) const {
  return lib_.load(std::memory_order_acquire) != nullptr && real == ours;
}

CUptiResult ClientMux::register_callbacks(CUpti_BuffersCallbackRequestFunc request,
                                          CUpti_BuffersCallbackCompleteFunc complete,
                                          decltype(&::cuptiActivityRegisterCallbacks) real,
                                          bool from_cupti) {
  if (from_cupti) return real(request, complete);
  std::lock_guard<std::mutex> lock(mu_);
  const CuptiLibrary* lib = lib_.load(std::memory_order_acquire);
  if (lib == nullptr || !multiplexing(reinterpret_cast<const void*>(real),
                                      reinterpret_cast<const void*>(lib->api().cuptiActivityRegisterCallbacks))) {
    const CUptiResult rc = real(request, complete);
    if (rc == CUPTI_SUCCESS && lib == nullptr) {  // remembered: a later capture adopts it
      request_.store(request, std::memory_order_release);
      complete_.store(complete, std::memory_order_release);
    }
    return rc;
  }
  if (request == nullptr || complete == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  request_.store(request, std::memory_order_release);
  complete_.store(complete, std::memory_order_release);
  {
    std::lock_guard<std::mutex> out(out_mu_);
    // A buffer the client's former callbacks gave goes back through them.
    if (sink_.open() && (sink_.request != request || sink_.complete != complete)) sink_.hand_over();
    sink_.request = request;
    sink_.complete = complete;
  }
  registrations_.fetch_add(1, std::memory_order_relaxed);
  return CUPTI_SUCCESS;
}

CUptiResult ClientMux::enable(CUpti_ActivityKind kind, decltype(&::cuptiActivityEnable) real,
                              bool from_cupti) {
  if (from_cupti || !valid_kind(kind)) return real(kind);
  std::lock_guard<std::mutex> lock(mu_);
  const CuptiLibrary* lib = lib_.load(std::memory_order_acquire);
  const bool mux = lib != nullptr && multiplexing(reinterpret_cast<const void*>(real),
                                                  reinterpret_cast<const void*>(lib->api().cuptiActivityEnable));
  if (lib != nullptr && !mux) return real(kind);  // another CUPTI than traintime's
  // Ours already on: nothing to switch on in CUPTI.
  const CUptiResult rc = mux && own_kinds_[kind] ? CUPTI_SUCCESS : real(kind);
  if (rc != CUPTI_SUCCESS) return rc;
  if (client_kinds_[kind].exchange(kOn, std::memory_order_acq_rel) == 0)
    client_kind_count_.fetch_add(1, std::memory_order_release);
  if (mux) {
    // As CUPTI would once records may come: the client holds a buffer (Kineto flushes at its
    // stop only when it does).
    std::lock_guard<std::mutex> out(out_mu_);
    if (sink_.request != nullptr && sink_.complete != nullptr) sink_.ensure_open();
  }
  return rc;
}

CUptiResult ClientMux::disable(CUpti_ActivityKind kind, decltype(&::cuptiActivityDisable) real,
                               bool from_cupti) {
  if (from_cupti || !valid_kind(kind)) return real(kind);
  std::lock_guard<std::mutex> lock(mu_);
  const CuptiLibrary* lib = lib_.load(std::memory_order_acquire);
  const bool mux = lib != nullptr && multiplexing(reinterpret_cast<const void*>(real),
                                                  reinterpret_cast<const void*>(lib->api().cuptiActivityDisable));
  if (lib != nullptr && !mux) return real(kind);
  if (mux) {
    // Forwarded until the client's next flush: the records of work in flight come after this.
    uint8_t on = kOn;
    client_kinds_[kind].compare_exchange_strong(on, kDraining, std::memory_order_acq_rel);
  } else if (client_kinds_[kind].exchange(0, std::memory_order_acq_rel) != 0) {
    client_kind_count_.fetch_sub(1, std::memory_order_release);
  }
  if (mux && own_kinds_[kind]) return CUPTI_SUCCESS;  // traintime still uses it
  const CUptiResult rc = real(kind);
  // Switching the whole RUNTIME or DRIVER kind off may take traintime's per-launch API records
  // (its correlation ids) with it: they are switched on again.
  if (mux && restore_api_records_ != nullptr &&
      (kind == CUPTI_ACTIVITY_KIND_RUNTIME || kind == CUPTI_ACTIVITY_KIND_DRIVER))
    restore_api_records_();
  return rc;
}

CUptiResult ClientMux::set_attribute(CUpti_ActivityAttribute attr, size_t* size, void* value,
                                     decltype(&::cuptiActivitySetAttribute) real, bool from_cupti) {
  if (!from_cupti && attr == CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER) {
    const CuptiLibrary* lib = lib_.load(std::memory_order_acquire);
    // Undefined once a session runs (cupti_activity.h): traintime's session keeps its setting.
    if (lib != nullptr && multiplexing(reinterpret_cast<const void*>(real),
                                       reinterpret_cast<const void*>(lib->api().cuptiActivitySetAttribute)))
      return size != nullptr && value != nullptr ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
  }
  return real(attr, size, value);
}

CUptiResult ClientMux::flush_all(uint32_t flag, decltype(&::cuptiActivityFlushAll) real, bool from_cupti) {
  const CUptiResult rc = real(flag);  // traintime's buffers complete: the client's records forwarded
  if (from_cupti) return rc;
  const CuptiLibrary* lib = lib_.load(std::memory_order_acquire);
  if (lib == nullptr || !multiplexing(reinterpret_cast<const void*>(real),
                                      reinterpret_cast<const void*>(lib->api().cuptiActivityFlushAll)))
    return rc;
  const int saved = errno;  // the client's callbacks may touch it; the caller sees the real call's
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& k : client_kinds_) {
    uint8_t draining = kDraining;
    if (k.compare_exchange_strong(draining, 0, std::memory_order_acq_rel))
      client_kind_count_.fetch_sub(1, std::memory_order_release);
  }
  hand_over_open(/*reopen=*/client_kind_count_.load(std::memory_order_acquire) > 0);
  errno = saved;
  return rc;
}

void ClientMux::hand_over_open(bool reopen) {
  std::lock_guard<std::mutex> out(out_mu_);
  sink_.hand_over();
  if (reopen && sink_.request != nullptr && sink_.complete != nullptr) sink_.ensure_open();
}

CUptiResult ClientMux::finalize(decltype(&::cuptiFinalize) real, bool from_cupti) {
  if (from_cupti) return real();
  std::lock_guard<std::mutex> lock(mu_);
  if (lib_.load(std::memory_order_acquire) == nullptr) {
    // CUPTI detaches every subscriber, traintime's (no longer capturing) included.
    if (real_sub_ != nullptr) {
      std::memset(added_, 0, sizeof added_);
      real_sub_ = nullptr;
      callback_.store(nullptr, std::memory_order_release);
    }
    request_.store(nullptr, std::memory_order_release);
    complete_.store(nullptr, std::memory_order_release);
    for (auto& k : client_kinds_) k.store(0, std::memory_order_relaxed);
    client_kind_count_.store(0, std::memory_order_release);
    return real();
  }
  // Finalize would detach traintime too: the client is done, so it is forgotten instead, its
  // open buffer (its memory) handed back first.
  hand_over_open(/*reopen=*/false);
  {
    std::lock_guard<std::mutex> out(out_mu_);
    sink_.request = nullptr;
    sink_.complete = nullptr;
  }
  request_.store(nullptr, std::memory_order_release);
  complete_.store(nullptr, std::memory_order_release);
  for (auto& k : client_kinds_) k.store(0, std::memory_order_relaxed);
  client_kind_count_.store(0, std::memory_order_release);
  return CUPTI_SUCCESS;
}

CUptiResult ClientMux::subscribed(CUptiResult rc, CUpti_SubscriberHandle* subscriber,
                                  CUpti_CallbackFunc callback, void* userdata, const void* real,
                                  bool from_cupti) {
  if (from_cupti || rc != CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED || subscriber == nullptr ||
      callback == nullptr)
    return rc;
  std::lock_guard<std::mutex> lock(mu_);
  // Refused because traintime holds the subscription of that very library: a virtual one.
  if (real_sub_ == nullptr || sub_lib_ == nullptr || sub_lib_->api().cuptiEnableDomain == nullptr ||
      sub_lib_->api().cuptiGetCallbackState == nullptr ||
      (real != reinterpret_cast<const void*>(sub_lib_->api().cuptiSubscribe) &&
       real != reinterpret_cast<const void*>(sub_lib_->api().cuptiSubscribe_v2)) ||
      callback_.load(std::memory_order_acquire) != nullptr)
    return rc;
  for (auto& domain : wanted_)
    for (auto& w : domain) w.store(0, std::memory_order_relaxed);
  userdata_.store(userdata, std::memory_order_relaxed);
  callback_.store(callback, std::memory_order_release);
  virtual_subscriptions_.fetch_add(1, std::memory_order_relaxed);
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&virtual_handle_);
  return CUPTI_SUCCESS;
}

CUptiResult ClientMux::want(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, bool on) {
  if (domain <= CUPTI_CB_DOMAIN_INVALID || domain >= kDomains || cbid >= kCbids)
    return CUPTI_ERROR_INVALID_PARAMETER;
  if (real_sub_ == nullptr) {  // traintime's subscription ended: nothing to switch any more
    wanted_[domain][cbid].store(on ? 1 : 0, std::memory_order_release);
    return CUPTI_SUCCESS;
  }
  const CuptiApi& api = sub_lib_->api();
  if (on && !added_[domain][cbid]) {
    uint32_t state = 0;
    const CUptiResult rc = api.cuptiGetCallbackState(&state, real_sub_, domain, cbid);
    if (rc != CUPTI_SUCCESS) return rc;  // not a callback of this release
    if (state == 0) {
      if (const CUptiResult e = api.cuptiEnableCallback(1, real_sub_, domain, cbid); e != CUPTI_SUCCESS)
        return e;
      added_[domain][cbid] = 1;
    }
  } else if (!on && added_[domain][cbid]) {
    api.cuptiEnableCallback(0, real_sub_, domain, cbid);
    added_[domain][cbid] = 0;
  }
  wanted_[domain][cbid].store(on ? 1 : 0, std::memory_order_release);
  return CUPTI_SUCCESS;
}

CUptiResult ClientMux::want_domain(CUpti_CallbackDomain domain, bool on) {
  if (domain <= CUPTI_CB_DOMAIN_INVALID || domain >= kDomains) return CUPTI_ERROR_INVALID_PARAMETER;
  // Every callback id of the release: those past its last one are INVALID_PARAMETER, skipped.
  bool any = false;
  for (CUpti_CallbackId cbid = 0; cbid < kCbids; ++cbid)
    if (want(domain, cbid, on) == CUPTI_SUCCESS) any = true;
  return any || real_sub_ == nullptr ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

CUptiResult ClientMux::enable_callback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                       CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                       decltype(&::cuptiEnableCallback) real) {
  if (!is_virtual(subscriber)) return real(enable, subscriber, domain, cbid);
  std::lock_guard<std::mutex> lock(mu_);
  if (callback_.load(std::memory_order_acquire) == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  return want(domain, cbid, enable != 0);
}

CUptiResult ClientMux::enable_domain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                     CUpti_CallbackDomain domain, decltype(&::cuptiEnableDomain) real) {
  if (!is_virtual(subscriber)) return real(enable, subscriber, domain);
  std::lock_guard<std::mutex> lock(mu_);
  if (callback_.load(std::memory_order_acquire) == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  return want_domain(domain, enable != 0);
}

CUptiResult ClientMux::enable_all_domains(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                          decltype(&::cuptiEnableAllDomains) real) {
  if (!is_virtual(subscriber)) return real(enable, subscriber);
  std::lock_guard<std::mutex> lock(mu_);
  if (callback_.load(std::memory_order_acquire) == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  for (int d = CUPTI_CB_DOMAIN_INVALID + 1; d < kDomains; ++d)
    want_domain(static_cast<CUpti_CallbackDomain>(d), enable != 0);
  return CUPTI_SUCCESS;
}

void ClientMux::forget_subscriber() {
  for (int d = CUPTI_CB_DOMAIN_INVALID + 1; d < kDomains; ++d)
    for (CUpti_CallbackId cbid = 0; cbid < kCbids; ++cbid)
      if (wanted_[d][cbid].load(std::memory_order_relaxed) || added_[d][cbid])
        want(static_cast<CUpti_CallbackDomain>(d), cbid, false);
  callback_.store(nullptr, std::memory_order_release);
  userdata_.store(nullptr, std::memory_order_relaxed);
}

CUptiResult ClientMux::unsubscribe(CUpti_SubscriberHandle subscriber, decltype(&::cuptiUnsubscribe) real) {
  if (!is_virtual(subscriber)) return real(subscriber);
  std::lock_guard<std::mutex> lock(mu_);
  if (callback_.load(std::memory_order_acquire) == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  forget_subscriber();  // only what was switched on for it; traintime's callbacks stay
  return CUPTI_SUCCESS;
}

void ClientMux::dispatch_slow(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (domain <= CUPTI_CB_DOMAIN_INVALID || domain >= kDomains || cbid >= kCbids ||
      !wanted_[domain][cbid].load(std::memory_order_acquire))
    return;
  CUpti_CallbackFunc fn = callback_.load(std::memory_order_acquire);
  if (fn == nullptr) return;
  callbacks_delivered_.fetch_add(1, std::memory_order_relaxed);
  fn(userdata_.load(std::memory_order_relaxed), domain, cbid, data);
}

CUptiResult ClientMux::enable_api_records(CUpti_CallbackId, uint8_t enable, CUptiResult rc, bool from_cupti) {
  if (from_cupti || enable != 0 || rc != CUPTI_SUCCESS) return rc;
  const CuptiLibrary* lib = lib_.load(std::memory_order_acquire);
  if (lib == nullptr) return rc;
  std::lock_guard<std::mutex> lock(mu_);
  if (restore_api_records_ != nullptr) restore_api_records_();
  return rc;
}

CUptiResult ClientMux::register_timestamp(CUpti_TimestampCallbackFunc fn,
                                          decltype(&::cuptiActivityRegisterTimestampCallback) real,
                                          bool from_cupti) {
  if (from_cupti) return real(fn);
  const CuptiLibrary* lib = lib_.load(std::memory_order_acquire);
  // While traintime captures, CUPTI's clock is traintime's: another clock mid-session would put
  // its records (and the ones already buffered) on two time bases. The client's records are moved
  // to its clock as they are forwarded instead.
  if (lib != nullptr && multiplexing(reinterpret_cast<const void*>(real),
                                     reinterpret_cast<const void*>(lib->api().cuptiActivityRegisterTimestampCallback))) {
    uint64_t cupti_now = 0;
    if (fn == nullptr || lib->api().cuptiGetTimestamp == nullptr ||
        lib->api().cuptiGetTimestamp(&cupti_now) != CUPTI_SUCCESS)
      return CUPTI_ERROR_NOT_SUPPORTED;
    std::lock_guard<std::mutex> lock(mu_);
    clock_now_.store(nullptr, std::memory_order_release);
    clock_cupti0_.store(cupti_now, std::memory_order_relaxed);
    clock_client0_.store(fn(), std::memory_order_relaxed);
    clock_now_.store(fn, std::memory_order_release);
    clock_applied_.store(true, std::memory_order_relaxed);
    return CUPTI_SUCCESS;
  }
  return real(fn);
}

void ClientMux::attach(const CuptiLibrary* lib, CUpti_SubscriberHandle subscriber,
                       const CUpti_ActivityKind* own, int own_count, void (*restore_api_records)()) {
  std::lock_guard<std::mutex> lock(mu_);
  sub_lib_ = lib;
  real_sub_ = subscriber;
  std::memset(own_kinds_, 0, sizeof own_kinds_);
  for (int i = 0; i < own_count; ++i)
    if (valid_kind(own[i])) own_kinds_[own[i]] = 1;
  restore_api_records_ = restore_api_records;
  lib_.store(lib, std::memory_order_release);
}

void ClientMux::detach(CUpti_SubscriberHandle subscriber) {
  std::lock_guard<std::mutex> lock(mu_);
  if (subscriber == nullptr) {  // traintime unsubscribed: what it carried for the client is gone
    std::memset(added_, 0, sizeof added_);
    real_sub_ = nullptr;
  }
  const CuptiLibrary* lib = lib_.exchange(nullptr, std::memory_order_acq_rel);
  if (lib == nullptr) return;
  CUpti_BuffersCallbackRequestFunc request = request_.load(std::memory_order_acquire);
  CUpti_BuffersCallbackCompleteFunc complete = complete_.load(std::memory_order_acquire);
  if (request == nullptr || complete == nullptr) return;
  // What was forwarded to the client so far is its own again; kinds it disabled stop here.
  hand_over_open(/*reopen=*/false);
  for (auto& k : client_kinds_) {
    uint8_t draining = kDraining;
    if (k.compare_exchange_strong(draining, 0, std::memory_order_acq_rel))
      client_kind_count_.fetch_sub(1, std::memory_order_release);
  }
  // The client goes on profiling: only its kinds stay on, and its callbacks get its records.
  for (int k = 1; k < CUPTI_ACTIVITY_KIND_COUNT; ++k) {
    if (own_kinds_[k] && !client_kinds_[k].load(std::memory_order_relaxed))
      lib->api().cuptiActivityDisable(static_cast<CUpti_ActivityKind>(k));
  }
  lib->api().cuptiActivityRegisterCallbacks(request, complete);
}

bool ClientMux::on_completed(uint8_t* buffer, size_t size, size_t valid_size, bool ours) {
  CUpti_BuffersCallbackCompleteFunc complete = complete_.load(std::memory_order_acquire);
  if (!ours) {
    // Allocated by the client before traintime registered: it goes back to the client. Without
    // a client to take it (it finalized) it is not ours to free either: it leaks.
    if (complete != nullptr) {
      handed_back_.fetch_add(1, std::memory_order_relaxed);
      complete(nullptr, 0, buffer, size, valid_size);
    }
    return true;
  }
  const CuptiLibrary* lib = lib_.load(std::memory_order_acquire);
  if (lib != nullptr && complete != nullptr && valid_size > 0 &&
      client_kind_count_.load(std::memory_order_acquire) > 0)
    forward(*lib, buffer, valid_size);
  return false;
}

void ClientMux::forward(const CuptiLibrary& lib, uint8_t* buffer, size_t valid_size) {
  ClientClock clock;
  clock.now = clock_now_.load(std::memory_order_acquire);
  clock.cupti0 = clock_cupti0_.load(std::memory_order_relaxed);
  clock.client0 = clock_client0_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> out(out_mu_);
  if (sink_.request == nullptr || sink_.complete == nullptr) return;
  const ForwardCounts n = forward_records(lib, buffer, valid_size, client_kinds_, sink_,
                                          clock.now != nullptr ? &clock : nullptr);
  forwarded_.fetch_add(n.copied, std::memory_order_relaxed);
  lost_.fetch_add(n.lost, std::memory_order_relaxed);
}

namespace {

// Where a record of `kind` keeps its start and end, in every checked release (the structs of the
// toolkit's headers; kernel, memcpy and memset offsets are checked against each release's own
// headers by tests/cupti, API, synchronization and overhead records kept theirs since 12.1).
bool timestamp_offsets(uint32_t kind, size_t* start, size_t* end) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      *start = offsetof(CUpti_ActivityKernel9, start);
      *end = offsetof(CUpti_ActivityKernel9, end);
      return true;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      *start = offsetof(CUpti_ActivityMemcpy5, start);
      *end = offsetof(CUpti_ActivityMemcpy5, end);
      return true;
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      *start = offsetof(CUpti_ActivityMemcpyPtoP4, start);
      *end = offsetof(CUpti_ActivityMemcpyPtoP4, end);
      return true;
    case CUPTI_ACTIVITY_KIND_MEMSET:
      *start = offsetof(CUpti_ActivityMemset4, start);
      *end = offsetof(CUpti_ActivityMemset4, end);
      return true;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      *start = offsetof(CUpti_ActivityAPI, start);
      *end = offsetof(CUpti_ActivityAPI, end);
      return true;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      *start = offsetof(CUpti_ActivitySynchronization2, start);
      *end = offsetof(CUpti_ActivitySynchronization2, end);
      return true;
    case CUPTI_ACTIVITY_KIND_OVERHEAD:
      *start = offsetof(CUpti_ActivityOverhead3, start);
      *end = offsetof(CUpti_ActivityOverhead3, end);
      return true;
    case CUPTI_ACTIVITY_KIND_MEMORY2:  // one timestamp (Memory3 and Memory4 agree on it)
      *start = *end = offsetof(CUpti_ActivityMemory3, timestamp);
      return true;
    default:
      return false;
  }
}

// CUPTI's clock to the client's: a line through the reading at registration and one now.
struct ClockLine {
  uint64_t cupti1 = 0, client1 = 0;
  long double rate = 1.0L;  // client ticks per CUPTI nanosecond
  uint64_t at(uint64_t t) const {
    if (t == 0) return 0;  // untimed stays untimed
    const long double d = (static_cast<long double>(t) - static_cast<long double>(cupti1)) * rate;
    const long double v = static_cast<long double>(client1) + d;
    return v <= 0 ? 0 : static_cast<uint64_t>(v);
  }
};

bool clock_line(const CuptiLibrary& lib, const ClientClock& clock, ClockLine* line) {
  if (lib.api().cuptiGetTimestamp == nullptr || lib.api().cuptiGetTimestamp(&line->cupti1) != CUPTI_SUCCESS)
    return false;
  line->client1 = clock.now();
  if (line->cupti1 > clock.cupti0 && line->client1 > clock.client0)
    line->rate = static_cast<long double>(line->client1 - clock.client0) /
                 static_cast<long double>(line->cupti1 - clock.cupti0);
  return true;
}

}  // namespace

bool ClientSink::ensure_open() {
  if (data != nullptr) return true;
  size_t max_records = 0;
  size = 0;
  used = 0;
  request(&data, &size, &max_records);
  if (data != nullptr && size == 0) hand_over();  // nothing fits: given straight back
  return data != nullptr;
}

void ClientSink::hand_over() {
  if (data != nullptr) complete(nullptr, 0, data, size, used);
  data = nullptr;
  size = used = 0;
}

ForwardCounts forward_records(const CuptiLibrary& lib, uint8_t* buffer, size_t valid_size,
                              const std::atomic<uint8_t>* wanted, ClientSink& sink,
                              const ClientClock* clock) {
  ForwardCounts counts;
  ClockLine line;
  const bool convert = clock != nullptr && clock->now != nullptr && clock_line(lib, *clock, &line);
  auto next_record = lib.api().cuptiActivityGetNextRecord;
  auto copy = [&](const CUpti_Activity* record, size_t bytes) {
    if (sink.open() && sink.used + bytes > sink.size) sink.hand_over();  // full: the next one
    if (!sink.ensure_open() || sink.size < bytes) {
      sink.hand_over();
      ++counts.lost;
      return;
    }
    uint8_t* out = sink.data;
    const size_t used = sink.used;
    std::memcpy(out + used, record, bytes);
    uint32_t kind = 0;
    std::memcpy(&kind, record, sizeof kind);
    size_t start = 0, end = 0;
    if (convert && timestamp_offsets(kind, &start, &end) && end + sizeof(uint64_t) <= bytes) {
      // A record with one timestamp (start == end) has it converted once.
      for (size_t at : {start, end}) {
        uint64_t t = 0;
        std::memcpy(&t, out + used + at, sizeof t);
        t = line.at(t);
        std::memcpy(out + used + at, &t, sizeof t);
        if (end == start) break;
      }
    }
    sink.used += bytes;
    ++counts.copied;
  };
  CUpti_Activity* record = nullptr;
  if (next_record(buffer, valid_size, &record) != CUPTI_SUCCESS) return counts;
  for (;;) {
    CUpti_Activity* next = record;
    const CUptiResult rc = next_record(buffer, valid_size, &next);
    const auto* at = reinterpret_cast<const uint8_t*>(record);
    size_t bytes = 0;
    if (rc == CUPTI_ERROR_MAX_LIMIT_REACHED) {
      bytes = static_cast<size_t>(buffer + valid_size - at);
    } else if (next != nullptr && next != record) {  // success, or an incomplete record next
      bytes = static_cast<size_t>(reinterpret_cast<const uint8_t*>(next) - at);
    } else {
      break;  // cannot be sized: it stays with traintime
    }
    uint32_t kind = 0;  // raw: a newer CUPTI's kinds are outside this header's enum
    std::memcpy(&kind, record, sizeof kind);
    if (kind > CUPTI_ACTIVITY_KIND_INVALID && kind < CUPTI_ACTIVITY_KIND_COUNT &&
        wanted[kind].load(std::memory_order_relaxed))
      copy(record, bytes);
    if (rc != CUPTI_SUCCESS) break;
    record = next;
  }
  return counts;
}

std::string ClientMux::describe() const {
  const uint64_t registrations = registrations_.load(std::memory_order_relaxed);
  const uint64_t forwarded = forwarded_.load(std::memory_order_relaxed);
  const uint64_t subs = virtual_subscriptions_.load(std::memory_order_relaxed);
  if (registrations == 0 && forwarded == 0 && subs == 0) return {};
  std::string out = "CUPTI shared with another in-process client (e.g. torch.profiler): " +
                    std::to_string(registrations) + " registration(s), " + std::to_string(forwarded) +
                    " record(s) forwarded to it";
  if (const uint64_t n = handed_back_.load(std::memory_order_relaxed))
    out += ", " + std::to_string(n) + " of its buffer(s) handed back";
  if (const uint64_t n = lost_.load(std::memory_order_relaxed))
    out += ", " + std::to_string(n) + " record(s) it gave no buffer for";
  if (subs > 0)
    out += ", " + std::to_string(subs) + " subscription(s) served from traintime's (" +
           std::to_string(callbacks_delivered_.load(std::memory_order_relaxed)) +
           " callback(s) delivered)";
  if (clock_applied_.load(std::memory_order_relaxed))
    out += "; its timestamp callback applied to the records forwarded to it (CUPTI and traintime "
           "kept CUPTI's clock)";
  return out;
}

}  // namespace traintime::cupti
