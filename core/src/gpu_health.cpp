// NVML's clock-event reasons (rank_file.h ClockEventReasons): their names at the JSON edge.
#include <algorithm>
#include <charconv>
#include <iterator>
#include <string>

#include "traintime/core/rank_file.h"

namespace traintime::core {

ClockEventReasons ClockEventReasons::without(ClockEventReason r) const {
  ClockEventReasons out = *this;
  out.bits &= ~clock_event_bit(r);
  return out;
}

ClockEventReasons& ClockEventReasons::operator|=(const ClockEventReasons& o) {
  bits |= o.bits;
  for (const std::string& name : o.unknown)
    if (std::find(unknown.begin(), unknown.end(), name) == unknown.end()) unknown.push_back(name);
  return *this;
}

std::vector<std::string> clock_event_reason_names(const ClockEventReasons& r) {
  std::vector<std::string> out;
  for (unsigned bit = 0; bit < 64; ++bit) {
    if (!(r.bits & (uint64_t{1} << bit))) continue;
    if (bit < std::size(kClockEventReasonNames))
      out.emplace_back(kClockEventReasonNames[bit]);
    else
      out.push_back("bit_" + std::to_string(bit));
  }
  out.insert(out.end(), r.unknown.begin(), r.unknown.end());
  return out;
}

namespace {
// The bit a name stands for as clock_event_reason_names() writes it; 0 for another name.
uint64_t bit_of(std::string_view name) {
  for (std::size_t bit = 0; bit < std::size(kClockEventReasonNames); ++bit)
    if (kClockEventReasonNames[bit] == name) return uint64_t{1} << bit;
  constexpr std::string_view kPrefix = "bit_";
  if (name.substr(0, kPrefix.size()) != kPrefix) return 0;
  unsigned bit = 0;
  const char* last = name.data() + name.size();
  const auto [end, ec] = std::from_chars(name.data() + kPrefix.size(), last, bit);
  if (ec != std::errc() || end != last || bit < std::size(kClockEventReasonNames) || bit >= 64) return 0;
  return uint64_t{1} << bit;
}
}  // namespace

void add_clock_event_reason(std::string_view name, ClockEventReasons* into) {
  if (const uint64_t bit = bit_of(name)) {
    into->bits |= bit;
  } else if (std::find(into->unknown.begin(), into->unknown.end(), name) == into->unknown.end()) {
    into->unknown.emplace_back(name);
  }
}

}  // namespace traintime::core
