/*
 * simgpu engine — SIMULATION ONLY. The interface between the simulated libraries.
 *
 * The virtual GPU lives in the fake libcuda.so.1, the one library every other fake and the
 * simulated program depend on, so there is exactly one timeline per process. The fake
 * libcudart/libnccl drive it through the simgpu_* calls below; the fake libcupti observes it
 * through simgpu_tool_hooks. Nothing here is part of any NVIDIA API.
 *
 * Time is virtual (ns): the host clock advances by a fixed cost per API call and jumps to the
 * end of the work on synchronize; GPU work starts when its stream is free, its event
 * dependencies are met and its launch has reached the GPU. Same calls in the same order give
 * the same timeline, whatever the host's speed.
 */
#ifndef SIMGPU_ENGINE_H
#define SIMGPU_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Kinds of GPU work. */
enum simgpu_work_kind { SIMGPU_KERNEL = 1, SIMGPU_MEMCPY = 2, SIMGPU_MEMSET = 3 };

/* One traced API call (runtime or driver domain); CUPTI turns it into CUpti_CallbackData. */
typedef struct simgpu_api_frame {
  int domain;                 /* CUpti_CallbackDomain value: 1 driver, 2 runtime */
  uint32_t cbid;              /* real CUPTI callback id */
  const char* function_name;  /* "cudaLaunchKernel", "__cudaLaunchKernel", "cuLaunchKernel" ... */
  const char* symbol_name;    /* kernel name on launches, else NULL */
  const void* params;         /* the real <api>_params struct where the toolkit defines one */
  void* return_value;         /* points at the cudaError_t / CUresult the call returns */
  uint32_t correlation_id;    /* distinct for every traced call, nested calls included */
  uint64_t correlation_data;  /* the subscriber's slot shared by ENTER and EXIT */
  uint64_t start_ns;          /* virtual host time at ENTER */
  uint64_t end_ns;            /* virtual host time at EXIT */
  struct simgpu_api_frame* outer; /* enclosing traced call on this thread, or NULL */
} simgpu_api_frame;

/* One piece of GPU work as executed (or, when captured, as a graph node). */
typedef struct simgpu_work {
  int kind;                    /* simgpu_work_kind */
  const char* name;            /* kernel name (persistent string) or NULL */
  uint64_t bytes;              /* memcpy/memset size */
  uint8_t copy_kind;           /* CUpti_ActivityMemcpyKind for memcpy */
  uint8_t src_kind, dst_kind;  /* CUpti_ActivityMemoryKind */
  uint32_t memset_value;
  uint32_t grid[3], block[3];
  uint32_t shared_mem;
  uint32_t stream_id;
  uint64_t launch_ns;          /* virtual host time the launch was issued */
  uint64_t start_ns, end_ns;   /* virtual GPU time */
  uint32_t correlation_id;     /* CUPTI's: kernels the runtime call's, memcpy/memset the driver call's */
  uint32_t runtime_correlation_id; /* the runtime API call's id (0 if launched from the driver API) */
  uint32_t graph_id;           /* 0 unless launched from a graph */
  uint64_t graph_node_id;
  uint64_t label;              /* simgpuSetLabel() on the launching (for graphs: capturing) thread */
  uint64_t launch_label;       /* simgpuSetLabel() on the thread that issued this launch */
  uint64_t seq;                /* order of execution in this process, from 0 */
} simgpu_work;

/* Resource events (CUPTI_CB_DOMAIN_RESOURCE). */
enum simgpu_resource_event {
  SIMGPU_RES_CU_INIT_FINISHED = 1,
  SIMGPU_RES_CONTEXT_CREATED = 2,
  SIMGPU_RES_STREAM_CREATED = 3,
  SIMGPU_RES_GRAPHNODE_CREATED = 4,
  // Instantiation clones every node of the graph into the exec: context = the exec,
  // handle = the clone node, graph = the original node.
  SIMGPU_RES_GRAPHNODE_CLONED = 5,
  SIMGPU_RES_GRAPHEXEC_DESTROY_STARTING = 6,  // handle = the exec
  SIMGPU_RES_GRAPH_DESTROY_STARTING = 7       // graph = the source graph
};

