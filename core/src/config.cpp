#include "traintime/core/config.h"

#include <locale.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <variant>

#include "ascii_text.h"
#include "traintime/core/category_rules.h"
#include "traintime/core/nvtx_domains.h"
#include "traintime/core/peak_flops.h"

namespace traintime::core {
namespace {

using BoolField = bool Config::*;
using StringField = std::string Config::*;
using U32Field = uint32_t Config::*;
using U64Field = uint64_t Config::*;
using DoubleField = double Config::*;

enum class Kind { kString, kBool, kU32, kU64, kDouble, kLogLevel, kCategoryRules, kNvtxDomains, kDtype, kSteps, kProxySteps };

// The field a row fills; the alternative matches the row's Kind (string kinds use StringField).
using Field = std::variant<StringField, BoolField, U32Field, U64Field, DoubleField>;

constexpr uint64_t kU32Max = std::numeric_limits<uint32_t>::max();
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

// One row per variable: adding a variable is adding a row here (and the field in Config).
struct Row {
  ConfigVar var;
  Kind kind;
  Field field;
  uint64_t min = 0;  // integers only
  uint64_t max = kU64Max;
};

const Row kRows[] = {
    {{"TRAINTIME_OUTPUT", "traintime-out",
      "Directory the rank files are written to (created if missing)."},
     Kind::kString, &Config::output_dir},
    {{"TRAINTIME_DISABLE", "0",
      "1 turns the profiler off entirely: annotations become no-ops and nothing is written."},
     Kind::kBool, &Config::disable},
    {{"TRAINTIME_LOG_LEVEL", "warn",
      "Messages printed to stderr: trace, debug, info, warn, error or off."},
     Kind::kLogLevel, &Config::log_level},
    {{"TRAINTIME_WARMUP_STEPS", "2",
      "Steps skipped before step wall-time statistics and samples/s, tokens/s are computed."},
     Kind::kU32, &Config::warmup_steps, 0, kU32Max},
    {{"TRAINTIME_CUPTI", "1", "0 turns GPU capture (CUPTI) off; CPU regions still work."},
     Kind::kBool, &Config::cupti},
    {{"TRAINTIME_CUPTI_LIB", "",
      "Path of the libcupti.so to load when the process has none loaded; empty means the "
      "loader's search path, then CUDA_HOME and /usr/local/cuda."},
     Kind::kString, &Config::cupti_lib},
    {{"TRAINTIME_NCCL", "1",
      "0 disables NCCL interposition; communication is then found by kernel name only (bytes "
      "unknown)."},
     Kind::kBool, &Config::nccl},
    {{"TRAINTIME_NCCL_KERNEL_CH", "auto",
      "NCCL's own GPU timers per collective (its profiler plugin's kernel-channel events): the collectives' GPU time when CUPTI cannot capture, and a cross-check of CUPTI's when it can. auto: on, except on NCCL 2.31.x, where they slow small collectives (NVIDIA/nccl issue 2355); 1: on everywhere; 0: off."},
     Kind::kString, &Config::nccl_kernel_ch},
    {{"TRAINTIME_SNAPSHOT_SEC", "0",
      "Write a snapshot of the rank file every N seconds (0 = only at exit)."},
     Kind::kU32, &Config::snapshot_sec, 0, kU32Max},
    {{"TRAINTIME_HANG_SEC", "300",
      "Seconds without progress (a collective in flight, or no step ended) after which the rank file is written once, marked as a suspected hang, and one line names what the rank waits in; the job is never touched (0 = off)."},
     Kind::kU32, &Config::hang_sec, 0, kU32Max},
    {{"TRAINTIME_NCCL_PROXY_STEPS", "auto",
      "NCCL's per-step network events (bytes and state of each step, through its profiler "
      "plugin), for the hang report's progress per channel and peer: auto (on for the next 512 "
      "collectives once a rank is suspected: a collective in flight past half of "
      "TRAINTIME_HANG_SEC, or one that took more than 4 times, and 1 ms beyond, the median of its "
      "op's recent durations of that size on its communicator, as when the rank waits for a "
      "straggler), on (always; costs the proxy thread a few events per step) or off."},
     Kind::kProxySteps, &Config::nccl_proxy_steps},
    {{"TRAINTIME_NVML", "1",
      "0 turns GPU health sampling off (SM and memory clocks, power, temperature, clock-event "
      "reasons, PCIe link, memory used, read from libnvidia-ml.so.1 on a thread of its own once "
      "the process uses CUDA)."},
     Kind::kBool, &Config::nvml},
    {{"TRAINTIME_NVML_INTERVAL_MS", "100",
      "Milliseconds between two GPU health samples (10 to 60000)."},
     Kind::kU32, &Config::nvml_interval_ms, 10, 60000},
    {{"TRAINTIME_TRACE", "0",
      "1 also records a capped timeline of every kernel (for Perfetto export)."},
     Kind::kBool, &Config::trace},
    {{"TRAINTIME_TRACE_MAX_EVENTS", "1000000",
      "Maximum events kept by TRAINTIME_TRACE=1 (1 to 1000000000)."},
     Kind::kU64, &Config::trace_max_events, 1, 1000000000},
    {{"TRAINTIME_STEP_DETAIL", "64", "Per-step breakdown rows kept in the rank file (0 to 1000000)."},
     Kind::kU32, &Config::step_detail, 0, 1000000},
    {{"TRAINTIME_STEPS", "auto",
      "Where steps come from: auto (a step marker when the program has one, else steps found "
      "from the repeating launch sequence), marker (markers only) or off (no steps)."},
     Kind::kSteps, &Config::steps},
    {{"TRAINTIME_STEP_ANCHOR", "",
      "A kernel name (or part of one) or a NCCL op (AllReduce, ...) that runs once per step: "
      "with no marker, a step ends at each of its launches instead of the searched period."},
     Kind::kString, &Config::step_anchor},
    {{"TRAINTIME_TOP_KERNELS", "10",
      "Kernels listed by GPU time in each region's top_kernels and in the rank's own (every "
      "region and unannotated work together), 1 to 65536."},
     Kind::kU32, &Config::top_kernels, 1, 65536},
    {{"TRAINTIME_CATEGORY_RULES", "",
      "Extra name rules tried before the built-in ones, e.g. "
      "\"forward=fwd,encode;io=prefetch,loader\"."},
     Kind::kCategoryRules, &Config::category_rules},
    {{"TRAINTIME_NVTX_DOMAINS", "*,-NCCL",
      "NVTX domains whose ranges become regions: comma-separated names, '-' before one leaves "
      "it out, '*' is every domain, 'default' the domain-less calls; the last entry naming a "
      "domain decides."},
     Kind::kNvtxDomains, &Config::nvtx_domains},
    {{"TRAINTIME_BUFFER_MB", "2",
      "Upper bound on one CUPTI activity buffer in MiB (1 to 1024). Buffers are at most 176 KiB "
      "in any case: they are sized together with the 1 MiB correlation table so that every "
      "buffer arrives before the table could lose a launch, so this setting no longer changes "
      "them."},
     Kind::kU32, &Config::buffer_mb, 1, 1024},
    {{"TRAINTIME_BUFFER_COUNT", "64",
      "Maximum number of CUPTI activity buffers in the pool (1 to 65536)."},
     Kind::kU32, &Config::buffer_count, 1, 65536},
    {{"TRAINTIME_RECORD_FIXTURE", "",
      "Directory to record raw CUPTI callbacks and activity buffers into, for replay tests."},
     Kind::kString, &Config::record_fixture},
    {{"TRAINTIME_PRINT_EVERY", "0",
      "Rank 0 prints one 'traintime:' line every N steps (step time, breakdown, samples/s, "
      "TFLOP/s; 0 = off)."},
     Kind::kU32, &Config::print_every, 0, kU32Max},
    {{"TRAINTIME_PROMETHEUS_FILE", "",
      "File the live metrics are written to in the Prometheus text format, for node_exporter's "
      "textfile collector ('%r' becomes the rank, zero-padded as in rank file names: 00003), every "
      "TRAINTIME_SNAPSHOT_SEC seconds (10 if "
      "unset) and at exit."},
     Kind::kString, &Config::prometheus_file},
    {{"TRAINTIME_FLOPS_PER_TOKEN", "0",
      "The model's FLOPs per token (forward and backward, e.g. 6 x parameters), for TFLOP/s and "
      "MFU; 0 = not given."},
     Kind::kDouble, &Config::flops_per_token},
    {{"TRAINTIME_PEAK_TFLOPS", "0",
      "Peak TFLOP/s of one GPU for MFU; 0 = from the table of known GPUs (docs/metrics.md)."},
     Kind::kDouble, &Config::peak_tflops},
    {{"TRAINTIME_DTYPE", "bf16",
      "Which peak of the table MFU is measured against: bf16, fp16, fp8, tf32 or fp32."},
     Kind::kDtype, &Config::dtype},
};

using ascii::lower;
using ascii::trim;

std::optional<bool> parse_bool(std::string_view text) {
  const std::string v = lower(trim(text));
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  return std::nullopt;
}

std::optional<uint64_t> parse_uint(std::string_view text, uint64_t min, uint64_t max) {
  text = trim(text);
  if (text.empty()) return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  if (value < min || value > max) return std::nullopt;
  return value;
}

std::optional<double> parse_double(std::string_view text) {
  // A plain decimal ("1.5", "2e12"): digits, one point, an exponent. strtod_l in the C locale,
  // so the application's locale cannot change what "1.5" means. (Not std::from_chars: its
  // libstdc++ implementation needs libm's fesetround, and libm would then be loaded into every
  // process the preload starts in.)
  text = trim(text);
  if (text.empty() || text.size() > 64 || text[0] == '+') return std::nullopt;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
      return std::nullopt;
  }
  static const locale_t c_locale = newlocale(LC_ALL_MASK, "C", locale_t{});
  if (c_locale == locale_t{}) return std::nullopt;
  char buf[65];
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  char* end = nullptr;
  const int saved_errno = errno;
  errno = 0;
  const double d = strtod_l(buf, &end, c_locale);
  const bool range_error = errno == ERANGE;
  errno = saved_errno;
  if (end != buf + text.size() || range_error || !std::isfinite(d) || d < 0) return std::nullopt;
  return d;
}

std::string describe_default(const ConfigVar& var) {
  return *var.default_text ? std::string(var.default_text) : std::string("\"\"");
}

std::string warning(const ConfigVar& var, std::string_view value, const std::string& expected) {
  return std::string(var.name) + "=\"" + std::string(value) + "\" is not " + expected +
         "; using the default " + describe_default(var);
}

std::string integer_expectation(const Row& row) {
  const uint64_t type_max = row.kind == Kind::kU32 ? kU32Max : kU64Max;
  if (row.min == 0 && row.max == type_max) return "a non-negative integer";
  return "an integer in [" + std::to_string(row.min) + ", " + std::to_string(row.max) + "]";
}

// Returns the warning for a bad value, or "" after storing a good one in `cfg`.
std::string apply(const Row& row, std::string_view value, Config& cfg) {
  switch (row.kind) {
    case Kind::kString:
      cfg.*std::get<StringField>(row.field) = std::string(value);
      return "";
    case Kind::kBool: {
      const std::optional<bool> b = parse_bool(value);
      if (!b) return warning(row.var, value, "a boolean (1/0, true/false, yes/no, on/off)");
      cfg.*std::get<BoolField>(row.field) = *b;
      return "";
    }
    case Kind::kU32:
    case Kind::kU64: {
      const std::optional<uint64_t> n = parse_uint(value, row.min, row.max);
      if (!n) return warning(row.var, value, integer_expectation(row));
      if (row.kind == Kind::kU32)
        cfg.*std::get<U32Field>(row.field) = static_cast<uint32_t>(*n);
      else
        cfg.*std::get<U64Field>(row.field) = *n;
      return "";
    }
    case Kind::kDouble: {
      const std::optional<double> d = parse_double(value);
      if (!d) return warning(row.var, value, "a non-negative number");
      cfg.*std::get<DoubleField>(row.field) = *d;
      return "";
    }
    case Kind::kDtype: {
      const std::string v = lower(trim(value));
      if (!is_peak_dtype(v)) return warning(row.var, value, "one of bf16, fp16, fp8, tf32, fp32");
      cfg.*std::get<StringField>(row.field) = v;
      return "";
    }
    case Kind::kProxySteps: {
      const std::string v = lower(trim(value));
      if (v != "auto" && v != "on" && v != "off") return warning(row.var, value, "one of auto, on, off");
      cfg.*std::get<StringField>(row.field) = v;
      return "";
    }
    case Kind::kSteps: {
      const std::string v = lower(trim(value));
      if (v != "auto" && v != "marker" && v != "off") return warning(row.var, value, "one of auto, marker, off");
      cfg.*std::get<StringField>(row.field) = v;
      return "";
    }
    case Kind::kLogLevel: {
      const std::string v = lower(trim(value));
      if (std::find(kLogLevelNames.begin(), kLogLevelNames.end(), v) == kLogLevelNames.end())
        return warning(row.var, value, "one of trace, debug, info, warn, error, off");
      cfg.*std::get<StringField>(row.field) = v;
      return "";
    }
    case Kind::kNvtxDomains: {
      std::string error;
      NvtxDomainFilter filter;
      if (!NvtxDomainFilter::parse(value, &filter, &error))
        return warning(row.var, value, "a domain list such as \"*,-NCCL\" (" + error + ")");
      cfg.*std::get<StringField>(row.field) = std::string(value);
      return "";
    }
    case Kind::kCategoryRules: {
      std::string error;
      if (!CategoryRules::parse(value, &error))
        return warning(row.var, value, "a valid rule list (" + error + ")");
      cfg.*std::get<StringField>(row.field) = std::string(value);
      return "";
    }
  }
  return "";
}

// Levenshtein distance, for "did you mean": names are short, so the quadratic table is fine.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// TRAINTIME_* names that are not settings of the library but are still the project's own: the
// job id and the root process's pid the library hands to its child processes, and the build and
// test scripts' variables.
constexpr std::string_view kOtherProjectVars[] = {
    "TRAINTIME_JOB_ID", "TRAINTIME_ROOT_PID", "TRAINTIME_BUILD_DIR", "TRAINTIME_JOBS", "TRAINTIME_TEST_JOBS",
    "TRAINTIME_TEST_CHROMIUM", "TRAINTIME_CI", "TRAINTIME_FUZZ_SECONDS", "TRAINTIME_PYENV_CACHE", "TRAINTIME_ZIG"};

}  // namespace

