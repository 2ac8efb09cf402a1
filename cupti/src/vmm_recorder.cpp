// The VMM calls' recorder (vmm_recorder.h). Lock order: core/lock_order.h (mu_, a leaf).
#include "vmm_recorder.h"

#include <cupti.h>  // the *_params structs of generated_cuda_meta.h

namespace traintime::cupti {

void VmmRecorder::on_enter(uint32_t correlation_id) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.push_back(correlation_id);
}

void VmmRecorder::on_success(ApiRole role, const void* params, uint32_t correlation_id,
                             const core::VmmLedger::At& at) {
  std::lock_guard<std::mutex> lock(mu_);
  switch (role) {
    case ApiRole::kVmmCreate: {
      const auto* p = static_cast<const cuMemCreate_params*>(params);
      // Device memory only: host-located VMM memory (CUDA 12.2 on) is not the GPU's.
      if (p->handle != nullptr && p->prop != nullptr && p->prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
          p->prop->location.id >= 0)
        ledger_.created(*p->handle, p->size, static_cast<uint32_t>(p->prop->location.id), at, &events_);
      break;
    }
    case ApiRole::kVmmRetain: {
      const auto* p = static_cast<const cuMemRetainAllocationHandle_params*>(params);
      if (p->handle != nullptr) ledger_.retained(*p->handle);
      break;
    }
    case ApiRole::kVmmRelease:
      ledger_.released(static_cast<const cuMemRelease_params*>(params)->handle, at, &events_);
      break;
    case ApiRole::kVmmMap: {
      const auto* p = static_cast<const cuMemMap_params*>(params);
      ledger_.mapped(p->ptr, p->size, p->handle, at, &events_);
      break;
    }
    case ApiRole::kVmmUnmap: {
      const auto* p = static_cast<const cuMemUnmap_params*>(params);
      ledger_.unmapped(p->ptr, p->size, at, &events_);
      break;
    }
    default:
      break;
  }
  // Each event's call: steps without a marker place it as they place a memory record.
  event_calls_.resize(events_.size(), correlation_id);
}

void VmmRecorder::take(ActivityPipeline& pipeline, bool wait) {
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  if (wait) {
    lock.lock();
  } else if (!lock.try_lock()) {
    return;
  }
  if (events_.empty() && calls_.empty()) return;
  pipeline.add_vmm(events_, event_calls_, calls_);
  events_.clear();
  event_calls_.clear();
  calls_.clear();
}

}  // namespace traintime::cupti
