// The CUPTI adapter: subscription, launch callbacks, activity buffers, the processing thread,
// flushing, and the GPU summary (DESIGN §2, §4). See gpu_capture.h for the lifecycle.
// Longer than the project's ~500 lines on purpose: it is the one class whose members share the
// lock order below (callbacks, processing thread, flushes, summary); the pieces with no shared
// locks (decode, join, tables, buffer pool, recorder) are already files of their own.
//
// Threads and locks. Lock order, outermost first (never taken in the other order):
//   start_mu_  (start-up only)
//   flush_mu_  -> [CUPTI's internal locks] -> queue_mu_   (FlushAll delivers buffers
//                                                          synchronously into on_completed)
//   agg_mu_    -> [the process's region registry, via Hooks::category_of / path_name]
//   GraphNodeTable / BufferPool / FixtureRecorder mutexes are leaves.
// queue_mu_ and agg_mu_ are never held together, and neither is held while calling CUPTI.
// The launch callback (application threads) takes no lock at all.
#include "traintime/cupti/gpu_capture.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "activity_pipeline.h"
#include "buffer_pool.h"
#include "callback_selection.h"
#include "client_mux.h"
#include "correlation_table.h"
#include "cupti_library.h"
#include "fixture_recorder.h"
#include "graph_node_table.h"
#include "traintime/core/gpu_aggregator.h"
#include "traintime/core/nccl_kernel_name.h"
#include "traintime/support/loader.h"
#include "traintime/support/real_symbol.h"
#include "traintime/support/log.h"

namespace traintime::cupti {
namespace {

constexpr size_t kMaxGraphNodes = size_t{1} << 18;
// The activity kinds traintime switches on.
constexpr CUpti_ActivityKind kOwnKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                            CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2,
                                            CUPTI_ACTIVITY_KIND_MEMSET};
// Normal flushes keep records flowing: CUPTI 13.0 keeps one buffer per launching thread and
// hands a half-full one over only when flushed, while the aggregator holds at most 1024 open
// steps (a record older than that is "late" and loses exactness). So flush once a second, and
// also whenever kFlushSteps steps have passed since the last flush (fast loops), checked every
// kPoll.
constexpr auto kFlushPeriod = std::chrono::milliseconds(1000);
constexpr auto kPoll = std::chrono::milliseconds(20);
constexpr uint32_t kFlushSteps = 64;
// A normal flush only returns buffers whose records are all complete, and the launching thread's
// buffer always holds the newest (unfinished) work: in practice it arrives when full. So each
// buffer is capped at about kStepsPerBuffer steps' worth of records (measured as the run goes),
// which keeps every record well inside the aggregator's 1024-step window however few kernels a
// step has; never below kMinRecordsPerBuffer, never beyond what the buffer holds.
constexpr uint64_t kStepsPerBuffer = 128;
constexpr uint64_t kMinRecordsPerBuffer = 4096;
// Live metrics (enable_live_metrics): a step's GPU figures are published once every buffer
// handed out before the next step ended has arrived, so buffers are kept to a few steps' worth
// of records and complete ones are flushed every few steps.
constexpr uint64_t kLiveStepsPerBuffer = 4;
constexpr uint64_t kLiveMinRecordsPerBuffer = 512;
constexpr uint32_t kLiveFlushSteps = 4;
// A launch's context waits in the correlation table until its record arrives; the table keeps
// the contexts of the last kLaunchesInFlight launch callbacks (correlation_table.h: by launch
// sequence number, so the id rate does not matter), one 64-byte line each: 16384 of them are
// 1 MiB, a core's L2 on current servers, written and read as a stream. What must fit is the
// launches between a callback and the processing of its record: the GPU's queue of pending
// work and the records in buffers not yet full or not yet processed. Per-thread buffers arrive
// when full, so the table and the buffer limit are chosen together: a buffer is bounded by
// bytes so that it completes within kLaunchesInFlight / (kStoresPerLaunch x 2 x
// kLaunchingThreads) launches even when every launch leaves only its smallest record (a
// memset's), with a runtime launch storing its context twice (its own id and its nested
// driver call's), up to kLaunchingThreads threads filling buffers side by side, and the 2 as
// slack for buffers waiting in the queue and work still queued on the GPU.
constexpr uint32_t kLaunchesInFlight = 1u << 14;
constexpr uint64_t kStoresPerLaunch = 2;
constexpr uint64_t kLaunchingThreads = 4;
constexpr size_t kSmallestLaunchRecord = sizeof(CUpti_ActivityMemset4);
constexpr size_t kBufferLimit =
    kLaunchesInFlight / (kStoresPerLaunch * 2 * kLaunchingThreads) * kSmallestLaunchRecord;
constexpr auto kDrainTimeout = std::chrono::seconds(10);

enum class State : uint8_t {
  kIdle,         // nothing decided yet (no CUDA seen)
  kOff,          // TRAINTIME_CUPTI=0
  kUnavailable,  // CUPTI missing, unusable or refused
  kCapturing,
  kStopped,      // after the forced flush at exit / terminating signal
};

// The launch the calling thread is inside: a nested launch callback (the driver call a runtime
// launch makes, or __cudaLaunchKernel under cudaLaunchKernel) reuses the outer context so both
// correlation ids join to the same region. Default TLS model: libtraintime.so may be dlopen()ed
// by the driver (CUDA_INJECTION64_PATH) without being preloaded, where initial-exec TLS can fail.
struct LaunchNest {
  uint32_t depth = 0;
  core::LaunchContext ctx;
};
thread_local LaunchNest t_nest;

class GpuCapture {
 public:
  static GpuCapture& get() {
    // Leaked on purpose: CUPTI may call back while static destructors run at exit.
    static GpuCapture* instance = new GpuCapture();
    return *instance;
  }