std::vector<std::string> unknown_variable_warnings(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  constexpr std::string_view kPrefix = "TRAINTIME_";
  for (const std::string& name : names) {
    if (name.compare(0, kPrefix.size(), kPrefix) != 0) continue;
    bool known = std::find(std::begin(kOtherProjectVars), std::end(kOtherProjectVars), name) !=
                 std::end(kOtherProjectVars);
    const char* nearest = nullptr;
    std::size_t best = std::numeric_limits<std::size_t>::max();
    for (const Row& row : kRows) {
      if (name == row.var.name) known = true;
      const std::size_t d = edit_distance(name, row.var.name);
      if (d < best) {
        best = d;
        nearest = row.var.name;
      }
    }
    if (known) continue;
    out.push_back(name + " is not a traintime variable and is ignored; did you mean " + nearest +
                  "? (README: Configuration lists them all)");
  }
  return out;
}

const std::vector<ConfigVar>& config_vars() {
  static const std::vector<ConfigVar> vars = [] {
    std::vector<ConfigVar> v;
    for (const Row& r : kRows) v.push_back(r.var);
    return v;
  }();
  return vars;
}

Config parse_config(const EnvLookup& env, std::vector<std::string>& warnings) {
  Config cfg;
  for (const Row& row : kRows) {
    const char* raw = env ? env(row.var.name) : nullptr;
    if (raw == nullptr || *raw == '\0') continue;
    std::string w = apply(row, raw, cfg);
    if (!w.empty()) warnings.push_back(std::move(w));
  }
  return cfg;
}

}  // namespace traintime::core
