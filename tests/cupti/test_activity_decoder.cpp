// CUPTI records -> GpuActivity, walked with a real cuptiActivityGetNextRecord.
#include <catch2/catch.hpp>

#include <cupti.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "activity_decoder.h"
#include "cupti_library.h"
#include "sample_buffer.h"

using namespace traintime;
using traintime::cupti::CuptiLibrary;
using traintime::cupti::DecodedActivity;
using traintime::cupti::RecordLayout;
using traintime::cupti::testing::check_sample;

TEST_CASE("record layout is chosen by the loaded CUPTI's version; unknown versions are refused",
          "[decoder]") {
  std::string why;
  CHECK(cupti::layout_for_version(130000, &why) == RecordLayout::kCupti13_0);
  CHECK(cupti::layout_for_version(130001, &why) == RecordLayout::kCupti13_0);
  // 13.1-13.5 by minor release (API xxyyzz), as their wheels' headers say (cupti_version.h).
  CHECK(cupti::layout_for_version(130101, &why) == RecordLayout::kCupti13_1);
  CHECK(cupti::layout_for_version(130202, &why) == RecordLayout::kCupti13_1);
  CHECK(cupti::layout_for_version(130301, &why) == RecordLayout::kCupti13_3);
  CHECK(cupti::layout_for_version(130401, &why) == RecordLayout::kCupti13_4);
  CHECK(cupti::layout_for_version(130500, &why) == RecordLayout::kCupti13_4);
  // The 12.x releases whose walkers were checked (API 18 = 12.1 ... 28 = 12.9 U1).
  for (uint32_t v : {18u, 20u, 21u, 22u, 24u})
    CHECK(cupti::layout_for_version(v, &why) == RecordLayout::kCupti12Memcpy5);
  for (uint32_t v : {26u, 28u})
    CHECK(cupti::layout_for_version(v, &why) == RecordLayout::kCupti12Memcpy6);
  // Versions no checked release reports are refused with the version named.
  for (uint32_t v : {0u, 17u, 19u, 23u, 25u, 27u, 29u, 129999u, 130600u, 140000u}) {
    why.clear();
    CHECK(cupti::layout_for_version(v, &why) == RecordLayout::kUnknown);
    CHECK(why.find(std::to_string(v)) != std::string::npos);
  }
}

TEST_CASE("13.0 records decode through the simulated libcupti's record walker", "[decoder][simgpu]") {
  CuptiLibrary lib;
  std::string why;
  REQUIRE(lib.load(SIM_CUPTI, &why));
  REQUIRE(lib.layout() == RecordLayout::kCupti13_0);
  check_sample(lib);
}

TEST_CASE("a buffer that ends in an incomplete record is counted, not logged as a failure",
          "[decoder][simgpu]") {
  // A forced flush while work still runs hands over a buffer whose last record is unfinished:
  // the walker says INVALID_KIND there. The rank file's warnings count it; a line on stderr per
  // process would be noise in the user's output.
  CuptiLibrary lib;
  std::string why;
  REQUIRE(lib.load(SIM_CUPTI, &why));
  cupti::testing::BufferBuilder b;
  auto* k = b.add<CUpti_ActivityKernel10>();
  k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k->start = 1000;
  k->end = 2000;
  k->correlationId = 7;
  k->name = cupti::testing::kKernelName;
  b.add<CUpti_ActivityKernel10>();  // not yet written: kind 0
  char path[] = "/tmp/tt_decoder_stderr_XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  std::fflush(stderr);
  const int saved = dup(2);
  dup2(fd, 2);
  int activities = 0;
  const cupti::DecodeCounts counts =
      cupti::decode_buffer(lib, b.data(), b.used, [&](const DecodedActivity&) { ++activities; });
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  const off_t written = lseek(fd, 0, SEEK_END);
  close(fd);
  unlink(path);
  CHECK(activities == 1);
  CHECK(counts.activities == 1);
  CHECK(counts.incomplete == 1);
  CHECK(written == 0);
}