  void configure(const Hooks& hooks, const core::Config& config);
  void start(const char* trigger);
  void lazy_start() noexcept;
  core::GpuSummary summary(bool snapshot);
  void shutdown(const char* reason);
  nlohmann::json trace_json();
  void on_fork_child() noexcept;
  void enable_live() noexcept;
  bool live_step(core::GpuStepFigures* out, uint64_t* late_records);
  std::string device_name();

  static void CUPTIAPI on_callback(void* self, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                   const void* data);
  static void CUPTIAPI on_requested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CUPTIAPI on_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size,
                                    size_t valid_size);

 private:
  GpuCapture() = default;

  core::LaunchContext current_context() const noexcept {
    return hooks_.launch_context ? hooks_.launch_context() : core::LaunchContext{};
  }
  uint32_t steps_completed() const noexcept {
    return hooks_.steps_completed ? hooks_.steps_completed() : 0;
  }
  std::string path_name(core::PathId p) const {
    return hooks_.path_name ? hooks_.path_name(p) : std::string();
  }
  core::Category category_of(core::PathId p) const {
    return hooks_.category_of ? hooks_.category_of(p) : core::Category::kOther;
  }

  bool start_capture(std::string* reason);
  // After another client switched the whole RUNTIME or DRIVER kind off: the per-launch API
  // records (correlation ids) on again.
  void restore_api_records() noexcept;
  // start_capture threw part way: what it switched on is switched off again.
  void abandon_start() noexcept;
  void give_up(const std::string& reason);
  void on_api(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* cb);
  void on_resource(CUpti_CallbackId cbid, const CUpti_ResourceData* rd);
  void processing_loop();
  // Normal (complete buffers only) or forced flush; try_only skips when another flush runs.
  void flush(bool forced, bool try_only);
  bool drain();
  void transfer_dropped();  // caller holds agg_mu_
  void stop_thread();
  // Processing thread: publishes the newest step whose records have all arrived (live metrics).
  void publish_live();
  // Processing thread, once: the CUDA name of the device of the first record.
  void resolve_device_name();

  Hooks hooks_;
  core::Config config_;
  bool configured_ = false;
  std::mutex start_mu_;
  std::atomic<State> state_{State::kIdle};
  std::atomic<bool> capturing_{false};  // hot-path switch for the callbacks
  std::atomic<bool> lazy_pending_{true};
  std::atomic<unsigned long long> lazy_probed_at_adds_{~0ULL};  // loader adds at the last probe
  std::atomic<bool> recorded_{false};
  std::atomic<bool> forked_{false};
  std::string reason_;        // gpu_capture_reason (written under start_mu_ before publication)
  std::string trigger_;

  CuptiLibrary lib_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  std::vector<SelectedCallback> api_records_;  // per-cbid API records switched on at start
  std::string static_cupti_;  // a library with CUPTI linked in statically, if one was found
  RoleTable roles_;
  std::unique_ptr<CorrelationTable> launches_;
  std::unique_ptr<GraphNodeTable> graph_nodes_;
  std::unique_ptr<BufferPool> pool_;
  std::unique_ptr<FixtureRecorder> recorder_;

  std::mutex agg_mu_;
  std::unique_ptr<core::GpuAggregator> aggregator_;
  std::unique_ptr<ActivityPipeline> pipeline_;

  std::mutex flush_mu_;
  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::condition_variable drained_cv_;
  struct Completed {
    uint8_t* buffer;
    size_t valid_size;
  };
  std::vector<Completed> queue_;  // FIFO: buffers are ingested in completion order
  bool busy_ = false;             // the processing thread holds a dequeued buffer
  bool stop_thread_ = false;
  bool flush_requested_ = false;
  std::thread thread_;
  std::atomic<uint64_t> dropped_pending_{0};
  std::atomic<size_t> max_records_{kMinRecordsPerBuffer};  // per buffer, see kStepsPerBuffer
  uint64_t records_seen_ = 0;  // processing thread only

  std::atomic<bool> live_{false};
  std::mutex live_mu_;  // leaf: the published figures (written by the processing thread only)
  bool live_valid_ = false;
  core::GpuStepFigures live_figures_;
  std::atomic<uint64_t> live_late_{0};
  bool device_resolved_ = false;  // processing thread only
  std::mutex device_mu_;          // leaf
  std::string device_name_;
};

