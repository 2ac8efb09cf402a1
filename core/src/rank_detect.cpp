#include "traintime/core/rank_detect.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <optional>
#include <random>
#include <string_view>

namespace traintime::core {
namespace {

struct RankSource {
  const char* rank_var;
  // Candidates for the world size, first set and valid wins.
  const char* size_vars[2];
};

// Innermost launcher first (see rank_detect.h for who exports what).
constexpr RankSource kRankSources[] = {
    {"RANK", {"WORLD_SIZE", nullptr}},
    {"OMPI_COMM_WORLD_RANK", {"OMPI_COMM_WORLD_SIZE", nullptr}},
    {"PMIX_RANK", {"OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"}},
    {"PMI_RANK", {"PMI_SIZE", nullptr}},
    {"SLURM_PROCID", {"SLURM_NTASKS", nullptr}},
};

// Decimal, no sign, no spaces, fits comfortably in int64_t.
std::optional<int64_t> parse_count(const char* text) {
  if (text == nullptr || *text == '\0') return std::nullopt;
  int64_t value = 0;
  for (const char* p = text; *p; ++p) {
    if (*p < '0' || *p > '9') return std::nullopt;
    if (value > (int64_t{1} << 50)) return std::nullopt;
    value = value * 10 + (*p - '0');
  }
  return value;
}

bool usable_job_id(const char* value) { return value != nullptr && *value != '\0'; }

}  // namespace

RankInfo detect_rank(const EnvLookup& env) {
  RankInfo info;
  if (!env) return info;
  for (const RankSource& src : kRankSources) {
    const std::optional<int64_t> rank = parse_count(env(src.rank_var));
    if (!rank) continue;
    for (const char* size_var : src.size_vars) {
      if (size_var == nullptr) break;
      const std::optional<int64_t> size = parse_count(env(size_var));
      if (!size || *size == 0 || *rank >= *size) continue;
      info.rank = *rank;
      info.world_size = *size;
      info.source = src.rank_var;
      info.from_launcher = true;
      return info;
    }
  }
  return info;
}

std::string detect_job_id(const EnvLookup& env) {
  if (!env) return "";
  if (const char* v = env("SLURM_JOB_ID"); usable_job_id(v)) return v;
  // torchrun exports its --rdzv-id, whose default is the literal "none": not an id.
  if (const char* v = env("TORCHELASTIC_RUN_ID"); usable_job_id(v) && std::string_view(v) != "none")
    return v;
  if (const char* v = env("OMPI_MCA_ess_base_jobid"); usable_job_id(v)) return v;
  if (const char* v = env("OMPI_MCA_orte_ess_jobid"); usable_job_id(v)) return v;
  if (const char* v = env("TRAINTIME_JOB_ID"); usable_job_id(v)) return v;
  return "";
}

std::string generate_job_id() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);

  // Two launches in the same second by a recycled pid still differ in the random part; if the
  // kernel's entropy source is unavailable the clock's nanoseconds stand in for it.
  uint32_t random_bits = 0;
  try {
    std::random_device rd;
    random_bits = rd();
  } catch (...) {
    random_bits = static_cast<uint32_t>(
        std::chrono::high_resolution_clock::now().time_since_epoch().count());
  }
  char out[96];
  std::snprintf(out, sizeof out, "%s-%ld-%08x", stamp, static_cast<long>(getpid()), random_bits);
  return out;
}

}  // namespace traintime::core
