// One released libcupti (a PyPI wheel of CUPTI 12.x or 13.x, or the toolkit's 13.0), checked
// without a GPU. [headers]: the layout traintime decodes the release's records with matches the
// release's own headers (TT_CUPTI_PROBE, cupti_layout_probe.cpp). [release], where the library
// answers without a GPU: it reports the API version its release is known to report, the adapter finds a checked
// record layout for it, a sample buffer in that layout walks through the release's own
// cuptiActivityGetNextRecord and decodes field for field, and the launch callbacks are found by
// name in its callback table. Run once per release (CTest), the library named by TT_CUPTI_LIB and
// the expected version by TT_CUPTI_API (both from scripts/fetch-cupti-releases.py's table).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "callback_selection.h"
#include "client_mux.h"
#include "cupti_library.h"
#include "sample_buffer.h"

namespace tc = traintime::cupti;

namespace {

// The release's libcupti (TT_CUPTI_LIB), loaded once for the whole process as a profiled
// process loads it. Once used (cuptiGetTimestamp), CUPTI keeps thread-local state, and a
// library with TLS unloaded and loaded again leaves a stale dynamic-TLS entry that
// LeakSanitizer's exit scan crashes on (ASan build, test cases in file order).
struct Release {
  tc::CuptiLibrary lib;
  bool loaded = false;
  std::string why;
};

Release& release() {
  static Release* r = [] {
    auto* x = new Release;
    if (const char* path = std::getenv("TT_CUPTI_LIB"))
      x->loaded = x->lib.load(path, &x->why);
    else
      x->why = "TT_CUPTI_LIB is not set";
    return x;
  }();
  return *r;
}

}  // namespace

TEST_CASE("a released libcupti decodes through its own walker and names its launch callbacks",
          "[release]") {
  const char* api = std::getenv("TT_CUPTI_API");
  REQUIRE(api != nullptr);
  INFO(release().why);
  REQUIRE(release().loaded);
  const tc::CuptiLibrary& lib = release().lib;
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
  std::set<std::string> launches, memory, others;
  for (const auto& s : selected)
    (s.role == tc::ApiRole::kKernelLaunch ? launches : s.role == tc::ApiRole::kMemory ? memory : others)
        .insert(base(s.name));
  for (const char* name : {"cudaLaunchKernel", "cudaLaunchKernel_ptsz", "cuLaunchKernel",
                           "cuLaunchKernelEx", "cudaLaunchCooperativeKernel"})
    CHECK(launches.count(name) == 1);
  for (const char* name : {"cudaGraphLaunch", "cuGraphLaunch", "cudaMemcpyAsync", "cudaMemsetAsync"})
    CHECK(others.count(name) == 1);
  // Allocations: their memory records take the step of the call.
  for (const char* name : {"cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync", "cuMemAlloc", "cuMemFree"})
    CHECK((memory.count(name) == 1 || memory.count(std::string(name) + "_v2") == 1));
  for (const auto& s : selected) CHECK(base(s.name) != "cudaMemGetInfo");
  // CUDA's virtual memory calls, under the names this release gives them (the VMM ledger).
  std::map<std::string, tc::ApiRole> vmm;
  for (const auto& s : selected)
    if (tc::is_vmm_role(s.role)) vmm[s.name] = s.role;
  CHECK(vmm == std::map<std::string, tc::ApiRole>{{"cuMemCreate", tc::ApiRole::kVmmCreate},
                                                  {"cuMemRetainAllocationHandle", tc::ApiRole::kVmmRetain},
                                                  {"cuMemRelease", tc::ApiRole::kVmmRelease},
                                                  {"cuMemMap", tc::ApiRole::kVmmMap},
                                                  {"cuMemUnmap", tc::ApiRole::kVmmUnmap}});
}