/* An allocation or a release the fake runtime made (CUPTI_ACTIVITY_KIND_MEMORY2 records). */
typedef struct simgpu_memory_op {
  int release;              /* 0 an allocation, 1 a release */
  uint8_t memory_kind;      /* CUpti_ActivityMemoryKind: 3 device, 2 pinned host */
  int pool;                 /* 1: from the device's default memory pool (cudaMallocAsync/cudaFreeAsync) */
  uint64_t address, bytes;  /* bytes: as allocated (a release repeats its allocation's size) */
  uint64_t timestamp_ns;    /* virtual host time inside the call */
  uint32_t correlation_id;  /* the runtime call's */
  uint32_t stream_id;       /* the stream of an asynchronous one, else 0 */
} simgpu_memory_op;

/* What the fake CUPTI observes. Every hook may be NULL. Hooks run on the calling thread. */
typedef struct simgpu_tool_hooks {
  void (*api_enter)(simgpu_api_frame* f);
  void (*api_exit)(simgpu_api_frame* f);
  /* GPU work was enqueued (not called for work captured into a graph). */
  void (*work)(const simgpu_work* w);
  /* event: simgpu_resource_event; handle: stream/graph node; graph: the node's graph. */
  void (*resource)(int event, void* context, void* handle, void* graph);
  /* An allocation or release (device or pinned host memory). */
  void (*memory)(const simgpu_memory_op* op);
} simgpu_tool_hooks;

/* ---- used by the fake libraries ---- */
void simgpu_set_tool_hooks(const simgpu_tool_hooks* hooks);
/* cuInit's work (idempotent): injection, context. Returns a CUresult. */
int simgpu_ensure_init(void);
// 1 once CUDA's (simulated) atexit teardown has run: a forced CUPTI flush after it is the crash
// real tools have met when their exit hook ran after CUDA's (SIMULATED: cuptiActivityFlushAll aborts).
int simgpu_cuda_torn_down(void);
/* The fake runtime reports an allocation or release to the fake CUPTI. */
void simgpu_report_memory(const simgpu_memory_op* op);
/* Opens/closes a traced API call on this thread (advances the host clock, raises callbacks). */
void simgpu_api_enter(simgpu_api_frame* f, int domain, uint32_t cbid, const char* function_name,
                      const char* symbol_name, const void* params, void* return_value);
void simgpu_api_exit(simgpu_api_frame* f);
/* Innermost traced call of this thread (NULL when none). */
simgpu_api_frame* simgpu_current_frame(void);
uint64_t simgpu_host_now(void);
void* simgpu_context(void);  /* the one CUcontext */
/* Makes the primary context current on this thread (announced once per process). */
void simgpu_make_context_current(void);
uint32_t simgpu_context_id(void);

/* A request to run work on a stream (stream NULL = legacy default stream). */
typedef struct simgpu_launch {
  int kind;
  const char* name;
  uint64_t duration_ns;  /* ignored for collectives (see simgpu_collective) */
  uint64_t bytes;
  uint8_t copy_kind, src_kind, dst_kind;
  uint32_t memset_value;
  uint32_t grid[3], block[3];
  uint32_t shared_mem;
  /* Non-NULL for an NCCL collective: duration comes from the straggler model. */
  const struct simgpu_collective* collective;
} simgpu_launch;

typedef struct simgpu_collective {
  uint64_t comm_key;     /* identifies the communicator (same on every rank) */
  uint64_t transfer_ns;  /* what the transfer takes once every rank has arrived */
  uint64_t epoch_ns;     /* virtual host time the communicator was created (ranks start together) */
  int nranks;
  int rank;
} simgpu_collective;

