// Memory headroom: each rank's GPU memory against its device's capacity (MemoryHeadroom).
#include "views.h"

#include <algorithm>

namespace traintime::report::views {

std::vector<MemoryHeadroom> memory_view(const std::vector<RankView>& per_rank) {
  std::vector<MemoryHeadroom> memory;
  for (const RankView& v : per_rank) {
    if (v.memory_total_bytes == 0 && !v.allocated_known) continue;
    MemoryHeadroom m;
    m.rank = v.rank;
    m.host = v.host;
    m.allocated_known = v.allocated_known;
    m.allocated_peak_bytes = v.allocated_peak_bytes;
    m.nvml = v.memory_total_bytes > 0;
    if (m.nvml) {
      m.used_bytes_max = std::min(v.memory_used_bytes, v.memory_total_bytes);
      m.total_bytes = v.memory_total_bytes;
      m.headroom_bytes = m.total_bytes - m.used_bytes_max;
      m.headroom_pct = 100.0 * static_cast<double>(m.headroom_bytes) / static_cast<double>(m.total_bytes);
    }
    memory.push_back(std::move(m));
  }
  std::stable_sort(memory.begin(), memory.end(), [](const MemoryHeadroom& a, const MemoryHeadroom& b) {
    if (a.nvml != b.nvml) return a.nvml;
    return a.headroom_pct != b.headroom_pct ? a.headroom_pct < b.headroom_pct : a.rank < b.rank;
  });
  return memory;
}
}  // namespace traintime::report::views
