#include "activity_decoder.h"

#include <cupti_activity_deprecated.h>

#include <cstddef>
#include <cstring>

namespace traintime::cupti {
namespace {

// Every checked layout (cupti_library.cpp) is decoded through one struct per family: the fields
// read below sit at the same offset in each struct of the family, which the compiler checks here
// against the toolkit's headers (cupti_activity_deprecated.h holds the 12.x structs).
#define TT_SAME_OFFSET(A, B, field) \
  static_assert(offsetof(A, field) == offsetof(B, field), #A " and " #B " differ at " #field)
#define TT_SAME_COMMON(A, B)                                                               \
  TT_SAME_OFFSET(A, B, kind);                                                              \
  TT_SAME_OFFSET(A, B, start);                                                             \
  TT_SAME_OFFSET(A, B, end);                                                               \
  TT_SAME_OFFSET(A, B, deviceId);                                                          \
  TT_SAME_OFFSET(A, B, streamId);                                                          \
  TT_SAME_OFFSET(A, B, correlationId);                                                     \
  TT_SAME_OFFSET(A, B, graphId);                                                           \
  TT_SAME_OFFSET(A, B, graphNodeId)
TT_SAME_COMMON(CUpti_ActivityKernel9, CUpti_ActivityKernel10);
TT_SAME_OFFSET(CUpti_ActivityKernel9, CUpti_ActivityKernel10, name);
TT_SAME_COMMON(CUpti_ActivityMemcpy5, CUpti_ActivityMemcpy6);
TT_SAME_OFFSET(CUpti_ActivityMemcpy5, CUpti_ActivityMemcpy6, copyKind);
TT_SAME_OFFSET(CUpti_ActivityMemcpy5, CUpti_ActivityMemcpy6, bytes);
TT_SAME_OFFSET(CUpti_ActivityMemcpy5, CUpti_ActivityMemcpy6, runtimeCorrelationId);
#undef TT_SAME_COMMON
#undef TT_SAME_OFFSET
// The record sizes each release's walker steps over (test_real_cupti_versions.py).
static_assert(sizeof(CUpti_ActivityKernel9) == 208 && sizeof(CUpti_ActivityKernel10) == 216);
static_assert(sizeof(CUpti_ActivityMemcpy5) == 88 && sizeof(CUpti_ActivityMemcpy6) == 96);
static_assert(sizeof(CUpti_ActivityMemcpyPtoP4) == 96 && sizeof(CUpti_ActivityMemset4) == 88);

core::CopyKind copy_kind(uint8_t kind) {
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

template <class Record>
bool has_timestamps(const Record* r) {
  // CUPTI leaves both at 0 when it could not time the work (e.g. out of device buffer memory).
  return !(r->start == 0 && r->end == 0) && r->end >= r->start;
}

// The fields every GPU record of the checked layouts has under the same names and offsets, and
// the kind-specific ones at their defaults: decode_buffer reuses one DecodedActivity for the
// whole buffer (clearing it for every record cost more than the decode).
template <class Record>
void fill_common(const Record* r, core::ActivityKind kind, DecodedActivity* out) {
  core::GpuActivity& a = out->activity;
  a.kind = kind;
  a.start_ns = r->start;
  a.end_ns = r->end;
  a.device = r->deviceId;
  a.stream = r->streamId;
  a.correlation_id = r->correlationId;
  a.graph_id = r->graphId;
  a.graph_node_id = r->graphNodeId;
  a.copy_kind = core::CopyKind::kNone;
  a.bytes = 0;
  a.copies = 1;
  a.name = {};
  out->runtime_correlation_id = 0;
  out->name_ptr = nullptr;
}

// The record's kind as the raw 32-bit value CUPTI wrote: a newer CUPTI may write kinds this
// header's enum does not have, and loading those through the enum type is undefined.
uint32_t record_kind(const CUpti_Activity* record) {
  uint32_t kind = 0;
  std::memcpy(&kind, record, sizeof kind);
  return kind;
}

// Every checked layout: kernels through Kernel9 (Kernel10 agrees on every field read, and so do
// Kernel11-13, checked against their releases' headers by tests/cupti), memcpy through Memcpy5
// (likewise Memcpy6 and Memcpy7), peer-to-peer MemcpyPtoP4 in all of them, memset through Memset4
// (likewise Memset5).
RecordResult decode_checked(RecordLayout layout, const CUpti_Activity* record,
                            DecodedActivity* out) {
  core::GpuActivity& a = out->activity;
  switch (record_kind(record)) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel9*>(record);
      if (!has_timestamps(k)) return RecordResult::kNoTimestamps;
      fill_common(k, core::ActivityKind::kKernel, out);
      out->name_ptr = k->name;
      return RecordResult::kActivity;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy5*>(record);
      if (!has_timestamps(m)) return RecordResult::kNoTimestamps;
      fill_common(m, core::ActivityKind::kMemcpy, out);
      a.copy_kind = copy_kind(m->copyKind);
      a.bytes = m->bytes;
      out->runtime_correlation_id = m->runtimeCorrelationId;
      // Memcpy6 (12.8 on) says how many copies a batched memcpy record stands for.
      if (layout != RecordLayout::kCupti12Memcpy5) {
        const uint32_t n = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record)->copyCount;
        a.copies = n > 0 ? n : 1;
      }
      return RecordResult::kActivity;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {  // peer to peer
      const auto* p = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(record);
      if (!has_timestamps(p)) return RecordResult::kNoTimestamps;
      fill_common(p, core::ActivityKind::kMemcpy, out);
      a.copy_kind = core::CopyKind::kPtoP;
      a.bytes = p->bytes;
      return RecordResult::kActivity;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* s = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      if (!has_timestamps(s)) return RecordResult::kNoTimestamps;
      fill_common(s, core::ActivityKind::kMemset, out);
      a.bytes = s->bytes;
      return RecordResult::kActivity;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: return RecordResult::kApi;
    default: return RecordResult::kOther;
  }
}

}  // namespace

RecordResult decode_record(RecordLayout layout, const CUpti_Activity* record, DecodedActivity* out) {
  switch (layout) {
    case RecordLayout::kCupti12Memcpy5:
    case RecordLayout::kCupti12Memcpy6:
    case RecordLayout::kCupti13_0:
    case RecordLayout::kCupti13_1:
    case RecordLayout::kCupti13_3:
    case RecordLayout::kCupti13_4: return decode_checked(layout, record, out);
    case RecordLayout::kUnknown: break;
  }
  return RecordResult::kOther;
}

}  // namespace traintime::cupti
