// Config parsing: one typed table, good values land in the right field, each bad value gets
// exactly one warning naming the variable, the value and the default kept.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "traintime/core/config.h"

using traintime::core::Config;
using traintime::core::config_vars;
using traintime::core::EnvLookup;
using traintime::core::parse_config;
using traintime::core::ConfigVar;
using traintime::core::unknown_variable_warnings;

namespace {

EnvLookup env_of(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

Config parse(const std::map<std::string, std::string>& vars, std::vector<std::string>& warnings) {
  return parse_config(env_of(vars), warnings);
}

bool same(const Config& a, const Config& b) {
  return a.output_dir == b.output_dir && a.disable == b.disable && a.log_level == b.log_level &&
         a.warmup_steps == b.warmup_steps && a.cupti == b.cupti && a.cupti_lib == b.cupti_lib &&
         a.nccl == b.nccl && a.nccl_kernel_ch == b.nccl_kernel_ch && a.snapshot_sec == b.snapshot_sec && a.trace == b.trace &&
         a.trace_max_events == b.trace_max_events && a.step_detail == b.step_detail && a.top_kernels == b.top_kernels &&
         a.category_rules == b.category_rules && a.buffer_mb == b.buffer_mb &&
         a.buffer_count == b.buffer_count && a.nvml == b.nvml &&
         a.nvml_interval_ms == b.nvml_interval_ms && a.steps == b.steps && a.step_anchor == b.step_anchor &&
         a.nccl_proxy_steps == b.nccl_proxy_steps;
}

}  // namespace

TEST_CASE("config with no variables set is all defaults and warns about nothing", "[config]") {
  std::vector<std::string> warnings;
  const Config c = parse({}, warnings);
  CHECK(warnings.empty());
  CHECK(c.output_dir == "traintime-out");
  CHECK_FALSE(c.disable);
  CHECK(c.log_level == "warn");
  CHECK(c.warmup_steps == 2);
  CHECK(c.cupti);
  CHECK(c.cupti_lib.empty());
  CHECK(c.nccl);
  CHECK(c.snapshot_sec == 0);
  CHECK(c.hang_sec == 300);
  CHECK(c.nvml);
  CHECK(c.nvml_interval_ms == 100);
  CHECK_FALSE(c.trace);
  CHECK(c.trace_max_events == 1000000);
  CHECK(c.step_detail == 64);
  CHECK(c.category_rules.empty());
  CHECK(c.buffer_mb == 2);
  CHECK(c.buffer_count == 64);
}

TEST_CASE("config table's default texts mean the same as the struct defaults", "[config]") {
  // Feeding every documented default back in must change nothing: the README cannot lie.
  std::map<std::string, std::string> vars;
  for (const auto& v : config_vars()) vars[v.name] = v.default_text;
  std::vector<std::string> warnings;
  CHECK(same(parse(vars, warnings), Config{}));
  CHECK(warnings.empty());
}

TEST_CASE("config table lists every variable once, with a doc string, in README order", "[config]") {
  const std::vector<std::string> expected = {
      "TRAINTIME_OUTPUT",         "TRAINTIME_DISABLE",          "TRAINTIME_LOG_LEVEL",
      "TRAINTIME_WARMUP_STEPS",   "TRAINTIME_CUPTI",            "TRAINTIME_CUPTI_LIB",
      "TRAINTIME_NCCL",           "TRAINTIME_NCCL_KERNEL_CH",   "TRAINTIME_SNAPSHOT_SEC",     "TRAINTIME_HANG_SEC",
      "TRAINTIME_NCCL_PROXY_STEPS",
      "TRAINTIME_NVML",           "TRAINTIME_NVML_INTERVAL_MS", "TRAINTIME_TRACE",
      "TRAINTIME_TRACE_MAX_EVENTS", "TRAINTIME_STEP_DETAIL",    "TRAINTIME_STEPS",
      "TRAINTIME_STEP_ANCHOR",    "TRAINTIME_TOP_KERNELS",  "TRAINTIME_CATEGORY_RULES",
      "TRAINTIME_NVTX_DOMAINS",   "TRAINTIME_BUFFER_MB",      "TRAINTIME_BUFFER_COUNT",     "TRAINTIME_RECORD_FIXTURE",
      "TRAINTIME_PRINT_EVERY",    "TRAINTIME_PROMETHEUS_FILE", "TRAINTIME_FLOPS_PER_TOKEN",
      "TRAINTIME_PEAK_TFLOPS",    "TRAINTIME_DTYPE"};
  std::vector<std::string> names;
  for (const auto& v : config_vars()) {
    names.push_back(v.name);
    CHECK(std::string(v.doc).size() > 10);
  }
  CHECK(names == expected);
}

TEST_CASE("config reads good values into their fields", "[config]") {
  std::vector<std::string> warnings;
  const Config c = parse({{"TRAINTIME_OUTPUT", "/tmp/out dir"},
                          {"TRAINTIME_DISABLE", "YES"},
                          {"TRAINTIME_LOG_LEVEL", "Debug"},
                          {"TRAINTIME_WARMUP_STEPS", "0"},
                          {"TRAINTIME_CUPTI", "off"},
                          {"TRAINTIME_CUPTI_LIB", "/opt/cuda/lib64/libcupti.so.13"},
                          {"TRAINTIME_NCCL", "False"},
                          {"TRAINTIME_SNAPSHOT_SEC", " 30 "},
                          {"TRAINTIME_HANG_SEC", "0"},
                          {"TRAINTIME_NVML", "0"},
                          {"TRAINTIME_NVML_INTERVAL_MS", "250"},
                          {"TRAINTIME_TRACE", "on"},
                          {"TRAINTIME_TRACE_MAX_EVENTS", "5000000"},
                          {"TRAINTIME_STEP_DETAIL", "1000"},
                          {"TRAINTIME_TOP_KERNELS", "500"},
                          {"TRAINTIME_CATEGORY_RULES", "io=prefetch"},
                          {"TRAINTIME_BUFFER_MB", "32"},
                          {"TRAINTIME_BUFFER_COUNT", "128"}},
                         warnings);
  CHECK(warnings.empty());
  CHECK(c.output_dir == "/tmp/out dir");
  CHECK(c.disable);
  CHECK(c.log_level == "debug");
  CHECK(c.warmup_steps == 0);
  CHECK_FALSE(c.cupti);
  CHECK(c.cupti_lib == "/opt/cuda/lib64/libcupti.so.13");
  CHECK_FALSE(c.nccl);
  CHECK(c.snapshot_sec == 30);
  CHECK(c.hang_sec == 0);
  CHECK_FALSE(c.nvml);
  CHECK(c.nvml_interval_ms == 250);
  CHECK(c.trace);
  CHECK(c.trace_max_events == 5000000);
  CHECK(c.step_detail == 1000);
  CHECK(c.top_kernels == 500);
  CHECK(c.category_rules == "io=prefetch");
  CHECK(c.buffer_mb == 32);
  CHECK(c.buffer_count == 128);
}

TEST_CASE("config reads the live-metrics and MFU variables", "[config]") {
  std::vector<std::string> warnings;
  const Config c = parse({{"TRAINTIME_PRINT_EVERY", "50"},
                          {"TRAINTIME_PROMETHEUS_FILE", "/var/lib/node_exporter/tt-%r.prom"},
                          {"TRAINTIME_FLOPS_PER_TOKEN", "4.2e10"},
                          {"TRAINTIME_PEAK_TFLOPS", " 989.5 "},
                          {"TRAINTIME_DTYPE", "FP8"}},
                         warnings);
  CHECK(warnings.empty());
  CHECK(c.print_every == 50);
  CHECK(c.prometheus_file == "/var/lib/node_exporter/tt-%r.prom");
  CHECK(c.flops_per_token == 4.2e10);
  CHECK(c.peak_tflops == 989.5);
  CHECK(c.dtype == "fp8");
  const Config d = parse({}, warnings);
  CHECK(d.print_every == 0);
  CHECK(d.prometheus_file.empty());
  CHECK(d.flops_per_token == 0);
  CHECK(d.peak_tflops == 0);
  CHECK(d.dtype == "bf16");
}

TEST_CASE("config reads TRAINTIME_STEPS and TRAINTIME_STEP_ANCHOR, refusing an unknown mode", "[config]") {
  std::vector<std::string> warnings;
  Config c = parse({{"TRAINTIME_STEPS", " Marker "}, {"TRAINTIME_STEP_ANCHOR", "adam_kernel"}}, warnings);
  CHECK(warnings.empty());
  CHECK(c.steps == "marker");
  CHECK(c.step_anchor == "adam_kernel");
  CHECK(Config{}.steps == "auto");
  c = parse({{"TRAINTIME_STEPS", "detect"}}, warnings);
  CHECK(c.steps == "auto");
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("TRAINTIME_STEPS") != std::string::npos);
  CHECK(warnings[0].find("detect") != std::string::npos);
  CHECK(warnings[0].find("auto") != std::string::npos);
}

