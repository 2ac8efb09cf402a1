// CUPTI activity buffer -> core::GpuActivity, by the record layout of the loaded libcupti.
// The live capture and the fixture replay both decode through decode_buffer(), so recorded real
// CUPTI output exercises exactly the code that runs in production.
#pragma once

#include <cupti.h>
#include <cupti_activity_deprecated.h>

#include <cstdint>
#include <cstring>

#include "cupti_library.h"
#include "traintime/core/activity.h"
#include "traintime/core/memory_tracker.h"

namespace traintime::cupti {

struct DecodedActivity {
  core::GpuActivity activity;         // activity.name is empty: see name_ptr
  uint32_t runtime_correlation_id = 0;  // memcpy: the runtime API's id (joined first), else 0
  const char* name_ptr = nullptr;       // kernel name pointer as CUPTI stored it in the record
  // A memory record (kMemory): the allocation or release, step 0 (the join sets it), and the
  // call's correlation id. `activity` is not written for it.
  core::MemoryEvent memory;
  uint32_t memory_correlation_id = 0;
  // An overhead record (kOverhead): CUPTI's own cost, by kind (CUpti_ActivityOverheadKind, raw),
  // its duration as CUPTI timed it (0 when it could not), and the record's additional data (the
  // 12.4+ layout's overheadData, which the client must free; null before it).
  uint32_t overhead_kind = 0;
  uint64_t overhead_ns = 0;
  void* overhead_data = nullptr;
};

struct DecodeCounts {
  uint64_t activities = 0;   // kernel, memcpy, memset records handed to the sink
  uint64_t api_records = 0;  // runtime/driver API records (enabled only to get correlation ids)
  uint64_t other = 0;        // kinds the adapter does not use
  uint64_t no_timestamps = 0;  // records with a zero or reversed [start, end] (not ingested)
  uint64_t incomplete = 0;   // an incomplete record ended the buffer (after a forced flush)
};

enum class RecordResult : uint8_t { kActivity, kApi, kOther, kNoTimestamps, kMemory, kOverhead };

// Where memory records go: the decoder's out-of-line memory path calls fn(ctx, record) itself,
// so the per-record loop of decode_buffer holds nothing more for them.
struct MemorySink {
  void (*fn)(void* ctx, DecodedActivity& d) = nullptr;
  void* ctx = nullptr;
};
// Where CUPTI's overhead records go (kOverhead), the same way.
using OverheadSink = MemorySink;

// The decoder of one checked layout (not kUnknown), made once per buffer: what differs between
// the layouts is settled here, not at every record. Every checked layout is read through one
// struct per family: kernels through Kernel9 (Kernel10 agrees on every field read, and so do
// Kernel11-13, checked against their releases' headers by tests/cupti), memcpy through Memcpy5
// (likewise Memcpy6 and Memcpy7), peer-to-peer MemcpyPtoP4 in all of them, memset through
// Memset4 (likewise Memset5); activity_decoder.cpp checks the offsets against the headers.
class RecordDecoder {
 public:
  explicit RecordDecoder(RecordLayout layout, MemorySink memory = {}, OverheadSink overhead = {},
                         bool overhead_data = false)
      : copy_count_(layout != RecordLayout::kCupti12Memcpy5),
        overhead_data_(overhead_data),
        memory_(memory),
        overhead_(overhead) {}