namespace {

// The other client (torch.profiler's Kineto) as ClientMux sees it: small buffers of its own,
// collected when completed.
struct OtherClient {
  static constexpr size_t kBytes = 400;  // room for about two records: the copy must split
  std::vector<std::vector<uint64_t>> storage;
  std::vector<std::pair<uint8_t*, size_t>> completed;
};
OtherClient* g_client = nullptr;

void CUPTIAPI client_request(uint8_t** buffer, size_t* size, size_t* max_records) {
  g_client->storage.emplace_back(OtherClient::kBytes / sizeof(uint64_t));
  *buffer = reinterpret_cast<uint8_t*>(g_client->storage.back().data());
  *size = OtherClient::kBytes;
  *max_records = 0;
}

void CUPTIAPI client_complete(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  g_client->completed.emplace_back(buffer, valid);
}

template <class Kernel, class Memcpy>
void check_forwarding(const tc::CuptiLibrary& lib) {
  tc::testing::BufferBuilder b;
  b.add<CUpti_ActivityAPI>()->kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  uint32_t correlation = 0;
  for (int i = 0; i < 3; ++i) {
    auto* k = b.add<Kernel>();
    k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k->start = 1000 + 10 * i;
    k->end = 1005 + 10 * i;
    k->correlationId = ++correlation;
    auto* m = b.add<Memcpy>();
    m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m->start = 2000 + 10 * i;
    m->end = 2005 + 10 * i;
    m->correlationId = ++correlation;
    b.add<CUpti_ActivityMemset4>()->kind = CUPTI_ACTIVITY_KIND_MEMSET;
  }
  std::atomic<uint8_t> wanted[CUPTI_ACTIVITY_KIND_COUNT] = {};
  wanted[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] = 1;
  wanted[CUPTI_ACTIVITY_KIND_MEMCPY] = 1;
  OtherClient client;
  g_client = &client;
  tc::ClientSink sink{client_request, client_complete};
  const tc::ForwardCounts n = tc::forward_records(lib, b.data(), b.used, wanted, sink);
  // The last buffer stays the client's open one until it flushes (Kineto flushes only while it
  // holds a buffer CUPTI requested).
  const size_t before_flush = client.completed.size();
  CHECK(sink.open());
  CHECK(client.storage.size() == before_flush + 1);
  sink.hand_over();
  CHECK_FALSE(sink.open());
  g_client = nullptr;
  CHECK(n.copied == 6);
  CHECK(n.lost == 0);
  CHECK(client.completed.size() == before_flush + 1);
  CHECK(client.completed.size() > 1);  // split across the client's buffers at record boundaries
  // The client walks what it got with the same release's walker: the kernels and memcpys, in
  // order, with their fields intact, and nothing else.
  std::vector<uint32_t> seen;
  for (auto& [buffer, valid] : client.completed) {
    CUpti_Activity* r = nullptr;
    while (lib.api().cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
      REQUIRE((r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_MEMCPY));
      if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
        const auto* k = reinterpret_cast<const Kernel*>(r);
        CHECK(k->end - k->start == 5);
        seen.push_back(k->correlationId);
      } else {
        const auto* m = reinterpret_cast<const Memcpy*>(r);
        CHECK(m->end - m->start == 5);
        seen.push_back(m->correlationId);
      }
    }
  }
  CHECK(seen == std::vector<uint32_t>{1, 2, 3, 4, 5, 6});
}

}  // namespace

TEST_CASE("records forwarded to torch.profiler's buffers walk the same through the release's own walker",
          "[release]") {
  INFO(release().why);
  REQUIRE(release().loaded);
  const tc::CuptiLibrary& lib = release().lib;
  switch (lib.layout()) {
    case tc::RecordLayout::kCupti12Memcpy5:
      check_forwarding<CUpti_ActivityKernel9, CUpti_ActivityMemcpy5>(lib);
      break;
    case tc::RecordLayout::kCupti12Memcpy6:
      check_forwarding<CUpti_ActivityKernel9, CUpti_ActivityMemcpy6>(lib);
      break;
    case tc::RecordLayout::kCupti13_0:
      check_forwarding<CUpti_ActivityKernel10, CUpti_ActivityMemcpy6>(lib);
      break;
    case tc::RecordLayout::kCupti13_1:
      check_forwarding<tc::testing::Grown<CUpti_ActivityKernel10, 224>, CUpti_ActivityMemcpy6>(lib);
      break;
    case tc::RecordLayout::kCupti13_3:
      check_forwarding<tc::testing::Grown<CUpti_ActivityKernel10, 232>, CUpti_ActivityMemcpy6>(lib);
      break;
    case tc::RecordLayout::kCupti13_4:
      check_forwarding<tc::testing::Grown<CUpti_ActivityKernel10, 248>,
                       tc::testing::Grown<CUpti_ActivityMemcpy6, 112>>(lib);
      break;
    case tc::RecordLayout::kUnknown:
      FAIL("no checked layout for " << std::getenv("TT_CUPTI_LIB"));
  }
}