TEST_CASE("config reads TRAINTIME_NCCL_PROXY_STEPS, refusing an unknown mode", "[config]") {
  std::vector<std::string> warnings;
  CHECK(Config{}.nccl_proxy_steps == "auto");
  Config c = parse({{"TRAINTIME_NCCL_PROXY_STEPS", " ON "}}, warnings);
  CHECK(warnings.empty());
  CHECK(c.nccl_proxy_steps == "on");
  c = parse({{"TRAINTIME_NCCL_PROXY_STEPS", "off"}}, warnings);
  CHECK(c.nccl_proxy_steps == "off");
  c = parse({{"TRAINTIME_NCCL_PROXY_STEPS", "always"}}, warnings);
  CHECK(c.nccl_proxy_steps == "auto");
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("TRAINTIME_NCCL_PROXY_STEPS") != std::string::npos);
  CHECK(warnings[0].find("always") != std::string::npos);
}

TEST_CASE("config rejects bad numbers and dtypes, naming the variable and the default", "[config]") {
  for (const char* bad : {"-1", "abc", "1e400", "nan", "inf", "1,5", "2.5x"}) {
    std::vector<std::string> warnings;
    const Config c = parse({{"TRAINTIME_PEAK_TFLOPS", bad}}, warnings);
    INFO(bad);
    CHECK(c.peak_tflops == 0);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0] == std::string("TRAINTIME_PEAK_TFLOPS=\"") + bad +
                             "\" is not a non-negative number; using the default 0");
  }
  std::vector<std::string> warnings;
  const Config c = parse({{"TRAINTIME_DTYPE", "int4"}}, warnings);
  CHECK(c.dtype == "bf16");
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] == "TRAINTIME_DTYPE=\"int4\" is not one of bf16, fp16, fp8, tf32, fp32; "
                       "using the default bf16");
}

