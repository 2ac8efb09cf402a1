#include <catch2/catch.hpp>

#include "traintime/core/attribution.h"

using namespace traintime::core;

namespace {
GpuActivity kernel(std::string_view name) {
  GpuActivity a;
  a.kind = ActivityKind::kKernel;
  a.start_ns = 100;
  a.end_ns = 200;
  a.name = name;
  return a;
}
}  // namespace

TEST_CASE("attribution: kernel takes the category of the region open on the launching thread",
          "[attribution]") {
  LaunchContext ctx;
  ctx.path = 7;
  CHECK(attribute(kernel("gemm"), ctx, Category::kForward) == Category::kForward);
  CHECK(attribute(kernel("gemm"), ctx, Category::kBackward) == Category::kBackward);
  CHECK(attribute(kernel("adam"), ctx, Category::kOptimizer) == Category::kOptimizer);
}

TEST_CASE("attribution: fallback path resolved by the runtime is used like any region",
          "[attribution]") {
  // The launching thread had no region; the runtime put the tt_step thread's "backward" there.
  LaunchContext ctx;
  ctx.path = 3;
  CHECK(attribute(kernel("wgrad"), ctx, Category::kBackward) == Category::kBackward);
}

TEST_CASE("attribution: work in an io region is io", "[attribution]") {
  LaunchContext ctx;
  ctx.path = 2;
  GpuActivity copy;
  copy.kind = ActivityKind::kMemcpy;
  copy.copy_kind = CopyKind::kHtoD;
  CHECK(attribute(copy, ctx, Category::kIo) == Category::kIo);
  CHECK(attribute(kernel("decode"), ctx, Category::kIo) == Category::kIo);
}

TEST_CASE("attribution: nothing open is unattributed whatever the region category says",
          "[attribution]") {
  LaunchContext ctx;  // path kNoPath
  CHECK(attribute(kernel("gemm"), ctx, Category::kForward) == Category::kUnattributed);
  GpuActivity memset;
  memset.kind = ActivityKind::kMemset;
  CHECK(attribute(memset, ctx, Category::kOther) == Category::kUnattributed);
}

TEST_CASE("attribution: NCCL op of an interposed call wins over the region, io included",
          "[attribution]") {
  LaunchContext ctx;
  ctx.path = 5;
  ctx.comm.op = CommOp::kAllReduce;
  CHECK(attribute(kernel("some_kernel"), ctx, Category::kBackward) == Category::kComm);
  CHECK(attribute(kernel("some_kernel"), ctx, Category::kIo) == Category::kComm);
  ctx.path = kNoPath;
  CHECK(attribute(kernel("some_kernel"), ctx, Category::kOther) == Category::kComm);
  GpuActivity copy;
  copy.kind = ActivityKind::kMemcpy;
  CHECK(attribute(copy, ctx, Category::kIo) == Category::kComm);
}

TEST_CASE("attribution: a kernel named like NCCL is comm without interposition",
          "[attribution]") {
  LaunchContext ctx;
  ctx.path = 5;
  CHECK(attribute(kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL"), ctx, Category::kBackward) ==
        Category::kComm);
  CHECK(attribute(kernel("_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE"),
                  LaunchContext{}, Category::kOther) == Category::kComm);
  // Only kernels are judged by name: a memcpy carries no kernel name.
  GpuActivity copy;
  copy.kind = ActivityKind::kMemcpy;
  copy.name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
  CHECK(attribute(copy, ctx, Category::kBackward) == Category::kBackward);
  // A user kernel that mentions nccl in the middle is not NCCL.
  CHECK(attribute(kernel("my_ncclDevKernel_copy"), ctx, Category::kBackward) == Category::kBackward);
}

TEST_CASE("attribution: the cached-name overload follows the same rules", "[attribution]") {
  LaunchContext ctx;
  CHECK(attribute(true, ctx, Category::kForward) == Category::kComm);
  CHECK(attribute(false, ctx, Category::kForward) == Category::kUnattributed);
  ctx.path = 1;
  CHECK(attribute(false, ctx, Category::kOptimizer) == Category::kOptimizer);
}
