// The tt_api_v1 table behind traintime.h and the Python package. push_id/pop are the hot path:
// one time read (the CPU's counter itself, in ticks: the registry makes them nanoseconds when
// the rank file is built, core/fast_clock.h), the per-thread registry state in one thread-local
// line, no lock, no allocation; errno is preserved because these calls sit between an
// application's syscall and its errno check.
#include <cerrno>
#include <type_traits>

#include "session.h"
#include "traintime/core/category.h"
#include "traintime/nvtx/nvtx_injection.h"
#include "traintime/traintime.h"

// The public header's category values are the ABI; the model's enum must agree with them, since
// push_category passes the value straight through.
static_assert(static_cast<int>(traintime::core::Category::kForward) == TT_FORWARD);
static_assert(static_cast<int>(traintime::core::Category::kBackward) == TT_BACKWARD);
static_assert(static_cast<int>(traintime::core::Category::kOptimizer) == TT_OPTIMIZER);
static_assert(static_cast<int>(traintime::core::Category::kComm) == TT_COMM);
static_assert(static_cast<int>(traintime::core::Category::kIo) == TT_IO);
static_assert(static_cast<int>(traintime::core::Category::kOther) == TT_OTHER);
static_assert(static_cast<int>(traintime::core::Category::kRecompute) == TT_RECOMPUTE);
static_assert(traintime::core::kLastRegionCategory == traintime::core::Category::kRecompute);

