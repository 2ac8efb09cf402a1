// Sharing CUPTI with torch.profiler (client_mux.h; docs/attribution.md). What each side gets:
// torch.profiler keeps its whole GPU trace under the preload: its cuptiSubscribe is served from
// traintime's subscription with exactly the callbacks it enables, and its buffers get every record
// of the kinds it enables (copied from traintime's buffers, on its own TSC clock when it registered
// one). traintime, while the profiler holds activity kinds, records exactly what it records
// without it: its kernels, copies and memsets, joined by its own launch callbacks; the profiler's
// extra kinds are decoded and dropped, and CUPTI keeps traintime's clock.
// This file: the callback side (a client's subscription served from traintime's, its callbacks
// multiplexed) and the attachment to traintime's capture; client_records.cpp forwards the activity
// records, client_clock.cpp moves them to the client's clock.
#include "client_mux.h"

#include <cerrno>
#include <cstring>

namespace traintime::cupti {

ClientMux& ClientMux::get() {
  static ClientMux* mux = new ClientMux();  // leaked: CUPTI may call back until exit
  return *mux;
}

bool ClientMux::multiplexing(const void* real, const void* ours) const {
  return lib_.load(std::memory_order_acquire) != nullptr && real == ours;
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
