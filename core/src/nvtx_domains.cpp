#include "traintime/core/nvtx_domains.h"

#include <cstring>

#include "ascii_text.h"

namespace traintime::core {

NvtxDomainFilter::NvtxDomainFilter() {
  std::string error;
  parse(kDefaultSpec, this, &error);
}

bool NvtxDomainFilter::parse(std::string_view spec, NvtxDomainFilter* out, std::string* error) {
  std::vector<Entry> entries;
  size_t begin = 0;
  while (begin <= spec.size()) {
    size_t end = spec.find(',', begin);
    if (end == std::string_view::npos) end = spec.size();
    std::string_view item = ascii::trim(spec.substr(begin, end - begin));
    if (item.empty()) {
      *error = "empty entry";
      return false;
    }
    bool include = true;
    if (item.front() == '-') {
      include = false;
      item = ascii::trim(item.substr(1));
      if (item.empty()) {
        *error = "'-' names no domain";
        return false;
      }
    }
    entries.push_back({std::string(item), include});
    begin = end + 1;
  }
  out->entries_ = std::move(entries);
  return true;
}

bool NvtxDomainFilter::records(std::string_view name) const {
  bool recorded = false;
  for (const Entry& e : entries_) {
    if (e.name == "*" || e.name == name) recorded = e.include;
  }
  return recorded;
}

bool fold_nvtx_name(const char* name, char* out, std::size_t capacity) {
  if (name == nullptr || capacity == 0) return false;
  // The keys PyTorch appends (torch/csrc/profiler: getNvtxStr), each after ", ".
  static constexpr const char* kKeys[] = {"seq = ", "op_id = ", "sizes = ", "input_op_ids = "};
  for (const char* p = std::strstr(name, ", "); p != nullptr; p = std::strstr(p + 2, ", ")) {
    for (const char* key : kKeys) {
      if (std::strncmp(p + 2, key, std::strlen(key)) != 0) continue;
      std::size_t n = static_cast<std::size_t>(p - name);
      if (n == 0) return false;  // nothing before the numbers: keep the name as it is
      if (n >= capacity) n = capacity - 1;
      std::memcpy(out, name, n);
      out[n] = '\0';
      return true;
    }
  }
  return false;
}

}  // namespace traintime::core