void GpuCapture::give_up(const std::string& reason) {
  reason_ = reason;
  state_.store(State::kUnavailable, std::memory_order_release);
  support::log_warn("GPU capture unavailable: {} (CPU regions and NCCL are still recorded)", reason);
}

void GpuCapture::configure(const Hooks& hooks, const core::Config& config) {
  std::lock_guard<std::mutex> lock(start_mu_);
  hooks_ = hooks;
  config_ = config;
  configured_ = true;
}

void GpuCapture::start(const char* trigger) {
  std::lock_guard<std::mutex> lock(start_mu_);
  lazy_pending_.store(false, std::memory_order_relaxed);
  if (state_.load(std::memory_order_acquire) != State::kIdle || !configured_ ||
      forked_.load(std::memory_order_relaxed))
    return;
  trigger_ = trigger;
  if (!config_.cupti) {
    reason_ = "TRAINTIME_CUPTI=0";
    state_.store(State::kOff, std::memory_order_release);
    return;
  }
  std::string reason;
  try {
    // A refusal after the library was chosen names it (path and version) as well.
    if (!start_capture(&reason))
      give_up(lib_.version() != 0 && reason.rfind(lib_.path(), 0) != 0 ? lib_.describe() + ": " + reason
                                                                       : reason);
  } catch (const std::exception& e) {
    // Out of memory, or no thread to be had (a process limit): the program goes on without GPU
    // capture instead of ending in std::terminate from this noexcept entry point.
    abandon_start();
    give_up(std::string("could not start GPU capture: ") + e.what());
  }
}

void GpuCapture::abandon_start() noexcept {
  capturing_.store(false, std::memory_order_release);
  if (subscriber_ != nullptr) {
    for (CUpti_ActivityKind kind : kOwnKinds) lib_.api().cuptiActivityDisable(kind);
    lib_.api().cuptiUnsubscribe(subscriber_);  // its callbacks go with it
    subscriber_ = nullptr;
  }
  ClientMux::get().detach(subscriber_);
}

