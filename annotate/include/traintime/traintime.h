/*
 * traintime.h — annotate a training program for the traintime profiler.
 *
 * Header-only and link-free. Include it, call the functions below, and link nothing: when the
 * program runs under `LD_PRELOAD=libtraintime.so` the calls reach the profiler; otherwise each
 * call is one well-predicted branch on a per-translation-unit pointer and does nothing.
 *
 *   tt_push("forward");            // open a region on this thread (nests: step/forward/layer3)
 *   tt_pop();                      // close the innermost region of this thread
 *   tt_push_category(TT_IO, "x");  // open a region with an explicit category
 *   uint64_t r = tt_range_start("prefetch");   // a range that may end on another thread
 *   tt_range_end(r);
 *   tt_step(samples, tokens);      // the end of one training step (counts samples and tokens)
 *   tt_set_flops(per_step, per_token);        // the model's FLOPs: TFLOP/s and MFU
 *   n = tt_metrics(out, capacity);            // live metrics ("traintime/step_ms", ...)
 *
 *   TT_PUSH_STATIC("forward");     // tt_push with the name registered once per call site:
 *   tt_pop();                      //   the push itself does no string compare or hash
 *   uint32_t id = tt_register_name("layer", TT_CATEGORY_AUTO);  // the same by hand: register
 *   tt_push_id(id);                //   once, push by id as often as you like; close with tt_pop
 *
 *   C++:  { TT_SCOPE("forward"); ... }   // RAII region; the name is registered once per site
 *
 * Categories. An explicit category wins. Otherwise the profiler matches the region's name
 * case-insensitively on whole tokens (split on non-alphanumerics and camelCase) in this order:
 * forward (forward, fwd), backward (backward, bwd), optimizer (optimizer, optim, adam, sgd),
 * io (io, data, dataloader, load, h2d); otherwise the parent region's category; otherwise
 * other. A region named exactly "step" marks a step, not the optimizer. recompute (forward work
 * re-run during backward by activation checkpointing) is never derived from a name: pass
 * TT_RECOMPUTE explicitly; it counts as compute time, like forward and backward.
 *
 * Names. Pass names that live as long as the call (string literals are ideal). The profiler
 * keeps its own copy the first time it sees a name. A name in read-only memory (a literal) is
 * recognised by its address from then on; a buffer you write to is compared with the copy at
 * every call, so reusing one for different names is safe, only slower.
 *
 * Threads. Regions nest per thread. Unbalanced tt_pop() calls are counted and reported, never
 * fatal. GPU work launched from a thread with no open region is attributed to the region open
 * on the thread that calls tt_step() (PyTorch's autograd engine launches backward kernels from
 * worker threads while the training thread sits in "backward").
 *
 * How dispatch works. On first use in each translation unit the header asks the dynamic linker
 * for `traintime_get_api_v1`, exported by libtraintime.so. A null answer (library absent, or
 * TRAINTIME_DISABLE=1) turns every call into a no-op for the rest of the process. dlsym lives
 * in libc since glibc 2.34; older glibc needs -ldl at link time.
 *
 * Compiling out. Define TRAINTIME_DISABLE_ANNOTATIONS (as NVTX_DISABLE does for NVTX) and every
 * call above becomes an empty inline function and TT_SCOPE/TT_SCOPE_CATEGORY/TT_PUSH_STATIC/
 * TT_PUSH_STATIC_CATEGORY expand to nothing:
 * no dispatch code, no dlsym, no reference to the profiler is left in the program.
 */
#ifndef TRAINTIME_TRAINTIME_H
#define TRAINTIME_TRAINTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Category of a region. The values are part of the ABI. */
typedef enum tt_category {
  TT_FORWARD = 0,
  TT_BACKWARD = 1,
  TT_OPTIMIZER = 2,
  TT_COMM = 3,
  TT_IO = 4,
  TT_OTHER = 5,
  TT_RECOMPUTE = 6 /* forward work re-run during backward (activation checkpointing) */
} tt_category;

/* Category value meaning "derive it from the name rules". */
#define TT_CATEGORY_AUTO (-1)

/* One live metric: a name that lives as long as the process ("traintime/step_ms") and a value. */
typedef struct tt_metric {
  const char* name;
  double value;
} tt_metric;

/*
 * A collective the library cannot see from C, as its caller timed it: PyTorch's gloo and MPI
 * process groups run theirs on the CPU, inside libtorch, and traintime.torch records each one
 * (docs/schema.md: communicators[] with "clock": "cpu"). Times are CLOCK_MONOTONIC nanoseconds of
 * the calling process. Append-only, like the table: `size` says how much of it the caller filled.
 */
