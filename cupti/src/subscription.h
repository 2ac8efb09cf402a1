// The CUPTI subscription, one part of GpuCapture (gpu_capture_class.h): the library chosen, the
// API callbacks selected by name and their roles (read by the launch callback: RoleTable), the
// subscriber, the buffer callbacks, the per-cbid API records and activity kinds switched on, and
// all of it switched off again when a step fails (rollback), so a capture that gives up leaves
// CUPTI as it found it. Set up under start_mu_ (capture_subscription.cpp); read-only after,
// except the rollback of a start that failed. No lock of its own.
#pragma once

#include <string>
#include <vector>

#include "callback_selection.h"
#include "cupti_library.h"

namespace traintime::cupti {

class Subscription {
 public:
  CuptiLibrary& lib() noexcept { return lib_; }
  const CuptiLibrary& lib() const noexcept { return lib_; }
  // The launch callback's lookup (hot path: an inline array read).
  const RoleTable& roles() const noexcept { return roles_; }
  CUpti_SubscriberHandle handle() const noexcept { return subscriber_; }
  // Said in the summary: callbacks this CUPTI and driver refused, a library with CUPTI linked in
  // statically, CUPTI's refusal of memory records.
  const std::string& refused_callbacks() const noexcept { return refused_callbacks_; }
  const std::string& static_cupti() const noexcept { return static_cupti_; }
  bool memory_refused() const noexcept { return memory_refused_; }

  // The library (config's TRAINTIME_CUPTI_LIB, `lib_path`) and the callbacks traintime uses,
  // chosen by name from its table; false with `reason` when there is no kernel-launch callback.
  bool select(const std::string& lib_path, std::vector<SelectedCallback>* selected, std::string* reason);
  // The selected callbacks' roles, for the launch callback.
  void set_roles(const std::vector<SelectedCallback>& selected);
  // Subscribes `callback` (with `userdata`), registers the buffer callbacks, lets a profiler
  // that registered before share CUPTI (ClientMux; `restore_api_records` is its hook), and
  // switches on the selected callbacks, their API records and the resource callbacks. False with
  // `reason` (what was switched on is switched off again) on a refusal.
  bool subscribe(const std::vector<SelectedCallback>& selected, CUpti_CallbackFunc callback, void* userdata,
                 CUpti_BuffersCallbackRequestFunc requested, CUpti_BuffersCallbackCompleteFunc completed,
                 void (*restore_api_records)(), std::string* reason);
  // The activity kinds (kOwnKinds) switched on; a required kind's refusal is returned (nothing
  // rolled back yet: the caller stops its thread first, then calls fail).
  CUptiResult enable_kinds();
  // `what` failed with `rc`: its `reason`, and everything switched on so far switched off again.
  // Always false.
  bool fail(const char* what, CUptiResult rc, std::string* reason);
  // A start that threw part way: what it switched on is switched off again.
  void abandon() noexcept;
  // After another client switched the whole RUNTIME or DRIVER kind off: the per-launch API
  // records (correlation ids) on again.
  void restore_api_records() noexcept;

 private:
  CuptiLibrary lib_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  std::vector<SelectedCallback> api_records_;  // per-cbid API records switched on at start
  std::string static_cupti_;  // a library with CUPTI linked in statically, if one was found
  std::string refused_callbacks_;  // the callbacks CUPTI refused to enable, said once
  bool memory_refused_ = false;  // cuptiActivityEnable(MEMORY2) failed: no memory figures
  RoleTable roles_;
  // What was switched on so far, switched off again if a later step fails (fail).
  std::vector<CUpti_ActivityKind> kinds_on_;
  std::vector<SelectedCallback> api_records_on_;
};

}  // namespace traintime::cupti
