// libFuzzer target: decoding one CUPTI activity record (cupti/src/activity_decoder.h) of every
// checked layout from arbitrary bytes: hostile kinds, sizes, timestamps, names and ids. The input
// is copied into a zeroed, aligned block larger than the largest record, as CUPTI hands records
// over; the decoder must classify it without reading outside it, crashing or hanging.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "activity_decoder.h"

namespace tc = traintime::cupti;

// Kernel records carry a pointer to the kernel's name: the fuzzer's bytes would make it point
// anywhere, so it is pointed at a NUL-terminated copy of the input instead (hostile names, for
// the demangler), at the offset of the layout's own struct.
template <class Kernel>
void point_name(uint8_t* record, const char* name) {
  const char* p = name;
  std::memcpy(record + offsetof(Kernel, name), &p, sizeof p);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  alignas(16) uint8_t block[1024] = {};
  std::memcpy(block, data, size < sizeof block ? size : sizeof block);
  const std::string name(reinterpret_cast<const char*>(data), size);
  for (tc::RecordLayout layout : {tc::RecordLayout::kCupti12Memcpy5, tc::RecordLayout::kCupti12Memcpy6,
                                  tc::RecordLayout::kCupti13_0, tc::RecordLayout::kCupti13_1,
                                  tc::RecordLayout::kCupti13_3, tc::RecordLayout::kCupti13_4}) {
    alignas(16) uint8_t copy[sizeof block];
    std::memcpy(copy, block, sizeof block);
    // Kernel10-13 keep the name where Kernel10 has it (checked against each release's header).
    if (layout != tc::RecordLayout::kCupti12Memcpy5 && layout != tc::RecordLayout::kCupti12Memcpy6)
      point_name<CUpti_ActivityKernel10>(copy, name.c_str());
    else
      point_name<CUpti_ActivityKernel9>(copy, name.c_str());
    tc::DecodedActivity out;
    (void)tc::decode_record(layout, reinterpret_cast<const CUpti_Activity*>(copy), &out);
  }
  return 0;
}
