// Helpers shared by the attribution engine's files (gpu_aggregator.cpp, kernel_names.cpp,
// step_window.cpp, comm_gpu.cpp, gpu_summary.cpp, aggregator_trace.cpp). Not a public header.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <string>
#include <string_view>

#include "traintime/core/category.h"
#include "traintime/core/rank_file.h"

namespace traintime::core::aggregator_detail {

constexpr std::size_t kNameCacheSize = 4096;  // direct-mapped, by the name's address
constexpr std::size_t kSpareBufs = 2;         // step buffers kept for reuse

// a[0, n) == b[0, n), sixteen (else eight) bytes at a time: names are a few dozen characters,
// and a call to memcmp costs more than the compare.
inline bool same_chars(const char* a, const char* b, std::size_t n) {
#if defined(__SSE2__)
  if (n >= 16) {
    // Byte-equal masks of sixteen-byte blocks ANDed together, tested once: a block compare is
    // then three instructions, not six with a branch.
    auto eq = [&](std::size_t i) {
      const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i));
      const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i));
      return _mm_cmpeq_epi8(x, y);
    };
    if (n <= 32) return _mm_movemask_epi8(_mm_and_si128(eq(0), eq(n - 16))) == 0xffff;
    // Up to 64: the first and the last 32 bytes, overlapping. Longer: whole 64-byte blocks while
    // more than 64 bytes are left, then the last 64, which may overlap the blocks before them.
    std::size_t head = 0;  // [head, head + 32) and [n - 32, n) are compared last
    if (n > 64) {
      for (std::size_t i = 0; i + 64 < n; i += 64) {
        const __m128i block = _mm_and_si128(_mm_and_si128(eq(i), eq(i + 16)),
                                            _mm_and_si128(eq(i + 32), eq(i + 48)));
        if (_mm_movemask_epi8(block) != 0xffff) return false;
      }
      head = n - 64;
    }
    const __m128i all = _mm_and_si128(_mm_and_si128(eq(head), eq(head + 16)),
                                      _mm_and_si128(eq(n - 32), eq(n - 16)));
    return _mm_movemask_epi8(all) == 0xffff;
  }
#endif
  if (n < 8) {
    for (std::size_t i = 0; i < n; ++i)
      if (a[i] != b[i]) return false;
    return true;
  }
  uint64_t x, y;
  for (std::size_t i = 0; i + 8 < n; i += 8) {
    std::memcpy(&x, a + i, 8);
    std::memcpy(&y, b + i, 8);
    if (x != y) return false;
  }
  std::memcpy(&x, a + n - 8, 8);  // the last eight, overlapping the loop's last word
  std::memcpy(&y, b + n - 8, 8);
  return x == y;
}

inline std::size_t mix(uint64_t key) {
  return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 32);
}

constexpr std::size_t kComm = static_cast<std::size_t>(Category::kComm);
constexpr std::size_t kIo = static_cast<std::size_t>(Category::kIo);
// Four bits per category (kClassOf >> 4 * c): bit 0 compute, bit 1 comm or compute.
constexpr uint64_t kClassOf = [] {
  uint64_t bits = 0;
  for (std::size_t c = 0; c < kCategoryCount; ++c) {
    const bool compute = is_compute(static_cast<Category>(c));
    bits |= uint64_t{(compute ? 1u : 0u) | (compute || c == kComm ? 2u : 0u)} << (4 * c);
  }
  return bits;
}();

// A mangled C++ kernel name made readable; anything else unchanged.
std::string demangle(std::string_view name);

inline void add_totals(StepTotals& into, const StepTotals& t) {
  into.gpu_busy_ns += t.gpu_busy_ns;
  into.compute_ns += t.compute_ns;
  into.comm_ns += t.comm_ns;
  into.comm_overlapped_ns += t.comm_overlapped_ns;
  into.exposed_comm_ns += t.exposed_comm_ns;
  into.io_ns += t.io_ns;
  into.idle_ns += t.idle_ns;
  into.gpu_sum_ns += t.gpu_sum_ns;
  into.compute_sum_ns += t.compute_sum_ns;
  into.comm_sum_ns += t.comm_sum_ns;
  into.io_sum_ns += t.io_sum_ns;
}

}  // namespace traintime::core::aggregator_detail
