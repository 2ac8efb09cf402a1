#include "activity_decoder.h"

namespace traintime::cupti {
namespace {

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

// The fields every GPU record of 13.0 has under the same names.
template <class Record>
void fill_common(const Record* r, core::ActivityKind kind, core::GpuActivity& a) {
  a.kind = kind;
  a.start_ns = r->start;
  a.end_ns = r->end;
  a.device = r->deviceId;
  a.stream = r->streamId;
  a.correlation_id = r->correlationId;
  a.graph_id = r->graphId;
  a.graph_node_id = r->graphNodeId;
}

// CUPTI 13.0: the structs below are exactly the ones cupti_activity.h of 13.0 names for each kind.
RecordResult decode_13_0(const CUpti_Activity* record, DecodedActivity* out) {
  core::GpuActivity& a = out->activity;
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      if (!has_timestamps(k)) return RecordResult::kNoTimestamps;
      fill_common(k, core::ActivityKind::kKernel, a);
      out->name_ptr = k->name;
      return RecordResult::kActivity;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      if (!has_timestamps(m)) return RecordResult::kNoTimestamps;
      fill_common(m, core::ActivityKind::kMemcpy, a);
      a.copy_kind = copy_kind(m->copyKind);
      a.bytes = m->bytes;
      out->runtime_correlation_id = m->runtimeCorrelationId;
      return RecordResult::kActivity;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {  // peer to peer
      const auto* p = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(record);
      if (!has_timestamps(p)) return RecordResult::kNoTimestamps;
      fill_common(p, core::ActivityKind::kMemcpy, a);
      a.copy_kind = core::CopyKind::kPtoP;
      a.bytes = p->bytes;
      return RecordResult::kActivity;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* s = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      if (!has_timestamps(s)) return RecordResult::kNoTimestamps;
      fill_common(s, core::ActivityKind::kMemset, a);
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
    case RecordLayout::kCupti13_0: return decode_13_0(record, out);
    case RecordLayout::kUnknown: break;
  }
  return RecordResult::kOther;
}

}  // namespace traintime::cupti
