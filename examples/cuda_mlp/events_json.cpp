#include "events_json.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

namespace example {

std::string expand_rank(const std::string& pattern, int rank) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'r') {
      out += std::to_string(rank);
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

bool write_events_json(const std::string& path, const EventsReport& r) {
  nlohmann::json j;
  j["schema"] = "traintime-example-events/1";
  j["program"] = r.program;
  j["rank"] = r.rank;
  j["world_size"] = r.world_size;
  j["launcher"] = r.launcher;
  j["device"] = r.device;
  j["timing"] = r.timing;
  j["steps"] = r.steps;
  j["warmup_steps"] = r.warmup_steps;
  nlohmann::json config = nlohmann::json::object();
  for (const auto& [k, v] : r.config_numbers) config[k] = v;
  for (const auto& [k, v] : r.config_strings) config[k] = v;
  j["config"] = config;
  j["regions"] = nlohmann::json::array();
  for (const RegionTiming& t : r.regions) {
    double total = 0;
    for (double v : t.per_step_ms) total += v;
    j["regions"].push_back({{"path", t.path},
                            {"single_stream", true},
                            {"entries", t.per_step_ms.size()},
                            {"total_ms", total},
                            {"per_step_ms", t.per_step_ms}});
  }
  j["comm"] = nlohmann::json::array();
  for (const CommOpTiming& op : r.comm) {
    nlohmann::json sizes = nlohmann::json::array();
    uint64_t calls = 0, bytes = 0;
    double total = 0;
    for (const CommSizeTiming& s : op.sizes) {
      sizes.push_back({{"bytes", s.bytes},
                       {"calls", s.calls},
                       {"total_ms", s.total_ms},
                       {"min_ms", s.min_ms}});
      calls += s.calls;
      bytes += s.bytes * s.calls;
      total += s.total_ms;
    }
    j["comm"].push_back({{"op", op.op},
                         {"comm_size", r.world_size},
                         {"calls", calls},
                         {"bytes", bytes},
                         {"total_ms", total},
                         {"sizes", sizes}});
  }
  j["notes"] = r.notes;

  std::ofstream f(path);
  if (!f) {
    std::fprintf(stderr, "error: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
    return false;
  }
  f << j.dump(2) << '\n';
  f.close();
  if (!f) {
    std::fprintf(stderr, "error: writing %s failed\n", path.c_str());
    return false;
  }
  return true;
}

}  // namespace example
