// Categories of GPU time and of regions (DESIGN §3, §4).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace traintime::core {

// The first seven values equal tt_category in the public header; the rest exist only for GPU
// time. Files name categories, never number them, so kUnattributed may move when one is added.
enum class Category : uint8_t {
  kForward = 0,
  kBackward = 1,
  kOptimizer = 2,
  kComm = 3,
  kIo = 4,
  kOther = 5,
  kRecompute = 6,     // forward work re-run during backward (activation checkpointing)
  kUnattributed = 7,  // GPU work launched with no region open anywhere
};
inline constexpr std::size_t kCategoryCount = 8;
// The last category a region may be given (register_name, push_category).
inline constexpr Category kLastRegionCategory = Category::kRecompute;

inline constexpr std::array<std::string_view, kCategoryCount> kCategoryNames = {
    "forward", "backward", "optimizer", "comm", "io", "other", "recompute", "unattributed"};

constexpr std::string_view category_name(Category c) {
  return kCategoryNames[static_cast<std::size_t>(c)];
}

inline std::optional<Category> category_from_name(std::string_view name) {
  for (std::size_t i = 0; i < kCategoryCount; ++i)
    if (kCategoryNames[i] == name) return static_cast<Category>(i);
  return std::nullopt;
}

// A value per category, indexed by Category: the model never keys anything by a category's
// name (names exist only where JSON is written or read). `listed` says which categories hold a
// value: a region lists only the categories of its own work, a rank file all of them.
template <class T>
struct ByCategory {
  std::array<T, kCategoryCount> values{};
  uint32_t listed = 0;  // bit c: category c holds a value

  static constexpr uint32_t bit(Category c) { return uint32_t{1} << static_cast<unsigned>(c); }
  bool has(Category c) const { return (listed & bit(c)) != 0; }
  // The value of `c`, T{} when not listed.
  const T& operator[](Category c) const { return values[static_cast<std::size_t>(c)]; }
  // The value of `c`, listing it.
  T& set(Category c) {
    listed |= bit(c);
    return values[static_cast<std::size_t>(c)];
  }
  std::size_t size() const { return static_cast<std::size_t>(__builtin_popcount(listed)); }
  bool empty() const { return listed == 0; }
  // f(category, value) for each listed category, in Category order.
  template <class F>
  void each(F&& f) const {
    for (std::size_t c = 0; c < kCategoryCount; ++c)
      if (has(static_cast<Category>(c))) f(static_cast<Category>(c), values[c]);
  }
  bool operator==(const ByCategory& o) const { return listed == o.listed && values == o.values; }
  bool operator!=(const ByCategory& o) const { return !(*this == o); }
};

// Compute time: every category except comm and io (DESIGN §4); recompute is compute.
constexpr bool is_compute(Category c) {
  return c != Category::kComm && c != Category::kIo;
}

}  // namespace traintime::core
