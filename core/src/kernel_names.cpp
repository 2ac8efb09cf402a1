// Kernel names: interned once per distinct name (a pointer cache in front of the name index, so
// a name seen before at the same address costs one compare of its characters), kept in one
// character arena (no allocation per name), demangled for the rank file.
#include <cxxabi.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>

#include "aggregator_internal.h"
#include "traintime/core/gpu_aggregator.h"
#include "traintime/core/nccl_kernel_name.h"

namespace traintime::core {

using namespace aggregator_detail;

namespace aggregator_detail {

std::string demangle(std::string_view name) {
  std::string text(name);
  if (name.substr(0, 2) != "_Z") return text;
  int status = 0;
  char* d = abi::__cxa_demangle(text.c_str(), nullptr, nullptr, &status);
  if (status == 0 && d != nullptr) text = d;
  std::free(d);
  return text;
}

}  // namespace aggregator_detail

namespace {

uint32_t name_hash(std::string_view name) {
  const std::size_t h = std::hash<std::string_view>{}(name);
  return static_cast<uint32_t>(h ^ (static_cast<uint64_t>(h) >> 32));
}

}  // namespace

uint32_t GpuAggregator::intern(std::string_view name, bool& nccl) {
  auto h = static_cast<std::size_t>((reinterpret_cast<uintptr_t>(name.data()) >> 3) ^
                                    (name.size() * 0x9e3779b1u)) &
           (kNameCacheSize - 1);
  NameCacheEntry& e = name_cache_[h];
  // CUPTI hands the same name pointer for every launch of a kernel; the compare guards against
  // an address reused for another name.
  if (e.ptr == name.data() && e.len == name.size() && e.id > kOtherKernels &&
      same_chars(name_of(e.id).data(), name.data(), name.size())) {
    nccl = name_nccl_[e.id] != 0;
    return e.id;
  }
  const uint32_t hash = name_hash(name);
  uint32_t id = name_index_.find(hash, [&](uint32_t i) {
    const std::string_view known = name_of(i);
    return known.size() == name.size() && same_chars(known.data(), name.data(), name.size());
  });
  if (id == IdIndex::kNone) {
    if (name_end_.size() >= static_cast<std::size_t>(opt_.max_kernel_names) + 2 ||
        name.size() > UINT32_MAX - name_chars_.size()) {  // offsets are 32-bit
      ++names_over_cap_;
      nccl = is_nccl_kernel(name);  // attribution must not depend on the cap
      return kOtherKernels;
    }
    id = static_cast<uint32_t>(name_end_.size());
    name_chars_.insert(name_chars_.end(), name.begin(), name.end());
    name_end_.push_back(static_cast<uint32_t>(name_chars_.size()));
    name_nccl_.push_back(is_nccl_kernel(name) ? 1 : 0);
    name_op_.push_back(comm_op_from_kernel_name(name));
    name_index_.insert(hash, id, [this](uint32_t i) { return name_hash(name_of(i)); });
  }
  e = {name.data(), name.size(), id};
  nccl = name_nccl_[id] != 0;
  return id;
}

}  // namespace traintime::core