namespace {

// The probe's "name value" lines (cupti_layout_probe.cpp, built against the release's headers).
std::map<std::string, size_t> probe_release_headers(const char* probe) {
  std::map<std::string, size_t> out;
  FILE* p = popen(probe, "r");
  REQUIRE(p != nullptr);
  char name[64];
  size_t value = 0;
  while (std::fscanf(p, "%63s %zu", name, &value) == 2) out[name] = value;
  REQUIRE(pclose(p) == 0);
  return out;
}

// What traintime's decoder reads: through one struct per family of the toolkit's headers.
template <class S>
void expect_common(std::map<std::string, size_t>& want, const std::string& family) {
  want[family + ".kind"] = offsetof(S, kind);
  want[family + ".start"] = offsetof(S, start);
  want[family + ".end"] = offsetof(S, end);
  want[family + ".deviceId"] = offsetof(S, deviceId);
  want[family + ".streamId"] = offsetof(S, streamId);
  want[family + ".correlationId"] = offsetof(S, correlationId);
  want[family + ".graphId"] = offsetof(S, graphId);
  want[family + ".graphNodeId"] = offsetof(S, graphNodeId);
}

}  // namespace

// Where the release's libcupti answers without a GPU the cases above also walk its buffers; this
// one needs only its headers (CUPTI 13.2 on call into the driver for every function).
TEST_CASE("the layout traintime uses for a release matches that release's own headers", "[headers]") {
  const char* api = std::getenv("TT_CUPTI_API");
  const char* probe = std::getenv("TT_CUPTI_PROBE");
  REQUIRE(api != nullptr);
  REQUIRE(probe != nullptr);
  std::string why;
  const tc::RecordLayout layout = tc::layout_for_version(static_cast<uint32_t>(std::stoul(api)), &why);
  INFO("API " << api << ": " << why);
  REQUIRE(layout != tc::RecordLayout::kUnknown);
  std::map<std::string, size_t> got = probe_release_headers(probe);
  const tc::LayoutSizes sizes = tc::layout_sizes(layout);
  std::map<std::string, size_t> want;
  want["kernel.size"] = sizes.kernel;
  want["memcpy.size"] = sizes.memcpy;
  want["ptop.size"] = sizes.memcpy_ptop;
  want["memset.size"] = sizes.memset;
  expect_common<CUpti_ActivityKernel9>(want, "kernel");
  want["kernel.name"] = offsetof(CUpti_ActivityKernel9, name);
  want["kernel.gridX"] = offsetof(CUpti_ActivityKernel9, gridX);
  want["kernel.gridY"] = offsetof(CUpti_ActivityKernel9, gridY);
  want["kernel.gridZ"] = offsetof(CUpti_ActivityKernel9, gridZ);
  expect_common<CUpti_ActivityMemcpy5>(want, "memcpy");
  want["memcpy.copyKind"] = offsetof(CUpti_ActivityMemcpy5, copyKind);
  want["memcpy.bytes"] = offsetof(CUpti_ActivityMemcpy5, bytes);
  want["memcpy.runtimeCorrelationId"] = offsetof(CUpti_ActivityMemcpy5, runtimeCorrelationId);
  if (layout != tc::RecordLayout::kCupti12Memcpy5)
    want["memcpy.copyCount"] = offsetof(CUpti_ActivityMemcpy6, copyCount);
  expect_common<CUpti_ActivityMemcpyPtoP4>(want, "ptop");
  want["ptop.bytes"] = offsetof(CUpti_ActivityMemcpyPtoP4, bytes);
  expect_common<CUpti_ActivityMemset4>(want, "memset");
  want["memset.bytes"] = offsetof(CUpti_ActivityMemset4, bytes);
  // Memory records are read through Memory3 in every release (activity_decoder.h).
  want["memory.kind"] = offsetof(CUpti_ActivityMemory3, kind);
  want["memory.memoryOperationType"] = offsetof(CUpti_ActivityMemory3, memoryOperationType);
  want["memory.memoryKind"] = offsetof(CUpti_ActivityMemory3, memoryKind);
  want["memory.correlationId"] = offsetof(CUpti_ActivityMemory3, correlationId);
  want["memory.address"] = offsetof(CUpti_ActivityMemory3, address);
  want["memory.bytes"] = offsetof(CUpti_ActivityMemory3, bytes);
  want["memory.timestamp"] = offsetof(CUpti_ActivityMemory3, timestamp);
  want["memory.deviceId"] = offsetof(CUpti_ActivityMemory3, deviceId);
  for (const auto& [name, value] : want) {
    INFO(name << " in " << tc::layout_name(layout));
    REQUIRE(got.count(name) == 1);
    CHECK(got[name] == value);
  }
  CHECK(got.size() == want.size());
}

