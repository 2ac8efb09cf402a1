// GpuCapture's launch and resource callbacks: the hot path on application threads (no lock, no
// allocation, errno preserved). A launch stores its region's context under its correlation id;
// graph-node callbacks keep the context of captured launches. Lock order: core/lock_order.h
// (on_api takes no lock; its flush at a context's teardown is try_only).
#include <pthread.h>

#include <cerrno>
#include <cstdlib>
#include <mutex>

#include "client_mux.h"
#include "gpu_capture_class.h"
#include "launch_params.h"
#include "traintime/core/nccl_kernel_name.h"

namespace traintime::cupti {
namespace {

// The launch the calling thread is inside: a nested launch callback (the driver call a runtime
// launch makes, or __cudaLaunchKernel under cudaLaunchKernel) reuses the outer context so both
// correlation ids join to the same region. Initial-exec TLS: a %fs-relative access instead of a
// __tls_get_addr call in each of a launch's four callbacks. libtraintime.so is preloaded (DESIGN
// §2; the driver's dlopen through CUDA_INJECTION64_PATH finds it already loaded), and its TLS is
// static already (preload/session.cpp's t_thread_state), so this costs no loading mode.
struct LaunchNest {
  uint32_t depth = 0;
  uint64_t open = 0;  // ticket of this launch's context, claimed and not yet published (0: none)
  core::LaunchContext ctx;
  CorrelationTable::Writer writer;  // this thread's chunk of the correlation table
  // self_cost (GpuCapture::launch_cost_edge): launches until the window opens (while it is
  // open, kWindowOpen less the launches begun since); whether this thread's callbacks are being
  // timed; the window's time so far, its pairs of readings, and what to take out of the current
  // callback's (a flush it ran, timed on its own).
  uint32_t cost_left = core::kCostPhase;
  bool timing = false;
  uint32_t timed_pairs = 0;
  uint64_t timed_ticks = 0;
  uint64_t excluded_ticks = 0;
};
// cost_left while a window is open: on_launch_begin's countdown never reaches 0 in it, so the
// branch that opens windows is not taken (nor mispredicted) between the readings.
constexpr uint32_t kWindowOpen = 1u << 30;
thread_local LaunchNest t_nest __attribute__((tls_model("initial-exec")));

// A launching thread that exits gives its chunk of the table back (correlation_table.h), so its
// segment does not stay held, skipped by every later lap. The key's value is the thread's Writer,
// set at its first launch. GpuCapture and its table are never destroyed.
pthread_key_t g_writer_key;
pthread_once_t g_writer_key_once = PTHREAD_ONCE_INIT;

}  // namespace

__attribute__((noinline)) void GpuCapture::watch_thread_exit() noexcept {
  const int saved_errno = errno;
  pthread_once(&g_writer_key_once, [] {
    pthread_key_create(&g_writer_key, [](void* writer) {
      GpuCapture& self = GpuCapture::get();
      if (self.launches_) self.launches_->give_back(*static_cast<CorrelationTable::Writer*>(writer));
    });
  });
  pthread_setspecific(g_writer_key, &t_nest.writer);
  errno = saved_errno;
}

void CUPTIAPI GpuCapture::on_callback(void* self_ptr, CUpti_CallbackDomain domain,
                                      CUpti_CallbackId cbid, const void* data) {
  auto* self = static_cast<GpuCapture*>(self_ptr);
  // A launch window being timed (self_cost): one launch in kCostEvery.
  if (__builtin_expect(t_nest.timing, 0)) return self->timed_callback(domain, cbid, data);
  // A profiler whose subscription rides on traintime's gets the calls it enabled, capture or not.
  if (__builtin_expect(self->mux_.active(), 0)) return self->shared_callback(domain, cbid, data);
  return self->own_callback(domain, cbid, data);
}

// A callback of a timed window. Its two readings bracket the very call every callback makes
// (own_callback, out of line, which the untimed path reaches by a tail call), with no branch
// between them that an untimed callback does not take: a sampled call's own branches (is it
// timed? does the window close?) are decided before the first reading or after the second,
// where their mispredictions (the sampled branch goes the rare way) cost nothing the estimate
// sees. The profiler's own callbacks (not ours) run first; a flush or a buffer callback run in
// it is in its own row and taken out.
__attribute__((noinline)) void GpuCapture::timed_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                                          const void* data) {
  if (mux_.active()) mux_.dispatch(domain, cbid, data);
  LaunchNest& nest = t_nest;
  const uint64_t buffers = buffer_ticks_here();
  const uint32_t left = nest.cost_left;
  core::FastClock& clock = core::process_clock();
  const uint64_t from = clock.ticks();
  own_callback(domain, cbid, data);
  const uint64_t d = clock.ticks() - from;
  const uint64_t other = nest.excluded_ticks + (buffer_ticks_here() - buffers);
  nest.timed_ticks += d > other ? d - other : 0;
  nest.excluded_ticks = 0;
  ++nest.timed_pairs;
  // A launch began in this callback (on_launch_begin counted it down): the window closes.
  if (nest.cost_left != left) {
    launch_cost_.add(nest.timed_ticks, nest.timed_pairs);
    nest.timing = false;
    nest.cost_left = static_cast<uint32_t>(core::kCostEvery) - 1;
  }
}