#ifdef TOOLKIT_CUPTI
// The real 13.0 libcupti agrees with our reading of the structs (record sizes, kinds). It walks
// buffers without a GPU; compiled only where the configure step found the toolkit's library.
TEST_CASE("13.0 records decode through the toolkit's real libcupti", "[decoder][toolkit]") {
  CuptiLibrary lib;
  std::string why;
  REQUIRE(lib.load(TOOLKIT_CUPTI, &why));
  REQUIRE(lib.path() == TOOLKIT_CUPTI);  // each test case runs in its own process
  REQUIRE(lib.layout() == RecordLayout::kCupti13_0);
  check_sample(lib);
}
#endif

TEST_CASE("memory records: device allocations and releases decode, through Memory3 in every layout",
          "[decoder][memory]") {
  CUpti_ActivityMemory4 r{};
  r.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  r.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  r.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  r.correlationId = 77;
  r.address = 0x7f0000010000;
  r.bytes = 3 << 20;
  r.timestamp = 1'700'000'000'000'001'234;
  r.deviceId = 2;
  r.isAsync = 1;
  r.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;  // cudaMallocAsync's
  // In a buffer as CUPTI's, with room past the record (the decoder's kernel path is compiled in).
  alignas(8) static unsigned char buffer[512];
  const auto* rec = reinterpret_cast<const CUpti_Activity*>(buffer);
  auto put = [&] { std::memcpy(buffer, &r, sizeof r); };
  put();
  struct Seen {
    int calls = 0;
    core::MemoryEvent last;
    uint32_t correlation = 0;
  } seen;
  const cupti::MemorySink sink{[](void* ctx, DecodedActivity& d) {
                                 auto* s = static_cast<Seen*>(ctx);
                                 ++s->calls;
                                 s->last = d.memory;
                                 s->correlation = d.memory_correlation_id;
                               },
                               &seen};
  for (RecordLayout layout : {RecordLayout::kCupti12Memcpy5, RecordLayout::kCupti13_4}) {
    const cupti::RecordDecoder decoder(layout, sink);
    DecodedActivity d;
    seen = Seen{};
    REQUIRE(decoder.decode(rec, &d) == cupti::RecordResult::kMemory);
    REQUIRE(seen.calls == 1);
    CHECK(seen.last.address == 0x7f0000010000);
    CHECK(seen.last.bytes == (3u << 20));
    CHECK(seen.last.timestamp_ns == 1'700'000'000'000'001'234);
    CHECK(seen.last.device == 2);
    CHECK_FALSE(seen.last.release);
    CHECK(seen.correlation == 77);
  }
  const cupti::RecordDecoder decoder(RecordLayout::kCupti13_4, sink);
  DecodedActivity d;
  seen = Seen{};
  r.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  put();
  CHECK(decoder.decode(rec, &d) == cupti::RecordResult::kMemory);
  CHECK(seen.last.release);
  // Pinned host memory is not device memory; an operation this reader does not know is skipped;
  // an untimed record is not applied.
  r.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  put();
  CHECK(decoder.decode(rec, &d) == cupti::RecordResult::kOther);
  r.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  r.memoryOperationType = static_cast<CUpti_ActivityMemoryOperationType>(0x7fffffff);
  put();
  CHECK(decoder.decode(rec, &d) == cupti::RecordResult::kOther);
  r.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  r.timestamp = 0;
  put();
  CHECK(decoder.decode(rec, &d) == cupti::RecordResult::kNoTimestamps);
  CHECK(seen.calls == 1);  // only the release above reached the sink
  // Without a sink (the replay's counting walk) the record is still recognised.
  r.timestamp = 5;
  put();
  CHECK(cupti::decode_record(RecordLayout::kCupti13_4, rec, &d) == cupti::RecordResult::kMemory);
}
