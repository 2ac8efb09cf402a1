// The profiler's configuration: one typed table, one environment prefix (TRAINTIME_), parsed and
// validated once at start-up. A bad value never stops the program: it gets exactly one warning
// naming the variable, the value and the default used instead. An empty value counts as unset.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace traintime::core {

// Reads one environment variable; returns nullptr when it is unset. Tests pass a map; the
// preload passes getenv.
using EnvLookup = std::function<const char*(const char* name)>;

struct Config {
  std::string output_dir = "traintime-out";  // TRAINTIME_OUTPUT
  bool disable = false;                        // TRAINTIME_DISABLE
  std::string log_level = "warn";              // TRAINTIME_LOG_LEVEL: trace|debug|info|warn|error|off
  uint32_t warmup_steps = 2;                   // TRAINTIME_WARMUP_STEPS
  bool cupti = true;                           // TRAINTIME_CUPTI (0 turns GPU capture off)
  std::string cupti_lib;                       // TRAINTIME_CUPTI_LIB (path to libcupti to load)
  bool nccl = true;                            // TRAINTIME_NCCL (0: no NCCL interposition)
  std::string nccl_kernel_ch = "auto";        // TRAINTIME_NCCL_KERNEL_CH: auto|1|0
  uint32_t snapshot_sec = 0;                   // TRAINTIME_SNAPSHOT_SEC (0 = off)
  uint32_t hang_sec = 300;                     // TRAINTIME_HANG_SEC (0 = off)
  std::string nccl_proxy_steps = "auto";       // TRAINTIME_NCCL_PROXY_STEPS: auto|on|off
  bool nvml = true;                            // TRAINTIME_NVML (0: no GPU health sampling)
  uint32_t nvml_interval_ms = 100;             // TRAINTIME_NVML_INTERVAL_MS
  bool trace = false;                          // TRAINTIME_TRACE
  uint64_t trace_max_events = 1000000;         // TRAINTIME_TRACE_MAX_EVENTS
  uint32_t step_detail = 64;                   // TRAINTIME_STEP_DETAIL: per-step rows kept
  std::string steps = "auto";                  // TRAINTIME_STEPS: auto|marker|off
  std::string step_anchor;                     // TRAINTIME_STEP_ANCHOR (empty = search)
  uint32_t top_kernels = 10;                   // TRAINTIME_TOP_KERNELS: kernels listed per region and rank
  std::string category_rules;                  // TRAINTIME_CATEGORY_RULES (raw; CategoryRules)
  std::string nvtx_domains = "*,-NCCL";        // TRAINTIME_NVTX_DOMAINS (raw; NvtxDomainFilter)
  uint32_t buffer_mb = 2;                      // TRAINTIME_BUFFER_MB: CUPTI activity buffer size
  uint32_t buffer_count = 64;                  // TRAINTIME_BUFFER_COUNT: max buffers in the pool
  std::string record_fixture;                  // TRAINTIME_RECORD_FIXTURE: directory (empty = off)
  uint32_t print_every = 0;                    // TRAINTIME_PRINT_EVERY: rank 0's console line
  std::string prometheus_file;                 // TRAINTIME_PROMETHEUS_FILE (empty = off)
  double flops_per_token = 0;                  // TRAINTIME_FLOPS_PER_TOKEN (0 = not given)
  double peak_tflops = 0;                      // TRAINTIME_PEAK_TFLOPS (0 = from the table)
  std::string dtype = "bf16";                  // TRAINTIME_DTYPE: peak column (peak_flops.h)
};

// TRAINTIME_LOG_LEVEL spellings, most verbose first; the index is the level's rank.
inline constexpr std::array<std::string_view, 6> kLogLevelNames = {"trace", "debug", "info",
                                                                  "warn",  "error", "off"};

// One row of the table, for the README and `--help`-style listings.
struct ConfigVar {
  const char* name;          // "TRAINTIME_WARMUP_STEPS"
  const char* default_text;  // "2" (what the variable means when unset; "" for an empty string)
  const char* doc;           // one sentence, including the accepted values
};

// Every variable, in README order.
const std::vector<ConfigVar>& config_vars();

// Reads every variable of the table through `env`. Appends one warning per variable whose value
// is invalid (that variable then keeps its default); never throws for a bad value.
// Booleans: 1/0/true/false/yes/no/on/off, any case. Integers: decimal, no sign, range-checked.
// TRAINTIME_CATEGORY_RULES is validated with CategoryRules::parse.
Config parse_config(const EnvLookup& env, std::vector<std::string>& warnings);

// One warning per name in `names` (the process's environment variable names) that starts with
// TRAINTIME_ but is no variable of the table (nor one of the project's scripts), naming the
// nearest known variable: a misspelled TRAINTIME_OUPUT would otherwise be ignored silently.
std::vector<std::string> unknown_variable_warnings(const std::vector<std::string>& names);

}  // namespace traintime::core