namespace traintime::preload {
namespace {

uint32_t api_register_name(const char* name, int category) {
  if (!name) return 0;
  const int saved = errno;
  core::RegionRegistry* r = registry();
  const uint32_t id = r ? r->register_name(name, category) : 0;
  errno = saved;
  return id;
}

// Every recording call: the registry, the caller's thread state and the time in ticks. The
// first record of a thread (and of the process: activation) and every record of a process that
// cannot trust the CPU's counter take record_slow, by a tail call: the common case makes no call
// and needs no stack frame (`f` is inlined and captures by value for that reason). errno: the
// counter read and clock_gettime leave it alone on success, and every slow path that could
// touch it (thread set-up, activation, the clock's calibration, a new name or path) saves and
// restores it itself, so the fast path pays nothing for it.
//
// What the calls cost (self_cost, core/self_cost.h): each is counted on its thread's state, and
// one in kCostEvery runs between two more clock readings (record_timed) whose difference goes to
// the registry's call_cost(). The count is one load and one store on the line push and pop use,
// and the test a predictable branch. NVTX's calls come through here uncounted (Counted false):
// the NVTX handlers count and time themselves, their own work included.
template <typename F>
__attribute__((noinline)) auto record_timed(core::RegionRegistry* r, core::ThreadState* ts, F f) {
  core::FastClock& clock = core::process_clock();
  const uint64_t t0 = clock.ticks();
  if constexpr (std::is_void_v<decltype(f(r, ts, uint64_t{0}))>) {
    f(r, ts, clock.ticks());
    r->call_cost().add(clock.ticks() - t0);
  } else {
    auto result = f(r, ts, clock.ticks());
    r->call_cost().add(clock.ticks() - t0);
    return result;
  }
}

template <bool Counted, typename F>
__attribute__((noinline)) auto record_slow(F f) {
  HotThread& h = t_hot;
  core::ThreadState* ts = h.ts ? h.ts : begin_recording(false);
  using R = decltype(f(h.registry, ts, uint64_t{0}));
  if (!ts) return R();
  if (Counted && ts->count_call()) return record_timed(h.registry, ts, f);
  return f(h.registry, ts, core::process_clock().ticks());
}

template <bool Counted = true, typename F>
inline auto record(F f) {
  HotThread& h = t_hot;
  core::ThreadState* ts = h.counted;
  if (__builtin_expect(ts == nullptr, 0)) return record_slow<Counted>(f);
  if (Counted && __builtin_expect(ts->count_call(), 0)) return record_timed(h.registry, ts, f);
  return f(h.registry, ts, core::FastClock::counter());
}

void api_push_id(uint32_t id) {
  record([id](core::RegionRegistry* r, core::ThreadState* ts, uint64_t now) { r->push_id(ts, id, now); });
}

void api_push_category(int category, const char* name) {
  record([category, name](core::RegionRegistry* r, core::ThreadState* ts, uint64_t now) {
    r->push(ts, name, category, now);
  });
}

void api_push(const char* name) { api_push_category(TT_CATEGORY_AUTO, name); }

// A region named "step" that closes ends a step (RegionRegistry's one rule): like tt_step, that
// is where GPU capture may start lazily.
template <bool Counted = true, typename Close>
void close_region(Close close) {
  if (__builtin_expect(record<Counted>(close), 0)) {
    gpu_start_point();
    notice_unloads();
    after_step();
  }
}

void api_pop() {
  close_region([](core::RegionRegistry* r, core::ThreadState* ts, uint64_t now) { return r->pop(ts, now); });
}

template <bool Counted = true>
uint64_t range_start(int category, const char* name) {
  return record<Counted>([category, name](core::RegionRegistry* r, core::ThreadState* ts, uint64_t now) {
    return r->range_start(ts, name, now, category);
  });
}

template <bool Counted = true>
void range_end(uint64_t id) {
  close_region<Counted>([id](core::RegionRegistry* r, core::ThreadState* ts, uint64_t now) {
    return r->range_end(ts, id, now);
  });
}

uint64_t api_range_start_category(int category, const char* name) { return range_start(category, name); }
uint64_t api_range_start(const char* name) { return range_start(TT_CATEGORY_AUTO, name); }
void api_range_end(uint64_t id) { range_end(id); }

// tt_step: counted on the thread's state, and about one in kStepCostEvery (at random) timed,
// the step's own work and what follows it here, into the registry's step_cost() (step_timed). An
// untimed step pays a count and a countdown: no clock reading, no shared write.
void step_body(HotThread& h, core::ThreadState* ts, uint64_t samples, uint64_t tokens) {
  if (ts) h.registry->step(ts, core::process_clock().now_ns(h.clock), samples, tokens);
  gpu_start_point();
  notice_unloads();
  after_step();
}

__attribute__((noinline)) void step_timed(HotThread& h, core::ThreadState* ts, uint64_t samples, uint64_t tokens) {
  core::FastClock& clock = core::process_clock();
  const uint64_t t0 = clock.ticks();
  step_body(h, ts, samples, tokens);
  h.registry->step_cost().add(clock.ticks() - t0, 1, ~uint64_t{0});
}

void api_step(uint64_t samples, uint64_t tokens) {
  const int saved = errno;
  HotThread& h = t_hot;
  // tt_step as the very first call: step 0 is measured from the library's load (its set-up is
  // activation's, not timed).
  core::ThreadState* ts = h.ts ? h.ts : begin_recording(true);
  if (ts && __builtin_expect(ts->count_step(), 0))
    step_timed(h, ts, samples, tokens);
  else
    step_body(h, ts, samples, tokens);
  errno = saved;
}

void api_set_flops(double flops_per_step, double flops_per_token) {
  set_flops(flops_per_step, flops_per_token);
}

uint32_t api_metrics(tt_metric* out, uint32_t capacity) { return metrics(out, capacity); }

// NVTX's push/pop (nvtx/): a token per open region, so a pop in one NVTX domain can close that
// domain's range below another domain's. kOverflowToken: the push went beyond the registry's
// depth and was counted there; its close is a plain pop, which un-counts it.
constexpr uint64_t kOverflowToken = ~0ULL;

uint64_t nvtx_open(const char* name) noexcept {
  return record<false>([name](core::RegionRegistry* r, core::ThreadState* ts, uint64_t now) {
    const int depth = ts->depth();
    r->push(ts, name, TT_CATEGORY_AUTO, now);
    return ts->depth() > depth ? ts->current_entry() : kOverflowToken;
  });
}

void nvtx_close(uint64_t token) noexcept {
  close_region<false>([token](core::RegionRegistry* r, core::ThreadState* ts, uint64_t now) {
    return token == kOverflowToken ? r->pop(ts, now) : r->close_entry(ts, token, now);
  });
}

uint64_t nvtx_range_start(const char* name) noexcept { return range_start<false>(TT_CATEGORY_AUTO, name); }
void nvtx_range_end(uint64_t id) noexcept { range_end<false>(id); }

// The allocator's figures of the step in progress (rare: once a step, from Python).
void step_memory(const core::TorchMemory& m) {
  const int saved = errno;
  HotThread& h = t_hot;
  if (h.ts ? h.ts : begin_recording(true)) h.registry->steps().set_torch_memory(m);
  errno = saved;
}

// An older package's call: per-step peaks, no step-end figures.
void api_step_memory(uint64_t allocated_peak_bytes, uint64_t reserved_peak_bytes) {
  core::TorchMemory m;
  m.allocated_peak_bytes = allocated_peak_bytes;
  m.reserved_peak_bytes = reserved_peak_bytes;
  step_memory(m);
}

void api_step_memory2(uint64_t allocated_peak_bytes, uint64_t reserved_peak_bytes,
                      uint64_t allocated_bytes, uint64_t reserved_bytes, int peaks_per_step) {
  core::TorchMemory m;
  m.allocated_peak_bytes = allocated_peak_bytes;
  m.reserved_peak_bytes = reserved_peak_bytes;
  m.peaks_per_step = peaks_per_step != 0;
  m.has_current = true;
  m.allocated_bytes = allocated_bytes;
  m.reserved_bytes = reserved_bytes;
  step_memory(m);
}

const tt_api_v1 kApi = {
    sizeof(tt_api_v1), 1,          api_register_name, api_push_id, api_push,
    api_push_category, api_pop,    api_range_start,   api_range_end, api_step,
    api_range_start_category,      api_set_flops,     api_metrics,       api_step_memory,
    api_step_memory2,              api_collective,                report_cost,
};

}  // namespace

const nvtx::Regions& nvtx_regions() {
  static const nvtx::Regions regions = [] {
    nvtx::Regions r;
    r.open = nvtx_open;
    r.close = nvtx_close;
    r.range_start = nvtx_range_start;
    r.range_end = nvtx_range_end;
    return r;
  }();
  return regions;
}

}  // namespace traintime::preload

extern "C" __attribute__((visibility("default"))) const tt_api_v1* traintime_get_api_v1(void) {
  const int saved = errno;
  const bool on = traintime::preload::session() != nullptr;
  errno = saved;
  return on ? &traintime::preload::kApi : nullptr;
}