typedef struct tt_collective {
  uint32_t size;       /* sizeof(tt_collective) as the caller was built */
  uint32_t group_size; /* ranks in the process group */
  uint32_t group_rank; /* the caller's rank in it */
  uint32_t reserved;   /* 0 */
  const char* group;   /* the group's id: 16 hex digits, equal on every member */
  const char* backend; /* "gloo", "mpi", ... */
  const char* op;      /* "AllReduce", "Broadcast", ..., as the rank file's comm[].op */
  uint64_t bytes;      /* the nccl-tests convention, as comm[].bytes */
  uint64_t seq;        /* 1, 2, ... per group in call order: the same on every member */
  uint64_t start_ns;   /* when it could start: issued, and the group's previous one done */
  uint64_t end_ns;     /* when it completed, waiting for the peers included */
} tt_collective;

/*
 * The function table libtraintime.so hands out. Append-only: new members go at the end and
 * callers check `size` before using them.
 */
typedef struct tt_api_v1 {
  uint32_t size;    /* sizeof(tt_api_v1) as the library was built */
  uint32_t version; /* 1 */
  /* Registers a (name, category) once and returns its id; 0 means "could not register". */
  uint32_t (*register_name)(const char* name, int category);
  /* Opens the region registered under id on the calling thread. */
  void (*push_id)(uint32_t id);
  void (*push)(const char* name);
  void (*push_category)(int category, const char* name);
  void (*pop)(void);
  uint64_t (*range_start)(const char* name);
  void (*range_end)(uint64_t id);
  void (*step)(uint64_t samples, uint64_t tokens);
  /* --- Appended in 0.2 (check `size` first: TT_API_HAS) ------------------------------------ */
  /* tt_range_start with an explicit category. */
  uint64_t (*range_start_category)(int category, const char* name);
  /* The model's FLOPs: per step, or per token (times each step's tokens); 0 leaves one unset. */
  void (*set_flops)(double flops_per_step, double flops_per_token);
  /* Live metrics (docs/metrics.md): fills up to `capacity` entries, returns how many exist. */
  uint32_t (*metrics)(tt_metric* out, uint32_t capacity);
  /* --- Appended in 0.3 ----------------------------------------------------------------------- */
  /* A framework allocator's view of the step in progress (the one the next tt_step ends), in
   * bytes: PyTorch's max_memory_allocated() and max_memory_reserved() since the last reset.
   * steps.detail[].memory.torch in the rank file; a later call in the same step replaces it. */
  void (*step_memory)(uint64_t allocated_peak_bytes, uint64_t reserved_peak_bytes);
  /* --- Appended in 0.4 ----------------------------------------------------------------------- */
  /* step_memory with the allocator's figures at the step's end (memory_allocated() and
   * memory_reserved()) and how its peaks were taken: peaks_per_step 1 when they were reset
   * after every step (each is the step's own), 0 when they run from the process start or the
   * user's own last reset (traintime.torch's default: a profiler leaves the peaks the user reads
   * alone). */
  void (*step_memory2)(uint64_t allocated_peak_bytes, uint64_t reserved_peak_bytes,
                       uint64_t allocated_bytes, uint64_t reserved_bytes, int peaks_per_step);
  /* --- Appended in 0.5 ----------------------------------------------------------------------- */
  /* A collective run on the CPU (tt_collective above); the process then writes a rank file. */
  void (*collective)(const tt_collective* c);
  /* A caller's own cost, for the rank file's self_cost.callbacks (docs/schema.md): the row
   * (module, what) with its figures so far, each report replacing the last: `calls` counted,
   * one in `every` timed, `samples` of them timed, their own times (each timed call's readings'
   * difference less the readings' own cost) summed (`sum_ns`) and squared and summed
   * (`sum_squares_ns`). traintime.torch reports its hooks this way before each step ends. */
  void (*report_cost)(const char* module, const char* what, uint64_t calls, uint64_t every,
                      uint64_t samples, uint64_t sum_ns, double sum_squares_ns);
} tt_api_v1;

/* Whether the table `api` points at has `member` (libraries older than this header lack it). */
#define TT_API_HAS(api, member) \
  ((api)->size >= offsetof(tt_api_v1, member) + sizeof(((tt_api_v1*)0)->member))

