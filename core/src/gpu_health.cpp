// NVML's clock-event reasons by name (rank_file.h StepHealth).
#include <charconv>
#include <iterator>
#include <string>

#include "traintime/core/rank_file.h"

namespace traintime::core {

std::vector<std::string> health_reason_names(uint64_t mask) {
  std::vector<std::string> out;
  for (unsigned bit = 0; bit < 64; ++bit) {
    if (!(mask & (uint64_t{1} << bit))) continue;
    if (bit < std::size(kHealthReasonNames))
      out.emplace_back(kHealthReasonNames[bit]);
    else
      out.push_back("bit_" + std::to_string(bit));
  }
  return out;
}

uint64_t health_reason_bit(std::string_view name) {
  for (std::size_t bit = 0; bit < std::size(kHealthReasonNames); ++bit)
    if (kHealthReasonNames[bit] == name) return uint64_t{1} << bit;
  constexpr std::string_view kPrefix = "bit_";
  if (name.substr(0, kPrefix.size()) != kPrefix) return 0;
  unsigned bit = 0;
  const char* last = name.data() + name.size();
  const auto [end, ec] = std::from_chars(name.data() + kPrefix.size(), last, bit);
  if (ec != std::errc() || end != last || bit < std::size(kHealthReasonNames) || bit >= 64) return 0;
  return uint64_t{1} << bit;
}

}  // namespace traintime::core
