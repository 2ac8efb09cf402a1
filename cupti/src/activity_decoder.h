// CUPTI activity buffer -> core::GpuActivity, by the record layout of the loaded libcupti.
// The live capture and the fixture replay both decode through decode_buffer(), so recorded real
// CUPTI output exercises exactly the code that runs in production.
#pragma once

#include <cupti.h>

#include <cstdint>

#include "cupti_library.h"
#include "traintime/core/activity.h"

namespace traintime::cupti {

struct DecodedActivity {
  core::GpuActivity activity;         // activity.name is empty: see name_ptr
  uint32_t runtime_correlation_id = 0;  // memcpy: the runtime API's id (joined first), else 0
  const char* name_ptr = nullptr;       // kernel name pointer as CUPTI stored it in the record
};

struct DecodeCounts {
  uint64_t activities = 0;   // kernel, memcpy, memset records handed to the sink
  uint64_t api_records = 0;  // runtime/driver API records (enabled only to get correlation ids)
  uint64_t other = 0;        // kinds the adapter does not use
  uint64_t no_timestamps = 0;  // records with a zero or reversed [start, end] (not ingested)
  uint64_t incomplete = 0;   // an incomplete record ended the buffer (after a forced flush)
};

enum class RecordResult : uint8_t { kActivity, kApi, kOther, kNoTimestamps };

// Decodes one record; kActivity sets every field of *out.
RecordResult decode_record(RecordLayout layout, const CUpti_Activity* record, DecodedActivity* out);

// Walks the buffer with the library's cuptiActivityGetNextRecord and calls sink(DecodedActivity&)
// for every kernel, memcpy and memset record. The sink may change the record it is given (it is
// rewritten for the next one): the pipeline sets the name in place rather than copy it.
template <class Sink>
DecodeCounts decode_buffer(const CuptiLibrary& lib, uint8_t* buffer, size_t valid_size, Sink&& sink) {
  DecodeCounts counts;
  CUpti_Activity* record = nullptr;
  DecodedActivity decoded;  // one for the buffer: decode_record sets all of it for an activity
  for (;;) {
    // MAX_LIMIT_REACHED is the normal end of the buffer; INVALID_KIND an incomplete record (work
    // still running at a forced flush: counted, and said once in the rank file's warnings, not
    // logged as a failure). Anything else is logged once. Called directly, not through
    // TRAINTIME_CUPTI_CALL: this is the per-record loop.
    const CUptiResult rc = lib.api().cuptiActivityGetNextRecord(buffer, valid_size, &record);
    if (rc != CUPTI_SUCCESS) {
      if (rc == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
      if (rc != CUPTI_ERROR_INVALID_KIND) {
        static CallSite site{"cuptiActivityGetNextRecord", __FILE__, __LINE__};
        checked(lib, site, rc, CUPTI_ERROR_INVALID_KIND);
      }
      ++counts.incomplete;
      break;
    }
    switch (decode_record(lib.layout(), record, &decoded)) {
      case RecordResult::kActivity:
        ++counts.activities;
        sink(decoded);
        break;
      case RecordResult::kApi: ++counts.api_records; break;
      case RecordResult::kOther: ++counts.other; break;
      case RecordResult::kNoTimestamps: ++counts.no_timestamps; break;
    }
  }
  return counts;
}

}  // namespace traintime::cupti