TEST_CASE("config accepts every boolean spelling in any case", "[config]") {
  for (const char* yes : {"1", "true", "TRUE", "yes", "Yes", "on", "ON"}) {
    std::vector<std::string> warnings;
    CHECK(parse({{"TRAINTIME_TRACE", yes}}, warnings).trace);
    CHECK(warnings.empty());
  }
  for (const char* no : {"0", "false", "False", "no", "NO", "off", "Off"}) {
    std::vector<std::string> warnings;
    CHECK_FALSE(parse({{"TRAINTIME_CUPTI", no}}, warnings).cupti);
    CHECK(warnings.empty());
  }
}

TEST_CASE("config warns once about a non-numeric integer, naming variable and default", "[config]") {
  std::vector<std::string> warnings;
  const Config c = parse({{"TRAINTIME_WARMUP_STEPS", "abc"}}, warnings);
  CHECK(c.warmup_steps == 2);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] ==
        "TRAINTIME_WARMUP_STEPS=\"abc\" is not a non-negative integer; using the default 2");
}

TEST_CASE("config rejects negative, signed, fractional and overflowing integers", "[config]") {
  for (const char* bad : {"-1", "+3", "2.5", "1e3", "99999999999", "0x10", "3 4"}) {
    std::vector<std::string> warnings;
    const Config c = parse({{"TRAINTIME_WARMUP_STEPS", bad}}, warnings);
    INFO(bad);
    CHECK(c.warmup_steps == 2);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("TRAINTIME_WARMUP_STEPS") != std::string::npos);
    CHECK(warnings[0].find(std::string("\"") + bad + "\"") != std::string::npos);
    CHECK(warnings[0].find("using the default 2") != std::string::npos);
  }
}

TEST_CASE("config range-checks bounded integers and says the range", "[config]") {
  std::vector<std::string> warnings;
  const Config c = parse({{"TRAINTIME_BUFFER_MB", "0"},
                          {"TRAINTIME_BUFFER_COUNT", "100000"},
                          {"TRAINTIME_TRACE_MAX_EVENTS", "5000000000"}},
                         warnings);
  CHECK(c.buffer_mb == 2);
  CHECK(c.buffer_count == 64);
  CHECK(c.trace_max_events == 1000000);
  REQUIRE(warnings.size() == 3);
  CHECK(warnings[0] ==
        "TRAINTIME_TRACE_MAX_EVENTS=\"5000000000\" is not an integer in [1, 1000000000]; using "
        "the default 1000000");
  CHECK(warnings[1] == "TRAINTIME_BUFFER_MB=\"0\" is not an integer in [1, 1024]; using the "
                       "default 2");
  CHECK(warnings[2].find("TRAINTIME_BUFFER_COUNT=\"100000\"") == 0);
  CHECK(warnings[2].find("using the default 64") != std::string::npos);
}

