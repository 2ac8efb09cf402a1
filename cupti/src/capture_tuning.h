// The CUPTI adapter's tuning: the activity kinds it switches on, flush cadence, buffer sizing and
// the correlation table's size, chosen together (the comments say why each value is what it is).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include <cupti.h>

namespace traintime::cupti {

inline constexpr size_t kMaxGraphNodes = size_t{1} << 18;
// The activity kinds traintime switches on. OVERHEAD (CUPTI's own cost, for self_cost) and
// MEMORY2 (allocations and releases) last: a CUPTI that refuses either leaves the capture
// running without those figures.
inline constexpr CUpti_ActivityKind kOwnKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                            CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2,
                                            CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_OVERHEAD,
                                            CUPTI_ACTIVITY_KIND_MEMORY2};
// Normal flushes keep records flowing: CUPTI 13.0 keeps one buffer per launching thread and
// hands a half-full one over only when flushed, while the aggregator holds at most 1024 open
// steps (a record older than that is "late" and loses exactness). So flush once a second, and
// also whenever kFlushSteps steps have passed since the last flush (fast loops), checked every
// kPoll; and whenever the launch sequence has moved a quarter of the correlation table since the
// last flush (the table asks for it: correlation_table.h), so a rarely launching thread's buffer
// arrives while its contexts are still in the table.
inline constexpr auto kFlushPeriod = std::chrono::milliseconds(1000);
inline constexpr auto kPoll = std::chrono::milliseconds(20);
inline constexpr uint32_t kFlushSteps = 64;
// A normal flush only returns buffers whose records are all complete, and the launching thread's
// buffer always holds the newest (unfinished) work: in practice it arrives when full. So each
// buffer is capped at about kStepsPerBuffer steps' worth of records (measured as the run goes),
// which keeps every record well inside the aggregator's 1024-step window however few kernels a
// step has; never below kMinRecordsPerBuffer, never beyond what the buffer holds.
inline constexpr uint64_t kStepsPerBuffer = 128;
inline constexpr uint64_t kMinRecordsPerBuffer = 4096;
// Live metrics (enable_live_metrics): a step's GPU figures are published once every buffer
// handed out before the next step ended has arrived, so buffers are kept to a few steps' worth
// of records and complete ones are flushed every few steps.
inline constexpr uint64_t kLiveStepsPerBuffer = 4;
inline constexpr uint64_t kLiveMinRecordsPerBuffer = 512;
inline constexpr uint32_t kLiveFlushSteps = 4;
// A launch's context waits in the correlation table until its record arrives; the table keeps
// the contexts of the last kLaunchesInFlight launch callbacks (correlation_table.h: by launch
// sequence number, so the id rate does not matter), one 64-byte line each: 16384 of them are
// 1 MiB, a core's L2 on current servers, written and read as a stream. What must fit is the
// launches between a callback and the processing of its record: the GPU's queue of pending
// work and the records in buffers not yet full or not yet processed. Per-thread buffers arrive
// when full, so the table and the buffer limit are chosen together: a buffer is bounded by
// bytes so that it completes within kLaunchesInFlight / (kSlotsPerLaunch x 2 x
// kLaunchingThreads) launches even when every launch leaves only its smallest record (a
// memset's), with a launch taking one slot whatever its nesting (its runtime and nested driver
// ids share it), up to kLaunchingThreads threads filling buffers side by side, and the 2 as
// slack for buffers waiting in the queue and work still queued on the GPU.
inline constexpr uint32_t kLaunchesInFlight = 1u << 14;
inline constexpr uint64_t kSlotsPerLaunch = 1;
inline constexpr uint64_t kLaunchingThreads = 4;
inline constexpr size_t kSmallestLaunchRecord = sizeof(CUpti_ActivityMemset4);
inline constexpr size_t kBufferLimit =
    kLaunchesInFlight / (kSlotsPerLaunch * 2 * kLaunchingThreads) * kSmallestLaunchRecord;
inline constexpr auto kDrainTimeout = std::chrono::seconds(10);

}  // namespace traintime::cupti