/* Exported by libtraintime.so; returns NULL when the profiler is disabled. */
typedef const tt_api_v1* (*tt_get_api_v1_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#ifdef TRAINTIME_DISABLE_ANNOTATIONS

#ifdef __cplusplus
extern "C" {
#endif
static inline void tt_push(const char* name) { (void)name; }
static inline void tt_push_category(tt_category category, const char* name) {
  (void)category;
  (void)name;
}
static inline void tt_pop(void) {}
static inline uint64_t tt_range_start(const char* name) {
  (void)name;
  return 0;
}
static inline void tt_range_end(uint64_t id) { (void)id; }
static inline void tt_step(uint64_t samples, uint64_t tokens) {
  (void)samples;
  (void)tokens;
}
static inline uint64_t tt_range_start_category(tt_category category, const char* name) {
  (void)category;
  (void)name;
  return 0;
}
static inline void tt_set_flops(double flops_per_step, double flops_per_token) {
  (void)flops_per_step;
  (void)flops_per_token;
}
static inline uint32_t tt_metrics(tt_metric* out, uint32_t capacity) {
  (void)out;
  (void)capacity;
  return 0;
}
static inline uint32_t tt_register_name(const char* name, int category) {
  (void)name;
  (void)category;
  return 0;
}
static inline void tt_push_id(uint32_t id) { (void)id; }
#define TT_PUSH_STATIC(name) ((void)0)
#define TT_PUSH_STATIC_CATEGORY(category, name) ((void)0)
#ifdef __cplusplus
} /* extern "C" */
#define TT_SCOPE(name) static_cast<void>(0)
#define TT_SCOPE_CATEGORY(category, name) static_cast<void>(0)
#endif /* __cplusplus */

#else /* !TRAINTIME_DISABLE_ANNOTATIONS */

#include "traintime/detail/dispatch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opens a region named `name` on the calling thread. */
static inline void tt_push(const char* name) {
  const tt_api_v1* api = tt_detail_api();
  if (api) api->push(name);
}

/* Opens a region with an explicit category (overrides the name rules). */
static inline void tt_push_category(tt_category category, const char* name) {
  const tt_api_v1* api = tt_detail_api();
  if (api) api->push_category((int)category, name);
}

/* Closes the innermost region open on the calling thread. */
static inline void tt_pop(void) {
  const tt_api_v1* api = tt_detail_api();
  if (api) api->pop();
}

/* Starts a range that may end on another thread; returns its id (0 when not profiled). */
static inline uint64_t tt_range_start(const char* name) {
  const tt_api_v1* api = tt_detail_api();
  return api ? api->range_start(name) : 0;
}

/* Ends a range started with tt_range_start. Ending id 0 or an unknown id is counted, not fatal. */
static inline void tt_range_end(uint64_t id) {
  const tt_api_v1* api = tt_detail_api();
  if (api) api->range_end(id);
}

/* Marks the end of one training step that processed `samples` samples and `tokens` tokens. */
static inline void tt_step(uint64_t samples, uint64_t tokens) {
  const tt_api_v1* api = tt_detail_api();
  if (api) api->step(samples, tokens);
}

/* tt_range_start with an explicit category (overrides the name rules). */
static inline uint64_t tt_range_start_category(tt_category category, const char* name) {
  const tt_api_v1* api = tt_detail_api();
  return api && TT_API_HAS(api, range_start_category) ? api->range_start_category((int)category, name)
                                                      : 0;
}

/*
 * The model's FLOPs, for achieved TFLOP/s and MFU: per training step (all micro-batches of this
 * rank), or per token (multiplied by the tokens each tt_step reports). Pass 0 for the one you do
 * not give. Call it once, any time; a later call replaces the figures.
 */
static inline void tt_set_flops(double flops_per_step, double flops_per_token) {
  const tt_api_v1* api = tt_detail_api();
  if (api && TT_API_HAS(api, set_flops)) api->set_flops(flops_per_step, flops_per_token);
}

/*
 * Live metrics of the latest completed steps, as (name, value) pairs — names in docs/metrics.md.
 * Fills at most `capacity` entries of `out` and returns how many there are (call with 64 and you
 * get them all; 0 when not profiled). No GPU synchronisation: GPU figures trail by a few steps
 * and say which step they belong to ("traintime/gpu_step").
 */
static inline uint32_t tt_metrics(tt_metric* out, uint32_t capacity) {
  const tt_api_v1* api = tt_detail_api();
  return api && TT_API_HAS(api, metrics) ? api->metrics(out, capacity) : 0;
}

/*
 * Registers a region name with a category (a tt_category, or TT_CATEGORY_AUTO for the name
 * rules) and returns its id for tt_push_id; 0 when not profiled or the name could not be
 * registered. Registering the same (name, category) again returns the same id. Call it once per
 * name (it takes the profiler's lock), not on every push.
 */
static inline uint32_t tt_register_name(const char* name, int category) {
  const tt_api_v1* api = tt_detail_api();
  return api ? api->register_name(name, category) : 0u;
}

/*
 * Opens the region registered under `id` on the calling thread: no string compare, no hash.
 * Close it with tt_pop. An id of 0 (nothing registered) still opens a nameless region, so the
 * tt_pop that follows closes it and not the region around it.
 */
static inline void tt_push_id(uint32_t id) {
  const tt_api_v1* api = tt_detail_api();
  if (api) api->push_id(id);
}

/*
 * tt_push(name) with the name registered once per call site and kept in a static (Tracy's way):
 * `TT_PUSH_STATIC("forward"); ... tt_pop();`. `name` must be the same at every pass through the
 * site (a string literal). A site whose registration failed or came before the profiler tries
 * again on the next pass.
 */
#define TT_PUSH_STATIC(name) TT_PUSH_STATIC_CATEGORY(TT_CATEGORY_AUTO, name)
/* TT_PUSH_STATIC with an explicit category: `TT_PUSH_STATIC_CATEGORY(TT_IO, "prefetch");`. */
#define TT_PUSH_STATIC_CATEGORY(category, name)                                              \
  do {                                                                                      \
    static uint32_t tt_detail_site_id = 0;                                                  \
    uint32_t tt_detail_id = __atomic_load_n(&tt_detail_site_id, __ATOMIC_RELAXED);          \
    if (__builtin_expect(tt_detail_id == 0, 0)) {                                           \
      tt_detail_id = tt_register_name(name, (int)(category));                               \
      __atomic_store_n(&tt_detail_site_id, tt_detail_id, __ATOMIC_RELAXED);                 \
    }                                                                                       \
    tt_push_id(tt_detail_id);                                                               \
  } while (0)

#ifdef __cplusplus
} /* extern "C" */

