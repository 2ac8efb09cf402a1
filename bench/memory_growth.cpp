// Memory after N kernels in aggregate mode (DESIGN §9: growth ≤ 32 MiB after 10 M kernels).
// Ingests the synthetic workload into one GpuAggregator (default options: no trace) until N
// kernels went in, reading the resident set size along the way, then fills a rank file as the
// exit path does. Prints one JSON object; judging is scripts/bench.sh's job.
//   bench_memory_growth [KERNELS [DISTINCT_NAMES]]   (default 10000000, 0)
// DISTINCT_NAMES > 0 gives the kernels that many different names, cycled (a model with many
// template instantiations; beyond the aggregator's name cap the excess folds into one row). The
// names are made before the first RSS reading, so only the aggregator's copies count.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "synthetic_workload.h"
#include "traintime/core/gpu_aggregator.h"
#include "traintime/core/rank_file.h"

using namespace traintime;

namespace {

// Resident set size from /proc/self/statm (pages), in bytes.
uint64_t rss_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return n == 2 ? uint64_t{resident} * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t target = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10'000'000ull;
  if (target == 0) {
    std::fprintf(stderr, "usage: bench_memory_growth [KERNELS > 0]\n");
    return 2;
  }
  const uint64_t distinct = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 0;
  const bench::SyntheticWorkload w;
  // Stable storage, as CUPTI's name pointers are stable per kernel.
  std::vector<std::string> names;
  names.reserve(distinct);
  for (uint64_t i = 0; i < distinct; ++i)
    names.push_back("_Z13gemm_variantILi" + std::to_string(i) + "EEvPKfS1_Pfiii");
  const uint64_t before = rss_bytes();
  nlohmann::json checkpoints = nlohmann::json::array();
  uint64_t kernels = 0, activities = 0, peak = before, pass = 0;
  {
    core::GpuAggregator aggregator;
    core::GpuActivity a;
    core::LaunchContext c;
    core::Category cat;
    uint64_t next_checkpoint = target / 10;
    while (kernels < target) {
      for (size_t i = 0; i < w.size() && kernels < target; ++i) {
        w.get(i, pass, &a, &c, &cat);
        if (a.kind == core::ActivityKind::kKernel) {
          if (distinct && a.name.substr(0, 4) != "nccl") a.name = names[kernels % distinct];
          ++kernels;
        }
        aggregator.ingest(a, c, cat);
        ++activities;
      }
      ++pass;
      if (kernels >= next_checkpoint || kernels >= target) {
        const uint64_t rss = rss_bytes();
        if (rss > peak) peak = rss;
        checkpoints.push_back({{"kernels", kernels}, {"rss_growth_bytes", int64_t(rss) - int64_t(before)}});
        next_checkpoint += target / 10;
      }
    }
    const uint64_t after_ingest = rss_bytes();
    const core::GpuSummary summary = aggregator.summary(pass * bench::SyntheticWorkload::kChunkSteps);
    (void)summary;  // what a rank-file write builds from the aggregator
    const uint64_t after_fill = rss_bytes();
    if (after_fill > peak) peak = after_fill;
    const auto fp = aggregator.footprint();
    nlohmann::json out = {
        {"kernels", kernels},
        {"distinct_names", distinct},
        // The per-name cost is judged beyond a name's own characters: their mean length.
        {"name_chars_mean", names.empty() ? 0.0 : [&] {
           double chars = 0;
           for (const std::string& n : names) chars += static_cast<double>(n.size());
           return chars / static_cast<double>(names.size());
         }()},
        {"activities", activities},
        {"steps", pass * bench::SyntheticWorkload::kChunkSteps},
        {"rss_before_bytes", before},
        {"rss_growth_after_ingest_bytes", int64_t(after_ingest) - int64_t(before)},
        {"rss_growth_after_fill_bytes", int64_t(after_fill) - int64_t(before)},
        {"rss_peak_growth_bytes", int64_t(peak) - int64_t(before)},
        {"late_records", aggregator.late_records()},
        {"footprint", {{"open_steps", fp.open_steps}, {"open_records", fp.open_records},
                       {"regions", fp.regions}, {"kernel_names", fp.kernel_names},
                       {"region_kernels", fp.region_kernels}, {"detail_steps", fp.detail_steps}}},
        {"checkpoints", checkpoints}};
    std::printf("%s\n", out.dump().c_str());
  }
  return 0;
}
