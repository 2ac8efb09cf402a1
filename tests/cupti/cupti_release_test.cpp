// One released libcupti (a PyPI wheel of CUPTI 12.x, or the toolkit's 13.0), checked without a
// GPU: it reports the API version its release is known to report, the adapter finds a checked
// record layout for it, a sample buffer in that layout walks through the release's own
// cuptiActivityGetNextRecord and decodes field for field, and the launch callbacks are found by
// name in its callback table. Run once per release (CTest), the library named by TT_CUPTI_LIB and
// the expected version by TT_CUPTI_API (both from scripts/fetch-cupti-releases.py's table).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <cstdlib>
#include <set>
#include <string>

#include "callback_selection.h"
#include "cupti_library.h"
#include "sample_buffer.h"

namespace tc = traintime::cupti;

TEST_CASE("a released libcupti decodes through its own walker and names its launch callbacks",
          "[release]") {
  const char* path = std::getenv("TT_CUPTI_LIB");
  const char* api = std::getenv("TT_CUPTI_API");
  REQUIRE(path != nullptr);
  REQUIRE(api != nullptr);
  tc::CuptiLibrary lib;
  std::string why;
  INFO(path << ": " << why);
  REQUIRE(lib.load(path, &why));
  CHECK(lib.version() == std::stoul(api));
  REQUIRE(lib.layout() != tc::RecordLayout::kUnknown);
  tc::testing::check_sample(lib);

  const auto selected = tc::select_callbacks(
      [&](CUpti_CallbackDomain d, CUpti_CallbackId id) -> const char* {
        const char* n = nullptr;
        return lib.api().cuptiGetCallbackName(d, id, &n) == CUPTI_SUCCESS ? n : nullptr;
      },
      tc::RoleTable::kMaxCbid);
  // Runtime names carry the version that introduced them (cudaLaunchKernel_v7000): drop it.
  auto base = [](std::string n) {
    const auto v = n.rfind("_v");
    if (v != std::string::npos && v + 2 < n.size() &&
        n.find_first_not_of("0123456789", v + 2) == std::string::npos)
      n.resize(v);
    return n;
  };
  std::set<std::string> launches, others;
  for (const auto& s : selected)
    (s.role == tc::ApiRole::kKernelLaunch ? launches : others).insert(base(s.name));
  for (const char* name : {"cudaLaunchKernel", "cudaLaunchKernel_ptsz", "cuLaunchKernel",
                           "cuLaunchKernelEx", "cudaLaunchCooperativeKernel"})
    CHECK(launches.count(name) == 1);
  for (const char* name : {"cudaGraphLaunch", "cuGraphLaunch", "cudaMemcpyAsync", "cudaMemsetAsync"})
    CHECK(others.count(name) == 1);
  for (const auto& s : selected) CHECK(base(s.name) != "cudaMalloc");
}
