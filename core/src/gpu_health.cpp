// NVML's clock-event reasons by name, and the compact per-step health (rank_file.h StepHealth).
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

StepHealth step_health(int32_t cuda_device, const HealthFigures& f) {
  StepHealth h;
  h.cuda_device = cuda_device;
  h.samples = f.samples;
  h.sm_clock_mhz_median = f.sm_clock_mhz_median;
  h.sm_clock_mhz_min = f.sm_clock_mhz_min;
  h.power_w_median = f.power_w_median;
  h.temperature_c_max = f.temperature_c_max;
  for (const std::string& name : f.clock_event_reasons) h.clock_event_reasons |= health_reason_bit(name);
  return h;
}

}  // namespace traintime::core
