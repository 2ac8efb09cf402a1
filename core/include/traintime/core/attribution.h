// The attribution rules of DESIGN §4 as one pure function: every GPU activity gets exactly one
// category. Region path and step come straight from the LaunchContext the launch callback made.
#pragma once

#include "traintime/core/activity.h"
#include "traintime/core/category.h"

namespace traintime::core {

// Category of one GPU activity (kernel, memcpy or memset), first matching rule:
//  1. NCCL work → kComm: launched inside an interposed NCCL call (ctx.comm.op != kNone), or a
//     kernel whose name is a NCCL device kernel (is_nccl_kernel, the fallback when NCCL is not
//     interposable). NCCL wins over every region, io included.
//  2. A region is open (ctx.path != kNoPath) → region_category, the category of ctx.path
//     (an io region gives kIo: rule 3 of DESIGN §4 is simply the region's own category).
//     ctx.path is the innermost region open on the launching thread; when that thread had none,
//     the runtime already put the innermost region of the thread that calls tt_step there
//     (PyTorch launches backward kernels from autograd threads), and for CUDA-graph kernels the
//     region open when the node was captured, else the graph launch's. This function sees only
//     the result, so the fallback order lives in one place (the launch callback).
//  3. Nothing open anywhere (ctx.path == kNoPath) → kUnattributed; region_category is ignored.
Category attribute(const GpuActivity& a, const LaunchContext& ctx, Category region_category);

// The same rules when the caller already knows whether the activity is a NCCL kernel by name
// (the aggregator caches that per interned kernel name instead of parsing every record).
constexpr Category attribute(bool nccl_kernel_name, const LaunchContext& ctx,
                             Category region_category) {
  if (ctx.comm.op != CommOp::kNone || nccl_kernel_name) return Category::kComm;
  if (ctx.path == kNoPath) return Category::kUnattributed;
  return region_category;
}

}  // namespace traintime::core
