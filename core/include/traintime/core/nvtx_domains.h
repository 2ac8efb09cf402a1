// Which NVTX domains become regions, and how an NVTX message becomes a region name (DESIGN §3).
// Pure functions of text: the NVTX adapter (nvtx/) applies them, config.cpp validates the
// variable with parse().
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace traintime::core {

// TRAINTIME_NVTX_DOMAINS: a comma-separated list of domain names, each optionally prefixed
// with '-' to leave that domain out; '*' stands for every domain and `default` for the domain
// of NVTX calls made without one (nvtxRangePushA, ...). Entries are applied left to right, so
// the last one that names a domain decides. Names are compared exactly (NVTX domain names are
// case-sensitive). Unset: kDefaultSpec, i.e. every domain but NCCL's own, whose ranges wrap the
// calls the NCCL interposer already measures and would otherwise push communication time into
// sub-regions of itself.
class NvtxDomainFilter {
 public:
  static constexpr std::string_view kDefaultSpec = "*,-NCCL";
  static constexpr std::string_view kDefaultDomain = "default";

  NvtxDomainFilter();  // kDefaultSpec

  // Nullopt-style: false and *error set ("empty entry", "'-' names no domain") for a bad spec.
  static bool parse(std::string_view spec, NvtxDomainFilter* out, std::string* error);

  // Whether ranges of the domain called `name` are recorded.
  bool records(std::string_view name) const;

 private:
  struct Entry {
    std::string name;  // "*" for every domain
    bool include;
  };
  std::vector<Entry> entries_;
};

// The region name for an NVTX message: names that carry per-call numbers are folded to one
// region. PyTorch's emit_nvtx / record_function NVTX names ("aten::addmm, seq = 1234, op_id =
// 7, sizes = [[8, 16]], input_op_ids = [5]") keep the operator name before the first
// ", <key> = " of those keys. Writes at most `capacity` - 1 bytes and a NUL into `out` when the
// name is folded and returns true; returns false (and leaves `out` alone) when `name` is kept as
// it is. No allocation, no lock: called on every NVTX push.
bool fold_nvtx_name(const char* name, char* out, std::size_t capacity);

}  // namespace traintime::core