namespace traintime {
namespace detail {
/* A call site's registered id: 0 until its first pass under the profiler, kSiteFailed when the
 * name could not be registered (the site then records nothing, as before, without retrying). */
constexpr uint32_t kSiteFailed = ~0u;

/*
 * TT_SCOPE's region. Without the profiler the constructor is one load and one branch and the
 * destructor nothing (the table pointer it tested is kept in the object, so the compiler knows
 * it is null): the site's registration and both calls into the profiler are out of line. The
 * site id is a plain zero-initialised static (no guard to test on every pass), registered on the
 * first pass that finds the profiler; `name` is a function giving the name, called only then.
 */
class Scope {
 public:
  template <typename Name>
  Scope(uint32_t* site, Name name, int category) : api_(tt_detail_api()) {
    if (__builtin_expect(api_ != 0, 0)) open(site, name, category);
  }
  ~Scope() {
    if (__builtin_expect(api_ != 0, 0)) api_->pop();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  template <typename Name>
  void open(uint32_t* site, Name& name, int category) {
    uint32_t id = __atomic_load_n(site, __ATOMIC_RELAXED);
    if (__builtin_expect(id == 0, 0)) {
      id = api_->register_name(name(), category);
      if (id == 0) id = kSiteFailed;
      __atomic_store_n(site, id, __ATOMIC_RELAXED);
    }
    if (id != kSiteFailed) {
      api_->push_id(id);
    } else {
      api_ = 0;  /* nothing opened: nothing to close */
    }
  }

  const tt_api_v1* api_;
};
} /* namespace detail */
} /* namespace traintime */

#define TT_DETAIL_CAT2(a, b) a##b
#define TT_DETAIL_CAT(a, b) TT_DETAIL_CAT2(a, b)
#define TT_DETAIL_SCOPE(category, name, n)                                                  \
  static uint32_t TT_DETAIL_CAT(tt_detail_id_, n) = 0;                                      \
  ::traintime::detail::Scope TT_DETAIL_CAT(tt_detail_scope_, n)(                          \
      &TT_DETAIL_CAT(tt_detail_id_, n), [&]() -> const char* { return (name); }, (int)(category))
/* RAII region for the rest of the enclosing scope: `TT_SCOPE("forward");`. */
#define TT_SCOPE(name) TT_DETAIL_SCOPE(TT_CATEGORY_AUTO, name, __COUNTER__)
/* RAII region with an explicit category: `TT_SCOPE_CATEGORY(TT_IO, "prefetch");`. */
#define TT_SCOPE_CATEGORY(category, name) TT_DETAIL_SCOPE(category, name, __COUNTER__)
#endif /* __cplusplus */

#endif /* TRAINTIME_DISABLE_ANNOTATIONS */

#endif /* TRAINTIME_TRAINTIME_H */
