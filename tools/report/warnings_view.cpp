// The rank files' warnings grouped across ranks (WarningGroup, warnings_view.h).
#include "warnings_view.h"

#include <algorithm>

#include "traintime/core/module_format.h"

namespace traintime::report::views {

void WarningGrouper::add_rank(const core::RankFile& f) {
  std::vector<std::string> rendered;  // this rank's texts made from its counters
  for (const auto& [name, m] : f.modules) {
    const core::ModuleFormat* format = core::find_module_format(name);
    if (format == nullptr) continue;  // a newer writer's module: its texts group as texts
    for (const auto& [key, v] : m.counters) {
      if (v == 0) continue;
      const core::CounterSpec* spec = format->find(key);
      if (spec == nullptr || spec->message == nullptr) continue;
      std::string text = spec->message(v, m);
      add(name + "." + key, true, static_cast<double>(v), f.rank, text);
      rendered.push_back(std::move(text));
    }
  }
  for (const std::string& w : f.warnings)
    if (std::find(rendered.begin(), rendered.end(), w) == rendered.end()) add(w, false, 0, f.rank, w);
}

std::vector<WarningGroup> WarningGrouper::take() {
  std::vector<std::pair<std::string, std::size_t>> order(index_.begin(), index_.end());
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    const WarningGroup& x = groups_[a.second].g;
    const WarningGroup& y = groups_[b.second].g;
    return x.key != y.key ? x.key < y.key : x.text < y.text;
  });
  std::vector<WarningGroup> out;
  out.reserve(order.size());
  for (const auto& [id, k] : order) {
    Building& b = groups_[k];
    std::vector<std::size_t> by(b.g.ranks.size());
    for (std::size_t i = 0; i < by.size(); ++i) by[i] = i;
    std::sort(by.begin(), by.end(), [&](std::size_t x, std::size_t y) { return b.g.ranks[x] < b.g.ranks[y]; });
    std::vector<int64_t> ranks;
    ranks.reserve(by.size());
    for (std::size_t i : by) ranks.push_back(b.g.ranks[i]);
    if (b.g.has_number) {
      for (double v : b.values) b.g.total += v;
      const std::size_t n = std::min<std::size_t>(3, by.size());
      std::partial_sort(by.begin(), by.begin() + static_cast<std::ptrdiff_t>(n), by.end(),
                        [&](std::size_t x, std::size_t y) {
                          return b.values[x] != b.values[y] ? b.values[x] > b.values[y]
                                                            : b.g.ranks[x] < b.g.ranks[y];
                        });
      for (std::size_t i = 0; i < n; ++i) b.g.worst.push_back({b.g.ranks[by[i]], b.values[by[i]]});
    }
    b.g.ranks = std::move(ranks);
    out.push_back(std::move(b.g));
  }
  return out;
}

void WarningGrouper::add(const std::string& id, bool counted, double v, int64_t rank, const std::string& text) {
  auto [it, fresh] = index_.try_emplace((counted ? "#" : "=") + id, groups_.size());
  if (fresh) {
    groups_.emplace_back();
    groups_.back().g.key = counted ? id : std::string();
    groups_.back().g.has_number = counted;
  }
  Building& b = groups_[it->second];
  if (!b.g.ranks.empty() && b.g.ranks.back() == rank) {
    if (b.g.has_number) b.values.back() += v;  // the rank wrote this one twice: its counts add up
  } else {
    b.g.ranks.push_back(rank);
    if (b.g.has_number) b.values.push_back(v);
  }
  if (b.g.text.empty() || (b.g.has_number && b.values.back() > b.top)) {
    b.g.text = text;
    b.top = b.g.has_number ? b.values.back() : 0;
  }
}

}  // namespace traintime::report::views