// The launch window opens at a launch's begin (an untimed callback): the rest of this launch's
// callbacks and the next launch's first are timed (one launch's worth, with whatever else the
// thread's callbacks did between); timed_callback closes it at the next launch's begin.
__attribute__((noinline)) void GpuCapture::launch_cost_edge() noexcept {
  LaunchNest& nest = t_nest;
  nest.timing = true;
  nest.timed_ticks = 0;
  nest.timed_pairs = 0;
  nest.excluded_ticks = 0;
  nest.cost_left = kWindowOpen;
}

void GpuCapture::timed_flush(bool forced, bool try_only) {
  core::FastClock& clock = core::process_clock();
  const uint64_t buffers = buffer_ticks_here();
  const uint64_t t0 = clock.ticks();
  flush(forced, try_only);
  const uint64_t d = clock.ticks() - t0;
  const uint64_t nested = buffer_ticks_here() - buffers;
  const uint64_t own = d > nested ? d - nested : 0;
  flush_cost_.add(own, 1, ~uint64_t{0});
  t_nest.excluded_ticks += own;
}

__attribute__((noinline)) void GpuCapture::shared_callback(CUpti_CallbackDomain domain,
                                                           CUpti_CallbackId cbid, const void* data) {
  mux_.dispatch(domain, cbid, data);
  own_callback(domain, cbid, data);
}

__attribute__((noinline)) void GpuCapture::own_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                                        const void* data) {
  if (!capturing_.load(std::memory_order_relaxed)) return;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    on_api(domain, cbid, static_cast<const CUpti_CallbackData*>(data));  // keeps errno
  } else if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    on_resource(cbid, static_cast<const CUpti_ResourceData*>(data));  // keeps errno
  }
}

// Hot path: application thread, inside the launch. No lock, no allocation. errno: the common
// path (role table, nest, launch-context hook, table store) touches none; each rarer branch that
// calls out (flush, NCCL pending call, first launch, fixture recorder) saves and restores it.
void GpuCapture::on_api(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                        const CUpti_CallbackData* cb) {
  const ApiRole role = sub_.roles().get(domain, cbid);
  if (role == ApiRole::kNone) return;
  if (is_control_role(role)) {
    on_api_control(role, cb);
    return;
  }
  LaunchNest& nest = t_nest;
  if (cb->callbackSite != CUPTI_API_ENTER) {
    if (nest.depth > 0) --nest.depth;
    if (nest.depth == 0 && nest.open != 0) {  // a launch without a nested driver call
      launches_->publish(nest.open);
      nest.open = 0;
    }
    return;
  }
  on_api_enter(domain, cbid, cb, role);
}