  // Decodes one record; kActivity sets every field of *out. Inline: it runs for every record of
  // every buffer, three a launch where the runtime and driver API records ride along.
  RecordResult decode(const CUpti_Activity* record, DecodedActivity* out) const {
    const uint32_t kind = record_kind(record);
    // The API records (two a launch in live buffers, enabled only for the correlation ids of
    // the launch callbacks) first, before any field is read: the kinds are adjacent (4, 5), so
    // this is one range comparison.
    if (kind == CUPTI_ACTIVITY_KIND_DRIVER || kind == CUPTI_ACTIVITY_KIND_RUNTIME)
      return RecordResult::kApi;
    // Then kernels, the most common activity, before the other kinds' jump table.
    if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) return kernel(record, out);
    core::GpuActivity& a = out->activity;
    switch (kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL: return kernel(record, out);
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy5*>(record);
        if (!has_timestamps(m)) return RecordResult::kNoTimestamps;
        fill_common(m, core::ActivityKind::kMemcpy, out);
        a.copy_kind = copy_kind(m->copyKind);
        a.bytes = m->bytes;
        a.copies = 1;
        a.grid = 0;
        // Memcpy6 (12.8 on) says how many copies a batched memcpy record stands for.
        if (copy_count_) {
          const uint32_t n = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record)->copyCount;
          a.copies = n > 0 ? n : 1;
        }
        out->runtime_correlation_id = m->runtimeCorrelationId;
        out->name_ptr = nullptr;
        return RecordResult::kActivity;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY2: {  // peer to peer
        const auto* p = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(record);
        if (!has_timestamps(p)) return RecordResult::kNoTimestamps;
        fill_common(p, core::ActivityKind::kMemcpy, out);
        a.copy_kind = core::CopyKind::kPtoP;
        a.bytes = p->bytes;
        a.copies = 1;
        a.grid = 0;
        out->runtime_correlation_id = 0;
        out->name_ptr = nullptr;
        return RecordResult::kActivity;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* s = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        if (!has_timestamps(s)) return RecordResult::kNoTimestamps;
        fill_common(s, core::ActivityKind::kMemset, out);
        a.copy_kind = core::CopyKind::kNone;
        a.bytes = s->bytes;
        a.copies = 1;
        a.grid = 0;
        out->runtime_correlation_id = 0;
        out->name_ptr = nullptr;
        return RecordResult::kActivity;
      }
      // Memory and overhead records in the default branch: a case 49 or 17 would stretch the
      // jump table of the common kinds (1 to 8).
      default:
        if (kind == CUPTI_ACTIVITY_KIND_MEMORY2) return memory(record, out);
        return kind == CUPTI_ACTIVITY_KIND_OVERHEAD ? overhead(record, out) : RecordResult::kOther;
    }
  }

 private:
  // OVERHEAD, read through Overhead2's fields, at the same offsets in Overhead and Overhead3
  // (activity_decoder.cpp checks them); Overhead3 (CUPTI 12.4, API 22, on) adds overheadData,
  // read only when the caller says the records have it (`overhead_data`). Out of line, as
  // memory(); hands the record to the sink.
  __attribute__((noinline)) RecordResult overhead(const CUpti_Activity* record, DecodedActivity* out) const {
    const auto* o = reinterpret_cast<const CUpti_ActivityOverhead2*>(record);
    uint32_t kind = 0;  // raw, as record_kind(): a newer CUPTI's values
    std::memcpy(&kind, &o->overheadKind, sizeof kind);
    out->overhead_kind = kind;
    out->overhead_ns = o->end >= o->start ? o->end - o->start : 0;
    out->overhead_data =
        overhead_data_ ? reinterpret_cast<const CUpti_ActivityOverhead3*>(record)->overheadData : nullptr;
    if (overhead_.fn != nullptr) overhead_.fn(overhead_.ctx, *out);
    return RecordResult::kOverhead;
  }

  // MEMORY2, read through Memory3 in every checked release (Memory4, 12.6 on, appends `source`;
  // activity_decoder.cpp checks the offsets): device memory allocations and releases only
  // (pool ones included: memoryPoolConfig says which pool, the address is the allocation's).
  // Out of line: rare, and kept off the kernel path's registers. Hands the record to the sink.
  __attribute__((noinline)) RecordResult memory(const CUpti_Activity* record, DecodedActivity* out) const {
    const auto* m = reinterpret_cast<const CUpti_ActivityMemory3*>(record);
    uint32_t operation = 0, memory_kind = 0;  // raw, as record_kind(): a newer CUPTI's values
    std::memcpy(&operation, &m->memoryOperationType, sizeof operation);
    std::memcpy(&memory_kind, &m->memoryKind, sizeof memory_kind);
    if (memory_kind != CUPTI_ACTIVITY_MEMORY_KIND_DEVICE) return RecordResult::kOther;
    const bool release = operation == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
    if (!release && operation != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION) return RecordResult::kOther;
    if (m->timestamp == 0) return RecordResult::kNoTimestamps;
    core::MemoryEvent& e = out->memory;
    e.timestamp_ns = m->timestamp;
    e.address = m->address;
    e.bytes = m->bytes;
    e.step = 0;
    e.device = m->deviceId;
    e.release = release;
    out->memory_correlation_id = m->correlationId;
    if (memory_.fn != nullptr) memory_.fn(memory_.ctx, *out);
    return RecordResult::kMemory;
  }

  // The record's kind as the raw 32-bit value CUPTI wrote: a newer CUPTI may write kinds this
  // header's enum does not have, and loading those through the enum type is undefined.
  static uint32_t record_kind(const CUpti_Activity* record) {
    uint32_t kind = 0;
    std::memcpy(&kind, record, sizeof kind);
    return kind;
  }

  static RecordResult kernel(const CUpti_Activity* record, DecodedActivity* out) {
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel9*>(record);
    if (!has_timestamps(k)) return RecordResult::kNoTimestamps;
    fill_common(k, core::ActivityKind::kKernel, out);
    core::GpuActivity& a = out->activity;
    a.copy_kind = core::CopyKind::kNone;
    a.bytes = 0;
    a.copies = 1;
    a.grid = core::kernel_grid(static_cast<uint32_t>(k->gridX), static_cast<uint32_t>(k->gridY),
                               static_cast<uint32_t>(k->gridZ));
    out->runtime_correlation_id = 0;
    out->name_ptr = k->name;
    return RecordResult::kActivity;
  }

  template <class Record>
  static bool has_timestamps(const Record* r) {
    // CUPTI leaves both at 0 when it could not time the work (e.g. out of device buffer
    // memory); end != 0 with end >= start excludes that and a reversed span in one test.
    return r->end != 0 && r->end >= r->start;
  }

  // The fields every GPU record of the checked layouts has under the same names and offsets.
  // Each kind sets the rest of *out itself: decode_buffer reuses one DecodedActivity for the
  // whole buffer (clearing it for every record cost more than the decode), and a default
  // written here only to be overwritten by the kind would be a second store.
  template <class Record>
  static void fill_common(const Record* r, core::ActivityKind kind, DecodedActivity* out) {
    core::GpuActivity& a = out->activity;
    a.kind = kind;
    a.start_ns = r->start;
    a.end_ns = r->end;
    a.device = r->deviceId;
    a.stream = r->streamId;
    a.correlation_id = r->correlationId;
    a.graph_id = r->graphId;
    a.graph_node_id = r->graphNodeId;
    a.name = {};
  }

  static core::CopyKind copy_kind(uint8_t kind) {
    switch (kind) {
      case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return core::CopyKind::kHtoD;
      case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return core::CopyKind::kDtoH;
      case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
      case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
      case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return core::CopyKind::kDtoD;
      case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return core::CopyKind::kPtoP;
      default: return core::CopyKind::kOther;
    }
  }

  bool copy_count_;  // memcpy records are Memcpy6 or later (copyCount)
  bool overhead_data_;  // overhead records are Overhead3 (overheadData)
  MemorySink memory_;
  OverheadSink overhead_;
};