/* Makes the next kernel this thread enqueues an NCCL collective (the fake NCCL sets it just
 * before it launches its kernel through the runtime). Consumed by that enqueue. */
void simgpu_set_next_collective(const simgpu_collective* c);
/* The virtual GPU start and end of the last collective kernel this thread enqueued (not captured):
 * what NCCL's kernel writes for its proxy thread's kernel-channel profiler events. Returns 0 when
 * there is none; start and end are ~0 for a collective that never runs (a peer never arrives). */
int simgpu_last_collective_span(uint64_t* start_ns, uint64_t* end_ns);
/* Enqueues work on `stream` (or adds a node when the stream is capturing). Returns a cudaError_t. */
int simgpu_enqueue(void* stream, const simgpu_launch* l);
/* Streams, events, graphs. All return cudaError_t values. */
int simgpu_stream_create(void** stream);
int simgpu_stream_destroy(void* stream);
uint32_t simgpu_stream_id(void* stream);
int simgpu_stream_synchronize(void* stream);
int simgpu_device_synchronize(void);
int simgpu_event_create(void** event);
int simgpu_event_destroy(void* event);
int simgpu_event_record(void* event, void* stream);
int simgpu_stream_wait_event(void* stream, void* event);
int simgpu_event_synchronize(void* event);
int simgpu_begin_capture(void* stream);
int simgpu_end_capture(void* stream, void** graph);
int simgpu_is_capturing(void* stream);
int simgpu_graph_instantiate(void** exec, void* graph);
int simgpu_graph_launch(void* exec, void* stream);
int simgpu_graph_destroy(void* graph);
int simgpu_graph_exec_destroy(void* exec);
uint32_t simgpu_graph_id(void* graph);
uint32_t simgpu_graph_exec_id(void* exec);
uint64_t simgpu_graph_node_id(void* node);
/* CUgraphNodeType of a node: 0 kernel, 1 memcpy, 2 memset. */
int simgpu_graph_node_type(void* node);
/* Kernel registry: persistent name for a host function / kernel handle. */
void* simgpu_register_kernel(const void* host_fun, const char* device_name);
const char* simgpu_kernel_name(const void* kernel_or_host_fun);
void* simgpu_kernel_handle(const void* host_fun);
/* Slowdown factor of rank r's compute kernels: SIMGPU_SLOWDOWN's factor divided by
 * SIMGPU_THROTTLE's (a throttled GPU runs its kernels 1/FACTOR slower). */
double simgpu_slowdown(int rank);
/* SIMGPU_THROTTLE=RANK:FACTOR,...: rank r's SM clock is the nominal one times FACTOR (1 when
 * not listed). */
double simgpu_throttle(int rank);

/* What the simulated libnvidia-ml.so.1 reports for rank r's GPU (the truth of GPU health
 * tests): nominal clocks, power and temperature, or the throttled ones under SIMGPU_THROTTLE. */
#define SIMGPU_SM_CLOCK_MHZ 1980u        /* nominal SM clock (H100 SXM's boost clock) */
#define SIMGPU_MEM_CLOCK_MHZ 2619u
#define SIMGPU_POWER_LIMIT_MW 700000u
#define SIMGPU_POWER_MW 550000u          /* nominal draw; times FACTOR when throttled */
#define SIMGPU_TEMPERATURE_C 62u         /* nominal; SIMGPU_HOT_TEMPERATURE_C when throttled */
#define SIMGPU_HOT_TEMPERATURE_C 91u
/* nvmlClocksEventReasonHwThermalSlowdown | SwThermalSlowdown: the reasons of a throttled GPU. */
#define SIMGPU_THROTTLE_REASONS 0x60ull
#define SIMGPU_PCIE_GEN 5u
#define SIMGPU_PCIE_WIDTH 16u
#define SIMGPU_MEMORY_USED_BYTES (3ull << 30) /* NVML's used memory; SIMGPU_MEMORY_USED=RANK:GIB,... sets a rank's */
typedef struct simgpu_health {
  unsigned sm_clock_mhz, mem_clock_mhz, power_mw, power_limit_mw, temperature_c;
  unsigned long long clock_event_reasons;
  unsigned pcie_gen, pcie_width;
  unsigned long long memory_total_bytes, memory_used_bytes;
} simgpu_health;
void simgpu_health_of(int rank, simgpu_health* out);
int simgpu_rank(void);

