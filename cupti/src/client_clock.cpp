// The client's clock (client_clock.h): its timestamp callback, taken instead of handed to CUPTI
// while traintime captures, and the records forwarded to it moved onto that clock.
#include "client_clock.h"

#include <cupti_activity_deprecated.h>

#include <cstring>

namespace traintime::cupti {
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

}  // namespace

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

bool ClockLine::measure(const CuptiLibrary& lib, const ClientClock& clock) {
  if (lib.api().cuptiGetTimestamp == nullptr || lib.api().cuptiGetTimestamp(&cupti1_) != CUPTI_SUCCESS)
    return false;
  client1_ = clock.now();
  if (cupti1_ > clock.cupti0 && client1_ > clock.client0)
    rate_ = static_cast<long double>(client1_ - clock.client0) / static_cast<long double>(cupti1_ - clock.cupti0);
  return true;
}

uint64_t ClockLine::at(uint64_t t) const {
  if (t == 0) return 0;  // untimed stays untimed
  const long double d = (static_cast<long double>(t) - static_cast<long double>(cupti1_)) * rate_;
  const long double v = static_cast<long double>(client1_) + d;
  return v <= 0 ? 0 : static_cast<uint64_t>(v);
}

void ClockLine::convert(uint8_t* record, size_t bytes) const {
  uint32_t kind = 0;
  std::memcpy(&kind, record, sizeof kind);
  size_t start = 0, end = 0;
  if (!timestamp_offsets(kind, &start, &end) || end + sizeof(uint64_t) > bytes) return;
  // A record with one timestamp (start == end) has it converted once.
  for (size_t at_offset : {start, end}) {
    uint64_t t = 0;
    std::memcpy(&t, record + at_offset, sizeof t);
    t = at(t);
    std::memcpy(record + at_offset, &t, sizeof t);
    if (end == start) break;
  }
}

}  // namespace traintime::cupti