bool GpuCapture::start_capture(std::string* reason) {
  if (!lib_.load(config_.cupti_lib, reason)) return false;
  support::log(support::LogLevel::kDebug, "CUPTI {} from {}{}, records as {}", lib_.version(),
               lib_.path(), lib_.reused() ? " (already loaded)" : "", layout_name(lib_.layout()));

  // Launch-type callbacks, by name from CUPTI's own table.
  const CUpti_CallbackId limit = RoleTable::kMaxCbid;
  const std::vector<SelectedCallback> selected = select_callbacks(
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
  for (const SelectedCallback& s : selected)
    if (s.role == ApiRole::kKernelLaunch || s.role == ApiRole::kGraphLaunch) ++launch_callbacks;
  if (launch_callbacks == 0) {
    *reason = lib_.path() + ": no kernel-launch callbacks in CUPTI's callback-name table";
    return false;
  }

  launches_ = std::make_unique<CorrelationTable>(kLaunchesInFlight);
  graph_nodes_ = std::make_unique<GraphNodeTable>(kMaxGraphNodes);
  pool_ = std::make_unique<BufferPool>(std::min(size_t{config_.buffer_mb} << 20, kBufferLimit),
                                       config_.buffer_count);
  queue_.reserve(config_.buffer_count + 1);
  core::AggregatorOptions options;
  options.warmup_steps = config_.warmup_steps;
  options.step_detail = config_.step_detail;
  options.trace = config_.trace;
  options.trace_max_events = config_.trace_max_events;
  aggregator_ = std::make_unique<core::GpuAggregator>(options);
  aggregator_->set_comm_table(hooks_.comm_table);
  pipeline_ = std::make_unique<ActivityPipeline>(lib_, *launches_, *graph_nodes_, *aggregator_,
                                                 [this](core::PathId p) { return category_of(p); });
  recorder_ = FixtureRecorder::open(config_.record_fixture);
  if (recorder_) recorder_->set_library(lib_);
  for (const SelectedCallback& s : selected) roles_.set(s.domain, s.cbid, s.role);

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
                                      cuptiSubscribe_v2, &subscriber_, &GpuCapture::on_callback,
                                      this, &params);
  } else {
    sub = TRAINTIME_CUPTI_CALL_EXPECT(lib_, CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
                                      cuptiSubscribe, &subscriber_, &GpuCapture::on_callback, this);
  }
  if (sub != CUPTI_SUCCESS) {
    std::string held_by = " (another CUPTI client such as Nsight or a profiler already subscribed)";
    if (holder[0] != '\0') held_by = std::string(" (CUPTI is held by ") + holder + ")";
    *reason = std::string("cuptiSubscribe refused: ") + lib_.result_string(sub) +
              (sub == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? held_by : "");
    subscriber_ = nullptr;
    return false;
  }
  // What was switched on so far, switched off again if a later step fails: a capture that
  // gives up leaves CUPTI as it found it (no records written for nobody).
  std::vector<CUpti_ActivityKind> kinds_on;
  std::vector<SelectedCallback> api_records_on;
  auto fail = [&](const char* what, CUptiResult rc) {
    *reason = std::string(what) + " failed: " + lib_.result_string(rc);
    for (CUpti_ActivityKind kind : kinds_on) TRAINTIME_CUPTI_CALL(lib_, cuptiActivityDisable, kind);
    for (const SelectedCallback& s : api_records_on) {
      if (s.domain == CUPTI_CB_DOMAIN_RUNTIME_API)
        TRAINTIME_CUPTI_CALL(lib_, cuptiActivityEnableRuntimeApi, s.cbid, 0);
      else
        TRAINTIME_CUPTI_CALL(lib_, cuptiActivityEnableDriverApi, s.cbid, 0);
    }
    TRAINTIME_CUPTI_CALL(lib_, cuptiUnsubscribe, subscriber_);  // its callbacks go with it
    subscriber_ = nullptr;
    ClientMux::get().detach(subscriber_);
    return false;
  };
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
  CUptiResult rc = TRAINTIME_CUPTI_CALL(lib_, cuptiActivityRegisterCallbacks,
                                        &GpuCapture::on_requested, &GpuCapture::on_completed);
  if (rc != CUPTI_SUCCESS) return fail("cuptiActivityRegisterCallbacks", rc);
  // A CUPTI linked statically into another library (a framework built with libcupti_static.a)
  // makes its calls inside that library: they never reach the interposers, so its profiler and
  // this capture cannot share CUPTI. Said once; the capture goes on.
  char static_cupti[512] = {};
  if (support::object_defining("cuptiActivityRegisterCallbacks", "libcupti",
                               reinterpret_cast<const void*>(&GpuCapture::on_completed), static_cupti,
                               sizeof static_cupti)) {
    static_cupti_ = static_cupti;
    support::log_warn("{} contains its own (static) CUPTI: a profiler using it in this process "
                      "cannot share CUPTI with traintime, and the two may disturb each other's records",
                      static_cupti_);
  }
  // From here CUPTI's buffers come to us: a client that registered before (torch.profiler
  // started first) is multiplexed, and gets CUPTI back if this start fails below.
  ClientMux::get().attach(&lib_, subscriber_, kOwnKinds, static_cast<int>(std::size(kOwnKinds)),
                          [] { GpuCapture::get().restore_api_records(); });

  for (const SelectedCallback& s : selected) {
    rc = TRAINTIME_CUPTI_CALL(lib_, cuptiEnableCallback, 1, subscriber_, s.domain, s.cbid);
    if (rc != CUPTI_SUCCESS) return fail("cuptiEnableCallback", rc);
    if (s.role == ApiRole::kContextTeardown) continue;
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
      api_records_on.push_back(s);
      api_records_.push_back(s);
    }
  }
  for (CUpti_CallbackId cbid : {CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED,
                                CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING,
                                CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING}) {
    rc = TRAINTIME_CUPTI_CALL(lib_, cuptiEnableCallback, 1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE, cbid);
    if (rc != CUPTI_SUCCESS) return fail("cuptiEnableCallback(resource)", rc);
  }
  // From here on callbacks store contexts and buffers flow: the processing thread must run.
  thread_ = std::thread([this] { processing_loop(); });
  state_.store(State::kCapturing, std::memory_order_release);
  capturing_.store(true, std::memory_order_release);
  for (CUpti_ActivityKind kind : kOwnKinds) {
    rc = TRAINTIME_CUPTI_CALL(lib_, cuptiActivityEnable, kind);
    if (rc != CUPTI_SUCCESS) {
      capturing_.store(false, std::memory_order_release);
      stop_thread();
      return fail("cuptiActivityEnable", rc);
    }
    kinds_on.push_back(kind);
  }
  return true;
}

void GpuCapture::restore_api_records() noexcept {
  for (const SelectedCallback& s : api_records_) {
    if (s.domain == CUPTI_CB_DOMAIN_RUNTIME_API)
      TRAINTIME_CUPTI_CALL(lib_, cuptiActivityEnableRuntimeApi, s.cbid, 1);
    else
      TRAINTIME_CUPTI_CALL(lib_, cuptiActivityEnableDriverApi, s.cbid, 1);
  }
}

void GpuCapture::lazy_start() noexcept {
  if (!lazy_pending_.load(std::memory_order_relaxed)) return;
  // Runs at every tt_step until CUDA loads: a CPU-only process probes for libcuda again only
  // when the loader has added an object since the last probe.
  const unsigned long long adds = support::loaded_object_adds();
  if (lazy_probed_at_adds_.exchange(adds, std::memory_order_relaxed) == adds) return;
  // Saved before dlopen: a failed dlopen may set errno inside the application's step.
  const int saved_errno = errno;
  // Only a process that has the CUDA driver loaded pays for CUPTI.
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!cuda) {
    errno = saved_errno;
    return;
  }
  dlclose(cuda);
  start("lazily (CUDA_INJECTION64_PATH belongs to another tool; work launched before this "
        "point is not captured)");
  errno = saved_errno;
}