/* ---- SIMULATION extension used by sim_train and the tests (exported by libcuda.so.1) ---- */
/* Labels the work this thread launches from now on (opaque to the simulator). */
void simgpuSetLabel(uint64_t label);
uint64_t simgpuGetLabel(void);
/* Keeps every executed piece of work for simgpuTimelineGet from now on (off by default, so
 * long simulated runs stay bounded in memory). */
void simgpuKeepTimeline(int keep);
/* Executed work kept so far, in execution (enqueue) order; Get returns 0 past the end. */
size_t simgpuTimelineCount(void);
int simgpuTimelineGet(size_t index, simgpu_work* out);
/* Virtual time the last GPU work ends (0 before any). */
uint64_t simgpuGpuEndNs(void);
/* Number of times cuInit ran the injection protocol (0 or 1). */
int simgpuInjectionCount(void);
/* SIMGPU_HANG (sim_train): the next NCCL collective this process runs never completes, as when
 * a peer never enters it. Work queued behind it on its stream, or waiting on an event recorded
 * after it, never runs; a synchronisation that would wait for it blocks forever; CUPTI never
 * delivers a record of it. */
void simgpuHangNextCollective(void);

/* ---- SIMULATION extension for sim_replay (tests/sim/replay): the timeline follows a trace ----
 * With the replay clock on, traced API calls cost no virtual host time: the replayer moves the
 * host clock to each recorded call's time with simgpuAdvanceHostNs (synchronisations still move
 * it to the end of the awaited work). Work this thread enqueues next takes its times from the
 * list given to simgpuReplayNext, one entry per piece of work in enqueue order (a graph launch:
 * its nodes in capture order): it starts at start_ns, or at its launch when the recording puts
 * it earlier (counted by simgpuReplayClamped), and lasts duration_ns, whatever its stream,
 * events or the collective model would say; stream_id, when not 0, is the stream its record
 * names. The fake NCCL launches a scheduled kernel under the entry's name when it has one. */
typedef struct simgpu_replay_work {
  uint64_t start_ns;
  uint64_t duration_ns;
  uint32_t stream_id;  /* 0: the stream it was enqueued on */
  const char* name;    /* NCCL kernels: the recorded name (persistent string), else NULL */
} simgpu_replay_work;
void simgpuReplayClock(int on);
/* Moves the virtual host clock forward to t (never back). */
void simgpuAdvanceHostNs(uint64_t t);
/* Replaces this thread's pending schedule with `works` (copied); NULL/0 clears it. */
void simgpuReplayNext(const simgpu_replay_work* works, size_t n);
/* Entries of this thread's schedule no enqueue has taken yet. */
size_t simgpuReplayPending(void);
/* Scheduled work that started at its launch because the recording put it earlier. */
uint64_t simgpuReplayClamped(void);
/* The next stream this thread creates gets this id (0: the next free one, as before). */
void simgpuSetNextStreamId(uint32_t id);
/* used by the fake NCCL: the name of this thread's next scheduled work, or NULL */
const char* simgpu_replay_next_name(void);

/* Duration model of the simulated kernels launched with <<<>>>/cudaLaunchKernel: every block
 * of the grid costs SIMGPU_NS_PER_BLOCK ns of GPU time (times the rank's slowdown factor). */
#define SIMGPU_NS_PER_BLOCK 100

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SIMGPU_ENGINE_H */
