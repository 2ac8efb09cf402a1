// Record forwarding to another in-process CUPTI client (client_mux.h): its buffer callbacks
// registered beside traintime's, the activity kinds it enables, and a copy of each record of those
// kinds from traintime's completed buffers into the client's own, on its clock (client_clock.h).
#include "client_mux.h"

#include <cerrno>
#include <cstring>

#include "client_clock.h"

namespace traintime::cupti {

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
  const bool convert = clock != nullptr && clock->now != nullptr && line.measure(lib, *clock);
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
    if (convert) line.convert(out + used, bytes);
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

}  // namespace traintime::cupti