namespace {

// The stream a kernel launch API was given, from its parameters (the *_params structs of
// CUPTI's generated_cuda*_meta.h), for the launch APIs NCCL uses: the runtime's
// cudaLaunchKernel (NCCL before 2.19, old drivers) and the driver's cuLaunchKernel and
// cuLaunchKernelEx (NCCL with runtime and driver >= 11.8). False for any other API.
bool launch_stream(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* params,
                   const void** stream) {
  if (params == nullptr) return false;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    switch (cbid) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
        *stream = static_cast<const cudaLaunchKernel_v7000_params*>(params)->stream;
        return true;
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
        *stream = static_cast<const cudaLaunchKernel_ptsz_v7000_params*>(params)->stream;
        return true;
      default:
        return false;
    }
  }
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return false;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
      *stream = static_cast<const cuLaunchKernel_params*>(params)->hStream;
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
      *stream = static_cast<const cuLaunchKernel_ptsz_params*>(params)->hStream;
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
      const CUlaunchConfig* config = static_cast<const cuLaunchKernelEx_params*>(params)->config;
      if (config == nullptr) return false;
      *stream = config->hStream;
      return true;
    }
    default:
      return false;
  }
}

}  // namespace

void CUPTIAPI GpuCapture::on_callback(void* self_ptr, CUpti_CallbackDomain domain,
                                      CUpti_CallbackId cbid, const void* data) {
  auto* self = static_cast<GpuCapture*>(self_ptr);
  // A profiler whose subscription rides on traintime's gets the calls it enabled, capture or not.
  ClientMux::get().dispatch(domain, cbid, data);
  if (!self->capturing_.load(std::memory_order_relaxed)) return;
  const int saved_errno = errno;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API)
    self->on_api(domain, cbid, static_cast<const CUpti_CallbackData*>(data));
  else if (domain == CUPTI_CB_DOMAIN_RESOURCE)
    self->on_resource(cbid, static_cast<const CUpti_ResourceData*>(data));
  errno = saved_errno;
}

// Hot path: application thread, inside the launch. No lock, no allocation.
void GpuCapture::on_api(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                        const CUpti_CallbackData* cb) {
  const ApiRole role = roles_.get(domain, cbid);
  if (role == ApiRole::kNone) return;
  if (role == ApiRole::kContextTeardown) {
    // FlushAll is allowed inside runtime/driver API callbacks (not resource ones): at the EXIT
    // of a context's destruction its work is done and its records can be delivered. try_only:
    // if another thread is flushing, it may be waiting on the very driver lock this thread holds.
    if (cb->callbackSite == CUPTI_API_EXIT) flush(false, true);
    return;
  }
  LaunchNest& nest = t_nest;
  if (cb->callbackSite != CUPTI_API_ENTER) {
    if (nest.depth > 0) --nest.depth;
    return;
  }
  if (nest.depth == 0) {
    nest.ctx = current_context();
    if (nest.ctx.comm_op == core::CommOp::kNone && role == ApiRole::kKernelLaunch &&
        hooks_.pending_comm_call != nullptr && cb->symbolName != nullptr &&
        core::is_nccl_kernel(cb->symbolName)) {
      const void* stream = nullptr;
      if (launch_stream(domain, cbid, cb->functionParams, &stream))
        hooks_.pending_comm_call(stream, &nest.ctx);
    }
  }
  ++nest.depth;
  launches_->store(cb->correlationId, nest.ctx);
  if (!recorded_.exchange(true, std::memory_order_relaxed)) {
    // Once, at the first launch, so after CUDA initialised and registered its own atexit
    // teardown: handlers run in reverse order, so the forced flush runs before CUDA tears down
    // even when the process recorded a region (and registered its rank-file hook) before cuInit.
    std::atexit([] { GpuCapture::get().shutdown("exit"); });
    if (hooks_.on_first_launch) hooks_.on_first_launch();  // the process has GPU work
  }
  if (recorder_) recorder_->on_api(domain, cbid, cb, nest.ctx);
}

void GpuCapture::on_resource(CUpti_CallbackId cbid, const CUpti_ResourceData* rd) {
  if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    // No FlushAll from a resource callback: ask the processing thread for a normal flush.
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      flush_requested_ = true;
    }
    queue_cv_.notify_one();
    return;
  }
  // Other resource callbacks are on only for a profiler riding on the subscription.
  if (cbid != CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING &&
      cbid != CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED && cbid != CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED)
    return;
  const auto* graph = static_cast<const CUpti_GraphData*>(rd->resourceDescriptor);
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING) {
    // Its clones never run again (their last records may still be on the way: retired only).
    // Not at GRAPH_DESTROY_STARTING: PyTorch destroys the source graph before the first replay.
    if (graph && graph->graphExec)
      graph_nodes_->forget_owner(reinterpret_cast<uint64_t>(graph->graphExec));
    return;
  }
  if (!graph || !graph->node) return;
  uint64_t node_id = 0;
  if (TRAINTIME_CUPTI_CALL(lib_, cuptiGetGraphNodeId, graph->node, &node_id) != CUPTI_SUCCESS) return;
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {
    // On the capturing thread: inside the captured launch's callback when stream capture made
    // the node, so the launch nest already holds the right region.
    const core::LaunchContext ctx = t_nest.depth > 0 ? t_nest.ctx : current_context();
    graph_nodes_->created(node_id, ctx);
    if (recorder_) recorder_->on_graph_node(node_id, 0, &ctx);
  } else if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED && graph->originalNode) {
    uint64_t original_id = 0;
    if (TRAINTIME_CUPTI_CALL(lib_, cuptiGetGraphNodeId, graph->originalNode, &original_id) !=
        CUPTI_SUCCESS)
      return;
    graph_nodes_->cloned(node_id, original_id, reinterpret_cast<uint64_t>(graph->graphExec));
    if (recorder_) recorder_->on_graph_node(node_id, original_id, nullptr);
  }
}

