// Kernel names: interned once per distinct name (a pointer cache in front of the hash map, so a
// name seen before at the same address costs no string work), demangled for the rank file.
#include <cxxabi.h>

#include <cstdlib>
#include <cstring>

#include "aggregator_internal.h"
#include "traintime/core/gpu_aggregator.h"
#include "traintime/core/nccl_kernel_name.h"

namespace traintime::core {

using namespace aggregator_detail;

namespace aggregator_detail {

std::string demangle(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int status = 0;
  char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string out = (status == 0 && d != nullptr) ? std::string(d) : name;
  std::free(d);
  return out;
}

}  // namespace aggregator_detail

uint32_t GpuAggregator::intern(std::string_view name, bool& nccl) {
  auto h = static_cast<std::size_t>((reinterpret_cast<uintptr_t>(name.data()) >> 3) ^
                                    (name.size() * 0x9e3779b1u)) &
           (kNameCacheSize - 1);
  NameCacheEntry& e = name_cache_[h];
  // CUPTI hands the same name pointer for every launch of a kernel; the compare guards against
  // an address reused for another name.
  if (e.ptr == name.data() && e.len == name.size() && e.id > kOtherKernels &&
      std::memcmp(names_[e.id].data(), name.data(), name.size()) == 0) {
    nccl = name_nccl_[e.id] != 0;
    return e.id;
  }
  std::string key(name);
  auto it = name_ids_.find(key);
  uint32_t id;
  if (it != name_ids_.end()) {
    id = it->second;
  } else if (names_.size() >= static_cast<std::size_t>(opt_.max_kernel_names) + 2) {
    ++names_over_cap_;
    nccl = is_nccl_kernel(name);  // attribution must not depend on the cap
    return kOtherKernels;
  } else {
    id = static_cast<uint32_t>(names_.size());
    names_.push_back(key);
    name_nccl_.push_back(is_nccl_kernel(name) ? 1 : 0);
    name_op_.push_back(comm_op_from_kernel_name(name));
    name_ids_.emplace(std::move(key), id);
  }
  e = {name.data(), name.size(), id};
  nccl = name_nccl_[id] != 0;
  return id;
}

}  // namespace traintime::core
