// NVTX domains and names as regions (issue 10 item 7): which domains are recorded, how per-call
// numbers are folded, and the registry operations the NVTX handlers need (closing a range below
// another domain's, repeated names without the registry's lock).
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "traintime/core/nvtx_domains.h"
#include "traintime/core/region_registry.h"

using namespace traintime::core;

namespace {

NvtxDomainFilter parsed(const char* spec) {
  NvtxDomainFilter f;
  std::string error;
  REQUIRE(NvtxDomainFilter::parse(spec, &f, &error));
  return f;
}

const RegionRow* find_row(const std::vector<RegionRow>& rows, const std::string& path) {
  for (const auto& r : rows)
    if (r.path == path) return &r;
  return nullptr;
}

}  // namespace

TEST_CASE("by default every NVTX domain is recorded except NCCL's own", "[nvtx]") {
  const NvtxDomainFilter f;
  CHECK(f.records("default"));
  CHECK(f.records("Megatron"));
  CHECK_FALSE(f.records("NCCL"));
  CHECK(f.records("nccl"));  // domain names are case-sensitive
}

TEST_CASE("TRAINTIME_NVTX_DOMAINS: the last entry naming a domain decides", "[nvtx]") {
  CHECK(parsed("*").records("NCCL"));
  const NvtxDomainFilter only = parsed("default, Megatron");
  CHECK(only.records("default"));
  CHECK(only.records("Megatron"));
  CHECK_FALSE(only.records("NCCL"));
  CHECK_FALSE(only.records("other"));
  const NvtxDomainFilter back = parsed("*,-NCCL,NCCL");
  CHECK(back.records("NCCL"));
  const NvtxDomainFilter none = parsed("-*");
  CHECK_FALSE(none.records("default"));
}

TEST_CASE("a malformed TRAINTIME_NVTX_DOMAINS is refused with the reason", "[nvtx]") {
  NvtxDomainFilter f;
  std::string error;
  CHECK_FALSE(NvtxDomainFilter::parse("*,,NCCL", &f, &error));
  CHECK(error == "empty entry");
  CHECK_FALSE(NvtxDomainFilter::parse("-", &f, &error));
  CHECK(error == "'-' names no domain");
  CHECK_FALSE(NvtxDomainFilter::parse("*,", &f, &error));
}

TEST_CASE("PyTorch emit_nvtx names with per-call numbers fold to the operator", "[nvtx]") {
  char out[64];
  REQUIRE(fold_nvtx_name("aten::addmm, seq = 1234, op_id = 7, sizes = [[8, 16], [16]]", out, sizeof out));
  CHECK(std::string(out) == "aten::addmm");
  REQUIRE(fold_nvtx_name("aten::mul, op_id = 3", out, sizeof out));
  CHECK(std::string(out) == "aten::mul");
  REQUIRE(fold_nvtx_name("MulBackward0, seq = 77", out, sizeof out));
  CHECK(std::string(out) == "MulBackward0");
  // Names without those keys are kept, commas and numbers included.
  CHECK_FALSE(fold_nvtx_name("layer 3, attention", out, sizeof out));
  CHECK_FALSE(fold_nvtx_name("step", out, sizeof out));
  CHECK_FALSE(fold_nvtx_name(", seq = 5", out, sizeof out));
  // Cut to the buffer.
  char small[5];
  REQUIRE(fold_nvtx_name("aten::addmm, seq = 1", small, sizeof small));
  CHECK(std::string(small) == "aten");
}

TEST_CASE("closing a range below another domain's keeps the upper one open under its path", "[nvtx]") {
  RegionRegistry reg;
  ThreadState* ts = reg.thread_state();
  // Domain A opens "outer", domain B opens "inner" inside it, then A pops first.
  reg.push(ts, "outer", kCategoryAuto, 0);
  const uint64_t outer = ts->current_entry();
  reg.push(ts, "inner", kCategoryAuto, 10);
  const uint64_t inner = ts->current_entry();
  reg.close_entry(ts, outer, 30);
  CHECK(ts->depth() == 1);
  CHECK(ts->current_entry() == inner);
  reg.close_entry(ts, inner, 70);
  CHECK(ts->depth() == 0);
  const auto rows = reg.snapshot_rows();
  const RegionRow* o = find_row(rows, "outer");
  const RegionRow* i = find_row(rows, "outer/inner");
  REQUIRE(o);
  REQUIRE(i);
  CHECK(o->cpu_ns == 30);
  CHECK(i->cpu_ns == 60);
  CHECK(reg.unbalanced_pops() == 0);
  // An entry that is not open is an unbalanced pop, not a crash.
  reg.close_entry(ts, outer, 80);
  CHECK(reg.unbalanced_pops() == 1);
}

TEST_CASE("a repeated name from a new buffer each time takes the registry's lock once", "[nvtx]") {
  RegionRegistry reg;
  ThreadState* ts = reg.thread_state();
  std::vector<std::string> copies;
  for (int i = 0; i < 1000; ++i) copies.emplace_back("forward");  // a Python string per call
  for (size_t i = 0; i < copies.size(); ++i) {
    reg.push(ts, copies[i].c_str(), kCategoryAuto, 2 * i);
    reg.pop(ts, 2 * i + 1);
  }
  CHECK(reg.locked_name_lookups() == 1);
  const auto rows = reg.snapshot_rows();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].count == 1000);
  // New text in a reused buffer is still told apart.
  char buffer[16];
  std::strcpy(buffer, "alpha");
  reg.push(ts, buffer, kCategoryAuto, 5000);
  reg.pop(ts, 5001);
  std::strcpy(buffer, "beta");
  reg.push(ts, buffer, kCategoryAuto, 5002);
  reg.pop(ts, 5003);
  const auto after = reg.snapshot_rows();
  CHECK(find_row(after, "alpha") != nullptr);
  CHECK(find_row(after, "beta") != nullptr);
}
