#include "activity_decoder.h"

#include <cstddef>

namespace traintime::cupti {
namespace {

// Every checked layout (cupti_library.cpp) is decoded through one struct per family: the fields
// RecordDecoder reads sit at the same offset in each struct of the family, which the compiler
// checks here against the toolkit's headers (cupti_activity_deprecated.h holds the 12.x structs).
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
TT_SAME_OFFSET(CUpti_ActivityKernel9, CUpti_ActivityKernel10, gridX);
TT_SAME_OFFSET(CUpti_ActivityKernel9, CUpti_ActivityKernel10, gridY);
TT_SAME_OFFSET(CUpti_ActivityKernel9, CUpti_ActivityKernel10, gridZ);
TT_SAME_COMMON(CUpti_ActivityMemcpy5, CUpti_ActivityMemcpy6);
TT_SAME_OFFSET(CUpti_ActivityMemcpy5, CUpti_ActivityMemcpy6, copyKind);
TT_SAME_OFFSET(CUpti_ActivityMemcpy5, CUpti_ActivityMemcpy6, bytes);
TT_SAME_OFFSET(CUpti_ActivityMemcpy5, CUpti_ActivityMemcpy6, runtimeCorrelationId);
TT_SAME_OFFSET(CUpti_ActivityMemory3, CUpti_ActivityMemory4, kind);
TT_SAME_OFFSET(CUpti_ActivityMemory3, CUpti_ActivityMemory4, memoryOperationType);
TT_SAME_OFFSET(CUpti_ActivityMemory3, CUpti_ActivityMemory4, memoryKind);
TT_SAME_OFFSET(CUpti_ActivityMemory3, CUpti_ActivityMemory4, correlationId);
TT_SAME_OFFSET(CUpti_ActivityMemory3, CUpti_ActivityMemory4, address);
TT_SAME_OFFSET(CUpti_ActivityMemory3, CUpti_ActivityMemory4, bytes);
TT_SAME_OFFSET(CUpti_ActivityMemory3, CUpti_ActivityMemory4, timestamp);
TT_SAME_OFFSET(CUpti_ActivityMemory3, CUpti_ActivityMemory4, deviceId);
// Overhead records: Overhead2's fields where Overhead (12.0) and Overhead3 (12.4 on) have them.
TT_SAME_OFFSET(CUpti_ActivityOverhead, CUpti_ActivityOverhead2, kind);
TT_SAME_OFFSET(CUpti_ActivityOverhead, CUpti_ActivityOverhead2, overheadKind);
TT_SAME_OFFSET(CUpti_ActivityOverhead, CUpti_ActivityOverhead2, start);
TT_SAME_OFFSET(CUpti_ActivityOverhead, CUpti_ActivityOverhead2, end);
TT_SAME_OFFSET(CUpti_ActivityOverhead2, CUpti_ActivityOverhead3, kind);
TT_SAME_OFFSET(CUpti_ActivityOverhead2, CUpti_ActivityOverhead3, overheadKind);
TT_SAME_OFFSET(CUpti_ActivityOverhead2, CUpti_ActivityOverhead3, start);
TT_SAME_OFFSET(CUpti_ActivityOverhead2, CUpti_ActivityOverhead3, end);
static_assert(offsetof(CUpti_ActivityOverhead3, overheadData) >= sizeof(CUpti_ActivityOverhead2));
#undef TT_SAME_COMMON
#undef TT_SAME_OFFSET
// The record sizes each release's walker steps over (test_real_cupti_versions.py).
static_assert(sizeof(CUpti_ActivityKernel9) == 208 && sizeof(CUpti_ActivityKernel10) == 216);
static_assert(sizeof(CUpti_ActivityMemcpy5) == 88 && sizeof(CUpti_ActivityMemcpy6) == 96);
static_assert(sizeof(CUpti_ActivityMemcpyPtoP4) == 96 && sizeof(CUpti_ActivityMemset4) == 88);

}  // namespace

RecordResult decode_record(RecordLayout layout, const CUpti_Activity* record, DecodedActivity* out) {
  if (layout == RecordLayout::kUnknown) return RecordResult::kOther;
  return RecordDecoder(layout).decode(record, out);
}

}  // namespace traintime::cupti
