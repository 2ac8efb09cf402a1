#include "traintime/core/peak_flops.h"

#include <algorithm>
#include <cctype>

namespace traintime::core {

bool is_peak_dtype(std::string_view dtype) {
  return dtype == "bf16" || dtype == "fp16" || dtype == "fp8" || dtype == "tf32" ||
         dtype == "fp32";
}

const std::vector<PeakGpu>& peak_table() {
  // NVIDIA datasheets, dense (the datasheets' "with sparsity" figures halved). Leaked: the rank
  // file written from an exit handler reads it after static destructors may have run.
  static const auto* table = new std::vector<PeakGpu>{
      // label       tokens                  bf16    fp16    fp8     tf32    fp32
      {"GH200",      {"GH200", nullptr},    989.5, 989.5, 1979 , 494.5, 67},
      {"H200 NVL",   {"H200", "NVL"},       835.5, 835.5, 1670.5, 417.5, 60},
      {"H200",       {"H200", nullptr},     989.5, 989.5, 1979 , 494.5, 67},
      {"H100 NVL",   {"H100", "NVL"},       835.5, 835.5, 1670.5, 417.5, 60},
      {"H100 PCIe",  {"H100", "PCIE"},      756  , 756  , 1513 , 378  , 51},
      {"H100 SXM",   {"H100", nullptr},     989.5, 989.5, 1979 , 494.5, 67},
      {"B200",       {"B200", nullptr},     2250 , 2250 , 4500 , 1125 , 75},
      {"A100",       {"A100", nullptr},     312  , 312  , 0    , 156  , 19.5},
      {"A800",       {"A800", nullptr},     312  , 312  , 0    , 156  , 19.5},
      {"L40S",       {"L40S", nullptr},     362  , 362  , 733  , 183  , 91.6},
      {"L40",        {"L40", nullptr},      181  , 181  , 362  , 90.5 , 90.5},
      {"L4",         {"L4", nullptr},       121  , 121  , 242.5, 60   , 30.3},
      {"A40",        {"A40", nullptr},      149.7, 149.7, 0    , 74.8 , 37.4},
      {"A10",        {"A10", nullptr},      125  , 125  , 0    , 62.5 , 31.2},
      {"V100 PCIe",  {"V100", "PCIE"},      0    , 112  , 0    , 0    , 14},
      {"V100 SXM",   {"V100", nullptr},     0    , 125  , 0    , 0    , 15.7},
  };
  return *table;
}

PeakLookup lookup_peak_tflops(std::string_view device_name, std::string_view dtype) {
  std::vector<std::string> tokens;
  std::string cur;
  for (char c : device_name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      cur += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    } else if (!cur.empty()) {
      tokens.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) tokens.push_back(std::move(cur));
  PeakLookup out;
  for (const PeakGpu& row : peak_table()) {
    const bool all = std::all_of(row.tokens.begin(), row.tokens.end(), [&](const char* t) {
      return t == nullptr || std::find(tokens.begin(), tokens.end(), t) != tokens.end();
    });
    if (!all) continue;
    out.gpu = row.label;
    if (dtype == "bf16") out.tflops = row.bf16;
    else if (dtype == "fp16") out.tflops = row.fp16;
    else if (dtype == "fp8") out.tflops = row.fp8;
    else if (dtype == "tf32") out.tflops = row.tf32;
    else if (dtype == "fp32") out.tflops = row.fp32;
    return out;
  }
  return out;
}

Peak resolve_peak(double configured, std::string_view device_name, std::string_view dtype) {
  Peak p;
  if (configured > 0) {
    p.tflops = configured;
    p.source = "TRAINTIME_PEAK_TFLOPS";
    return p;
  }
  if (device_name.empty()) {
    p.source = "no GPU name known (set TRAINTIME_PEAK_TFLOPS)";
    return p;
  }
  const PeakLookup l = lookup_peak_tflops(device_name, dtype);
  if (l.gpu.empty()) {
    p.source = std::string("GPU \"") + std::string(device_name) +
               "\" is not in the table (set TRAINTIME_PEAK_TFLOPS)";
  } else if (l.tflops <= 0) {
    p.source = "table: " + l.gpu + " has no " + std::string(dtype) + " figure";
  } else {
    p.tflops = l.tflops;
    p.source = "table: " + l.gpu + ", " + std::string(dtype);
  }
  return p;
}

}  // namespace traintime::core