__attribute__((noinline)) void GpuCapture::on_api_enter(CUpti_CallbackDomain domain,
                                                        CUpti_CallbackId cbid,
                                                        const CUpti_CallbackData* cb, ApiRole role) {
  LaunchNest& nest = t_nest;
  // One slot per launch, whatever its nesting (correlation_table.h): the outer call claims it
  // (on_launch_begin), nested calls add their ids, and it is published at the entry of the
  // driver call, the innermost, before any work is submitted; a driver call that is the outer
  // one publishes at once.
  if (nest.depth == 0) return on_launch_begin(domain, cbid, cb, role);
  ++nest.depth;
  if (__builtin_expect(!launches_->add_nested(nest.open, cb->correlationId), 0))
    store_alone(cb->correlationId);  // published already, or no room left
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API && nest.open != 0) {
    launches_->publish(nest.open);
    nest.open = 0;
  }
  if (__builtin_expect(after_launch_due(role), 0)) after_launch(domain, cbid, cb);
}

__attribute__((noinline)) void GpuCapture::store_alone(uint32_t correlation_id) {
  LaunchNest& nest = t_nest;
  // With the launch's own slot still open (no room left in it), beside it: the chunk is kept.
  launches_->publish(nest.open != 0 ? launches_->claim_beside(nest.writer, correlation_id, nest.ctx)
                                    : launches_->claim(nest.writer, correlation_id, nest.ctx));
}

__attribute__((noinline)) void GpuCapture::on_launch_begin(CUpti_CallbackDomain domain,
                                                           CUpti_CallbackId cbid,
                                                           const CUpti_CallbackData* cb, ApiRole role) {
  LaunchNest& nest = t_nest;
  if (__builtin_expect(--nest.cost_left == 0, 0)) launch_cost_edge();
  current_context(&nest.ctx);
  // An NCCL kernel launched by NCCL's own thread: only when some call waits for one (one
  // relaxed load) is the kernel's name looked at.
  if (nest.ctx.comm.op == core::CommOp::kNone && role == ApiRole::kKernelLaunch &&
      hooks_.comm_calls_waiting != nullptr && hooks_.comm_calls_waiting())
    take_pending_comm_call(domain, cbid, cb, &nest.ctx);
  ++nest.depth;
  if (__builtin_expect(nest.writer.end == 0, 0)) watch_thread_exit();  // its first launch
  const uint64_t ticket = launches_->claim(nest.writer, cb->correlationId, nest.ctx);
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    launches_->publish(ticket);
  } else {
    nest.open = ticket;
  }
  if (__builtin_expect(after_launch_due(role), 0)) after_launch(domain, cbid, cb);
}

// Out of line, as every rare branch of the launch path: the common callback then saves and
// restores fewer registers (each of a launch's four callbacks pays for what on_api inlines).
__attribute__((noinline)) void GpuCapture::on_api_control(ApiRole role,
                                                          const CUpti_CallbackData* cb) {
  if (is_vmm_role(role)) return on_vmm(role, cb);
  if (role == ApiRole::kContextTeardown) {
    // FlushAll is allowed inside runtime/driver API callbacks (not resource ones): at the EXIT
    // of a context's destruction its work is done and its records can be delivered. try_only:
    // if another thread is flushing, it may be waiting on the very driver lock this thread holds.
    // Lock order: core/lock_order.h.
    if (cb->callbackSite == CUPTI_API_EXIT) {
      const int saved_errno = errno;
      timed_flush(false, true);
      errno = saved_errno;
    }
    return;
  }
  // A capture's begin, at its entry, so before the stream is capturing.
  if (cb->callbackSite == CUPTI_API_ENTER && hooks_.on_capture_begin) {
    const int saved_errno = errno;
    hooks_.on_capture_begin();
    errno = saved_errno;
  }
}

void GpuCapture::on_vmm(ApiRole role, const CUpti_CallbackData* cb) {
  const int saved_errno = errno;
  // The ledger allocates: out of memory inside the application's cuMemCreate, the allocation
  // goes uncounted rather than an exception through CUPTI.
  try {
    vmm_call(role, cb);
  } catch (...) {
  }
  errno = saved_errno;
}

