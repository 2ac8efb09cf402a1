#include "traintime/core/attribution.h"

#include "traintime/core/nccl_kernel_name.h"

namespace traintime::core {

Category attribute(const GpuActivity& a, const LaunchContext& ctx, Category region_category) {
  bool nccl_name = a.kind == ActivityKind::kKernel && !a.name.empty() && is_nccl_kernel(a.name);
  return attribute(nccl_name, ctx, region_category);
}

}  // namespace traintime::core
