// libFuzzer target: TRAINTIME_CATEGORY_RULES (core/category_rules.h) and the NVTX name rules
// (core/nvtx_domains.h) on arbitrary text. Refusals come with a reason; accepted rules then
// categorise names made of the same bytes. No crash, no exception.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "traintime/core/category_rules.h"
#include "traintime/core/nvtx_domains.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string error;
  if (auto rules = traintime::core::CategoryRules::parse(text, &error)) {
    (void)rules->match(text);
  } else if (error.empty()) {
    std::abort();  // a refusal must say why
  }
  traintime::core::NvtxDomainFilter filter;
  if (traintime::core::NvtxDomainFilter::parse(text, &filter, &error)) (void)filter.records(text);
  const std::string name(text);  // NUL-terminated for the C-string folding
  char folded[64];
  std::memset(folded, 'x', sizeof folded);
  if (traintime::core::fold_nvtx_name(name.c_str(), folded, sizeof folded) &&
      std::memchr(folded, '\0', sizeof folded) == nullptr)
    std::abort();  // a folded name is always terminated inside the buffer
  return 0;
}
