// Peak dense tensor TFLOP/s of common NVIDIA GPUs, for MFU (model FLOPs utilisation): achieved
// TFLOP/s / the peak of the rank's GPU at the training dtype. Figures are NVIDIA's datasheet
// numbers without structured sparsity; docs/metrics.md lists the same table (a unit test keeps the
// two equal). TRAINTIME_PEAK_TFLOPS overrides the table for GPUs it does not know.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace traintime::core {

// The dtypes the table has a column for: bf16, fp16, fp8, tf32, fp32.
bool is_peak_dtype(std::string_view dtype);

struct PeakGpu {
  const char* label;                   // "H100 SXM"
  std::array<const char*, 2> tokens;   // each one given must be a token of the device name
  double bf16, fp16, fp8, tf32, fp32;  // dense TFLOP/s; 0 = the GPU has no tensor path for it
};

// Most specific first ("H100 PCIe" before "H100").
const std::vector<PeakGpu>& peak_table();

struct PeakLookup {
  std::string gpu;    // the table row that matched ("" when none did)
  double tflops = 0;  // 0 when no row matched or the dtype has no figure for it
};

// Matches the CUDA device name ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB") on whole
// tokens, case-insensitively, against the table rows in order.
PeakLookup lookup_peak_tflops(std::string_view device_name, std::string_view dtype);

struct Peak {
  double tflops = 0;   // 0: unknown
  std::string source;  // "TRAINTIME_PEAK_TFLOPS", "table: H100 SXM, bf16", or why there is none
};
// The peak MFU is measured against: `configured` (TRAINTIME_PEAK_TFLOPS) when > 0, else the
// table's figure for the device at `dtype`.
Peak resolve_peak(double configured, std::string_view device_name, std::string_view dtype);

}  // namespace traintime::core