// Whether the overhead records of CUPTI API version `api_version` are Overhead3, with the
// overheadData pointer the client frees (12.4, API 22, and every 13.x).
constexpr bool overhead_has_data(uint32_t api_version) { return api_version >= 22; }

// Decodes one record by the given layout (kUnknown: every record is kOther); kActivity sets
// every field of *out.
RecordResult decode_record(RecordLayout layout, const CUpti_Activity* record, DecodedActivity* out);

// Walks the buffer with the library's cuptiActivityGetNextRecord and calls on_record(const
// CUpti_Activity*) for each complete record.
template <class OnRecord>
void walk_buffer(const CuptiLibrary& lib, uint8_t* buffer, size_t valid_size, DecodeCounts* counts,
                 OnRecord&& on_record) {
  // The walker's address once per buffer, not reloaded after every call through it.
  const auto next_record = lib.api().cuptiActivityGetNextRecord;
  CUpti_Activity* record = nullptr;
  for (;;) {
    // MAX_LIMIT_REACHED is the normal end of the buffer; INVALID_KIND an incomplete record (work
    // still running at a forced flush: counted, and said once in the rank file's warnings, not
    // logged as a failure). Anything else is logged once. Called directly, not through
    // TRAINTIME_CUPTI_CALL: this is the per-record loop.
    const CUptiResult rc = next_record(buffer, valid_size, &record);
    if (rc != CUPTI_SUCCESS) {
      if (rc == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
      if (rc != CUPTI_ERROR_INVALID_KIND) {
        static CallSite site{"cuptiActivityGetNextRecord", __FILE__, __LINE__};
        checked(lib, site, rc, CUPTI_ERROR_INVALID_KIND);
      }
      ++counts->incomplete;
      break;
    }
    on_record(record);
  }
}

// Walks the buffer and calls sink(DecodedActivity&) for every kernel, memcpy and memset record,
// and memory.fn for every device memory allocation and release (its `memory`), from the
// decoder. The sink may change the record it is given (it is rewritten for the next one): the
// pipeline sets the name in place rather than copy it.
// CUPTI's overhead records go to overhead.fn the same way; their additional data is read when
// the library's records have it (CUPTI 12.4, API 22, on: overhead_has_data()).
template <class Sink>
DecodeCounts decode_buffer(const CuptiLibrary& lib, uint8_t* buffer, size_t valid_size, Sink&& sink,
                           MemorySink memory = {}, OverheadSink overhead = {}) {
  DecodeCounts counts;
  if (lib.layout() == RecordLayout::kUnknown) {  // not a loaded library: nothing is decoded
    walk_buffer(lib, buffer, valid_size, &counts, [&](const CUpti_Activity*) { ++counts.other; });
    return counts;
  }
  const RecordDecoder decoder(lib.layout(), memory, overhead, overhead_has_data(lib.version()));
  DecodedActivity decoded;  // one for the buffer: decode sets all of it for an activity
  walk_buffer(lib, buffer, valid_size, &counts, [&](const CUpti_Activity* record) {
    switch (decoder.decode(record, &decoded)) {
      case RecordResult::kActivity:
        ++counts.activities;
        sink(decoded);
        break;
      case RecordResult::kApi: ++counts.api_records; break;
      case RecordResult::kOther: ++counts.other; break;
      case RecordResult::kNoTimestamps: ++counts.no_timestamps; break;
      case RecordResult::kMemory: break;  // handed to `memory` by the decoder (it counts them)
      case RecordResult::kOverhead: break;  // likewise to `overhead`
    }
  });
  return counts;
}

}  // namespace traintime::cupti
