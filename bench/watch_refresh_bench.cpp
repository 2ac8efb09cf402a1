// traintime-report --watch's refresh of a large running job (docs/report.md): the job's rank files
// read once, then, REFRESHES times, PCT % of them replaced by rename (as a rank writes a new
// snapshot) and the job read again and analysed as the watch does, through its parse cache; and
// once the same refresh without the cache (every file parsed again), for the ratio. Wall times of
// this process, which reads with every core as the report does. Prints one JSON object; judging
// is scripts/bench.sh's. The files are left as they were, but for their inodes and times.
//   bench_watch_refresh DIR [PCT [REFRESHES]]   (default 1, 3)
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "analysis.h"
#include "job.h"

using namespace traintime::report;
namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One read of the job as a watch refresh makes it; its wall time.
double refresh(const std::string& dir, const LoadOptions& options, std::size_t* ranks) {
  const auto t0 = std::chrono::steady_clock::now();
  const Job job = load_job(dir, options);
  const Report r = analyze(job);
  *ranks = job.ranks.size();
  (void)r;
  return seconds_since(t0);
}

// The file rewritten under a temporary name and renamed over itself: a new inode and time.
bool replace(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  const fs::path tmp = p.parent_path() / ("." + p.filename().string() + ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text.str();
    if (!out) return false;
  }
  std::error_code ec;
  fs::rename(tmp, p, ec);
  return !ec;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_watch_refresh DIR [PCT [REFRESHES]]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const double pct = argc > 2 ? std::atof(argv[2]) : 1.0;
  const int refreshes = argc > 3 ? std::max(1, std::atoi(argv[3])) : 3;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "bench_watch_refresh: no rank files in %s\n", dir.c_str());
    return 1;
  }
  const std::size_t changed = std::max<std::size_t>(1, static_cast<std::size_t>(files.size() * pct / 100.0));
  ParseCache cache;
  LoadOptions cached;
  cached.cache = &cache;
  std::size_t ranks = 0;
  const double first = refresh(dir, cached, &ranks);
  std::vector<double> times;
  for (int k = 0; k < refreshes; ++k) {
    // A different `changed` files each time, spread over the job.
    for (std::size_t i = 0; i < changed; ++i)
      if (!replace(files[(i * files.size() / changed + static_cast<std::size_t>(k)) % files.size()])) {
        std::fprintf(stderr, "bench_watch_refresh: cannot replace a file in %s\n", dir.c_str());
        return 1;
      }
    times.push_back(refresh(dir, cached, &ranks));
  }
  std::sort(times.begin(), times.end());
  std::size_t uncached_ranks = 0;
  const double uncached = refresh(dir, LoadOptions{}, &uncached_ranks);
  if (ranks != files.size() || uncached_ranks != files.size()) {
    std::fprintf(stderr, "bench_watch_refresh: read %zu and %zu ranks of %zu files\n", ranks, uncached_ranks,
                 files.size());
    return 1;
  }
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  std::printf("{\"ranks\": %zu, \"changed\": %zu, \"refreshes\": %d, \"first_s\": %.4f, \"refresh_s\": %.4f, "
              "\"refresh_max_s\": %.4f, \"uncached_s\": %.4f, \"cache_hits\": %llu, \"max_rss_kb\": %ld}\n",
              files.size(), changed, refreshes, first, times[times.size() / 2], times.back(), uncached,
              static_cast<unsigned long long>(cache.hits()), ru.ru_maxrss);
  return 0;
}