void CUPTIAPI GpuCapture::on_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  GpuCapture& self = get();
  *max_records = self.max_records_.load(std::memory_order_relaxed);
  uint8_t* b = self.capturing_.load(std::memory_order_acquire)
                   ? self.pool_->acquire(self.steps_completed())
                   : nullptr;
  size_t bytes = self.pool_->buffer_bytes();
  if (!b && self.lib_.version() < 27) {
    // Releases before API 27 can crash when refused a buffer: give a scratch one, whose
    // records on_completed counts as dropped.
    b = self.pool_->acquire_scratch();
    bytes = BufferPool::kScratchBytes;
  }
  *buffer = b;
  *size = b ? bytes : 0;  // no buffer: CUPTI drops and counts the records
}

void CUPTIAPI GpuCapture::on_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size,
                                       size_t valid_size) {
  GpuCapture& self = get();
  // Another CUPTI client's buffer goes back to it; its records in ours are copied to it.
  if (buffer && ClientMux::get().on_completed(buffer, size, valid_size,
                                              self.pool_ && self.pool_->owns(buffer)))
    return;
  size_t dropped = 0;
  if (TRAINTIME_CUPTI_CALL(self.lib_, cuptiActivityGetNumDroppedRecords, ctx, stream, &dropped) ==
      CUPTI_SUCCESS)
    self.dropped_pending_.fetch_add(dropped, std::memory_order_relaxed);
  if (!buffer) return;
  if (self.pool_->is_scratch(buffer)) {
    const DecodeCounts counts =
        decode_buffer(self.lib_, buffer, valid_size, [](const DecodedActivity&) {});
    self.dropped_pending_.fetch_add(counts.activities + counts.no_timestamps,
                                    std::memory_order_relaxed);
    self.pool_->release_scratch(buffer);
    return;
  }
  if (valid_size == 0 || self.state_.load(std::memory_order_acquire) != State::kCapturing) {
    self.pool_->release(buffer);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(self.queue_mu_);
    self.queue_.push_back({buffer, valid_size});  // ≤ buffer_count entries: capacity reserved
  }
  self.queue_cv_.notify_one();
}

void GpuCapture::processing_loop() {
  auto next_flush = std::chrono::steady_clock::now() + kFlushPeriod;
  uint32_t flushed_at_step = steps_completed();
  std::unique_lock<std::mutex> lock(queue_mu_);
  for (;;) {
    queue_cv_.wait_for(lock, kPoll, [&] { return !queue_.empty() || stop_thread_ || flush_requested_; });
    if (queue_.empty()) {
      if (stop_thread_) break;
      const uint32_t step = steps_completed();
      const bool live = live_.load(std::memory_order_relaxed);
      if (live) {
        lock.unlock();
        publish_live();
        lock.lock();
        if (!queue_.empty() || stop_thread_) continue;
      }
      if (flush_requested_ || std::chrono::steady_clock::now() >= next_flush ||
          step - flushed_at_step >= (live ? kLiveFlushSteps : kFlushSteps)) {
        flush_requested_ = false;
        flushed_at_step = step;
        lock.unlock();
        // Lock order: flush_mu_ -> CUPTI -> queue_mu_ (on_completed); queue_mu_ released here.
        flush(false, true);
        lock.lock();
        next_flush = std::chrono::steady_clock::now() + kFlushPeriod;
      }
      continue;
    }
    const Completed item = queue_.front();
    queue_.erase(queue_.begin());
    busy_ = true;
    lock.unlock();
    if (recorder_) recorder_->on_buffer(item.buffer, item.valid_size);
    {
      std::lock_guard<std::mutex> agg(agg_mu_);
      transfer_dropped();
      const uint64_t before = pipeline_->stats().activities + pipeline_->stats().api_records;
      pipeline_->process(item.buffer, item.valid_size);
      records_seen_ += pipeline_->stats().activities + pipeline_->stats().api_records - before;
      live_late_.store(aggregator_->records_after_publish(), std::memory_order_relaxed);
    }
    if (const uint32_t steps = steps_completed()) {
      const bool live = live_.load(std::memory_order_relaxed);
      const uint64_t per_step = records_seen_ / steps + 1;
      const uint64_t fits = pool_->buffer_bytes() / sizeof(CUpti_ActivityAPI);
      max_records_.store(std::clamp(per_step * (live ? kLiveStepsPerBuffer : kStepsPerBuffer),
                                    std::min(live ? kLiveMinRecordsPerBuffer : kMinRecordsPerBuffer, fits),
                                    fits),
                         std::memory_order_relaxed);
    }
    pool_->release(item.buffer);
    if (!device_resolved_) resolve_device_name();
    if (live_.load(std::memory_order_relaxed)) publish_live();
    lock.lock();
    busy_ = false;
    if (queue_.empty()) drained_cv_.notify_all();
  }
  busy_ = false;
  drained_cv_.notify_all();
}

