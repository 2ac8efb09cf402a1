// The VMM calls' recorder, one part of GpuCapture (gpu_capture_class.h): what cuMemCreate,
// cuMemRetainAllocationHandle, cuMemRelease, cuMemMap and cuMemUnmap did, seen in their
// callbacks on application threads (rare), kept in a core::VmmLedger, and handed to the
// activity pipeline by the processing thread before each buffer it ingests.
// Lock order: core/lock_order.h (mu_ is a leaf: alone in the callbacks, inside agg_mu_ in take).
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "activity_pipeline.h"
#include "callback_selection.h"
#include "traintime/core/vmm_ledger.h"

namespace traintime::cupti {

class VmmRecorder {
 public:
  // A VMM call's entry, before the call runs, so before CUPTI could write a memory record for
  // it: a record of this call (if CUPTI makes one) finds the id when its buffer is processed.
  void on_enter(uint32_t correlation_id);
  // A VMM call (`role`, is_vmm_role) that returned CUDA_SUCCESS, with its parameters (CUPTI's
  // *_params struct of the call), its correlation id and when it ran. The ledger allocates:
  // the caller catches (an allocation failure leaves the call uncounted).
  void on_success(ApiRole role, const void* params, uint32_t correlation_id, const core::VmmLedger::At& at);
  // The ledger's events and the VMM calls' ids so far, to the pipeline. The caller holds
  // agg_mu_; `wait`: false from a snapshot, which may run in a signal handler on a thread
  // holding mu_ (then nothing moves until the next buffer).
  void take(ActivityPipeline& pipeline, bool wait);

 private:
  std::mutex mu_;
  core::VmmLedger ledger_;
  std::vector<core::MemoryEvent> events_;  // made since the last take
  std::vector<uint32_t> event_calls_;      // the correlation id of each one's call
  std::vector<uint32_t> calls_;            // correlation ids of VMM calls since then
};

}  // namespace traintime::cupti
