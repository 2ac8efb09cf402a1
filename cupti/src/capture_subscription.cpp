// GpuCapture's start of capture (the tables, the aggregator and the pipeline, the processing
// thread) and its subscription (subscription.h): the CUPTI library chosen, launch callbacks selected by name, the
// subscriber, buffer callbacks, per-cbid API records and the activity kinds switched on, and
// everything switched off again when a step fails (rollback), so a capture that gives up leaves
// CUPTI as it found it. Lock order: core/lock_order.h (runs under start_mu_).
#include <algorithm>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "client_mux.h"
#include "gpu_capture_class.h"
#include "traintime/support/log.h"
#include "traintime/support/real_symbol.h"

namespace traintime::cupti {

void GpuCapture::abandon_start() noexcept {
  capturing_.store(false, std::memory_order_release);
  watch_captures(false);
  sub_.abandon();
}

void Subscription::abandon() noexcept {
  if (subscriber_ != nullptr) {
    for (CUpti_ActivityKind kind : kOwnKinds) lib_.api().cuptiActivityDisable(kind);
    lib_.api().cuptiUnsubscribe(subscriber_);  // its callbacks go with it
    subscriber_ = nullptr;
  }
  ClientMux::get().detach(subscriber_);
}

bool GpuCapture::start_capture(std::string* reason) {
  std::vector<SelectedCallback> selected;
  if (!sub_.select(config_.cupti_lib, &selected, reason)) return false;
  CuptiLibrary& lib = sub_.lib();

  launches_ = std::make_unique<CorrelationTable>(kLaunchesInFlight);
  // The window asks for a flush once a quarter of it has gone by (correlation_table.h): a rarely
  // launching thread's buffer then arrives while its contexts are still there.
  launches_->set_flush_hook([](void* self) { static_cast<GpuCapture*>(self)->ask_flush(); }, this);
  graph_nodes_ = std::make_unique<GraphNodeTable>(kMaxGraphNodes);
  pool_ = std::make_unique<BufferPool>(std::min(size_t{config_.buffer_mb} << 20, kBufferLimit),
                                       config_.buffer_count);
  core::AggregatorOptions options;
  options.warmup_steps = config_.warmup_steps;
  options.step_detail = config_.step_detail;
  options.top_kernels = config_.top_kernels;
  options.trace = config_.trace;
  options.trace_max_events = config_.trace_max_events;
  aggregator_ = std::make_unique<core::GpuAggregator>(options);
  aggregator_->split_groups(hooks_.comm_group != nullptr);  // processing_thread.cpp splits them
  pipeline_ = std::make_unique<ActivityPipeline>(lib, *launches_, *graph_nodes_, *aggregator_);
  if (const core::StepsMode mode = core::steps_mode_named(config_.steps); mode != core::StepsMode::kMarker) {
    core::StepFeedOptions feed;
    feed.mode = mode;
    feed.anchor = config_.step_anchor;
    step_feed_ = std::make_unique<core::StepFeed>(*aggregator_, feed);
    pipeline_->set_step_feed(step_feed_.get());
  }
  recorder_ = FixtureRecorder::open(config_.record_fixture);
  if (recorder_) recorder_->set_library(lib);
  sub_.set_roles(selected);
  if (!sub_.subscribe(selected, &GpuCapture::on_callback, this, &GpuCapture::on_requested, &GpuCapture::on_completed,
                      [] { GpuCapture::get().restore_api_records(); }, reason))
    return false;
  // From here on callbacks store contexts and buffers flow: the processing thread must run.
  queue_.start(config_.buffer_count + 1, *this);
  state_.store(State::kCapturing, std::memory_order_release);
  capturing_.store(true, std::memory_order_release);
  if (const CUptiResult rc = sub_.enable_kinds(); rc != CUPTI_SUCCESS) {
    capturing_.store(false, std::memory_order_release);
    queue_.stop();
    return sub_.fail("cuptiActivityEnable", rc, reason);
  }
  return true;
}

bool Subscription::select(const std::string& lib_path, std::vector<SelectedCallback>* selected,
                          std::string* reason) {
  if (!lib_.load(lib_path, reason)) return false;
  support::log(support::LogLevel::kDebug, "CUPTI {} from {}{}, records as {}", lib_.version(),
               lib_.path(), lib_.reused() ? " (already loaded)" : "", layout_name(lib_.layout()));

  // Launch-type callbacks, by name from CUPTI's own table.
  const CUpti_CallbackId limit = RoleTable::kMaxCbid;
  *selected = select_callbacks(
      [&](CUpti_CallbackDomain domain, CUpti_CallbackId cbid) -> const char* {
        const char* name = nullptr;
        // Ids past the library's last one are INVALID_PARAMETER: expected while probing.
        if (TRAINTIME_CUPTI_CALL_EXPECT(lib_, CUPTI_ERROR_INVALID_PARAMETER, cuptiGetCallbackName,
                                        domain, cbid, &name) != CUPTI_SUCCESS)
          return nullptr;
        return name;
      },
      limit);
  size_t launch_callbacks = 0;
  for (const SelectedCallback& s : *selected)
    if (s.role == ApiRole::kKernelLaunch || s.role == ApiRole::kGraphLaunch) ++launch_callbacks;
  if (launch_callbacks == 0) {
    *reason = lib_.path() + ": no kernel-launch callbacks in CUPTI's callback-name table";
    return false;
  }
  return true;
}

void Subscription::set_roles(const std::vector<SelectedCallback>& selected) {
  for (const SelectedCallback& s : selected) roles_.set(s.domain, s.cbid, s.role);
}

bool Subscription::subscribe(const std::vector<SelectedCallback>& selected, CUpti_CallbackFunc callback,
                             void* userdata, CUpti_BuffersCallbackRequestFunc requested,
                             CUpti_BuffersCallbackCompleteFunc completed, void (*restore_api_records)(),
                             std::string* reason) {
  // A refusal is reported once, as the reason of gpu_capture "unavailable" (give_up logs it).
  // cuptiSubscribe_v2 (CUPTI 13) names us to other tools ("CUPTI for traintime") and names the
  // holder when CUPTI is taken; older releases have only cuptiSubscribe.
  char holder[256] = {};
  CUptiResult sub;
  if (lib_.api().cuptiSubscribe_v2) {
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "traintime";
    params.oldSubscriberName = holder;
    params.oldSubscriberSize = sizeof holder;
    sub = TRAINTIME_CUPTI_CALL_EXPECT(lib_, CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
                                      cuptiSubscribe_v2, &subscriber_, callback, userdata, &params);
  } else {
    sub = TRAINTIME_CUPTI_CALL_EXPECT(lib_, CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
                                      cuptiSubscribe, &subscriber_, callback, userdata);
  }
  if (sub != CUPTI_SUCCESS) {
    std::string held_by = " (another CUPTI client such as Nsight or a profiler already subscribed)";
    if (holder[0] != '\0') held_by = std::string(" (CUPTI is held by ") + holder + ")";
    *reason = std::string("cuptiSubscribe refused: ") + lib_.result_string(sub) +
              (sub == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? held_by : "");
    subscriber_ = nullptr;
    return false;
  }
  auto fail = [&](const char* what, CUptiResult rc) { return this->fail(what, rc, reason); };
  // Per-thread activity buffers, the 13.0 default, set explicitly where the attribute exists
  // (API 21 on): 12.x defaults to per-context buffers, and the flush design below (a launching
  // thread's buffer arrives when full or flushed) is then the same on every release. The header
  // requires it before the buffer callbacks are registered and before any kind is enabled.
  if (lib_.version() >= 21 && lib_.api().cuptiActivitySetAttribute) {
    uint8_t per_thread = 1;
    size_t size = sizeof per_thread;
    TRAINTIME_CUPTI_CALL(lib_, cuptiActivitySetAttribute,
                         CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &size, &per_thread);
  }
  CUptiResult rc = TRAINTIME_CUPTI_CALL(lib_, cuptiActivityRegisterCallbacks, requested, completed);
  if (rc != CUPTI_SUCCESS) return fail("cuptiActivityRegisterCallbacks", rc);
  // A CUPTI linked statically into another library (a framework built with libcupti_static.a)
  // makes its calls inside that library: they never reach the interposers, so its profiler and
  // this capture cannot share CUPTI. Said once; the capture goes on.
  char static_cupti[512] = {};
  if (support::object_defining("cuptiActivityRegisterCallbacks", "libcupti",
                               reinterpret_cast<const void*>(completed), static_cupti,
                               sizeof static_cupti)) {
    static_cupti_ = static_cupti;
    support::log_warn("{} contains its own (static) CUPTI: a profiler using it in this process "
                      "cannot share CUPTI with traintime, and the two may disturb each other's records",
                      static_cupti_);
  }
  // From here CUPTI's buffers come to us: a client that registered before (torch.profiler
  // started first) is multiplexed, and gets CUPTI back if this start fails below.
  ClientMux::get().attach(&lib_, subscriber_, kOwnKinds, static_cast<int>(std::size(kOwnKinds)),
                          restore_api_records);

  // A callback this driver does not have is refused (seen on an H200 with driver 580, CUDA 13.0:
  // CUPTI 13.1 and 13.5 name callbacks of later CUDA releases, and enabling one is
  // INVALID_PARAMETER): skipped, said once; only a capture left with no launch callback gives up.
  std::vector<const char*> refused;
  size_t launches_on = 0;
  CUptiResult refusal = CUPTI_SUCCESS;
  for (const SelectedCallback& s : selected) {
    rc = TRAINTIME_CUPTI_CALL_EXPECT(lib_, CUPTI_ERROR_INVALID_PARAMETER, cuptiEnableCallback, 1,
                                     subscriber_, s.domain, s.cbid);
    if (rc != CUPTI_SUCCESS) {
      refused.push_back(s.name);
      refusal = rc;
      roles_.set(s.domain, s.cbid, ApiRole::kNone);
      continue;
    }
    if (s.role == ApiRole::kKernelLaunch || s.role == ApiRole::kGraphLaunch) ++launches_on;
    if (is_control_role(s.role)) continue;
    // Correlation ids come with API records; enabling them per launch cbid (never the whole
    // RUNTIME/DRIVER kinds) keeps the extra records to one per launch call, dropped at decode.
    bool api_record = false;
    if (s.domain == CUPTI_CB_DOMAIN_RUNTIME_API && lib_.api().cuptiActivityEnableRuntimeApi) {
      rc = TRAINTIME_CUPTI_CALL(lib_, cuptiActivityEnableRuntimeApi, s.cbid, 1);
      api_record = true;
    } else if (s.domain == CUPTI_CB_DOMAIN_DRIVER_API && lib_.api().cuptiActivityEnableDriverApi) {
      rc = TRAINTIME_CUPTI_CALL(lib_, cuptiActivityEnableDriverApi, s.cbid, 1);
      api_record = true;
    }
    if (rc != CUPTI_SUCCESS) return fail("enabling API records for correlation ids", rc);
    if (api_record) {
      api_records_on_.push_back(s);
      api_records_.push_back(s);
    }
  }
  if (launches_on == 0) {
    fail("cuptiEnableCallback", refusal);
    *reason = std::string("cuptiEnableCallback refused every kernel-launch callback (") + lib_.result_string(refusal) +
              "): a CUPTI newer than the driver's CUDA version? Use the CUPTI of the driver's CUDA "
              "(nvidia-smi names it) or a newer driver";
    return false;
  }
  if (!refused.empty()) {
    std::string names;
    for (size_t i = 0; i < refused.size() && i < 4; ++i) names += (i ? ", " : "") + std::string(refused[i]);
    if (refused.size() > 4) names += ", ...";
    refused_callbacks_ = std::to_string(refused.size()) + " of the " + std::to_string(selected.size()) +
                         " CUDA API callbacks traintime uses were refused by this CUPTI and driver (" +
                         names + "; a CUPTI newer than the driver's CUDA names calls the driver does "
                         "not have): work launched through them would be unattributed";
    support::log_warn("{}", refused_callbacks_);
  }
  for (CUpti_CallbackId cbid : {CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED,
                                CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING,
                                CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING}) {
    rc = TRAINTIME_CUPTI_CALL(lib_, cuptiEnableCallback, 1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE, cbid);
    if (rc != CUPTI_SUCCESS) return fail("cuptiEnableCallback(resource)", rc);
  }
  return true;
}

CUptiResult Subscription::enable_kinds() {
  for (CUpti_ActivityKind kind : kOwnKinds) {
    if (kind == CUPTI_ACTIVITY_KIND_MEMORY2 || kind == CUPTI_ACTIVITY_KIND_OVERHEAD) {
      // Optional: without memory records the rank file has no memory figures, and says why;
      // without overhead records self_cost has no rows of CUPTI's own cost.
      const CUptiResult rc = TRAINTIME_CUPTI_CALL_EXPECT(lib_, CUPTI_ERROR_NOT_SUPPORTED, cuptiActivityEnable, kind);
      if (rc == CUPTI_SUCCESS) kinds_on_.push_back(kind);
      else if (kind == CUPTI_ACTIVITY_KIND_MEMORY2) memory_refused_ = true;
      continue;
    }
    const CUptiResult rc = TRAINTIME_CUPTI_CALL(lib_, cuptiActivityEnable, kind);
    if (rc != CUPTI_SUCCESS) return rc;
    kinds_on_.push_back(kind);
  }
  return CUPTI_SUCCESS;
}

bool Subscription::fail(const char* what, CUptiResult rc, std::string* reason) {
  // A capture that gives up leaves CUPTI as it found it (no records written for nobody).
  *reason = std::string(what) + " failed: " + lib_.result_string(rc);
  for (CUpti_ActivityKind kind : kinds_on_) TRAINTIME_CUPTI_CALL(lib_, cuptiActivityDisable, kind);
  for (const SelectedCallback& s : api_records_on_) {
    if (s.domain == CUPTI_CB_DOMAIN_RUNTIME_API)
      TRAINTIME_CUPTI_CALL(lib_, cuptiActivityEnableRuntimeApi, s.cbid, 0);
    else
      TRAINTIME_CUPTI_CALL(lib_, cuptiActivityEnableDriverApi, s.cbid, 0);
  }
  TRAINTIME_CUPTI_CALL(lib_, cuptiUnsubscribe, subscriber_);  // its callbacks go with it
  subscriber_ = nullptr;
  ClientMux::get().detach(subscriber_);
  return false;
}

void Subscription::restore_api_records() noexcept {
  for (const SelectedCallback& s : api_records_) {
    if (s.domain == CUPTI_CB_DOMAIN_RUNTIME_API)
      TRAINTIME_CUPTI_CALL(lib_, cuptiActivityEnableRuntimeApi, s.cbid, 1);
    else
      TRAINTIME_CUPTI_CALL(lib_, cuptiActivityEnableDriverApi, s.cbid, 1);
  }
}

}  // namespace traintime::cupti