void GpuCapture::publish_live() {
  // Records of step k are in buffers handed out before step k+1 ended (a launch's record goes
  // to the buffer current on its thread; one more step of slack covers work still running when
  // the next step ends). So once every buffer handed out with fewer than k+2 steps completed has
  // been ingested, and k+2 steps are complete (no such buffer can be handed out any more), the
  // step's figures are final — except for work still running two steps later, which
  // records_after_publish() counts.
  const uint32_t limit = std::min(steps_completed(), pool_->min_outstanding_step());
  if (limit < 2) return;
  const uint64_t step = limit - 2;
  {
    std::lock_guard<std::mutex> lock(live_mu_);
    if (live_valid_ && step <= live_figures_.step) return;
  }
  core::GpuStepFigures figures;
  {
    std::lock_guard<std::mutex> agg(agg_mu_);
    if (!aggregator_->step_figures(step, &figures)) return;
    aggregator_->set_published_below(step + 1);
  }
  std::lock_guard<std::mutex> lock(live_mu_);
  live_figures_ = figures;
  live_valid_ = true;
}

void GpuCapture::resolve_device_name() {
  int device = -1;
  {
    std::lock_guard<std::mutex> agg(agg_mu_);
    device = aggregator_->first_device();
  }
  if (device < 0) return;
  device_resolved_ = true;
  // The driver is loaded (it produced the record); RTLD_NOLOAD never loads another one.
  void* cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!cuda) return;
  using GetFn = int (*)(int*, int);
  using NameFn = int (*)(char*, int, int);
  auto get = reinterpret_cast<GetFn>(dlsym(cuda, "cuDeviceGet"));
  auto name_of = reinterpret_cast<NameFn>(dlsym(cuda, "cuDeviceGetName"));
  char name[256] = {};
  int handle = 0;
  if (get && name_of && get(&handle, device) == 0 && name_of(name, sizeof name - 1, handle) == 0) {
    std::lock_guard<std::mutex> lock(device_mu_);
    device_name_ = name;
  }
  dlclose(cuda);
}

void GpuCapture::enable_live() noexcept { live_.store(true, std::memory_order_relaxed); }

bool GpuCapture::live_step(core::GpuStepFigures* out, uint64_t* late_records) {
  *late_records = live_late_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(live_mu_);
  if (live_valid_) *out = live_figures_;
  return live_valid_;
}

std::string GpuCapture::device_name() {
  std::lock_guard<std::mutex> lock(device_mu_);
  return device_name_;
}