TEST_CASE("config range-checks the GPU health interval, naming the variable", "[config]") {
  std::vector<std::string> warnings;
  const Config c = parse({{"TRAINTIME_NVML_INTERVAL_MS", "5"}, {"TRAINTIME_NVML", "sometimes"}}, warnings);
  CHECK(c.nvml_interval_ms == 100);
  CHECK(c.nvml);
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0].find("TRAINTIME_NVML=\"sometimes\"") == 0);
  CHECK(warnings[1] == "TRAINTIME_NVML_INTERVAL_MS=\"5\" is not an integer in [10, 60000]; using the "
                       "default 100");
}

TEST_CASE("config warns about a bad boolean and keeps its default", "[config]") {
  std::vector<std::string> warnings;
  const Config c = parse({{"TRAINTIME_CUPTI", "maybe"}, {"TRAINTIME_DISABLE", "2"}}, warnings);
  CHECK(c.cupti);
  CHECK_FALSE(c.disable);
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0].find("TRAINTIME_DISABLE=\"2\" is not a boolean") == 0);
  CHECK(warnings[0].find("using the default 0") != std::string::npos);
  CHECK(warnings[1].find("TRAINTIME_CUPTI=\"maybe\" is not a boolean") == 0);
  CHECK(warnings[1].find("using the default 1") != std::string::npos);
}

TEST_CASE("config warns about an unknown log level", "[config]") {
  std::vector<std::string> warnings;
  const Config c = parse({{"TRAINTIME_LOG_LEVEL", "verbose"}}, warnings);
  CHECK(c.log_level == "warn");
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] == "TRAINTIME_LOG_LEVEL=\"verbose\" is not one of trace, debug, info, warn, "
                       "error, off; using the default warn");
}

TEST_CASE("config validates category rules by parsing them", "[config]") {
  std::vector<std::string> warnings;
  const Config c = parse({{"TRAINTIME_CATEGORY_RULES", "fwd"}}, warnings);
  CHECK(c.category_rules.empty());
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("TRAINTIME_CATEGORY_RULES=\"fwd\" is not a valid rule list") == 0);
  CHECK(warnings[0].find("no '='") != std::string::npos);
  CHECK(warnings[0].find("using the default \"\"") != std::string::npos);
}

TEST_CASE("config treats an empty value as unset", "[config]") {
  std::vector<std::string> warnings;
  const Config c = parse({{"TRAINTIME_OUTPUT", ""}, {"TRAINTIME_WARMUP_STEPS", ""}}, warnings);
  CHECK(warnings.empty());
  CHECK(c.output_dir == "traintime-out");
  CHECK(c.warmup_steps == 2);
}

TEST_CASE("config gives one warning per bad variable, not one per problem", "[config]") {
  std::vector<std::string> warnings;
  parse({{"TRAINTIME_WARMUP_STEPS", "x"}, {"TRAINTIME_TRACE", "y"}, {"TRAINTIME_NCCL", "1"}},
        warnings);
  CHECK(warnings.size() == 2);
}

TEST_CASE("a misspelled TRAINTIME_ variable is named with the nearest known one", "[config]") {
  const std::vector<std::string> w = unknown_variable_warnings(
      {"TRAINTIME_OUPUT", "TRAINTIME_SNAPSHOT_SECS", "TRAINTIME_OUTPUT", "TRAINTIME_JOB_ID",
       "PATH", "TRAINTIMEX"});
  REQUIRE(w.size() == 2);
  CHECK(w[0].find("TRAINTIME_OUPUT is not a traintime variable") == 0);
  CHECK(w[0].find("did you mean TRAINTIME_OUTPUT?") != std::string::npos);
  CHECK(w[1].find("TRAINTIME_SNAPSHOT_SECS is not a traintime variable") == 0);
  CHECK(w[1].find("did you mean TRAINTIME_SNAPSHOT_SEC?") != std::string::npos);
}

TEST_CASE("every variable of the table is known to the misspelling check", "[config]") {
  std::vector<std::string> names;
  for (const ConfigVar& v : config_vars()) names.emplace_back(v.name);
  CHECK(unknown_variable_warnings(names).empty());
}