void GpuCapture::vmm_call(ApiRole role, const CUpti_CallbackData* cb) {
  if (cb->callbackSite == CUPTI_API_ENTER) {
    vmm_.on_enter(cb->correlationId);
  } else if (cb->functionParams != nullptr && cb->functionReturnValue != nullptr &&
             *static_cast<const CUresult*>(cb->functionReturnValue) == CUDA_SUCCESS) {
    core::LaunchContext ctx;
    current_context(&ctx);
    core::VmmLedger::At at;
    at.step = ctx.step;
    const CuptiApi& api = sub_.lib().api();
    if (api.cuptiGetTimestamp == nullptr || api.cuptiGetTimestamp(&at.timestamp_ns) != CUPTI_SUCCESS)
      at.timestamp_ns = 0;
    vmm_.on_success(role, cb->functionParams, cb->correlationId, at);
  }
}

__attribute__((noinline)) void GpuCapture::after_launch(CUpti_CallbackDomain domain,
                                                        CUpti_CallbackId cbid,
                                                        const CUpti_CallbackData* cb) {
  const int saved_errno = errno;
  if (!recorded_.load(std::memory_order_relaxed) && !recorded_.exchange(true, std::memory_order_relaxed)) {
    // Once, at the first launch, so after CUDA initialised and registered its own atexit
    // teardown: the root re-registers its exit hook here (core/module.h on_first_gpu_launch),
    // so the forced flush (this module's stop) runs before CUDA tears down even when the process
    // recorded a region (and registered that hook) before cuInit.
    if (hooks_.on_first_gpu_launch) hooks_.on_first_gpu_launch();  // the process has GPU work
  }
  if (recorder_) recorder_->on_api(domain, cbid, cb, t_nest.ctx);
  errno = saved_errno;
}

__attribute__((noinline)) void GpuCapture::take_pending_comm_call(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                        const CUpti_CallbackData* cb, core::LaunchContext* ctx) {
  if (hooks_.pending_comm_call == nullptr || cb->symbolName == nullptr ||
      !core::is_nccl_kernel(cb->symbolName))
    return;
  const void* stream = nullptr;
  if (!launch_stream(domain, cbid, cb->functionParams, &stream)) return;
  const int saved_errno = errno;
  hooks_.pending_comm_call(stream, ctx);
  errno = saved_errno;
}

__attribute__((noinline)) void GpuCapture::ask_flush() noexcept { queue_.ask_flush(); }

__attribute__((noinline)) void GpuCapture::on_resource(CUpti_CallbackId cbid,
                                                       const CUpti_ResourceData* rd) {
  const int saved_errno = errno;
  on_resource_event(cbid, rd);
  errno = saved_errno;
}

void GpuCapture::on_resource_event(CUpti_CallbackId cbid, const CUpti_ResourceData* rd) {
  if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    // No FlushAll from a resource callback: ask the processing thread for a normal flush.
    ask_flush();
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
  if (TRAINTIME_CUPTI_CALL(sub_.lib(), cuptiGetGraphNodeId, graph->node, &node_id) != CUPTI_SUCCESS) return;
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {
    // On the capturing thread: inside the captured launch's callback when stream capture made
    // the node, so the launch nest already holds the right region.
    core::LaunchContext ctx;
    if (t_nest.depth > 0)
      ctx = t_nest.ctx;
    else
      current_context(&ctx);
    graph_nodes_->created(node_id, ctx);
    if (recorder_) recorder_->on_graph_node(node_id, 0, &ctx);
  } else if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED && graph->originalNode) {
    uint64_t original_id = 0;
    if (TRAINTIME_CUPTI_CALL(sub_.lib(), cuptiGetGraphNodeId, graph->originalNode, &original_id) !=
        CUPTI_SUCCESS)
      return;
    graph_nodes_->cloned(node_id, original_id, reinterpret_cast<uint64_t>(graph->graphExec));
    if (recorder_) recorder_->on_graph_node(node_id, original_id, nullptr);
  }
}

}  // namespace traintime::cupti