void GpuCapture::flush(bool forced, bool try_only) {
  // Lock order: flush_mu_ -> CUPTI internal -> queue_mu_ (taken inside on_completed). The
  // caller holds neither queue_mu_ nor agg_mu_.
  std::unique_lock<std::mutex> lock(flush_mu_, std::defer_lock);
  if (try_only) {
    if (!lock.try_lock()) return;
  } else {
    lock.lock();
  }
  TRAINTIME_CUPTI_CALL(lib_, cuptiActivityFlushAll, forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
}

bool GpuCapture::drain() {
  // Lock order: queue_mu_ only; the processing thread releases it while ingesting.
  std::unique_lock<std::mutex> lock(queue_mu_);
  return drained_cv_.wait_for(lock, kDrainTimeout,
                              [&] { return (queue_.empty() && !busy_) || !thread_.joinable(); });
}

void GpuCapture::transfer_dropped() {
  const uint64_t n = dropped_pending_.exchange(0, std::memory_order_relaxed);
  if (n) aggregator_->note_dropped(n);
}

void GpuCapture::stop_thread() {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stop_thread_ = true;
  }
  queue_cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void GpuCapture::shutdown(const char* reason) {
  if (forked_.load(std::memory_order_relaxed)) return;  // never flush inherited CUPTI state
  if (state_.load(std::memory_order_acquire) != State::kCapturing) return;
  // Forced flush: exit or terminating signal only (DESIGN §2). Lock order as in flush().
  flush(true, false);
  if (!drain()) support::log_warn("GPU activity processing did not finish within 10 s at exit");
  capturing_.store(false, std::memory_order_release);
  state_.store(State::kStopped, std::memory_order_release);
  stop_thread();
  ClientMux::get().detach(subscriber_);  // a profiler still running in the process gets CUPTI back
  if (recorder_) {
    std::lock_guard<std::mutex> agg(agg_mu_);
    const uint32_t steps = steps_completed();
    auto name = [this](core::PathId p) { return path_name(p); };
    recorder_->finish(steps, pipeline_->stats(), name,
                      [this](core::PathId p) { return category_of(p); }, reason);
    recorder_->write_live_result(gpu_rank_file(aggregator_->summary(steps), steps, name));
  }
}

core::GpuSummary GpuCapture::summary(bool snapshot) {
  core::GpuSummary out;
  const State state = state_.load(std::memory_order_acquire);
  if (forked_.load(std::memory_order_relaxed) && state != State::kIdle) {
    out.capture_reason =
        "forked from a process that captured the GPU; CUPTI state is not inherited";
    return out;
  }
  switch (state) {
    case State::kIdle:
      out.capture_reason = "no GPU activity was captured in this process";
      return out;
    case State::kOff:
      out.capture_reason = reason_;
      return out;
    case State::kUnavailable:
      out.capture = "unavailable";
      out.capture_reason = reason_;
      return out;
    case State::kCapturing:
      if (snapshot) {
        // Mid-run: complete buffers only (normal flush), then wait for them to be ingested.
        flush(false, false);
        drain();
      }
      break;
    case State::kStopped:
      break;
  }
  std::lock_guard<std::mutex> agg(agg_mu_);
  transfer_dropped();
  out = aggregator_->summary(steps_completed());
  // While capturing, CUPTI may still hold records it has not delivered (a snapshot flushes
  // complete buffers only; the signal path does not flush at all).
  out.records_complete = state == State::kStopped;
  out.capture = "cupti";
  out.device_name = device_name();
  out.capture_reason = lib_.describe() + ", started " + trigger_;
  if (!lib_.explicit_note().empty()) out.capture_reason += "; " + lib_.explicit_note();
  if (const std::string shared = ClientMux::get().describe(); !shared.empty())
    out.capture_reason += "; " + shared;
  if (!static_cupti_.empty())
    out.warnings.push_back(static_cupti_ + " contains a statically linked CUPTI that traintime cannot "
                           "share: a profiler using it in this process may disturb GPU capture");
  const PipelineStats& ps = pipeline_->stats();
  core::CaptureStats& cs = out.capture_stats;
  cs.present = true;
  cs.buffers = ps.buffers;
  cs.records = ps.activities;
  cs.launch_callbacks = launches_->launches();
  cs.correlation_ids_per_callback = launches_->ids_per_store();
  cs.joined = ps.joined_runtime + ps.joined_correlation;
  cs.graph_node_context = ps.graph_node_context;
  cs.missing_context = ps.missing_context;
  cs.overwritten = launches_->overwritten();
  for (std::string& w : pipeline_->warnings()) out.warnings.push_back(std::move(w));
  if (out.dropped_records)
    out.warnings.push_back(std::to_string(out.dropped_records) +
                           " GPU activity records were dropped (by CUPTI, or unread in scratch buffers "
                           "while the buffer pool was exhausted): GPU times undercount");
  if (const uint64_t refused = pool_->refused())
    out.warnings.push_back(std::to_string(refused) + " CUPTI buffer requests refused (pool of " +
                           std::to_string(config_.buffer_count) + " x " +
                           std::to_string(pool_->buffer_bytes() >> 10) +
                           " KiB exhausted; raise TRAINTIME_BUFFER_COUNT): their records were dropped");
  return out;
}

nlohmann::json GpuCapture::trace_json() {
  const State state = state_.load(std::memory_order_acquire);
  if (forked_.load(std::memory_order_relaxed) ||
      (state != State::kCapturing && state != State::kStopped))
    return nullptr;
  std::lock_guard<std::mutex> agg(agg_mu_);
  return aggregator_->trace_json([this](core::PathId p) { return path_name(p); });
}

void GpuCapture::on_fork_child() noexcept {
  // The child has none of the parent's threads; it must never flush or process inherited state.
  forked_.store(true, std::memory_order_relaxed);
  capturing_.store(false, std::memory_order_relaxed);
  lazy_pending_.store(false, std::memory_order_relaxed);
}

}  // namespace

void configure(const Hooks& hooks, const core::Config& config) {
  GpuCapture::get().configure(hooks, config);
}
void start(const char* trigger) noexcept {
  const int saved_errno = errno;
  GpuCapture::get().start(trigger);
  errno = saved_errno;
}
void lazy_start_point() noexcept { GpuCapture::get().lazy_start(); }
core::GpuSummary summary(bool snapshot) { return GpuCapture::get().summary(snapshot); }
void shutdown(const char* reason) { GpuCapture::get().shutdown(reason); }
nlohmann::json trace_json() { return GpuCapture::get().trace_json(); }
void on_fork_child() noexcept { GpuCapture::get().on_fork_child(); }
void enable_live_metrics() noexcept { GpuCapture::get().enable_live(); }
bool live_step(core::GpuStepFigures* out, uint64_t* late_records) {
  return GpuCapture::get().live_step(out, late_records);
}
std::string device_name() { return GpuCapture::get().device_name(); }

}  // namespace traintime::cupti