namespace {

decltype(&::cuptiGetTimestamp) g_cupti_now = nullptr;

// torch.profiler's TSC clock stand-in: 3 ticks per CUPTI nanosecond, offset 7.
uint64_t CUPTIAPI client_clock() {
  uint64_t t = 0;
  g_cupti_now(&t);
  return 3 * t + 7;
}

}  // namespace

TEST_CASE("records forwarded to a client with its own clock are moved to that clock", "[release]") {
  INFO(release().why);
  REQUIRE(release().loaded);
  const tc::CuptiLibrary& lib = release().lib;
  REQUIRE(lib.api().cuptiGetTimestamp != nullptr);
  g_cupti_now = lib.api().cuptiGetTimestamp;
  uint64_t before = 0;
  REQUIRE(g_cupti_now(&before) == CUPTI_SUCCESS);
  // The registration reading, a second before the records (exact: the clock is a function of CUPTI's).
  tc::ClientClock clock{client_clock, before - 1000000000, 3 * (before - 1000000000) + 7};
  tc::testing::BufferBuilder b;
  auto* api = b.add<CUpti_ActivityAPI>();
  api->kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  api->start = before - 500000;
  api->end = before - 400000;
  auto* m = b.add<CUpti_ActivityMemset4>();
  m->kind = CUPTI_ACTIVITY_KIND_MEMSET;
  m->start = before - 300000;
  m->end = before - 200000;
  auto* untimed = b.add<CUpti_ActivityMemset4>();
  untimed->kind = CUPTI_ACTIVITY_KIND_MEMSET;
  std::atomic<uint8_t> wanted[CUPTI_ACTIVITY_KIND_COUNT] = {};
  wanted[CUPTI_ACTIVITY_KIND_RUNTIME] = 1;
  wanted[CUPTI_ACTIVITY_KIND_MEMSET] = 1;
  OtherClient client;
  g_client = &client;
  tc::ClientSink sink{client_request, client_complete};
  const tc::ForwardCounts n = tc::forward_records(lib, b.data(), b.used, wanted, sink, &clock);
  sink.hand_over();
  g_client = nullptr;
  uint64_t after = 0;
  REQUIRE(g_cupti_now(&after) == CUPTI_SUCCESS);
  CHECK(n.copied == 3);
  // Each timestamp t becomes 3t + 7, late by at most 3 x the time the forward took to read both
  // clocks (its reading of the client's clock comes after its reading of CUPTI's).
  std::vector<std::pair<uint64_t, uint64_t>> got;  // (CUPTI time, converted)
  const uint64_t sent[] = {before - 500000, before - 400000, before - 300000, before - 200000, 0, 0};
  for (auto& [buffer, valid] : client.completed) {
    CUpti_Activity* r = nullptr;
    while (lib.api().cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
      if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
        const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(r);
        got.emplace_back(a->start, a->end);
      } else {
        const auto* s = reinterpret_cast<const CUpti_ActivityMemset4*>(r);
        got.emplace_back(s->start, s->end);
      }
    }
  }
  REQUIRE(got.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    for (int j = 0; j < 2; ++j) {
      const uint64_t t = sent[2 * i + j];
      const uint64_t c = j == 0 ? got[i].first : got[i].second;
      INFO("record " << i << (j == 0 ? " start " : " end ") << t);
      if (t == 0) {
        CHECK(c == 0);  // untimed stays untimed
      } else {
        CHECK(c >= 3 * t + 7);
        CHECK(c <= 3 * t + 7 + 3 * (after - before));
      }
    }
  }
}
